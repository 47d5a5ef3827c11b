/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package freeroom

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	clocktesting "k8s.io/utils/clock/testing"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/resources"
	"github.com/stevedore-dev/stevedore/pkg/test"
)

// keepsNothing is a Kept for clusters with no room planned.
func keepsNothing(*corev1.Node, func(types.UID) bool) (resources.Requests, bool) {
	return resources.Requests{}, true
}

func TestAPodIsSentToTheFirstNodeThatMayTakeIt(t *testing.T) {
	node := func(name string) *test.NodeWrapper {
		return test.Node(name).Allocatable("cpu", "4", "memory", "16Gi", "pods", "110")
	}
	pod := func(name string) *test.PodWrapper { return test.Pod(name).Pending().Req("cpu", "1", "memory", "1Gi") }
	tests := []struct {
		name  string
		nodes []*corev1.Node
		bound []*corev1.Pod
		kept  Kept
		pod   *corev1.Pod
		want  string
	}{
		{name: "the first node by name with room",
			nodes: []*corev1.Node{node("b").Obj(), node("a").Obj()}, pod: pod("p").Obj(), want: "a"},
		{name: "no node",
			pod: pod("p").Obj(), want: ""},
		{name: "a node full of bound pods is passed over",
			nodes: []*corev1.Node{node("a").Obj(), node("b").Obj()},
			bound: []*corev1.Pod{test.Pod("x").Node("a").Req("cpu", "3500m").Obj()}, pod: pod("p").Obj(), want: "b"},
		{name: "a pod that finished frees its room",
			nodes: []*corev1.Node{node("a").Obj()},
			bound: []*corev1.Pod{test.Pod("x").Node("a").Req("cpu", "3500m").Phase(corev1.PodSucceeded).Obj()}, pod: pod("p").Obj(), want: "a"},
		{name: "no node has room for the pod's memory",
			nodes: []*corev1.Node{node("a").Obj()}, pod: test.Pod("p").Pending().Req("cpu", "1", "memory", "20Gi").Obj(), want: ""},
		{name: "a node with no pod slot left is passed over",
			nodes: []*corev1.Node{test.Node("a").Allocatable("cpu", "4", "memory", "16Gi", "pods", "1").Obj()},
			bound: []*corev1.Pod{test.Pod("x").Node("a").Obj()}, pod: pod("p").Obj(), want: ""},
		{name: "a cordoned node is passed over",
			nodes: []*corev1.Node{node("a").Unschedulable().Obj(), node("b").Obj()}, pod: pod("p").Obj(), want: "b"},
		{name: "a NoSchedule taint the pod does not tolerate",
			nodes: []*corev1.Node{node("a").Taint("CriticalAddonsOnly", "true", corev1.TaintEffectNoSchedule).Obj()}, pod: pod("p").Obj(), want: ""},
		{name: "a PreferNoSchedule taint does not keep the pod off",
			nodes: []*corev1.Node{node("a").Taint("spot", "true", corev1.TaintEffectPreferNoSchedule).Obj()}, pod: pod("p").Obj(), want: "a"},
		{name: "a taint the pod tolerates",
			nodes: []*corev1.Node{node("a").Taint("CriticalAddonsOnly", "true", corev1.TaintEffectNoSchedule).Obj()},
			pod:   pod("p").Toleration("CriticalAddonsOnly", corev1.TolerationOpExists, "", corev1.TaintEffectNoSchedule).Obj(), want: "a"},
		{name: "a node the pod's node selector does not match",
			nodes: []*corev1.Node{node("a").Labels("team", "x").Obj(), node("b").Labels("team", "y").Obj()},
			pod:   pod("p").NodeSelector("team", "y").Obj(), want: "b"},
		{name: "a node that takes no unplanned pod (coming up for others)",
			nodes: []*corev1.Node{node("a").Obj(), node("b").Obj()}, pod: pod("p").Obj(), want: "b",
			kept: func(n *corev1.Node, _ func(types.UID) bool) (resources.Requests, bool) {
				return resources.Requests{}, n.Name != "a"
			}},
		{name: "a node Stevedore launched that is still coming up is passed by before the keeper is asked",
			nodes: []*corev1.Node{node("a").Labels(stevedorev1.LabelNodePool, "default").Obj(), node("b").Obj()}, pod: pod("p").Obj(), want: "b",
			kept: func(n *corev1.Node, _ func(types.UID) bool) (resources.Requests, bool) {
				if n.Name == "a" {
					panic("the keeper was asked about a node coming up")
				}
				return resources.Requests{}, true
			}},
		{name: "a node Stevedore launched that finished initializing",
			nodes: []*corev1.Node{node("a").Labels(stevedorev1.LabelNodePool, "default", stevedorev1.LabelInitialized, "true").Obj(), node("b").Obj()},
			pod:   pod("p").Obj(), want: "a"},
		{name: "the room a node keeps for the pods planned there",
			nodes: []*corev1.Node{node("a").Obj(), node("b").Obj()}, pod: pod("p").Obj(), want: "b",
			kept: func(n *corev1.Node, _ func(types.UID) bool) (resources.Requests, bool) {
				if n.Name == "a" {
					return resources.Requests{MilliCPU: 3500, Pods: 3}, true
				}
				return resources.Requests{}, true
			}},
		{name: "a DaemonSet's pod on the node is seen by the keeper",
			nodes: []*corev1.Node{node("a").Obj(), node("b").Obj()},
			bound: []*corev1.Pod{test.Pod("ds-a").Node("a").OwnedBy("DaemonSet", "agent").Obj()}, pod: pod("p").Obj(), want: "a",
			kept: func(_ *corev1.Node, hasDaemon func(types.UID) bool) (resources.Requests, bool) {
				if hasDaemon("DaemonSet-agent") {
					return resources.Requests{}, true
				}
				return resources.Requests{MilliCPU: 3500}, true // the agent's room, not bound yet
			}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			x := indexOf(tc.nodes, tc.bound)
			kept := tc.kept
			if kept == nil {
				kept = keepsNothing
			}
			if got := x.Send(klog.Background(), tc.pod, resources.Pod(tc.pod), kept); got != tc.want {
				t.Errorf("Send = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestTheRoomOfAPodSentIsHeldUntilItBindsOrIsGivenBack: a node with room for one pod takes the first pod sent,
// not the second; the room comes back when the first is bound elsewhere, is given back, is deleted, or is held
// longer than sentTTL.
func TestTheRoomOfAPodSentIsHeldUntilItBindsOrIsGivenBack(t *testing.T) {
	for _, tc := range []struct {
		name    string
		release func(x *Index, clk *clocktesting.FakeClock, first *corev1.Pod)
	}{
		{"bound to another node", func(x *Index, _ *clocktesting.FakeClock, first *corev1.Pod) {
			bound := first.DeepCopy()
			bound.Spec.NodeName = "elsewhere"
			x.setPod(bound)
		}},
		{"given back", func(x *Index, _ *clocktesting.FakeClock, first *corev1.Pod) { x.Unsend(first.UID) }},
		{"deleted", func(x *Index, _ *clocktesting.FakeClock, first *corev1.Pod) {
			x.deletePod(cache.DeletedFinalStateUnknown{Key: "default/first", Obj: first})
		}},
		{"held too long", func(_ *Index, clk *clocktesting.FakeClock, _ *corev1.Pod) { clk.Step(sentTTL + time.Second) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := clocktesting.NewFakeClock(time.Now())
			x := New(clk)
			x.setNode(test.Node("a").Allocatable("cpu", "2", "memory", "8Gi", "pods", "110").Obj())
			first := test.Pod("first").Pending().Req("cpu", "1500m").Obj()
			second := test.Pod("second").Pending().Req("cpu", "1500m").Obj()
			if got := x.Send(klog.Background(), first, resources.Pod(first), keepsNothing); got != "a" {
				t.Fatalf("first pod sent to %q, want a", got)
			}
			if got := x.Send(klog.Background(), second, resources.Pod(second), keepsNothing); got != "" {
				t.Fatalf("second pod sent to %q while the first holds the room", got)
			}
			tc.release(x, clk, first)
			if got := x.Send(klog.Background(), second, resources.Pod(second), keepsNothing); got != "a" {
				t.Errorf("second pod sent to %q once the first let the room go, want a", got)
			}
		})
	}
}

// TestPodsBoundBeforeTheirNodeIsSeenCountOnceItIs: the informers deliver a pod bound to a node before the node;
// its room is counted when the node comes, and a node deleted is no longer offered.
func TestPodsBoundBeforeTheirNodeIsSeenCountOnceItIs(t *testing.T) {
	x := New(clocktesting.NewFakeClock(time.Now()))
	x.setPod(test.Pod("early").Node("a").Req("cpu", "3").Obj())
	node := test.Node("a").Allocatable("cpu", "4", "memory", "16Gi", "pods", "110").Obj()
	x.setNode(node)
	pod := test.Pod("p").Pending().Req("cpu", "2").Obj()
	if got := x.Send(klog.Background(), pod, resources.Pod(pod), keepsNothing); got != "" {
		t.Errorf("sent to %q, a node whose early pod leaves 1 CPU", got)
	}
	x.deletePod(test.Pod("early").Node("a").Req("cpu", "3").Obj())
	if got := x.Send(klog.Background(), pod, resources.Pod(pod), keepsNothing); got != "a" {
		t.Errorf("sent to %q, want a once the early pod left", got)
	}
	x.Unsend(pod.UID)
	x.deleteNode(node)
	if got := x.Send(klog.Background(), pod, resources.Pod(pod), keepsNothing); got != "" {
		t.Errorf("sent to %q, a node that was deleted", got)
	}
}

// indexOf is an index that has been told of the nodes and of the pods bound to them, as the informers tell it.
func indexOf(nodes []*corev1.Node, bound []*corev1.Pod) *Index {
	x := New(clocktesting.NewFakeClock(time.Now()))
	for _, n := range nodes {
		x.setNode(n)
	}
	for _, p := range bound {
		x.setPod(p)
	}
	return x
}

// TestANodeIsJudgedAsItIsNow: a node's update (its taint taken off, its allocatable grown, a cordon) and its
// deletion and return change what Send makes of it.
func TestANodeIsJudgedAsItIsNow(t *testing.T) {
	base := func() *test.NodeWrapper {
		return test.Node("a").Allocatable("cpu", "4", "memory", "16Gi", "pods", "110")
	}
	pod := test.Pod("p").Pending().Req("cpu", "2").Obj()
	x := New(clocktesting.NewFakeClock(time.Now()))
	steps := []struct {
		name string
		do   func()
		want string
	}{
		{"registered with the unregistered taint", func() {
			x.setNode(base().Taint("karpenter.sh/unregistered", "", corev1.TaintEffectNoExecute).Obj())
		}, ""},
		{"the taint taken off", func() { x.setNode(base().Obj()) }, "a"},
		{"a bound pod fills it", func() { x.setPod(test.Pod("x").Node("a").Req("cpu", "3").Obj()) }, ""},
		{"its allocatable grows", func() {
			x.setNode(test.Node("a").Allocatable("cpu", "8", "memory", "16Gi", "pods", "110").Obj())
		}, "a"},
		{"cordoned", func() {
			x.setNode(test.Node("a").Allocatable("cpu", "8", "memory", "16Gi", "pods", "110").Unschedulable().Obj())
		}, ""},
		{"launched by Stevedore, coming up", func() {
			x.setNode(test.Node("a").Allocatable("cpu", "8", "memory", "16Gi", "pods", "110").Labels(stevedorev1.LabelNodePool, "default").Obj())
		}, ""},
		{"initialized", func() {
			x.setNode(test.Node("a").Allocatable("cpu", "8", "memory", "16Gi", "pods", "110").
				Labels(stevedorev1.LabelNodePool, "default", stevedorev1.LabelInitialized, "true").Obj())
		}, "a"},
		{"deleted", func() { x.deleteNode(base().Obj()) }, ""},
		{"back, its bound pod still counted", func() { x.setNode(base().Obj()) }, ""},
		{"its bound pod gone", func() { x.deletePod(test.Pod("x").Node("a").Req("cpu", "3").Obj()) }, "a"},
	}
	for _, s := range steps {
		s.do()
		got := x.Send(klog.Background(), pod, resources.Pod(pod), keepsNothing)
		x.Unsend(pod.UID)
		if got != s.want {
			t.Errorf("%s: sent to %q, want %q", s.name, got, s.want)
		}
	}
	// what a node matches follows its labels, for pods that select nodes by them (a node selector, a required
	// node affinity) and are matched again and again in a burst
	inZone := func(name, zone string) *corev1.Pod {
		p := test.Pod(name).Pending().Req("cpu", "1").Obj()
		p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
			NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
				{Key: corev1.LabelTopologyZone, Operator: corev1.NodeSelectorOpIn, Values: []string{zone}}}}}}}}
		return p
	}
	for _, s := range []struct {
		name string
		node *corev1.Node
		pod  *corev1.Pod
		want string
	}{
		{"in zone a, a pod for zone a", base().Labels(corev1.LabelTopologyZone, "us-east-1a").Obj(), inZone("p1", "us-east-1a"), "a"},
		{"a second pod for zone a", nil, inZone("p2", "us-east-1a"), "a"},
		{"a pod for zone b", nil, inZone("p3", "us-east-1b"), ""},
		{"relabelled to zone b, a pod for zone a", base().Labels(corev1.LabelTopologyZone, "us-east-1b").Obj(), inZone("p4", "us-east-1a"), ""},
		{"a pod for zone b", nil, inZone("p5", "us-east-1b"), "a"},
		{"a node selector for zone b", nil, test.Pod("p6").Pending().NodeSelector(corev1.LabelTopologyZone, "us-east-1b").Obj(), "a"},
		{"a node selector for zone a", nil, test.Pod("p7").Pending().NodeSelector(corev1.LabelTopologyZone, "us-east-1a").Obj(), ""},
	} {
		if s.node != nil {
			x.setNode(s.node)
		}
		got := x.Send(klog.Background(), s.pod, resources.Pod(s.pod), keepsNothing)
		x.Unsend(s.pod.UID)
		if got != s.want {
			t.Errorf("%s: sent to %q, want %q", s.name, got, s.want)
		}
	}
}

// BenchmarkSendAt4000Nodes sends pods that no node may take to an index of 4000 nodes as a burst leaves it: a
// third full, a third registered with the unregistered taint, a third ready and keeping their room for the pods
// planned there. Each Send looks at every node.
func BenchmarkSendAt4000Nodes(b *testing.B) {
	var nodes []*corev1.Node
	var bound []*corev1.Pod
	for i := range 4000 {
		name := fmt.Sprintf("ip-10-0-%d-%d.ec2.internal", i/250, i%250)
		n := test.Node(name).Allocatable("cpu", "3920m", "memory", "15Gi", "pods", "58").
			Labels(corev1.LabelTopologyZone, "us-east-1a", "stevedore.dev/nodepool", "default")
		switch i % 3 {
		case 0:
			bound = append(bound, test.Pod(fmt.Sprintf("full-%d", i)).Node(name).Req("cpu", "3500m", "memory", "5Gi").Obj())
		case 1:
			n = n.Taint("karpenter.sh/unregistered", "", corev1.TaintEffectNoExecute)
		}
		nodes = append(nodes, n.Obj())
	}
	x := indexOf(nodes, bound)
	keeps := func(*corev1.Node, func(types.UID) bool) (resources.Requests, bool) {
		return resources.Requests{MilliCPU: 3500, Memory: 5 << 30, Pods: 5}, true
	}
	// as the opt-in keeps Stevedore's pods off Karpenter's nodes
	pod := test.Pod("p").Pending().Req("cpu", "700m", "memory", "1Gi").Obj()
	pod.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
		NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
			{Key: "karpenter.sh/nodepool", Operator: corev1.NodeSelectorOpDoesNotExist}}}}}}}
	req := resources.Pod(pod)
	logger := klog.Background()
	b.ResetTimer()
	for range b.N {
		if got := x.Send(logger, pod, req, keeps); got != "" {
			b.Fatalf("sent to %s", got)
		}
	}
}
