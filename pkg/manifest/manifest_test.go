/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package manifest

import (
	"path/filepath"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
)

func TestDecodeReadsMultiDocumentYAMLAndLists(t *testing.T) {
	in := `# a comment-only document is skipped
---
apiVersion: stevedore.dev/v1
kind: NodePool
metadata: {name: a}
spec:
  template:
    spec:
      nodeClassRef: {name: default}
---
{"apiVersion": "v1", "kind": "List", "items": [
  {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default"}, "spec": {"containers": [{"name": "c", "image": "i"}]}},
  {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "ds", "namespace": "kube-system"}}
]}
`
	objs, err := NewDecoder().Decode(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) != 3 {
		t.Fatalf("decoded %d objects, want 3", len(objs))
	}
	if _, ok := objs[0].(*stevedorev1.NodePool); !ok {
		t.Errorf("object 0 is %T, want NodePool", objs[0])
	}
	if _, ok := objs[1].(*corev1.Pod); !ok {
		t.Errorf("object 1 is %T, want Pod", objs[1])
	}
	if _, ok := objs[2].(*appsv1.DaemonSet); !ok {
		t.Errorf("object 2 is %T, want DaemonSet", objs[2])
	}
	if got := Name(objs[1]); got != "Pod/default/p" {
		t.Errorf("Name = %q", got)
	}
}

func TestDecodeRejectsUnknownFieldsAndKinds(t *testing.T) {
	for name, in := range map[string]string{
		"unknown field": "apiVersion: stevedore.dev/v1\nkind: NodePool\nmetadata: {name: a}\nspec: {wieght: 3}\n",
		"unknown kind":  "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: a}\n",
		"not yaml":      "apiVersion: v1\nkind: Pod\nmetadata: [\n",
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := NewDecoder().Decode(strings.NewReader(in)); err == nil {
				t.Fatal("want an error")
			}
		})
	}
}

func TestEveryExampleManifestDecodes(t *testing.T) {
	files, err := filepath.Glob("../../manifests/examples/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no example manifests found: %v", err)
	}
	d := NewDecoder()
	for _, f := range files {
		if _, err := d.DecodeFile(f); err != nil {
			t.Errorf("%v", err)
		}
	}
}

// TestKarpentersObjectsAreReadAsStevedores: Karpenter's NodePool, NodeClaim, NodeOverlay and EC2NodeClass decode
// into Stevedore's kinds of the same name, keep their apiVersion (IsKarpenter), and the fields Stevedore does not
// read are listed (Ignored), status aside; a Stevedore object with such a field is still an error.
func TestKarpentersObjectsAreReadAsStevedores(t *testing.T) {
	in := `apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: general}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements:
        - {key: karpenter.k8s.aws/instance-generation, operator: Gte, values: ["6"]}
status:
  nodeClassObservedGeneration: 3
---
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {name: default}
spec:
  role: KarpenterNodeRole-my-cluster
  amiSelectorTerms: [{alias: al2023@v20251120}]
  subnetSelectorTerms: [{tags: {karpenter.sh/discovery: my-cluster}}]
  placementGroupSelector: {name: training}
  networkInterfaces: [{networkCardIndex: 0, deviceIndex: 0, interfaceType: interface}]
  ipPrefixCount: 1
---
apiVersion: v1
kind: List
items:
  - apiVersion: karpenter.sh/v1
    kind: NodeClaim
    metadata: {name: general-abcde, labels: {karpenter.sh/nodepool: general}}
    spec: {nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}, requirements: []}
    status: {nodeName: ip-10-0-1-1.ec2.internal, providerID: "aws:///us-east-1a/i-0123"}
  - apiVersion: karpenter.sh/v1alpha1
    kind: NodeOverlay
    metadata: {name: discount}
    spec: {priceAdjustment: "-10%"}
`
	d := NewDecoder()
	objs, err := d.Decode(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) != 4 {
		t.Fatalf("decoded %d objects, want 4", len(objs))
	}
	np, ok := objs[0].(*stevedorev1.NodePool)
	if !ok || !IsKarpenter(np) || np.Spec.Template.Spec.Requirements[0].Operator != "Gte" {
		t.Errorf("object 0: %T %+v", objs[0], objs[0])
	}
	nc, ok := objs[1].(*stevedorev1.EC2NodeClass)
	if !ok || nc.Spec.AMISelectorTerms[0].Alias != "al2023@v20251120" || nc.Spec.PlacementGroupSelector == nil || nc.Spec.PlacementGroupSelector.Name != "training" {
		t.Errorf("object 1: %T %+v", objs[1], objs[1])
	}
	if c, ok := objs[2].(*stevedorev1.NodeClaim); !ok || !IsKarpenter(c) || c.Status.NodeName != "ip-10-0-1-1.ec2.internal" {
		t.Errorf("object 2: %T %+v", objs[2], objs[2])
	}
	if o, ok := objs[3].(*stevedorev1.NodeOverlay); !ok || o.Spec.PriceAdjustment == nil {
		t.Errorf("object 3: %T %+v", objs[3], objs[3])
	}
	want := []string{
		"EC2NodeClass/default (karpenter.k8s.aws/v1): spec.networkInterfaces is not a field Stevedore reads",
		"EC2NodeClass/default (karpenter.k8s.aws/v1): spec.ipPrefixCount is not a field Stevedore reads",
	}
	got := d.Ignored()
	if strings.Join(got, "\n") != strings.Join(want, "\n") && strings.Join(got, "\n") != strings.Join([]string{want[1], want[0]}, "\n") {
		t.Errorf("ignored:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if _, err := NewDecoder().Decode(strings.NewReader("apiVersion: stevedore.dev/v1\nkind: EC2NodeClass\nmetadata: {name: x}\nspec: {ipPrefixCount: 1}\n")); err == nil {
		t.Error("a Stevedore object with a field it does not have was read")
	}
}
