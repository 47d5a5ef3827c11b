/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package solver

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/poolcap"
	"github.com/stevedore-dev/stevedore/pkg/test"
)

// ownedBy makes pods one Deployment's: a ReplicaSet controller and its pod-template-hash.
func ownedBy(deployment string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Labels["pod-template-hash"] = "h1"
		yes := true
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: deployment + "-h1",
			UID: types.UID("rs-" + deployment), Controller: &yes}}
	}
}

// capped gives pods a cap of 2 per Spot pool.
func capped(p *corev1.Pod) {
	if p.Annotations == nil {
		p.Annotations = map[string]string{}
	}
	p.Annotations[poolcap.Annotation] = "2"
}

// spotPools counts, per Spot pool (instance type/zone), the pods of app a plan puts on new nodes; a spot node whose
// pods are capped must launch as one instance type in one zone.
func spotPools(t *testing.T, plan *Plan, app string) (map[string]int, int) {
	t.Helper()
	pools := map[string]int{}
	onDemand := 0
	for _, n := range plan.NewNodes {
		mine := 0
		for _, p := range n.Pods {
			if p.Labels["app"] == app {
				mine++
			}
		}
		if mine == 0 {
			continue
		}
		if n.Offering.CapacityType != stevedorev1.CapacityTypeSpot {
			onDemand += mine
			continue
		}
		if _, ok := n.Pods[0].Annotations[poolcap.Annotation]; ok {
			zones := n.Requirements.Get(corev1.LabelTopologyZone)
			if len(n.InstanceTypes) != 1 || zones == nil || zones.Len() != 1 {
				t.Errorf("spot node %s of capped pods may launch as %d types in zones %v: its pool is not decided", n.InstanceType.Name, len(n.InstanceTypes), zones)
			}
		}
		pools[n.InstanceType.Name+"/"+n.Offering.Zone] += mine
	}
	return pools, onDemand
}

func TestACapPerSpotPoolSpreadsAWorkloadOverPools(t *testing.T) {
	spotOnly := req(stevedorev1.LabelCapacityType, "In", stevedorev1.CapacityTypeSpot)
	both := req(stevedorev1.LabelCapacityType, "In", stevedorev1.CapacityTypeSpot, stevedorev1.CapacityTypeOnDemand)
	oneType := req(corev1.LabelInstanceTypeStable, "In", "m5.xlarge")
	oneZone := req(corev1.LabelTopologyZone, "In", "us-east-1a")
	for _, tc := range []struct {
		name string
		objs []runtime.Object
		// most is the most pods of web one spot pool may hold; onDemand how many go on on-demand
		most, onDemand int
		unschedulable  int
	}{
		{
			name: "no cap: twenty replicas pack into few pools",
			objs: append([]runtime.Object{testPool("spot", 0, spotOnly)}, replicas("web", 20, "1", "2Gi", ownedBy("web"))...),
			most: 20,
		},
		{
			name: "a cap of 2: twenty replicas in at least ten pools",
			objs: append([]runtime.Object{testPool("spot", 0, spotOnly)}, replicas("web", 20, "1", "2Gi", ownedBy("web"), capped)...),
			most: 2,
		},
		{
			name: "one pool allowed: two on spot, the rest on on-demand",
			objs: append([]runtime.Object{testPool("mixed", 0, both, oneType, oneZone)}, replicas("web", 8, "1", "2Gi", ownedBy("web"), capped)...),
			most: 2, onDemand: 6, // three pods fit an m5.xlarge: a spot node of two and two on-demand nodes of three
		},
		{
			name: "one pool allowed and spot only: the pods over the cap are not planned",
			objs: append([]runtime.Object{testPool("spot", 0, spotOnly, oneType, oneZone)}, replicas("web", 5, "1", "2Gi", ownedBy("web"), capped)...),
			most: 2, unschedulable: 3,
		},
		{
			name: "a running spot node's pods count: its pool takes no more",
			objs: append([]runtime.Object{testPool("spot", 0, spotOnly, oneType, req(corev1.LabelTopologyZone, "In", "us-east-1a", "us-east-1b")),
				test.Node("running").Allocatable("cpu", "4", "memory", "16Gi", "pods", "58").Labels(stevedorev1.LabelNodePool, "spot",
					stevedorev1.LabelCapacityType, stevedorev1.CapacityTypeSpot, corev1.LabelInstanceTypeStable, "m5.xlarge",
					corev1.LabelTopologyZone, "us-east-1a").Obj()},
				append(boundReplicas("web", 2, "running", ownedBy("web"), capped), replicas("web", 3, "1", "2Gi", ownedBy("web"), capped)...)...),
			most: 2, unschedulable: 1,
		},
		{
			// the pool bound on a node's tries could hold the cheapest zone's types only: every zone's are tried
			name: "pods that must join a running pod's zone spread over that zone's pools",
			objs: append([]runtime.Object{testPool("spot", 0, spotOnly),
				test.Node("running").Allocatable("cpu", "4", "memory", "16Gi", "pods", "58").Labels(
					stevedorev1.LabelCapacityType, stevedorev1.CapacityTypeOnDemand, corev1.LabelInstanceTypeStable, "m5.xlarge",
					corev1.LabelTopologyZone, "us-east-1a").Obj()},
				append(boundReplicas("web", 1, "running", ownedBy("web"), capped, zoneAffinity("web")),
					replicas("web", 30, "1", "2Gi", ownedBy("web"), capped, zoneAffinity("web"))...)...),
			most: 2,
		},
		{
			name: "each workload has its own cap",
			objs: append(append([]runtime.Object{testPool("spot", 0, spotOnly, oneType, oneZone)},
				replicas("web", 2, "1", "2Gi", ownedBy("web"), capped)...), replicas("api", 2, "1", "2Gi", ownedBy("api"), capped)...),
			most: 2,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			plan, _, _ := solveObjects(t, tc.objs...)
			pools, onDemand := spotPools(t, plan, "web")
			most := 0
			for _, n := range pools {
				most = max(most, n)
			}
			if tc.most > 2 {
				if most <= 2 {
					t.Errorf("without a cap the largest pool holds %d pods of web: the case shows nothing (%v)", most, pools)
				}
			} else if most > tc.most {
				t.Errorf("a spot pool holds %d pods of web, the cap is %d: %v", most, tc.most, pools)
			}
			if onDemand != tc.onDemand {
				t.Errorf("%d pods of web on on-demand, want %d (spot pools %v)", onDemand, tc.onDemand, pools)
			}
			if len(plan.Unschedulable) != tc.unschedulable {
				t.Errorf("%d pods unschedulable, want %d: %v", len(plan.Unschedulable), tc.unschedulable, plan.Unschedulable)
			}
		})
	}
}

// boundReplicas are pods of prefix bound to node, 1 CPU each.
func boundReplicas(prefix string, n int, node string, mutate ...func(*corev1.Pod)) []runtime.Object {
	var out []runtime.Object
	for i := range n {
		p := test.Pod(fmt.Sprintf("%s-bound-%d", prefix, i)).Node(node).Phase(corev1.PodRunning).Req("cpu", "1", "memory", "2Gi").Obj()
		p.Labels = map[string]string{"app": prefix}
		for _, m := range mutate {
			m(p)
		}
		out = append(out, p)
	}
	return out
}

// zoneAffinity makes pods require a zone holding a pod of app.
func zoneAffinity(app string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Spec.Affinity = &corev1.Affinity{PodAffinity: &corev1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}, TopologyKey: corev1.LabelTopologyZone}}}}
	}
}
