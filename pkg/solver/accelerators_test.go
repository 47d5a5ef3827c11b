/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package solver

import (
	"fmt"
	"math"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/cloud"
	"github.com/stevedore-dev/stevedore/pkg/test"
)

// acceleratorPod is a pod requesting cpu, memory and extended resources given as name, quantity pairs.
func acceleratorPod(name, cpu, mem string, extended ...string) *corev1.Pod {
	args := append([]string{"cpu", cpu, "memory", mem}, extended...)
	return test.Pod(name).Pending().Labels("app", name).Req(args...).Obj()
}

// cheapestHolding is the cheapest instance type (by its cheapest offering) whose allocatable holds requests, and its
// price: what an exhaustive search picks for a pod alone on a node.
func cheapestHolding(t *testing.T, requests corev1.ResourceList, allow func(*cloud.InstanceType) bool) (string, float64) {
	t.Helper()
	best, bestPrice := "", math.Inf(1)
	for _, it := range testInstanceTypes(t) {
		if !allow(it) || !fitsList(requests, it.Allocatable()) {
			continue
		}
		if o, ok := it.Offerings.Cheapest(); ok && o.Price < bestPrice {
			best, bestPrice = it.Name, o.Price
		}
	}
	return best, bestPrice
}

func TestSolverPacksAcceleratorsAsResources(t *testing.T) {
	all := func(*cloud.InstanceType) bool { return true }
	gpuCost := func(plan *Plan) (float64, int) {
		total := 0.0
		for _, n := range plan.NewNodes {
			total += n.Offering.Price
		}
		return total, len(plan.NewNodes)
	}
	cases := []struct {
		name  string
		objs  []runtime.Object
		check func(t *testing.T, plan *Plan)
	}{
		{
			name: "one NVIDIA GPU: the cheapest type with one",
			objs: []runtime.Object{testPool("default", 0), acceleratorPod("train", "1", "4Gi", stevedorev1.ResourceNVIDIAGPU, "1")},
			check: func(t *testing.T, plan *Plan) {
				want, _ := cheapestHolding(t, podRequests([]*corev1.Pod{acceleratorPod("x", "1", "4Gi", stevedorev1.ResourceNVIDIAGPU, "1")}), all)
				if len(plan.NewNodes) != 1 || plan.NewNodes[0].InstanceType.Name != want {
					t.Fatalf("nodes %v (unschedulable %v), want one %s", nodeTypes(plan), plan.Unschedulable, want)
				}
				if it := plan.NewNodes[0].InstanceType; it.Labels()[stevedorev1.LabelInstanceGPUManufacturer] != "nvidia" {
					t.Errorf("%s has no NVIDIA GPU label", it.Name)
				}
			},
		},
		{
			name: "GPU pods share a node while its GPUs last, then another is opened",
			objs: []runtime.Object{testPool("default", 0, req(stevedorev1.LabelInstanceFamily, "In", "g5")),
				acceleratorPod("a", "1", "4Gi", stevedorev1.ResourceNVIDIAGPU, "3"), acceleratorPod("b", "1", "4Gi", stevedorev1.ResourceNVIDIAGPU, "3"),
				acceleratorPod("c", "1", "4Gi", stevedorev1.ResourceNVIDIAGPU, "2")},
			check: func(t *testing.T, plan *Plan) {
				gpus := int64(0)
				for _, n := range plan.NewNodes {
					need := podRequests(n.Pods)[stevedorev1.ResourceNVIDIAGPU]
					have := n.InstanceType.Allocatable()[stevedorev1.ResourceNVIDIAGPU]
					if need.Cmp(have) > 0 {
						t.Errorf("%s holds pods requesting %s GPUs but has %s", n.InstanceType.Name, need.String(), have.String())
					}
					gpus += have.Value()
				}
				if len(plan.Unschedulable) > 0 || gpus < 8 {
					t.Errorf("nodes %v (%d GPUs), unschedulable %v; want 8 GPUs placed", nodeTypes(plan), gpus, plan.Unschedulable)
				}
				// no worse than one node per pod, each on its cheapest g5. (One g5.48xlarge for all three would be
				// cheaper still with the catalog's spot prices; the greedy phase opens a g5.12xlarge per pod because
				// each join would change the node to a g5.48xlarge at a marginal cost above a new g5.12xlarge.)
				g5 := func(it *cloud.InstanceType) bool { return family(it.Name) == "g5" }
				alone := 0.0
				for _, gpus := range []string{"3", "3", "2"} {
					_, p := cheapestHolding(t, podRequests([]*corev1.Pod{acceleratorPod("x", "1", "4Gi", stevedorev1.ResourceNVIDIAGPU, gpus)}), g5)
					alone += p
				}
				if cost, _ := gpuCost(plan); cost > alone+1e-9 {
					t.Errorf("plan %v costs %.4f/h, more than one node per pod (%.4f)", nodeTypes(plan), cost, alone)
				}
			},
		},
		{
			name: "Neuron devices and cores: inf2 and trn1",
			objs: []runtime.Object{testPool("default", 0),
				acceleratorPod("infer", "1", "2Gi", stevedorev1.ResourceAWSNeuronCore, "2"),
				acceleratorPod("trainer", "4", "16Gi", stevedorev1.ResourceAWSNeuron, "12")},
			check: func(t *testing.T, plan *Plan) {
				byPod := podTypes(plan)
				if f := family(byPod["infer"]); f != "inf2" && f != "inf1" && f != "trn1" {
					t.Errorf("the NeuronCore pod is on %s, want a Neuron type", byPod["infer"])
				}
				if it := byPod["trainer"]; it != "inf2.48xlarge" && it != "trn1.32xlarge" && it != "trn1n.32xlarge" && it != "inf1.24xlarge" {
					t.Errorf("the 12-device pod is on %s, want a type with at least 12 Neuron devices", it)
				}
			},
		},
		{
			name: "an EFA pod gets a type with an EFA interface",
			objs: []runtime.Object{testPool("default", 0), acceleratorPod("hpc", "2", "8Gi", stevedorev1.ResourceEFA, "1")},
			check: func(t *testing.T, plan *Plan) {
				want, _ := cheapestHolding(t, podRequests([]*corev1.Pod{acceleratorPod("x", "2", "8Gi", stevedorev1.ResourceEFA, "1")}), all)
				if got := podTypes(plan)["hpc"]; got != want {
					t.Errorf("the EFA pod is on %s, want the cheapest type with EFA, %s", got, want)
				}
			},
		},
		{
			name: "plain pods beside a GPU pod do not take the GPU node's room",
			objs: append([]runtime.Object{testPool("default", 0), acceleratorPod("gpu", "1", "2Gi", stevedorev1.ResourceNVIDIAGPU, "1")},
				replicas("web", 3, "500m", "512Mi")...),
			check: func(t *testing.T, plan *Plan) {
				for pod, it := range podTypes(plan) {
					accelerated := false
					for _, n := range plan.NewNodes {
						if n.InstanceType.Name == it {
							accelerated = n.InstanceType.Accelerated()
						}
					}
					if (pod == "gpu") != accelerated {
						t.Errorf("pod %s on %s (accelerated %v)", pod, it, accelerated)
					}
				}
			},
		},
		{
			name: "a plain pod lands on a GPU type only when nothing else fits: a GPU-only NodePool",
			objs: []runtime.Object{testPool("gpus", 0, req(stevedorev1.LabelInstanceGPUCount, "Exists")), testPod("web", "500m", "512Mi")},
			check: func(t *testing.T, plan *Plan) {
				if len(plan.NewNodes) != 1 || !plan.NewNodes[0].InstanceType.Accelerated() {
					t.Errorf("nodes %v, want one GPU node (the NodePool has nothing else)", nodeTypes(plan))
				}
			},
		},
		{
			name: "a NodePool limit on GPUs holds",
			objs: append([]runtime.Object{func() runtime.Object {
				np := testPool("gpus", 0, req(stevedorev1.LabelInstanceFamily, "In", "g5"))
				np.Spec.Limits = stevedorev1.Limits{stevedorev1.ResourceNVIDIAGPU: resource.MustParse("2")}
				return np
			}()}, func() []runtime.Object {
				var out []runtime.Object
				for i := 0; i < 4; i++ {
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
				if gpus > 2 || len(plan.Unschedulable) != 2 {
					t.Errorf("%d GPUs launched (%v), %d pods unschedulable; want at most 2 and 2 left pending", gpus, nodeTypes(plan), len(plan.Unschedulable))
				}
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			plan, _, _ := solveObjects(t, tc.objs...)
			tc.check(t, plan)
		})
	}
}

func nodeTypes(plan *Plan) []string {
	var out []string
	for _, n := range plan.NewNodes {
		out = append(out, n.InstanceType.Name)
	}
	return out
}

// podTypes maps each planned pod's name to its node's instance type.
func podTypes(plan *Plan) map[string]string {
	out := map[string]string{}
	for _, n := range plan.NewNodes {
		for _, p := range n.Pods {
			out[p.Name] = n.InstanceType.Name
		}
	}
	return out
}

func family(instanceType string) string {
	for i, c := range instanceType {
		if c == '.' {
			return instanceType[:i]
		}
	}
	return instanceType
}
