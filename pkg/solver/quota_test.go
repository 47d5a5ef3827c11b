/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package solver

import (
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	autoscalingv1beta1 "github.com/stevedore-dev/stevedore/pkg/apis/autoscaling/v1beta1"
	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/cloud/catalog"
	"github.com/stevedore-dev/stevedore/pkg/test"
)

func testQuota(name string, selector *metav1.LabelSelector, kv ...string) *autoscalingv1beta1.CapacityQuota {
	limits := corev1.ResourceList{}
	for i := 0; i+1 < len(kv); i += 2 {
		limits[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return &autoscalingv1beta1.CapacityQuota{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: autoscalingv1beta1.CapacityQuotaSpec{Selector: selector, Limits: autoscalingv1beta1.CapacityQuotaLimits{Resources: limits}}}
}

// onePool is a NodePool of the given instance types, with template labels.
func onePool(name string, weight int32, labels map[string]string, types ...string) *stevedorev1.NodePool {
	np := testPool(name, weight, req(corev1.LabelInstanceTypeStable, "In", types...))
	np.Spec.Template.ObjectMeta.Labels = labels
	return np
}

// planned sums the plan's new nodes: how many per NodePool, their cpu (cores of the planned type) and price.
func planned(plan *Plan) (map[string]int, int64, float64) {
	count := map[string]int{}
	var cpu int64
	var cost float64
	for _, n := range plan.NewNodes {
		count[n.NodePool.Name]++
		q := n.InstanceType.Capacity[corev1.ResourceCPU]
		cpu += q.Value()
		cost += n.Offering.Price
	}
	return count, cpu, cost
}

func TestCapacityQuotasCapTheNodesTheySelectAcrossNodePools(t *testing.T) {
	team := &metav1.LabelSelector{MatchLabels: map[string]string{"team": "ml"}}
	price := func(it string) float64 {
		for _, ty := range catalog.Default().InstanceTypes {
			if ty.Name == it {
				for _, o := range ty.Offerings {
					if o.CapacityType == "on-demand" {
						return o.Price
					}
				}
			}
		}
		t.Fatalf("no on-demand price for %s", it)
		return 0
	}
	onDemand := req(stevedorev1.LabelCapacityType, "In", "on-demand")
	for _, tc := range []struct {
		name  string
		objs  []runtime.Object
		check func(t *testing.T, plan *Plan)
	}{
		{
			name: "cpu across two NodePools: two 4-CPU nodes for 8 CPUs, the rest unschedulable naming the quota",
			objs: append([]runtime.Object{onePool("a", 90, nil, "m5.xlarge"), onePool("b", 10, nil, "c5.xlarge"),
				testQuota("cluster", nil, "cpu", "8")}, replicas("web", 12, "1", "1Gi")...),
			check: func(t *testing.T, plan *Plan) {
				_, cpu, _ := planned(plan)
				if cpu != 8 {
					t.Errorf("planned %d CPUs, want exactly the quota's 8", cpu)
				}
				if len(plan.Unschedulable) == 0 {
					t.Fatal("no pod left unschedulable past the quota")
				}
				for _, why := range plan.Unschedulable {
					if !strings.Contains(why, "the CapacityQuota cluster is reached (cpu)") {
						t.Errorf("reason %q does not name the quota and the resource", why)
					}
				}
			},
		},
		{
			name: "a selector on a template label caps one NodePool's nodes, the other takes the rest",
			objs: append([]runtime.Object{onePool("ml", 90, map[string]string{"team": "ml"}, "m5.large"), onePool("general", 10, nil, "m5.large"),
				testQuota("ml", team, "nodes", "1")}, replicas("big", 3, "1500m", "1Gi", func(p *corev1.Pod) {
				p.Spec.Affinity = antiAffinity("big")
			})...),
			check: func(t *testing.T, plan *Plan) {
				count, _, _ := planned(plan)
				if count["ml"] != 1 || count["general"] != 2 || len(plan.Unschedulable) != 0 {
					t.Errorf("nodes per NodePool %v (unschedulable %v), want 1 in ml and 2 in general", count, plan.Unschedulable)
				}
			},
		},
		{
			name: "hourly cost: as many nodes as the dollars allow",
			objs: append([]runtime.Object{func() runtime.Object {
				np := onePool("a", 0, nil, "m5.large")
				np.Spec.Template.Spec.Requirements = append(np.Spec.Template.Spec.Requirements, onDemand)
				return np
			}(), testQuota("budget", nil, "stevedore.dev/hourly-cost", "0.5")}, replicas("web", 10, "1500m", "1Gi", func(p *corev1.Pod) {
				p.Spec.Affinity = antiAffinity("web")
			})...),
			check: func(t *testing.T, plan *Plan) {
				count, _, cost := planned(plan)
				want := int(0.5 / price("m5.large"))
				if count["a"] != want || cost > 0.5 {
					t.Errorf("%d nodes costing $%.4f/h, want %d (at $%.4f/h, within $0.50/h)", count["a"], cost, want, price("m5.large"))
				}
			},
		},
		{
			name: "a selector on the instance type leaves the other types alone",
			objs: append(append([]runtime.Object{onePool("a", 0, nil, "m5.xlarge", "m5.2xlarge"),
				testQuota("no-2xl", &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelInstanceTypeStable: "m5.2xlarge"}}, "nodes", "0")},
				replicas("small", 2, "1", "1Gi")...), replicas("large", 1, "6", "8Gi")...),
			check: func(t *testing.T, plan *Plan) {
				for _, n := range plan.NewNodes {
					if n.InstanceType.Name == "m5.2xlarge" {
						t.Errorf("an m5.2xlarge was planned past a quota of 0")
					}
				}
				if len(plan.Unschedulable) != 1 {
					t.Errorf("unschedulable %v, want the 6-CPU pod only", plan.Unschedulable)
				}
			},
		},
		{
			name: "at the boundary: a quota of exactly one node's CPUs takes one node",
			objs: append([]runtime.Object{onePool("a", 0, nil, "m5.xlarge"), testQuota("cluster", nil, "cpu", "4")},
				replicas("web", 6, "1", "1Gi")...),
			check: func(t *testing.T, plan *Plan) {
				if _, cpu, _ := planned(plan); cpu != 4 || len(plan.NewNodes) != 1 {
					t.Errorf("%d nodes, %d CPUs, want one m5.xlarge", len(plan.NewNodes), cpu)
				}
			},
		},
		{
			name: "at the boundary: one CPU short of a node takes none",
			objs: append([]runtime.Object{onePool("a", 0, nil, "m5.xlarge"), testQuota("cluster", nil, "cpu", "3")},
				replicas("web", 2, "1", "1Gi")...),
			check: func(t *testing.T, plan *Plan) {
				if len(plan.NewNodes) != 0 || len(plan.Unschedulable) != 2 {
					t.Errorf("%d nodes, %d pods unschedulable, want none and both", len(plan.NewNodes), len(plan.Unschedulable))
				}
				if got := plan.QuotasReached["cluster"]; got != corev1.ResourceCPU {
					t.Errorf("QuotasReached = %v, want cluster by cpu", plan.QuotasReached)
				}
			},
		},
		{
			name: "a quota selecting nothing the NodePools launch changes nothing",
			objs: append([]runtime.Object{onePool("a", 0, nil, "m5.xlarge"),
				testQuota("other", &metav1.LabelSelector{MatchLabels: map[string]string{"team": "nobody"}}, "nodes", "0")},
				replicas("web", 6, "1", "1Gi")...),
			check: func(t *testing.T, plan *Plan) {
				if len(plan.Unschedulable) != 0 || len(plan.QuotasReached) != 0 {
					t.Errorf("unschedulable %v, quotas reached %v; want neither", plan.Unschedulable, plan.QuotasReached)
				}
			},
		},
		{
			name: "a quota on spot capacity: a spot-only NodePool stops at it, the on-demand one takes the rest",
			objs: append([]runtime.Object{func() runtime.Object {
				np := onePool("spot", 90, nil, "m5.large")
				np.Spec.Template.Spec.Requirements = append(np.Spec.Template.Spec.Requirements, req(stevedorev1.LabelCapacityType, "In", "spot"))
				return np
			}(), func() runtime.Object {
				np := onePool("od", 10, nil, "m5.large")
				np.Spec.Template.Spec.Requirements = append(np.Spec.Template.Spec.Requirements, onDemand)
				return np
			}(), testQuota("spot", &metav1.LabelSelector{MatchLabels: map[string]string{stevedorev1.LabelCapacityType: "spot"}}, "nodes", "1")},
				replicas("big", 3, "1500m", "1Gi", func(p *corev1.Pod) { p.Spec.Affinity = antiAffinity("big") })...),
			check: func(t *testing.T, plan *Plan) {
				count, _, _ := planned(plan)
				if count["spot"] != 1 || count["od"] != 2 {
					t.Errorf("nodes per NodePool %v, want 1 spot and 2 on-demand", count)
				}
			},
		},
		{
			name: "a zone the NodePool leaves open counts its nodes against a zonal quota",
			objs: append([]runtime.Object{onePool("a", 0, nil, "m5.large"),
				testQuota("zone-a", &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelTopologyZone: "us-east-1a"}}, "nodes", "1")},
				replicas("big", 3, "1500m", "1Gi", func(p *corev1.Pod) { p.Spec.Affinity = antiAffinity("big") })...),
			check: func(t *testing.T, plan *Plan) {
				if len(plan.NewNodes) != 1 || len(plan.Unschedulable) != 2 {
					t.Errorf("%d nodes, %d unschedulable; want 1 and 2 (every node may land in us-east-1a)", len(plan.NewNodes), len(plan.Unschedulable))
				}
			},
		},
		{
			name: "GPUs across two NodePools",
			objs: append([]runtime.Object{testPool("g5", 50, req(stevedorev1.LabelInstanceFamily, "In", "g5")),
				testPool("g6", 10, req(stevedorev1.LabelInstanceFamily, "In", "g6")),
				testQuota("gpus", nil, string(stevedorev1.ResourceNVIDIAGPU), "3")}, func() []runtime.Object {
				var out []runtime.Object
				for i := 0; i < 5; i++ {
					out = append(out, acceleratorPod(fmt.Sprintf("g-%d", i), "1", "2Gi", stevedorev1.ResourceNVIDIAGPU, "1"))
				}
				return out
			}()...),
			check: func(t *testing.T, plan *Plan) {
				gpus := int64(0)
				for _, n := range plan.NewNodes {
					q := n.InstanceType.Capacity[stevedorev1.ResourceNVIDIAGPU]
					gpus += q.Value()
				}
				if gpus != 3 || len(plan.Unschedulable) != 2 {
					t.Errorf("%d GPUs launched (%v), %d pods unschedulable; want 3 and 2 left pending", gpus, nodeTypes(plan), len(plan.Unschedulable))
				}
			},
		},
		{
			name: "a node does not grow past the quota",
			objs: append([]runtime.Object{onePool("a", 0, nil, "m5.large", "m5.xlarge", "m5.2xlarge"),
				testQuota("cluster", nil, "cpu", "4")}, replicas("web", 6, "900m", "512Mi")...),
			check: func(t *testing.T, plan *Plan) {
				if _, cpu, _ := planned(plan); cpu > 4 || cpu == 0 {
					t.Errorf("planned %d CPUs against a quota of 4", cpu)
				}
				if len(plan.Unschedulable) == 0 {
					t.Error("every pod was placed within 4 CPUs: the case does not reach the quota")
				}
			},
		},
		{
			name: "the cluster's nodes count: one 4-CPU node runs, one more fits in 8",
			objs: append([]runtime.Object{onePool("a", 0, nil, "m5.xlarge"), testQuota("cluster", nil, "cpu", "8"),
				test.Node("running").Allocatable("cpu", "4", "memory", "16Gi", "pods", "58").Labels(stevedorev1.LabelNodePool, "a").Obj()},
				replicas("web", 12, "1", "1Gi")...),
			check: func(t *testing.T, plan *Plan) {
				if _, cpu, _ := planned(plan); cpu != 4 {
					t.Errorf("planned %d CPUs, want 4 (8 less the running node's 4)", cpu)
				}
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			plan, _, _ := solveObjects(t, tc.objs...)
			tc.check(t, plan)
		})
	}
}

func antiAffinity(app string) *corev1.Affinity {
	return &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
		LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}, TopologyKey: corev1.LabelHostname}}}}
}
