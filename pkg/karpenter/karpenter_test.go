/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package karpenter

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/manifest"
)

// decode reads a YAML stream as `scheduler plan` and `scheduler convert` read their files.
func decode(t *testing.T, yaml string) ([]runtime.Object, []string) {
	t.Helper()
	dec := manifest.NewDecoder()
	objs, err := dec.Decode(strings.NewReader(yaml))
	if err != nil {
		t.Fatal(err)
	}
	return objs, dec.Ignored()
}

// price is a catalog of one offering.
func price(instanceType, zone, capacityType string) float64 {
	if instanceType == "m5.large" && zone == "us-east-1a" && capacityType == "on-demand" {
		return 0.096
	}
	return 0
}

const karpenterNodePool = `apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: general}
spec:
  template:
    metadata:
      labels: {team: shop, karpenter.k8s.aws/ec2nodeclass: x}
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements:
      - {key: karpenter.sh/capacity-type, operator: In, values: [spot]}
      - {key: karpenter.k8s.aws/capacity-reservation-id, operator: In, values: [cr-1]}
      - {key: karpenter.sh/nodepool, operator: DoesNotExist}
`

func TestProblemsNameTheObjectAndTheField(t *testing.T) {
	for _, tc := range []struct {
		name, yaml string
		want       []string
	}{
		{name: "a NodePool without problems", yaml: `apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: ok}
spec: {template: {spec: {nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: d}, requirements: [{key: karpenter.k8s.aws/instance-cpu-manufacturer, operator: In, values: [amd]}]}}}
`},
		{name: "refused requirement and template label", yaml: karpenterNodePool, want: []string{
			"NodePool/general: spec.template.spec.requirements[1]: karpenter.k8s.aws/capacity-reservation-id: Stevedore selects capacity reservations",
			"NodePool/general: spec.template.metadata.labels: karpenter.k8s.aws/ec2nodeclass is the EC2NodeClass's name",
		}},
		{name: "dedicated tenancy", yaml: `apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: dedicated}
spec: {template: {spec: {nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: d}, requirements: [{key: karpenter.k8s.aws/instance-tenancy, operator: In, values: [dedicated]}]}}}
`, want: []string{"NodePool/dedicated: spec.template.spec.requirements[0]: karpenter.k8s.aws/instance-tenancy"}},
		{name: "an AL2 EC2NodeClass", yaml: `apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {name: old}
spec: {amiFamily: AL2, amiSelectorTerms: [{alias: al2@latest}], role: R, subnetSelectorTerms: [{tags: {a: b}}], securityGroupSelectorTerms: [{tags: {a: b}}]}
`, want: []string{
			"EC2NodeClass/old: spec.amiFamily AL2: Stevedore launches AL2023, Bottlerocket and Custom images",
			"EC2NodeClass/old: spec.amiSelectorTerms[0].alias al2@latest: Stevedore resolves al2023 and bottlerocket aliases",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs, _ := decode(t, tc.yaml)
			got := Problems(objs[0])
			if len(got) != len(tc.want) {
				t.Fatalf("problems %q, want %d of them: %q", got, len(tc.want), tc.want)
			}
			for i := range got {
				if !strings.HasPrefix(got[i], tc.want[i]) {
					t.Errorf("problem %d is %q, want it to start with %q", i, got[i], tc.want[i])
				}
			}
		})
	}
}

func TestConvert(t *testing.T) {
	const nodeClass = `apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata:
  name: default
  annotations: {kubectl.kubernetes.io/last-applied-configuration: "{}", owner: platform}
spec:
  amiSelectorTerms: [{alias: al2023@latest}]
  role: KarpenterNodeRole
  subnetSelectorTerms: [{tags: {karpenter.sh/discovery: c}}]
  securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: c}}]
  ipPrefixCount: 1
status: {instanceProfile: p}
---
apiVersion: karpenter.sh/v1
kind: NodeClaim
metadata: {name: general-abcde, labels: {karpenter.sh/nodepool: general}}
spec: {nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}, requirements: []}
---
apiVersion: v1
kind: Node
metadata: {name: n1}
---
apiVersion: autoscaling.x-k8s.io/v1beta1
kind: CapacityBuffer
metadata: {name: web, namespace: shop}
spec: {podTemplateRef: {name: web}, replicas: 2}
`
	objs, ignored := decode(t, karpenterNodePool+"---\n"+nodeClass)
	if len(ignored) != 1 || !strings.Contains(ignored[0], "ipPrefixCount") {
		t.Fatalf("the decoder ignored %q, want spec.ipPrefixCount named", ignored)
	}

	_, err := Convert(objs, ignored, false)
	if err == nil {
		t.Fatal("Convert accepted what Stevedore does not carry over")
	}
	for _, want := range []string{"capacity-reservation-id", "karpenter.k8s.aws/ec2nodeclass", "ipPrefixCount", "--drop-unsupported"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error does not name %q: %v", want, err)
		}
	}

	conv, err := Convert(objs, ignored, true)
	if err != nil {
		t.Fatal(err)
	}
	if len(conv.Objects) != 2 {
		t.Fatalf("converted %d objects, want the NodePool and the EC2NodeClass", len(conv.Objects))
	}
	np := conv.Objects[0].(*stevedorev1.NodePool)
	if gvk := np.GetObjectKind().GroupVersionKind(); gvk != stevedorev1.SchemeGroupVersion.WithKind("NodePool") {
		t.Errorf("the NodePool is a %v", gvk)
	}
	if ref := np.Spec.Template.Spec.NodeClassRef; ref.Group != stevedorev1.GroupName || ref.Name != "default" {
		t.Errorf("nodeClassRef %+v, want Stevedore's group and the same name", ref)
	}
	var keys []string
	for _, r := range np.Spec.Template.Spec.Requirements {
		keys = append(keys, r.Key)
	}
	if strings.Join(keys, ",") != "karpenter.sh/capacity-type,karpenter.sh/nodepool" {
		t.Errorf("requirements on %v, want capacity-type and the absence of karpenter.sh/nodepool kept, the reservation dropped", keys)
	}
	if l := np.Spec.Template.ObjectMeta.Labels; l["team"] != "shop" || l[stevedorev1.LabelNodeClass] != "" {
		t.Errorf("template labels %v, want team kept and the EC2NodeClass label dropped", l)
	}
	nc := conv.Objects[1].(*stevedorev1.EC2NodeClass)
	if nc.Status.InstanceProfile != "" || nc.Annotations["owner"] != "platform" || nc.Annotations["kubectl.kubernetes.io/last-applied-configuration"] != "" {
		t.Errorf("EC2NodeClass status %+v, annotations %v: want no status, the user's annotation, not kubectl's copy of Karpenter's manifest", nc.Status, nc.Annotations)
	}
	left := strings.Join(conv.Left, "\n")
	for _, want := range []string{"capacity-reservation-id", "ipPrefixCount", "NodeClaim/general-abcde: not converted", "1 object that is not Karpenter's",
		"CapacityBuffer/shop/web: not converted (Stevedore serves autoscaling.x-k8s.io CapacityBuffers as they are"} {
		if !strings.Contains(left, want) {
			t.Errorf("what was left out does not say %q:\n%s", want, left)
		}
	}

	if len(conv.Notes) != 1 || !strings.Contains(conv.Notes[0], "ec2nodeclasses.stevedore.dev/default keeps the node role KarpenterNodeRole") ||
		!strings.Contains(conv.Notes[0], "iam:PassRole") {
		t.Errorf("notes %q, want one telling to let Stevedore pass KarpenterNodeRole", conv.Notes)
	}

	out, err := WriteYAML(conv.Objects)
	if err != nil {
		t.Fatal(err)
	}
	back, ignoredBack := decode(t, string(out))
	if len(back) != 2 || len(ignoredBack) != 0 || manifest.IsKarpenter(back[0]) || manifest.IsKarpenter(back[1]) {
		t.Errorf("the written manifests read back as %d objects (ignored %q), want Stevedore's two:\n%s", len(back), ignoredBack, out)
	}
	if strings.Contains(string(out), "status") {
		t.Errorf("the written manifests have a status:\n%s", out)
	}
}

func TestNewPreviewPlansThePodsOfKarpentersNodesAnew(t *testing.T) {
	const cluster = `apiVersion: v1
kind: Node
metadata:
  name: karpenter-node
  labels: {karpenter.sh/nodepool: general, node.kubernetes.io/instance-type: m5.large, topology.kubernetes.io/zone: us-east-1a, karpenter.sh/capacity-type: on-demand}
---
apiVersion: v1
kind: Node
metadata:
  name: other-node
  labels: {node.kubernetes.io/instance-type: m5.xlarge}
---
apiVersion: v1
kind: Pod
metadata: {name: web, namespace: shop}
spec: {nodeName: karpenter-node, containers: [{name: c, image: i}]}
status: {phase: Running}
---
apiVersion: v1
kind: Pod
metadata:
  name: agent
  namespace: kube-system
  ownerReferences: [{apiVersion: apps/v1, kind: DaemonSet, name: agent, uid: 4d3c0a5e-0000-4000-8000-000000000001}]
spec: {nodeName: karpenter-node, containers: [{name: c, image: i}]}
status: {phase: Running}
---
apiVersion: v1
kind: Pod
metadata: {name: done, namespace: shop}
spec: {nodeName: karpenter-node, containers: [{name: c, image: i}]}
status: {phase: Succeeded}
---
apiVersion: v1
kind: Pod
metadata: {name: elsewhere, namespace: shop}
spec: {nodeName: other-node, containers: [{name: c, image: i}]}
status: {phase: Running}
---
apiVersion: karpenter.sh/v1
kind: NodeClaim
metadata: {name: general-abcde, labels: {karpenter.sh/nodepool: general}}
spec: {nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}, requirements: []}
---
`
	objs, _ := decode(t, cluster+karpenterNodePool)
	p, err := NewPreview(objs, price)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Replaced) != 1 {
		t.Fatalf("replaced %+v, want Karpenter's one node", p.Replaced)
	}
	if r := p.Replaced[0]; r.Name != "karpenter-node" || r.NodePool != "general" || r.Price != 0.096 || r.Pods != 1 {
		t.Errorf("replaced node %+v, want karpenter-node of general at $0.096 with its one movable pod", r)
	}
	var kept []string
	for _, obj := range p.Objects {
		kept = append(kept, manifest.Name(obj))
		switch o := obj.(type) {
		case *corev1.Pod:
			if o.Name == "web" && (o.Spec.NodeName != "" || o.Status.Phase != corev1.PodPending) {
				t.Errorf("pod web is on %q in phase %s, want it unbound and pending", o.Spec.NodeName, o.Status.Phase)
			}
			if o.Name == "elsewhere" && o.Spec.NodeName != "other-node" {
				t.Errorf("pod elsewhere left its node")
			}
		case *stevedorev1.NodePool:
			if len(o.Spec.Template.Spec.Requirements) != 2 {
				t.Errorf("the NodePool keeps requirements %+v, want the refused one left out", o.Spec.Template.Spec.Requirements)
			}
		}
	}
	if got := strings.Join(kept, ","); got != "Node/other-node,Pod/shop/web,Pod/shop/elsewhere,NodePool/general" {
		t.Errorf("the plan's input is %s", got)
	}
	if len(p.Problems) != 2 {
		t.Errorf("problems %q, want the NodePool's two", p.Problems)
	}
}
