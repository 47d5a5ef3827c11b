/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package cost

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/stevedore-dev/stevedore/pkg/test"
)

const gpu corev1.ResourceName = "nvidia.com/gpu"

func alloc(cpu, mem string, gpus int64) corev1.ResourceList {
	rl := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem),
		corev1.ResourcePods: resource.MustParse("110")}
	if gpus > 0 {
		rl[gpu] = *resource.NewQuantity(gpus, resource.DecimalSI)
	}
	return rl
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

func TestEachNodeIsSplitByItsBindingResource(t *testing.T) {
	web := func(name, cpu, mem string) *corev1.Pod {
		return test.Pod(name).Node("n").Req("cpu", cpu, "memory", mem).OwnedBy("ReplicaSet", "web-5d8f").Labels("pod-template-hash", "5d8f").Obj()
	}
	trainer := test.Pod("trainer").Node("n").Req("cpu", "8", "memory", "32Gi", string(gpu), "4").OwnedBy("Job", "train").Obj()
	agent := test.Pod("agent").Node("n").Req("cpu", "1", "memory", "1Gi").OwnedBy("DaemonSet", "agent").Obj()
	done := test.Pod("done").Node("n").Req("cpu", "2", "memory", "1Gi").Obj()
	done.Status.Phase = corev1.PodSucceeded
	static := test.Pod("static").Node("n").Req("cpu", "3", "memory", "1Gi").Obj()
	cases := []struct {
		name    string
		node    Node
		binding corev1.ResourceName
		// pods is each workload's cost (namespace default); ds the DaemonSets'; idle what is left
		pods     map[string]float64
		ds, idle float64
	}{
		{name: "cpu fills first", node: Node{Name: "n", Price: 0.2, Allocatable: alloc("4", "16Gi", 0),
			Pods: []*corev1.Pod{web("a", "1", "1Gi"), web("b", "1", "2Gi")}},
			binding: corev1.ResourceCPU, pods: map[string]float64{"Deployment/web": 0.1}, idle: 0.1},
		{name: "memory fills first", node: Node{Name: "n", Price: 0.2, Allocatable: alloc("4", "16Gi", 0),
			Pods: []*corev1.Pod{web("a", "500m", "12Gi"), test.Pod("solo").Node("n").Req("cpu", "500m", "memory", "2Gi").Obj()}},
			binding: corev1.ResourceMemory, pods: map[string]float64{"Deployment/web": 0.15, "Pod/solo": 0.025}, idle: 0.025},
		{name: "GPUs fill first; a pod without one pays nothing", node: Node{Name: "n", Price: 32, Allocatable: alloc("96", "1100Gi", 8),
			Pods: []*corev1.Pod{trainer, web("a", "4", "8Gi")}},
			binding: gpu, pods: map[string]float64{"Job/train": 16, "Deployment/web": 0}, idle: 16},
		{name: "a DaemonSet pod is reported apart", node: Node{Name: "n", Price: 0.4, Allocatable: alloc("4", "16Gi", 0),
			Pods: []*corev1.Pod{agent, web("a", "2", "1Gi")}},
			binding: corev1.ResourceCPU, pods: map[string]float64{"Deployment/web": 0.2}, ds: 0.1, idle: 0.1},
		{name: "finished pods hold nothing; with no request left the node is idle", node: Node{Name: "n", Price: 0.1,
			Allocatable: alloc("4", "16Gi", 0), Pods: []*corev1.Pod{done}}, idle: 0.1},
		{name: "pods asking more than the node has share it", node: Node{Name: "n", Price: 0.3, Allocatable: alloc("4", "16Gi", 0),
			Pods: []*corev1.Pod{static, web("a", "3", "1Gi")}},
			binding: corev1.ResourceCPU, pods: map[string]float64{"Pod/static": 0.15, "Deployment/web": 0.15}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := Attribute([]Node{tc.node})
			if got := r.Nodes[0].Binding; got != tc.binding {
				t.Errorf("binding resource %q, want %q", got, tc.binding)
			}
			for name, want := range tc.pods {
				kind, wname, _ := strings.Cut(name, "/")
				w := Workload{Namespace: "default", Kind: kind, Name: wname}
				if got := r.ByWorkload[w]; !near(got, want) {
					t.Errorf("%s costs %v, want %v (all: %v)", name, got, want, r.ByWorkload)
				}
			}
			if !near(r.DaemonSets, tc.ds) || !near(r.Idle, tc.idle) {
				t.Errorf("DaemonSets %v, idle %v; want %v, %v", r.DaemonSets, r.Idle, tc.ds, tc.idle)
			}
			if !near(r.Pods+r.DaemonSets+r.Idle, tc.node.Price) || !near(r.Total, tc.node.Price) {
				t.Errorf("pods %v + DaemonSets %v + idle %v = %v, total %v; want the node's price %v", r.Pods, r.DaemonSets, r.Idle,
					r.Pods+r.DaemonSets+r.Idle, r.Total, tc.node.Price)
			}
		})
	}
}

// TestTheSplitSumsToTheBill: over random clusters, every node's pods, DaemonSets and idle share add up to its price,
// the namespaces to the pods', and no share is negative.
func TestTheSplitSumsToTheBill(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 11))
	for round := range 200 {
		var nodes []Node
		for i := range 1 + r.IntN(8) {
			n := Node{Name: fmt.Sprintf("n%d", i), Price: float64(r.IntN(5000)) / 1000, Allocatable: alloc(fmt.Sprint(2+r.IntN(30)),
				fmt.Sprintf("%dGi", 4+r.IntN(120)), int64(r.IntN(2)*8))}
			for j := range r.IntN(12) {
				w := test.Pod(fmt.Sprintf("p%d-%d", i, j)).Node(n.Name).Namespace(fmt.Sprintf("ns%d", r.IntN(3))).
					Req("cpu", fmt.Sprintf("%dm", r.IntN(4000)), "memory", fmt.Sprintf("%dMi", r.IntN(16000)))
				if r.IntN(4) == 0 {
					w = w.OwnedBy("DaemonSet", "agent")
				}
				n.Pods = append(n.Pods, w.Obj())
			}
			nodes = append(nodes, n)
		}
		rep := Attribute(nodes)
		want := 0.0
		for _, n := range nodes {
			want += n.Price
		}
		namespaces := 0.0
		for _, c := range rep.ByNamespace {
			namespaces += c
		}
		if !near(rep.Total, want) || !near(rep.Pods+rep.DaemonSets+rep.Idle, want) || !near(namespaces, rep.Pods) {
			t.Fatalf("round %d: total %v, pods %v + DaemonSets %v + idle %v, namespaces %v; want %v", round, rep.Total, rep.Pods,
				rep.DaemonSets, rep.Idle, namespaces, want)
		}
		for _, nc := range rep.Nodes {
			if nc.Pods < 0 || nc.DaemonSets < 0 || nc.Idle < 0 || !near(nc.Pods+nc.DaemonSets+nc.Idle, nc.Price) {
				t.Fatalf("round %d: node %s split %v + %v + %v of %v", round, nc.Name, nc.Pods, nc.DaemonSets, nc.Idle, nc.Price)
			}
		}
	}
}

func TestWorkloadOf(t *testing.T) {
	cases := []struct {
		pod  *corev1.Pod
		want Workload
	}{
		{test.Pod("a").OwnedBy("ReplicaSet", "web-5d8f").Labels("pod-template-hash", "5d8f").Obj(), Workload{"default", "Deployment", "web"}},
		{test.Pod("b").OwnedBy("ReplicaSet", "solo").Obj(), Workload{"default", "ReplicaSet", "solo"}},
		{test.Pod("c").OwnedBy("StatefulSet", "db").Obj(), Workload{"default", "StatefulSet", "db"}},
		{test.Pod("d").OwnedBy("Job", "train").Obj(), Workload{"default", "Job", "train"}},
		{test.Pod("e").Obj(), Workload{"default", "Pod", "e"}},
	}
	for _, tc := range cases {
		if got := WorkloadOf(tc.pod); got != tc.want {
			t.Errorf("WorkloadOf(%s) = %v, want %v", tc.pod.Name, got, tc.want)
		}
	}
}
