/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package foundation

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"

	autoscalingv1beta1 "github.com/stevedore-dev/stevedore/pkg/apis/autoscaling/v1beta1"
	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/manifest"
	"github.com/stevedore-dev/stevedore/test/integration/harness"
)

var (
	nodePools      = schema.GroupVersionResource{Group: "stevedore.dev", Version: "v1", Resource: "nodepools"}
	ec2NodeClasses = schema.GroupVersionResource{Group: "stevedore.dev", Version: "v1", Resource: "ec2nodeclasses"}
	nodeOverlays   = schema.GroupVersionResource{Group: "stevedore.dev", Version: "v1", Resource: "nodeoverlays"}
	commitments    = schema.GroupVersionResource{Group: "stevedore.dev", Version: "v1", Resource: "commitments"}
)

const validNodePoolSpec = `
template:
  spec:
    nodeClassRef: {name: default}
    requirements:
      - {key: kubernetes.io/arch, operator: In, values: [arm64]}
`

const validNodeClassSpec = `
role: NodeRole
subnetSelectorTerms:
  - tags: {karpenter.sh/discovery: my-cluster}
`

// TestInvalidSpecsAreRefusedWithAMessageNamingTheField applies bad NodePools and EC2NodeClasses the way kubectl
// does and checks the API server refuses each with a message that names what is wrong.
func TestInvalidSpecsAreRefusedWithAMessageNamingTheField(t *testing.T) {
	cases := []struct {
		name     string
		resource schema.GroupVersionResource
		kind     string
		spec     string
		want     string
	}{
		{"weight zero", nodePools, "NodePool", validNodePoolSpec + "weight: 0\n", "spec.weight"},
		{"weight above 100", nodePools, "NodePool", validNodePoolSpec + "weight: 101\n", "spec.weight"},
		{"unknown operator", nodePools, "NodePool", "template: {spec: {nodeClassRef: {name: d}, requirements: [{key: a, operator: Like, values: [x]}]}}", "spec.template.spec.requirements[0].operator"},
		{"In without values", nodePools, "NodePool", "template: {spec: {nodeClassRef: {name: d}, requirements: [{key: a, operator: In}]}}", "operator In needs at least one value"},
		{"Gt with a word", nodePools, "NodePool", "template: {spec: {nodeClassRef: {name: d}, requirements: [{key: a, operator: Gt, values: [x]}]}}", "Gt, Lt, Gte and Lte need exactly one non-negative integer"},
		{"Gte with a negative number", nodePools, "NodePool", "template: {spec: {nodeClassRef: {name: d}, requirements: [{key: a, operator: Gte, values: ['-1']}]}}", "Gt, Lt, Gte and Lte need exactly one non-negative integer"},
		{"Lte without a value", nodePools, "NodePool", "template: {spec: {nodeClassRef: {name: d}, requirements: [{key: a, operator: Lte}]}}", "Gt, Lt, Gte and Lte need exactly one"},
		{"Lt with two values", nodePools, "NodePool", "template: {spec: {nodeClassRef: {name: d}, requirements: [{key: a, operator: Lt, values: ['1','2']}]}}", "Gt, Lt, Gte and Lte need exactly one"},
		{"Exists with values", nodePools, "NodePool", "template: {spec: {nodeClassRef: {name: d}, requirements: [{key: a, operator: Exists, values: [x]}]}}", "Exists and DoesNotExist take no values"},
		{"minValues above values", nodePools, "NodePool", "template: {spec: {nodeClassRef: {name: d}, requirements: [{key: a, operator: In, values: [x], minValues: 2}]}}", "minValues needs at least that many values"},
		{"hostname requirement", nodePools, "NodePool", "template: {spec: {nodeClassRef: {name: d}, requirements: [{key: kubernetes.io/hostname, operator: In, values: [x]}]}}", "set by Stevedore"},
		{"nodepool requirement", nodePools, "NodePool", "template: {spec: {nodeClassRef: {name: d}, requirements: [{key: stevedore.dev/nodepool, operator: In, values: [x]}]}}", "set by Stevedore"},
		{"bad requirement key", nodePools, "NodePool", "template: {spec: {nodeClassRef: {name: d}, requirements: [{key: 'bad key!', operator: Exists}]}}", "spec.template.spec.requirements[0].key"},
		{"unknown consolidationPolicy", nodePools, "NodePool", validNodePoolSpec + "disruption: {consolidationPolicy: Sometimes}\n", "spec.disruption.consolidationPolicy"},
		{"consolidationPolicy in lower case", nodePools, "NodePool", validNodePoolSpec + "disruption: {consolidationPolicy: balanced}\n", "spec.disruption.consolidationPolicy"},
		{"bad consolidateAfter", nodePools, "NodePool", validNodePoolSpec + "disruption: {consolidateAfter: soon}\n", "spec.disruption.consolidateAfter"},
		{"bad expireAfter", nodePools, "NodePool", "template: {spec: {nodeClassRef: {name: d}, expireAfter: 30d}}", "spec.template.spec.expireAfter"},
		{"bad terminationGracePeriod", nodePools, "NodePool", "template: {spec: {nodeClassRef: {name: d}, terminationGracePeriod: forever}}", "spec.template.spec.terminationGracePeriod"},
		{"budget nodes above 100%", nodePools, "NodePool", validNodePoolSpec + "disruption: {budgets: [{nodes: '150%'}]}\n", "spec.disruption.budgets[0].nodes"},
		{"budget nodes negative", nodePools, "NodePool", validNodePoolSpec + "disruption: {budgets: [{nodes: '-1'}]}\n", "spec.disruption.budgets[0].nodes"},
		{"budget schedule without duration", nodePools, "NodePool", validNodePoolSpec + "disruption: {budgets: [{nodes: '1', schedule: '@daily'}]}\n", "schedule and duration must be set together"},
		{"budget unknown reason", nodePools, "NodePool", validNodePoolSpec + "disruption: {budgets: [{nodes: '1', reasons: [Bored]}]}\n", "spec.disruption.budgets[0].reasons[0]"},
		{"missing nodeClassRef", nodePools, "NodePool", "template: {spec: {requirements: []}}", "spec.template.spec.nodeClassRef"},
		{"nodeClassRef of another kind", nodePools, "NodePool", "template: {spec: {nodeClassRef: {name: d, kind: AzureNodeClass}}}", "spec.template.spec.nodeClassRef.kind"},
		{"nodeClassRef of another group", nodePools, "NodePool", "template: {spec: {nodeClassRef: {name: d, group: example.com}}}", "spec.template.spec.nodeClassRef.group"},
		{"bad taint effect", nodePools, "NodePool", "template: {spec: {nodeClassRef: {name: d}, taints: [{key: a, effect: Sometimes}]}}", "spec.template.spec.taints: effect must be"},
		{"reserved template label", nodePools, "NodePool", "template: {metadata: {labels: {stevedore.dev/nodepool: x}}, spec: {nodeClassRef: {name: d}}}", "spec.template.metadata.labels"},
		{"negative replicas", nodePools, "NodePool", validNodePoolSpec + "replicas: -1\n", "spec.replicas"},
		{"static with a cpu limit", nodePools, "NodePool", validNodePoolSpec + "replicas: 2\nlimits: {cpu: 10}\n", "spec.limits: a static NodePool (spec.replicas set) takes only limits.nodes"},
		{"static with a weight", nodePools, "NodePool", validNodePoolSpec + "replicas: 2\nweight: 10\n", "spec.weight: a static NodePool"},
		{"no subnets", ec2NodeClasses, "EC2NodeClass", "role: NodeRole\n", "spec.subnetSelectorTerms"},
		{"empty subnet term", ec2NodeClasses, "EC2NodeClass", "role: R\nsubnetSelectorTerms: [{}]\n", "set id or tags"},
		{"subnet id and tags", ec2NodeClasses, "EC2NodeClass", "role: R\nsubnetSelectorTerms: [{id: subnet-1, tags: {a: b}}]\n", "id cannot be combined with tags"},
		{"role and instance profile", ec2NodeClasses, "EC2NodeClass", validNodeClassSpec + "instanceProfile: P\n", "exactly one of role and instanceProfile"},
		{"neither role nor instance profile", ec2NodeClasses, "EC2NodeClass", "subnetSelectorTerms: [{tags: {a: b}}]\n", "exactly one of role and instanceProfile"},
		{"empty reservation term", ec2NodeClasses, "EC2NodeClass", validNodeClassSpec + "capacityReservationSelectorTerms: [{}]\n", "capacityReservationSelectorTerms[]: set id, tags or instanceMatchCriteria"},
		{"unknown reservation match criteria", ec2NodeClasses, "EC2NodeClass", validNodeClassSpec + "capacityReservationSelectorTerms: [{instanceMatchCriteria: any}]\n", "spec.capacityReservationSelectorTerms[0].instanceMatchCriteria"},
		{"empty connection tracking", ec2NodeClasses, "EC2NodeClass", validNodeClassSpec + "connectionTracking: {}\n", "spec.connectionTracking: set at least one timeout"},
		{"connection tracking timeout too short", ec2NodeClasses, "EC2NodeClass", validNodeClassSpec + "connectionTracking: {udpTimeout: 5}\n", "spec.connectionTracking.udpTimeout"},
		{"volume initialization rate too fast", ec2NodeClasses, "EC2NodeClass", validNodeClassSpec + "blockDeviceMappings: [{deviceName: /dev/xvda, ebs: {snapshotID: snap-1, volumeInitializationRate: 400}}]\n", "volumeInitializationRate"},
		{"volume initialization rate without a snapshot", ec2NodeClasses, "EC2NodeClass", validNodeClassSpec + "blockDeviceMappings: [{deviceName: /dev/xvda, ebs: {volumeSize: 20Gi, volumeInitializationRate: 200}}]\n", "volumeInitializationRate: needs a snapshotID"},
		{"reservation id and tags", ec2NodeClasses, "EC2NodeClass", validNodeClassSpec + "capacityReservationSelectorTerms: [{id: cr-0123, tags: {a: b}}]\n", "id cannot be combined with other fields"},
		{"bad reservation id", ec2NodeClasses, "EC2NodeClass", validNodeClassSpec + "capacityReservationSelectorTerms: [{id: odcr-1}]\n", "spec.capacityReservationSelectorTerms[0].id"},
		{"bad reservation owner", ec2NodeClasses, "EC2NodeClass", validNodeClassSpec + "capacityReservationSelectorTerms: [{tags: {a: b}, ownerID: me}]\n", "spec.capacityReservationSelectorTerms[0].ownerID"},
		{"empty placement group selector", ec2NodeClasses, "EC2NodeClass", validNodeClassSpec + "placementGroupSelector: {}\n", "placementGroupSelector: set exactly one of name, id and tags"},
		{"placement group name and id", ec2NodeClasses, "EC2NodeClass", validNodeClassSpec + "placementGroupSelector: {name: a, id: pg-0123}\n", "placementGroupSelector: set exactly one of name, id and tags"},
		{"bad placement group id", ec2NodeClasses, "EC2NodeClass", validNodeClassSpec + "placementGroupSelector: {id: group-1}\n", "spec.placementGroupSelector.id"},
		{"placement group selector and gang groups", ec2NodeClasses, "EC2NodeClass", validNodeClassSpec + "placementGroupSelector: {name: a}\ngangPlacementGroup: Cluster\n", "placementGroupSelector and gangPlacementGroup cannot both be set"},
		{"unknown gang placement strategy", ec2NodeClasses, "EC2NodeClass", validNodeClassSpec + "gangPlacementGroup: Spread\n", "spec.gangPlacementGroup"},
		{"unknown amiFamily", ec2NodeClasses, "EC2NodeClass", validNodeClassSpec + "amiFamily: Windows2022\n", "spec.amiFamily"},
		{"bad alias", ec2NodeClasses, "EC2NodeClass", validNodeClassSpec + "amiSelectorTerms: [{alias: ubuntu@latest}]\n", "spec.amiSelectorTerms[0].alias"},
		{"alias with other terms", ec2NodeClasses, "EC2NodeClass", validNodeClassSpec + "amiSelectorTerms: [{alias: al2023@latest}, {id: ami-123}]\n", "an alias term must be the only term"},
		{"alias of another family", ec2NodeClasses, "EC2NodeClass", validNodeClassSpec + "amiFamily: AL2023\namiSelectorTerms: [{alias: bottlerocket@latest}]\n", "spec.amiFamily: with an alias term"},
		{"Custom without images", ec2NodeClasses, "EC2NodeClass", validNodeClassSpec + "amiFamily: Custom\nuserData: x\n", "amiFamily Custom needs amiSelectorTerms"},
		{"IMDS tokens unknown", ec2NodeClasses, "EC2NodeClass", validNodeClassSpec + "metadataOptions: {httpTokens: sometimes}\n", "spec.metadataOptions.httpTokens"},
		{"hop limit zero", ec2NodeClasses, "EC2NodeClass", validNodeClassSpec + "metadataOptions: {httpPutResponseHopLimit: 0}\n", "spec.metadataOptions.httpPutResponseHopLimit"},
		{"reserved tag", ec2NodeClasses, "EC2NodeClass", validNodeClassSpec + "tags: {kubernetes.io/cluster/other: owned}\n", "spec.tags"},
		{"two root volumes", ec2NodeClasses, "EC2NodeClass", validNodeClassSpec + "blockDeviceMappings: [{rootVolume: true, ebs: {volumeSize: 20Gi}}, {rootVolume: true, ebs: {volumeSize: 30Gi}}]\n", "at most one mapping may be the root volume"},
		{"unknown volume type", ec2NodeClasses, "EC2NodeClass", validNodeClassSpec + "blockDeviceMappings: [{ebs: {volumeSize: 20Gi, volumeType: ssd}}]\n", "spec.blockDeviceMappings[0].ebs.volumeType"},
		{"unknown eviction signal", ec2NodeClasses, "EC2NodeClass", validNodeClassSpec + "kubelet: {evictionHard: {cpu.available: 5%}}\n", "spec.kubelet.evictionHard"},
		{"unknown instance store policy", ec2NodeClasses, "EC2NodeClass", validNodeClassSpec + "instanceStorePolicy: RAID1\n", "spec.instanceStorePolicy"},
		{"maxPods zero", ec2NodeClasses, "EC2NodeClass", validNodeClassSpec + "kubelet: {maxPods: 0}\n", "spec.kubelet.maxPods"},
		{"unknown soft eviction signal", ec2NodeClasses, "EC2NodeClass", validNodeClassSpec + "kubelet: {evictionSoft: {cpu.available: 5%}, evictionSoftGracePeriod: {cpu.available: 1m}}\n", "spec.kubelet.evictionSoft: keys"},
		{"soft eviction without grace period", ec2NodeClasses, "EC2NodeClass", validNodeClassSpec + "kubelet: {evictionSoft: {memory.available: 500Mi}}\n", "every threshold needs its evictionSoftGracePeriod"},
		{"grace period without soft eviction", ec2NodeClasses, "EC2NodeClass", validNodeClassSpec + "kubelet: {evictionSoft: {memory.available: 500Mi}, evictionSoftGracePeriod: {memory.available: 1m, nodefs.available: 1m}}\n", "every grace period needs its evictionSoft threshold"},
		{"image GC high below low", ec2NodeClasses, "EC2NodeClass", validNodeClassSpec + "kubelet: {imageGCHighThresholdPercent: 50, imageGCLowThresholdPercent: 60}\n", "imageGCHighThresholdPercent must be greater"},
		{"overlay with price and adjustment", nodeOverlays, "NodeOverlay", "price: '0.1'\npriceAdjustment: '-10%'\n", "set at most one of price and priceAdjustment"},
		{"overlay that changes nothing", nodeOverlays, "NodeOverlay", "weight: 10\n", "set price, priceAdjustment or capacity"},
		{"overlay adjustment without a sign", nodeOverlays, "NodeOverlay", "priceAdjustment: '10%'\n", "spec.priceAdjustment"},
		{"overlay adjustment below -100%", nodeOverlays, "NodeOverlay", "priceAdjustment: '-150%'\n", "spec.priceAdjustment"},
		{"overlay negative price", nodeOverlays, "NodeOverlay", "price: '-1'\n", "spec.price"},
		{"overlay capacity of cpu", nodeOverlays, "NodeOverlay", "capacity: {cpu: '2'}\n", "spec.capacity: cpu, memory, ephemeral-storage and pods cannot be set"},
		{"overlay weight zero", nodeOverlays, "NodeOverlay", "price: '0.1'\nweight: 0\n", "spec.weight"},
		{"overlay Gte with a word", nodeOverlays, "NodeOverlay", "price: '0.1'\nrequirements: [{key: karpenter.k8s.aws/instance-cpu, operator: Gte, values: [many]}]\n", "take one non-negative integer"},
		{"overlay unknown operator", nodeOverlays, "NodeOverlay", "price: '0.1'\nrequirements: [{key: a, operator: Like, values: [x]}]\n", "spec.requirements[0].operator"},
		{"commitment of neither kind", commitments, "Commitment", "{}\n", "spec: set exactly one of savingsPlan and reservedInstances"},
		{"commitment of both kinds", commitments, "Commitment", "savingsPlan: {type: Compute, hourlyCommitment: '1', discountPercent: '20'}\nreservedInstances: {instanceType: m5.large, count: 1}\n",
			"spec: set exactly one of savingsPlan and reservedInstances"},
		{"instance savings plan without a family", commitments, "Commitment", "savingsPlan: {type: EC2Instance, hourlyCommitment: '1', discountPercent: '20'}\n", "spec.savingsPlan.instanceFamily"},
		{"compute savings plan with a family", commitments, "Commitment", "savingsPlan: {type: Compute, instanceFamily: m5, hourlyCommitment: '1', discountPercent: '20'}\n", "spec.savingsPlan.instanceFamily"},
		{"savings plan of another type", commitments, "Commitment", "savingsPlan: {type: SageMaker, hourlyCommitment: '1', discountPercent: '20'}\n", "spec.savingsPlan.type"},
		{"savings plan commitment that is no price", commitments, "Commitment", "savingsPlan: {type: Compute, hourlyCommitment: lots, discountPercent: '20'}\n", "spec.savingsPlan.hourlyCommitment"},
		{"savings plan discount of 100%", commitments, "Commitment", "savingsPlan: {type: Compute, hourlyCommitment: '1', discountPercent: '100'}\n", "spec.savingsPlan.discountPercent"},
		{"reservation of no type", commitments, "Commitment", "reservedInstances: {instanceType: m5, count: 1}\n", "spec.reservedInstances.instanceType"},
		{"reservation of no instance", commitments, "Commitment", "reservedInstances: {instanceType: m5.large, count: 0}\n", "spec.reservedInstances.count"},
		{"image GC above 100", ec2NodeClasses, "EC2NodeClass", validNodeClassSpec + "kubelet: {imageGCHighThresholdPercent: 101}\n", "spec.kubelet.imageGCHighThresholdPercent"},
	}
	client := dynamic.NewForConfigOrDie(sb.RESTConfig)
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var spec map[string]any
			if err := yaml.Unmarshal([]byte(tc.spec), &spec); err != nil {
				t.Fatalf("test spec: %v", err)
			}
			obj := &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": "stevedore.dev/v1", "kind": tc.kind,
				"metadata": map[string]any{"name": fmt.Sprintf("invalid-%d", i)},
				"spec":     spec,
			}}
			_, err := client.Resource(tc.resource).Create(context.Background(), obj, metav1.CreateOptions{})
			if err == nil {
				_ = client.Resource(tc.resource).Delete(context.Background(), obj.GetName(), metav1.DeleteOptions{})
				t.Fatalf("created, want it refused")
			}
			if !apierrors.IsInvalid(err) {
				t.Fatalf("error %v, want Invalid", err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q does not mention %q", err, tc.want)
			}
		})
	}
}

// TestAStaticNodePoolStaysStaticAndScales: replicas cannot be added or removed after creation, and the scale
// subresource (kubectl scale) sets them.
func TestAStaticNodePoolStaysStaticAndScales(t *testing.T) {
	ctx := harness.Context(t)
	pools := sb.Stevedore.StevedoreV1().NodePools()
	three := int64(3)
	static := harness.NewNodePool("static-api", "static-api", func(np *stevedorev1.NodePool) { np.Spec.Replicas = &three })
	dynamicPool := harness.NewNodePool("dynamic-api", "dynamic-api")
	for _, np := range []*stevedorev1.NodePool{static, dynamicPool} {
		np.Spec.Template.Spec.Requirements = append(np.Spec.Template.Spec.Requirements, harness.Req(stevedorev1.LabelInstanceType, "In", "no-such-type"))
		if _, err := pools.Create(ctx, np, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = pools.Delete(context.Background(), np.Name, metav1.DeleteOptions{}) })
	}
	cur, err := pools.Get(ctx, "static-api", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cur.Spec.Replicas = nil
	if _, err := pools.Update(ctx, cur, metav1.UpdateOptions{}); err == nil || !strings.Contains(err.Error(), "spec.replicas: a NodePool cannot change between static") {
		t.Errorf("static -> dynamic: error %v, want a refusal naming spec.replicas", err)
	}
	cur, err = pools.Get(ctx, "dynamic-api", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cur.Spec.Replicas = &three
	if _, err := pools.Update(ctx, cur, metav1.UpdateOptions{}); err == nil || !strings.Contains(err.Error(), "spec.replicas: a NodePool cannot change between static") {
		t.Errorf("dynamic -> static: error %v, want a refusal naming spec.replicas", err)
	}
	client := dynamic.NewForConfigOrDie(sb.RESTConfig)
	scale, err := client.Resource(nodePools).Get(ctx, "static-api", metav1.GetOptions{}, "scale")
	if err != nil {
		t.Fatal(err)
	}
	if err := unstructured.SetNestedField(scale.Object, int64(5), "spec", "replicas"); err != nil {
		t.Fatal(err)
	}
	if _, err := client.Resource(nodePools).Update(ctx, scale, metav1.UpdateOptions{}, "scale"); err != nil {
		t.Fatalf("scaling through the scale subresource: %v", err)
	}
	cur, err = pools.Get(ctx, "static-api", metav1.GetOptions{})
	if err != nil || cur.Spec.Replicas == nil || *cur.Spec.Replicas != 5 {
		t.Fatalf("after scaling to 5: %v, replicas %v", err, cur.Spec.Replicas)
	}
}

// TestCapacityQuotaLimitsAreValidated checks the CapacityQuota's limits in both served versions: whole,
// non-negative quantities, decimals only for the hourly cost.
func TestCapacityQuotaLimitsAreValidated(t *testing.T) {
	for _, version := range []string{"v1alpha1", "v1beta1"} {
		quotas := schema.GroupVersionResource{Group: "autoscaling.x-k8s.io", Version: version, Resource: "capacityquotas"}
		for i, tc := range []struct{ name, limits, want string }{
			{"a negative limit", "{cpu: '-1'}", "quantities cannot be negative"},
			{"a negative hourly cost", "{stevedore.dev/hourly-cost: '-5'}", "quantities cannot be negative"},
			{"a fraction of a CPU", "{cpu: '1.5'}", "quantities are whole numbers"},
			{"a long resource name", "{" + strings.Repeat("x", 64) + ": '1'}", "resource names are at most 63 characters"},
			{"valid: cpu, memory, nodes and GPUs", "{cpu: '64', memory: 256Gi, nodes: 10, nvidia.com/gpu: 8}", ""},
			{"valid: dollars and cents an hour", "{stevedore.dev/hourly-cost: '12.50'}", ""},
		} {
			t.Run(version+"/"+tc.name, func(t *testing.T) {
				var limits map[string]any
				if err := yaml.Unmarshal([]byte(tc.limits), &limits); err != nil {
					t.Fatal(err)
				}
				name := fmt.Sprintf("quota-%s-%d", version, i)
				obj := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "autoscaling.x-k8s.io/" + version, "kind": "CapacityQuota",
					"metadata": map[string]any{"name": name}, "spec": map[string]any{"limits": map[string]any{"resources": limits}}}}
				client := dynamic.NewForConfigOrDie(sb.RESTConfig).Resource(quotas)
				_, err := client.Create(context.Background(), obj, metav1.CreateOptions{})
				if tc.want == "" {
					if err != nil {
						t.Fatalf("a valid quota was refused: %v", err)
					}
					_ = client.Delete(context.Background(), name, metav1.DeleteOptions{})
					return
				}
				if err == nil || !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("error %v, want Invalid mentioning %q", err, tc.want)
				}
			})
		}
	}
}

// TestInvalidSharedCapacityBuffersAreRefused checks the autoscaling.x-k8s.io CapacityBuffer's validation, in both
// served versions: what the API refuses, and nothing more (a Karpenter or Cluster Autoscaler manifest must pass).
func TestInvalidSharedCapacityBuffersAreRefused(t *testing.T) {
	for _, version := range []string{"v1alpha1", "v1beta1"} {
		buffers := schema.GroupVersionResource{Group: "autoscaling.x-k8s.io", Version: version, Resource: "capacitybuffers"}
		for i, tc := range []struct{ name, spec, want string }{
			{"both references", "podTemplateRef: {name: a}\nscalableRef: {kind: Deployment, name: b}\nreplicas: 2\n", "podTemplateRef and scalableRef cannot both be set"},
			{"a template without a count", "podTemplateRef: {name: a}\npercentage: 10\n", "with podTemplateRef, set replicas or limits"},
			{"negative replicas", "podTemplateRef: {name: a}\nreplicas: -1\n", "spec.replicas"},
			{"an empty workload kind", "scalableRef: {kind: '', name: b}\nreplicas: 1\n", "spec.scalableRef.kind"},
			{"valid: a workload's percentage", "scalableRef: {kind: Deployment, name: b}\npercentage: 20\n", ""},
			{"valid: limits alone", "podTemplateRef: {name: a}\nlimits: {cpu: '8'}\n", ""},
		} {
			t.Run(version+"/"+tc.name, func(t *testing.T) {
				var spec map[string]any
				if err := yaml.Unmarshal([]byte(tc.spec), &spec); err != nil {
					t.Fatal(err)
				}
				name := fmt.Sprintf("shared-%s-%d", version, i)
				obj := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "autoscaling.x-k8s.io/" + version, "kind": "CapacityBuffer",
					"metadata": map[string]any{"name": name, "namespace": "default"}, "spec": spec}}
				client := dynamic.NewForConfigOrDie(sb.RESTConfig).Resource(buffers).Namespace("default")
				_, err := client.Create(context.Background(), obj, metav1.CreateOptions{})
				if tc.want == "" {
					if err != nil {
						t.Fatalf("a valid buffer was refused: %v", err)
					}
					_ = client.Delete(context.Background(), name, metav1.DeleteOptions{})
					return
				}
				if err == nil || !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("error %v, want Invalid mentioning %q", err, tc.want)
				}
			})
		}
	}
}

func TestInvalidCapacityBuffersAreRefused(t *testing.T) {
	buffers := schema.GroupVersionResource{Group: "stevedore.dev", Version: "v1", Resource: "capacitybuffers"}
	for i, tc := range []struct{ name, spec, want string }{
		{"neither reference", "replicas: 2\n", "spec: set exactly one of podTemplateRef and scalableRef"},
		{"both references", "podTemplateRef: {name: a}\nscalableRef: {kind: Deployment, name: b}\nreplicas: 2\n", "spec: set exactly one of podTemplateRef and scalableRef"},
		{"no count", "podTemplateRef: {name: a}\n", "spec: set replicas, percentage or limits"},
		{"percentage of a template", "podTemplateRef: {name: a}\npercentage: 10\n", "spec.percentage: a percentage of a workload's replicas needs scalableRef"},
		{"unknown workload kind", "scalableRef: {kind: CronJob, name: b}\nreplicas: 1\n", "spec.scalableRef.kind"},
		{"negative replicas", "podTemplateRef: {name: a}\nreplicas: -1\n", "spec.replicas"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var spec map[string]any
			if err := yaml.Unmarshal([]byte(tc.spec), &spec); err != nil {
				t.Fatal(err)
			}
			obj := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "stevedore.dev/v1", "kind": "CapacityBuffer",
				"metadata": map[string]any{"name": fmt.Sprintf("invalid-%d", i), "namespace": "default"}, "spec": spec}}
			_, err := dynamic.NewForConfigOrDie(sb.RESTConfig).Resource(buffers).Namespace("default").Create(context.Background(), obj, metav1.CreateOptions{})
			if err == nil || !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want Invalid mentioning %q", err, tc.want)
			}
		})
	}
}

func TestEveryExampleAppliesAndDefaultsAreFilled(t *testing.T) {
	ctx := harness.Context(t)
	files, err := filepath.Glob("../../../manifests/examples/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no examples: %v", err)
	}
	d := manifest.NewDecoder()
	for _, f := range files {
		objs, err := d.DecodeFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, obj := range objs {
			switch o := obj.(type) {
			case *stevedorev1.NodePool:
				o.Name = "example-" + o.Name
				if _, err := sb.Stevedore.StevedoreV1().NodePools().Create(ctx, o, metav1.CreateOptions{}); err != nil {
					t.Errorf("%s: %s: %v", f, manifest.Name(o), err)
				}
				t.Cleanup(func() {
					_ = sb.Stevedore.StevedoreV1().NodePools().Delete(context.Background(), o.Name, metav1.DeleteOptions{})
				})
			case *stevedorev1.CapacityBuffer:
				o.Name = "example-" + o.Name
				if _, err := sb.Stevedore.StevedoreV1().CapacityBuffers(o.Namespace).Create(ctx, o, metav1.CreateOptions{}); err != nil {
					t.Errorf("%s: %s: %v", f, manifest.Name(o), err)
				}
				t.Cleanup(func() {
					_ = sb.Stevedore.StevedoreV1().CapacityBuffers(o.Namespace).Delete(context.Background(), o.Name, metav1.DeleteOptions{})
				})
			case *autoscalingv1beta1.CapacityBuffer:
				o.Name = "example-" + o.Name
				if _, err := sb.Stevedore.AutoscalingXV1beta1().CapacityBuffers(o.Namespace).Create(ctx, o, metav1.CreateOptions{}); err != nil {
					t.Errorf("%s: %s: %v", f, manifest.Name(o), err)
				}
				t.Cleanup(func() {
					_ = sb.Stevedore.AutoscalingXV1beta1().CapacityBuffers(o.Namespace).Delete(context.Background(), o.Name, metav1.DeleteOptions{})
				})
			case *autoscalingv1beta1.CapacityQuota:
				o.Name = "example-" + o.Name
				if _, err := sb.Stevedore.AutoscalingXV1beta1().CapacityQuotas().Create(ctx, o, metav1.CreateOptions{}); err != nil {
					t.Errorf("%s: %s: %v", f, manifest.Name(o), err)
				}
				t.Cleanup(func() {
					_ = sb.Stevedore.AutoscalingXV1beta1().CapacityQuotas().Delete(context.Background(), o.Name, metav1.DeleteOptions{})
				})
			case *stevedorev1.EC2NodeClass:
				o.Name = "example-" + o.Name
				if _, err := sb.Stevedore.StevedoreV1().EC2NodeClasses().Create(ctx, o, metav1.CreateOptions{}); err != nil {
					t.Errorf("%s: %s: %v", f, manifest.Name(o), err)
				}
				t.Cleanup(func() {
					_ = sb.Stevedore.StevedoreV1().EC2NodeClasses().Delete(context.Background(), o.Name, metav1.DeleteOptions{})
				})
			}
		}
	}
	nc, err := sb.Stevedore.StevedoreV1().EC2NodeClasses().Get(ctx, "example-amd64", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	mo := nc.Spec.MetadataOptions
	if mo == nil || *mo.HTTPTokens != "required" || *mo.HTTPPutResponseHopLimit != 1 {
		t.Errorf("metadataOptions defaults = %+v, want IMDSv2 required with hop limit 1", mo)
	}
}

// TestOlderSpellingsAreAcceptedAndNormalised applies a NodePool written the way the user's Karpenter documents
// write them and checks it is stored and normalised to the canonical form.
func TestOlderSpellingsAreAcceptedAndNormalised(t *testing.T) {
	ctx := harness.Context(t)
	const legacy = `
apiVersion: stevedore.dev/v1
kind: NodePool
metadata: {name: legacy-spellings}
spec:
  template:
    spec:
      nodeClassRef:
        name: arm64
      requirements:
        - key: kubernetes.io/arch
          values: ["arm64"]
  disruption:
    consolidationPolicy: WhenUnderutilized
    consolidateAfter: 5m
    expireAfter: 720h
`
	objs, err := manifest.NewDecoder().Decode(strings.NewReader(legacy))
	if err != nil {
		t.Fatal(err)
	}
	np := objs[0].(*stevedorev1.NodePool)
	if _, err := sb.Stevedore.StevedoreV1().NodePools().Create(ctx, np, metav1.CreateOptions{}); err != nil {
		t.Fatalf("the older spellings were refused: %v", err)
	}
	t.Cleanup(func() {
		_ = sb.Stevedore.StevedoreV1().NodePools().Delete(context.Background(), np.Name, metav1.DeleteOptions{})
	})
	stored, err := sb.Stevedore.StevedoreV1().NodePools().Get(ctx, np.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ref := stored.Spec.Template.Spec.NodeClassRef
	if ref.Group != stevedorev1.GroupName || ref.Kind != "EC2NodeClass" {
		t.Errorf("nodeClassRef = %+v, want group and kind defaulted by the API server", ref)
	}
	if op := stored.Spec.Template.Spec.Requirements[0].Operator; op != "In" {
		t.Errorf("requirement operator = %q, want In by default", op)
	}
	stored.Normalize()
	if p := stored.Spec.Disruption.ConsolidationPolicy; p != stevedorev1.ConsolidationPolicyWhenEmptyOrUnderutilized {
		t.Errorf("consolidationPolicy normalised to %q", p)
	}
	if e := stored.Spec.Template.Spec.ExpireAfter; e == nil || e.String() != "720h0m0s" {
		t.Errorf("expireAfter normalised to %v, want 720h from spec.disruption.expireAfter", e)
	}
}
