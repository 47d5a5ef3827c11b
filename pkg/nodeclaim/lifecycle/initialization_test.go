/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package lifecycle

import (
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/test"
)

func TestNotInitialized(t *testing.T) {
	claim := test.NodeClaim("c1", "default").
		StartupTaint("example.com/cni-not-ready", "", corev1.TaintEffectNoSchedule).
		Taint("dedicated", "batch", corev1.TaintEffectNoSchedule).Obj()
	tests := []struct {
		name string
		node *corev1.Node
		want string
	}{
		{name: "Ready without taints", node: test.Node("n1").Obj(), want: ""},
		{name: "not Ready", node: test.Node("n1").Ready(corev1.ConditionFalse).Obj(), want: "node is not Ready"},
		{name: "Ready unknown", node: test.Node("n1").Ready(corev1.ConditionUnknown).Obj(), want: "node is not Ready"},
		{name: "no conditions yet", node: func() *corev1.Node { n := test.Node("n1").Obj(); n.Status.Conditions = nil; return n }(),
			want: "node is not Ready"},
		{name: "not-ready taint", node: test.Node("n1").Taint(corev1.TaintNodeNotReady, "", corev1.TaintEffectNoSchedule).Obj(),
			want: "node has taint " + corev1.TaintNodeNotReady},
		{name: "unreachable taint", node: test.Node("n1").Taint(corev1.TaintNodeUnreachable, "", corev1.TaintEffectNoExecute).Obj(),
			want: "node has taint " + corev1.TaintNodeUnreachable},
		{name: "cloud provider uninitialized taint",
			node: test.Node("n1").Taint("node.cloudprovider.kubernetes.io/uninitialized", "true", corev1.TaintEffectNoSchedule).Obj(),
			want: "node has taint node.cloudprovider.kubernetes.io/uninitialized"},
		{name: "unregistered taint", node: test.Node("n1").Taint(stevedorev1.TaintUnregistered, "true", corev1.TaintEffectNoSchedule).Obj(),
			want: "node has taint " + stevedorev1.TaintUnregistered},
		{name: "startup taint still there", node: test.Node("n1").Taint("example.com/cni-not-ready", "", corev1.TaintEffectNoSchedule).Obj(),
			want: "startup taint example.com/cni-not-ready is still on the node"},
		{name: "startup taint key with another effect is not the startup taint",
			node: test.Node("n1").Taint("example.com/cni-not-ready", "", corev1.TaintEffectNoExecute).Obj(), want: ""},
		{name: "the NodePool's own taints stay and do not hold initialization",
			node: test.Node("n1").Taint("dedicated", "batch", corev1.TaintEffectNoSchedule).Obj(), want: ""},
		{name: "not Ready is said before taints",
			node: test.Node("n1").Ready(corev1.ConditionFalse).Taint(corev1.TaintNodeNotReady, "", corev1.TaintEffectNoSchedule).Obj(),
			want: "node is not Ready"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := notInitialized(claim, tc.node); got != tc.want {
				t.Errorf("notInitialized = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestInitialize(t *testing.T) {
	startup := corev1.Taint{Key: "example.com/cni-not-ready", Effect: corev1.TaintEffectNoSchedule}
	registered := func() *test.NodeClaimWrapper {
		return launchedClaim().StartupTaint(startup.Key, startup.Value, startup.Effect).Registered()
	}
	node := func() *test.NodeWrapper {
		return registered().NodeFor().Finalizers(stevedorev1.TerminationFinalizer).Taint("dedicated", "batch", corev1.TaintEffectNoSchedule)
	}
	tests := []struct {
		name        string
		node        *corev1.Node // nil: not registered yet
		want        time.Duration
		initialized bool
	}{
		{name: "no node: look again soon", node: nil, want: 10 * time.Second},
		{name: "startup taint still on the Ready node",
			node: node().Taint(startup.Key, startup.Value, startup.Effect).Obj()},
		{name: "startup taint gone but not Ready", node: node().Ready(corev1.ConditionFalse).Obj()},
		{name: "Ready with only the NodePool's taints", node: node().Obj(), initialized: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			claim := registered().Obj()
			h := newHarness(t, claim)
			if tc.node != nil {
				h.Add(tc.node)
			}
			h.Clock.Step(90 * time.Second)

			after, err := h.life.initialize(h.Ctx, claim)
			if err != nil || after != tc.want {
				t.Fatalf("initialize = %v, %v; want %v, nil", after, err, tc.want)
			}
			got := h.claim()
			for _, ct := range []string{stevedorev1.ConditionInitialized, stevedorev1.ConditionReady} {
				c := condition(got, ct)
				if tc.initialized && (c == nil || c.Status != metav1.ConditionTrue) {
					t.Errorf("%s condition = %+v, want True", ct, c)
				}
				if !tc.initialized && c != nil {
					t.Errorf("%s condition = %+v, want none", ct, c)
				}
			}
			if tc.initialized != got.IsInitialized() {
				t.Errorf("IsInitialized = %v, want %v", got.IsInitialized(), tc.initialized)
			}
			var wantCalled []string
			if tc.initialized {
				wantCalled = []string{"n1"} // no event: the Initialized condition records it
				if v := h.Node("n1").Labels[stevedorev1.LabelInitialized]; v != "true" {
					t.Errorf("node label %s = %q, want true", stevedorev1.LabelInitialized, v)
				}
			} else if tc.node != nil {
				if _, ok := h.Node("n1").Labels[stevedorev1.LabelInitialized]; ok {
					t.Errorf("node of an uninitialized NodeClaim has label %s", stevedorev1.LabelInitialized)
				}
			}
			if !reflect.DeepEqual(h.initialized, wantCalled) {
				t.Errorf("OnInitialized called with %q, want %q", h.initialized, wantCalled)
			}
			if ev := h.Events(); len(ev) != 0 {
				t.Errorf("events = %q, want none (the conditions record the initialization)", ev)
			}
		})
	}
}

// TestInitializeAgain: an initialized NodeClaim looked at again records nothing new, but Permit is told again.
func TestInitializeAgain(t *testing.T) {
	claim := launchedClaim().Initialized().Condition(stevedorev1.ConditionReady, metav1.ConditionTrue, "Ready").Obj()
	for i := range claim.Status.Conditions {
		claim.Status.Conditions[i].Message = "node is ready" // as initialize writes them
	}
	node := test.NodeClaim("c1", "default").Launched("n1", "m5.large", "us-east-1a", "on-demand", "0.0960").NodeFor().
		Labels(stevedorev1.LabelInitialized, "true").Obj()
	h := newHarness(t, claim, node)
	if _, err := h.life.initialize(h.Ctx, claim); err != nil {
		t.Fatal(err)
	}
	if n := test.Updated(h.Stevedore.Actions(), "nodeclaims", "status"); n != 0 {
		t.Errorf("%d NodeClaim status updates, want none", n)
	}
	for _, a := range h.Kube.Actions() {
		if a.GetVerb() == "patch" {
			t.Errorf("node patched again: %v", a)
		}
	}
	if ev := h.Events(); len(ev) != 0 {
		t.Errorf("events = %q, want none", ev)
	}
	if !reflect.DeepEqual(h.initialized, []string{"n1"}) {
		t.Errorf("OnInitialized called with %q, want [n1]", h.initialized)
	}
}
