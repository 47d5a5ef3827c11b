/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package e2e

import (
	"archive/zip"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// karpenterVersion is the release of Karpenter's AWS provider whose CRD chart the hand-over test installs.
const karpenterVersion = "v1.15.2"

// karpenterCRDChart writes Karpenter's own CRD chart (charts/karpenter-crd of github.com/aws/karpenter-provider-aws
// at karpenterVersion) into dir, taken from the module's zip as the Go module proxy serves it, and returns its
// folder. go mod download fetches the zip even though the module asks for a newer Go than this one to build; only
// the chart's files are read.
func karpenterCRDChart(t *testing.T, dir string) string {
	t.Helper()
	cmd := exec.Command("go", "mod", "download", "-json", "github.com/aws/karpenter-provider-aws@"+karpenterVersion)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off")
	out, _ := cmd.Output() // the Go version the module asks for is reported as its Error; the zip is there
	var mod struct{ Zip string }
	if err := json.Unmarshal(out, &mod); err != nil || mod.Zip == "" {
		t.Fatalf("go mod download of Karpenter %s: %v\n%s", karpenterVersion, err, out)
	}
	zr, err := zip.OpenReader(mod.Zip)
	if err != nil {
		t.Fatal(err)
	}
	defer zr.Close()
	prefix := "github.com/aws/karpenter-provider-aws@" + karpenterVersion + "/charts/karpenter-crd/"
	chart := filepath.Join(dir, "karpenter-crd")
	for _, f := range zr.File {
		name, ok := strings.CutPrefix(f.Name, prefix)
		if !ok || strings.HasSuffix(f.Name, "/") || strings.Contains(name, "..") {
			continue
		}
		rc, err := f.Open()
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(rc)
		_ = rc.Close()
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Dir(filepath.Join(chart, name)), 0o750); err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(chart, name), string(body))
	}
	if _, err := os.Stat(filepath.Join(chart, "templates", "autoscaling.x-k8s.io_capacitybuffers.yaml")); err != nil {
		t.Fatalf("Karpenter %s's CRD chart has no CapacityBuffer CRD: %v", karpenterVersion, err)
	}
	return chart
}

// TestKarpentersCRDChartGoesAndTheBuffersStay follows the migration guide's CRD hand-over as written, on Karpenter's
// own CRD chart: installed with Helm as release karpenter-crd (Karpenter's NodePool, NodeClaim, NodeOverlay and
// EC2NodeClass CRDs and capacitybuffers.autoscaling.x-k8s.io), with a NodePool of Karpenter's and a CapacityBuffer
// stored; after the guide's commands the release is gone, Karpenter's CRDs too, and the buffer and its CRD stay.
func TestKarpentersCRDChartGoesAndTheBuffersStay(t *testing.T) {
	scheduler := binary(t, "STEVEDORE_BIN", "./cmd/scheduler")
	kubectl := binary(t, "KUBECTL", "k8s.io/kubernetes/cmd/kubectl")
	helm := helmBinary(t)
	dir := t.TempDir()
	chart := karpenterCRDChart(t, dir)
	_, kubeconfig, _ := startSandbox(t, scheduler, dir)
	k := func(args ...string) (string, error) {
		return run(t, nil, kubectl, append([]string{"--kubeconfig", kubeconfig}, args...)...)
	}
	if out, err := run(t, nil, helm, "install", "karpenter-crd", chart, "-n", "kube-system", "--kubeconfig", kubeconfig); err != nil {
		t.Fatalf("helm install: %v\n%s", err, out)
	}
	karpenters := []string{"crd/nodepools.karpenter.sh", "crd/nodeclaims.karpenter.sh", "crd/nodeoverlays.karpenter.sh", "crd/ec2nodeclasses.karpenter.k8s.aws"}
	if out, err := k(append([]string{"wait", "--for=condition=Established", "--timeout=2m", "crd/capacitybuffers.autoscaling.x-k8s.io"}, karpenters...)...); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	pool := filepath.Join(dir, "nodepool.yaml")
	writeFile(t, pool, `apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: general}
spec:
  template:
    spec:
      requirements: [{key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}]
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
`)
	eventually(t, "Karpenter's NodePool stored", func() error {
		_, err := k("apply", "-f", pool)
		return err
	})
	buffer := filepath.Join(dir, "buffer.yaml")
	writeFile(t, buffer, `apiVersion: autoscaling.x-k8s.io/v1beta1
kind: CapacityBuffer
metadata: {name: web, namespace: default}
spec: {podTemplateRef: {name: web}, replicas: 2}
`)
	eventually(t, "the CapacityBuffer created", func() error {
		_, err := k("apply", "-f", buffer)
		return err
	})

	out, err := newDocShell(t, scheduler, kubectl, kubeconfig).run("docs/migration-from-karpenter.md", "6. **Hand over the CRDs.**")
	if err != nil {
		t.Fatalf("the guide's CRD hand-over, run as written: %v\n%s", err, out)
	}
	if out, err := run(t, nil, helm, "list", "-A", "-q", "--kubeconfig", kubeconfig); err != nil || strings.Contains(out, "karpenter-crd") {
		t.Errorf("helm still lists karpenter-crd (%v):\n%s", err, out)
	}
	eventually(t, "Karpenter's CRDs deleted", func() error {
		out, err := k(append([]string{"get", "--ignore-not-found", "-o", "name"}, karpenters...)...)
		if err != nil {
			return err
		}
		if out != "" {
			return fmt.Errorf("still there: %s", out)
		}
		return nil
	})
	if out, err := k("get", "capacitybuffers.autoscaling.x-k8s.io", "web", "-n", "default", "-o", "name"); err != nil {
		t.Errorf("the CapacityBuffer did not stay: %v\n%s", err, out)
	}
}
