/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package freeroom

import (
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/stevedore-dev/stevedore/pkg/test"
)

// TestAPodIsHeldWhileBindingItWouldBreakItsSpread reads as PodTopologySpread's Filter does, for the pods bound:
// the pod's domain count, plus the pod itself, less the least count over the domains with a node, within maxSkew.
func TestAPodIsHeldWhileBindingItWouldBreakItsSpread(t *testing.T) {
	zone := func(name, z string) *corev1.Node {
		return test.Node(name).Labels(corev1.LabelTopologyZone, z).Obj()
	}
	web := func(name string) *test.PodWrapper { return test.Pod(name).Labels("app", "web") }
	spread := func(skew int32) *corev1.Pod {
		return web("p").Pending().Spread(corev1.LabelTopologyZone, skew, corev1.DoNotSchedule, "app", "web").Obj()
	}
	threeZones := []*corev1.Node{zone("a1", "a"), zone("a2", "a"), zone("b1", "b"), zone("c1", "c")}
	tests := []struct {
		name  string
		nodes []*corev1.Node
		bound []*corev1.Pod
		pod   *corev1.Pod
		node  string
		held  bool
	}{
		{name: "no hard constraint", nodes: threeZones, bound: []*corev1.Pod{web("x").Node("a1").Obj()},
			pod: web("p").Pending().Spread(corev1.LabelTopologyZone, 1, corev1.ScheduleAnyway, "app", "web").Obj(), node: "a1"},
		{name: "the first pod of the group", nodes: threeZones, pod: spread(1), node: "a1"},
		{name: "its zone one ahead of an empty zone", nodes: threeZones, bound: []*corev1.Pod{web("x").Node("a2").Obj()},
			pod: spread(1), node: "a1", held: true},
		{name: "a zone behind the others", nodes: threeZones,
			bound: []*corev1.Pod{web("x").Node("a2").Obj(), web("y").Node("c1").Obj()}, pod: spread(1), node: "b1"},
		{name: "maxSkew 2 lets it one further ahead", nodes: threeZones, bound: []*corev1.Pod{web("x").Node("a2").Obj()},
			pod: spread(2), node: "a1"},
		{name: "pods of another app do not count", nodes: threeZones,
			bound: []*corev1.Pod{test.Pod("x").Labels("app", "db").Node("a2").Obj()}, pod: spread(1), node: "a1"},
		{name: "pods of another namespace do not count", nodes: threeZones,
			bound: []*corev1.Pod{web("x").Namespace("other").Node("a2").Obj()}, pod: spread(1), node: "a1"},
		{name: "a pod being deleted does not count", nodes: threeZones,
			bound: []*corev1.Pod{web("x").Node("a2").Deleting(metav1.Now()).Obj()}, pod: spread(1), node: "a1"},
		{name: "a node without the zone label is no domain", nodes: []*corev1.Node{zone("a1", "a"), test.Node("plain").Obj()},
			bound: []*corev1.Pod{web("x").Node("a1").Obj()}, pod: spread(1), node: "a1"},
		{name: "the zones the pod's node selector rules out are no domains",
			nodes: []*corev1.Node{test.Node("a1").Labels(corev1.LabelTopologyZone, "a", "pool", "x").Obj(), zone("b1", "b")},
			bound: []*corev1.Pod{web("x").Node("a1").Obj()},
			pod:   web("p").Pending().NodeSelector("pool", "x").Spread(corev1.LabelTopologyZone, 1, corev1.DoNotSchedule, "app", "web").Obj(), node: "a1"},
		{name: "fewer domains than minDomains: the least count is 0", nodes: []*corev1.Node{zone("a1", "a")},
			bound: []*corev1.Pod{web("x").Node("a1").Obj()},
			pod: func() *corev1.Pod {
				p := spread(1)
				p.Spec.TopologySpreadConstraints[0].MinDomains = ptr.To[int32](2)
				return p
			}(), node: "a1", held: true},
		{name: "a node the index does not know is left to the scheduler", nodes: threeZones,
			bound: []*corev1.Pod{web("x").Node("a2").Obj()}, pod: spread(1), node: "unknown"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			x := indexOf(tc.nodes, tc.bound)
			groups, why := x.SpreadAllows(tc.pod, tc.node)
			if held := why != ""; held != tc.held {
				t.Errorf("held: %v (%q, groups %v), want %v", held, why, groups, tc.held)
			}
		})
	}
}

// TestTheSpreadCountsFollowThePodsAndTellWhoWaits: a group is counted from the pods bound when it is first asked
// about, then kept as pods bind, are reserved, leave or have their reservation undone; each change is told.
func TestTheSpreadCountsFollowThePodsAndTellWhoWaits(t *testing.T) {
	x := New(clocktesting.NewFakeClock(time.Now()))
	var told []string
	x.OnSpreadChange(func(ids []string) { told = append(told, ids...) })
	for _, n := range []*corev1.Node{test.Node("a1").Labels(corev1.LabelTopologyZone, "a").Obj(),
		test.Node("b1").Labels(corev1.LabelTopologyZone, "b").Obj()} {
		x.setNode(n)
	}
	first := test.Pod("first").Labels("app", "web").Node("a1").Obj()
	x.setPod(first)
	pod := test.Pod("p").Labels("app", "web").Pending().Spread(corev1.LabelTopologyZone, 1, corev1.DoNotSchedule, "app", "web").Obj()
	groups, why := x.SpreadAllows(pod, "a1")
	if why == "" || len(groups) != 1 {
		t.Fatalf("with a pod of the group in zone a and none in b, a1 is allowed (%q, %v)", why, groups)
	}
	second := test.Pod("second").Labels("app", "web").Pending().Obj()
	x.Reserve(second, "b1")
	if !slices.Equal(told, groups) {
		t.Errorf("told %v when a pod of the group was reserved in b, want %v", told, groups)
	}
	if _, why := x.SpreadAllows(pod, "a1"); why != "" {
		t.Errorf("held (%q) once a pod of the group is reserved in b", why)
	}
	x.Unreserve(second.UID)
	if _, why := x.SpreadAllows(pod, "a1"); why == "" {
		t.Error("allowed in a once the reservation in b was undone")
	}
	boundB := second.DeepCopy()
	boundB.Spec.NodeName = "b1"
	x.setPod(boundB)
	x.deletePod(first)
	told = nil
	x.deletePod(boundB)
	if !slices.Equal(told, groups) {
		t.Errorf("told %v when a pod of the group left, want %v", told, groups)
	}
	if _, why := x.SpreadAllows(pod, "a1"); why != "" {
		t.Errorf("held (%q) with no pod of the group left", why)
	}
}

// TestPodsReleasedTogetherSeeEachOther: the pods planned on one node are released together when it is ready; the
// second of a group held to one pod per zone waits until the first is bound elsewhere or given back.
func TestPodsReleasedTogetherSeeEachOther(t *testing.T) {
	x := New(clocktesting.NewFakeClock(time.Now()))
	for _, n := range []*corev1.Node{test.Node("a1").Labels(corev1.LabelTopologyZone, "a").Obj(),
		test.Node("b1").Labels(corev1.LabelTopologyZone, "b").Obj()} {
		x.setNode(n)
	}
	pod := func(name string) *corev1.Pod {
		return test.Pod(name).Labels("app", "web").Pending().Spread(corev1.LabelTopologyZone, 1, corev1.DoNotSchedule, "app", "web").Obj()
	}
	first, second := pod("first"), pod("second")
	if _, why := x.SpreadAllows(first, "a1"); why != "" {
		t.Fatalf("the first pod is held: %s", why)
	}
	if _, why := x.SpreadAllows(second, "a1"); why == "" {
		t.Fatal("the second pod is released to a1 while the first, released there, is not bound yet")
	}
	x.Unsend(first.UID)
	if _, why := x.SpreadAllows(second, "a1"); why != "" {
		t.Errorf("the second pod is held once the first gave its place back: %s", why)
	}
}
