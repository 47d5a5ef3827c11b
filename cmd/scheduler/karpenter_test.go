/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/runtime"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/manifest"
)

// run executes a command with args and returns what it printed on stdout and stderr.
func run(t *testing.T, cmd *cobra.Command, args ...string) (string, string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	cmd.SetArgs(args)
	err := cmd.Execute()
	return out.String(), errOut.String(), err
}

// TestPlanPreviewsAClusterKarpenterRuns: on a dump of a cluster Karpenter runs (its objects as they are), plan
// places the pods of Karpenter's nodes anew on Karpenter's NodePool read as Stevedore's, leaves the DaemonSet's
// pods and the bootstrap node alone, and prints what Karpenter's nodes cost now beside the plan's cost.
func TestPlanPreviewsAClusterKarpenterRuns(t *testing.T) {
	stdout, stderr, err := run(t, newPlanCommand(), "-f", "testdata/karpenter-cluster.yaml", "-o", "json")
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	var out planOutput
	if err := json.Unmarshal([]byte(stdout), &out); err != nil {
		t.Fatal(err)
	}
	k := out.Karpenter
	if k == nil || k.Nodes != 2 || k.Pods != 5 || k.TotalPrice != 0.768 || len(k.Unpriced) != 0 {
		t.Fatalf("Karpenter's nodes: %+v, want 2 nodes of $0.384/h and the 5 web pods", k)
	}
	planned := 0
	for _, n := range out.Nodes {
		if n.NodePool != "default" {
			t.Errorf("node %s of NodePool %s", n.Name, n.NodePool)
		}
		for _, p := range n.Pods {
			if !strings.HasPrefix(p, "shop/web-") {
				t.Errorf("plan places %s: only the web pods leave Karpenter's nodes", p)
			}
			planned++
		}
	}
	if planned != 5 || len(out.Unschedulable) != 0 || out.TotalPrice >= k.TotalPrice {
		t.Errorf("planned %d pods (%d unschedulable) for $%.4f/h, want the 5 for less than Karpenter's $%.4f/h", planned,
			len(out.Unschedulable), out.TotalPrice, k.TotalPrice)
	}
	if len(out.Existing) != 0 {
		t.Errorf("pods placed on existing nodes %+v: the bootstrap node's taint keeps them off", out.Existing)
	}
	table, _, err := run(t, newPlanCommand(), "-f", "testdata/karpenter-cluster.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`Karpenter's nodes now: 2 nodes, \$0\.7680 per hour, for the 5 pods planned here \(the plan: -[0-9.]+%\)`).MatchString(table) {
		t.Errorf("the table does not compare the costs:\n%s", table)
	}
}

// TestPlanDisruptWeighsKarpentersNodes: plan --disrupt reads Karpenter's NodeClaims and nodes as nodes Stevedore
// manages, prices them from the catalog, and says what consolidation would do with them.
func TestPlanDisruptWeighsKarpentersNodes(t *testing.T) {
	stdout, stderr, err := run(t, newPlanCommand(), "--disrupt", "-f", "testdata/karpenter-cluster.yaml", "-o", "json")
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	var out disruptOutput
	if err := json.Unmarshal([]byte(stdout), &out); err != nil {
		t.Fatal(err)
	}
	if out.Command == nil || out.Command.Reason != "Underutilized" || out.CostBefore != 0.768 || out.CostAfter >= out.CostBefore {
		t.Fatalf("dry run %+v, want consolidation of the two underused m5.2xlarge nodes", out)
	}
	if len(out.Nodes) != 2 {
		t.Errorf("nodes weighed %+v, want Karpenter's two", out.Nodes)
	}
}

// karpenterForm rewrites a Stevedore manifest as Karpenter's: the same fields under Karpenter's apiVersions.
func karpenterForm(raw []byte) []byte {
	s := string(raw)
	for _, kind := range []string{"NodePool", "NodeClaim"} {
		s = strings.ReplaceAll(s, "apiVersion: stevedore.dev/v1\nkind: "+kind, "apiVersion: karpenter.sh/v1\nkind: "+kind)
	}
	s = strings.ReplaceAll(s, "apiVersion: stevedore.dev/v1\nkind: NodeOverlay", "apiVersion: karpenter.sh/v1alpha1\nkind: NodeOverlay")
	s = strings.ReplaceAll(s, "apiVersion: stevedore.dev/v1\nkind: EC2NodeClass", "apiVersion: karpenter.k8s.aws/v1\nkind: EC2NodeClass")
	return []byte(strings.ReplaceAll(s, "group: stevedore.dev", "group: karpenter.k8s.aws"))
}

// specs decodes objects and returns their specs by kind and name, for comparison.
func specs(t *testing.T, objs []runtime.Object) map[string]any {
	t.Helper()
	out := map[string]any{}
	for _, obj := range objs {
		switch o := obj.(type) {
		case *stevedorev1.NodePool:
			out["NodePool/"+o.Name] = o.Spec
		case *stevedorev1.EC2NodeClass:
			out["EC2NodeClass/"+o.Name] = o.Spec
		case *stevedorev1.NodeOverlay:
			out["NodeOverlay/"+o.Name] = o.Spec
		}
	}
	return out
}

// TestConvertCarriesKarpentersExamplesOver converts each of Karpenter's examples (testdata of the foundation tests,
// written back in Karpenter's apiVersions): what it writes is Stevedore's equivalent, field for field; the examples
// Stevedore refuses (Amazon Linux 2, Windows) are errors naming the field.
func TestConvertCarriesKarpentersExamplesOver(t *testing.T) {
	files, err := filepath.Glob("../../test/integration/foundation/testdata/karpenter-examples/*.yaml")
	if err != nil || len(files) < 20 {
		t.Fatalf("found %d examples (%v)", len(files), err)
	}
	refused := map[string]string{"al2-custom-ami.yaml": "spec.amiFamily AL2", "windows-2019.yaml": "windows2019@latest",
		"windows-2022.yaml": "windows2022@latest", "windows-2025.yaml": "windows2025@latest", "windows-custom-userdata.yaml": "spec.amiFamily Windows2022"}
	dir := t.TempDir()
	for _, f := range files {
		name := filepath.Base(f)
		t.Run(strings.TrimSuffix(name, ".yaml"), func(t *testing.T) {
			raw, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			in := filepath.Join(dir, name)
			if err := os.WriteFile(in, karpenterForm(raw), 0o600); err != nil {
				t.Fatal(err)
			}
			stdout, _, err := run(t, newConvertCommand(), "-f", in)
			if want, ok := refused[name]; ok {
				if err == nil || !strings.Contains(err.Error(), want) {
					t.Fatalf("error %v, want one naming %s", err, want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			converted, err := manifest.NewDecoder().Decode(strings.NewReader(stdout))
			if err != nil {
				t.Fatalf("the converted manifests do not read as Stevedore's: %v\n%s", err, stdout)
			}
			original, err := manifest.NewDecoder().Decode(bytes.NewReader(raw))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(specs(t, original), specs(t, converted)); diff != "" {
				t.Errorf("converted specs differ from Stevedore's equivalents (-want +got):\n%s", diff)
			}
			if strings.Contains(stdout, "karpenter.sh/v1") || strings.Contains(stdout, "status:") {
				t.Errorf("the output keeps Karpenter's apiVersion or a status:\n%s", stdout)
			}
		})
	}
}

// TestConvertCarriesTheSeedSetupsOver converts the Karpenter objects of the user's own setups, as their documents
// write them (older spellings included).
func TestConvertCarriesTheSeedSetupsOver(t *testing.T) {
	files, err := filepath.Glob("../../test/integration/foundation/testdata/karpenter-seeds/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no seed setups (%v)", err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			stdout, stderr, err := run(t, newConvertCommand(), "-f", f)
			if err != nil {
				t.Fatalf("%v\n%s", err, stderr)
			}
			objs, err := manifest.NewDecoder().Decode(strings.NewReader(stdout))
			if err != nil || len(objs) == 0 {
				t.Fatalf("converted %d objects (%v):\n%s", len(objs), err, stdout)
			}
		})
	}
}

// TestConvertSaysWhatItLeavesOut: a Karpenter field Stevedore does not read, or a requirement it refuses, is an
// error naming the object; with --drop-unsupported the manifests are written without them, each listed, and with
// the fields Stevedore reads (placementGroupSelector among them).
func TestConvertSaysWhatItLeavesOut(t *testing.T) {
	in := filepath.Join(t.TempDir(), "karpenter.yaml")
	if err := os.WriteFile(in, []byte(`apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {name: training}
spec:
  role: KarpenterNodeRole-my-cluster
  amiSelectorTerms: [{alias: al2023@latest}]
  subnetSelectorTerms: [{tags: {karpenter.sh/discovery: my-cluster}}]
  placementGroupSelector: {name: training}
  networkInterfaces: [{networkCardIndex: 0, deviceIndex: 0, interfaceType: efa-only}]
---
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: training}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: training}
      requirements:
        - {key: karpenter.k8s.aws/instance-family, operator: In, values: [p5]}
        - {key: karpenter.k8s.aws/capacity-reservation-type, operator: In, values: [capacity-block]}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	_, _, err := run(t, newConvertCommand(), "-f", in)
	for _, want := range []string{"EC2NodeClass/training (karpenter.k8s.aws/v1): spec.networkInterfaces",
		"NodePool/training: spec.template.spec.requirements[1]: karpenter.k8s.aws/capacity-reservation-type"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v, want one saying %q", err, want)
		}
	}
	stdout, stderr, err := run(t, newConvertCommand(), "-f", in, "--drop-unsupported")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(stdout, "networkInterfaces") || strings.Contains(stdout, "capacity-reservation-type") ||
		!strings.Contains(stdout, "instance-family") || !strings.Contains(stdout, "placementGroupSelector") {
		t.Errorf("written:\n%s", stdout)
	}
	if strings.Count(stderr, "left out:") != 2 {
		t.Errorf("stderr lists %d things left out, want 2:\n%s", strings.Count(stderr, "left out:"), stderr)
	}
}
