/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package lifecycle

import (
	"reflect"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/test"
)

// launchedClaim is a NodeClaim whose m5.large i-n1 was launched at t0 as node n1, with a NodePool taint and label.
func launchedClaim() *test.NodeClaimWrapper {
	return test.NodeClaim("c1", "default").Created(t0).Labels("team", "a").
		Taint("dedicated", "batch", corev1.TaintEffectNoSchedule).
		Launched("n1", "m5.large", "us-east-1a", stevedorev1.CapacityTypeOnDemand, "0.0960")
}

const n1ProviderID = "aws:///us-east-1a/i-n1"

func TestRegisterSyncsNode(t *testing.T) {
	tests := []struct {
		name string
		node string // the name the kubelet registered under
	}{
		{name: "node found by the launched name", node: "n1"},
		{name: "node found by provider ID under another name", node: "ip-10-0-0-9.ec2.internal"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			claim := launchedClaim().Obj()
			node := test.Node(tc.node).ProviderID(n1ProviderID).Ready(corev1.ConditionFalse).
				Taint(stevedorev1.TaintUnregistered, "true", corev1.TaintEffectNoSchedule).
				Taint("dedicated", "batch", corev1.TaintEffectNoSchedule). // registered with it already: not doubled
				Taint("example.com/agent", "", corev1.TaintEffectNoSchedule).
				Finalizers("example.com/keep").Obj()
			h := newHarness(t, claim, node)
			h.Clock.Step(time.Minute)

			after, err := h.life.register(h.Ctx, claim)
			if err != nil || after != 0 {
				t.Fatalf("register = %v, %v; want 0, nil", after, err)
			}
			got := h.Node(tc.node)
			wantLabels := map[string]string{
				stevedorev1.LabelNodePool:       "default",
				stevedorev1.LabelNodeClaim:      "c1",
				"team":                          "a",
				corev1.LabelInstanceTypeStable:  "m5.large",
				corev1.LabelTopologyZone:        "us-east-1a",
				corev1.LabelTopologyRegion:      testRegion,
				stevedorev1.LabelCapacityType:   stevedorev1.CapacityTypeOnDemand,
				corev1.LabelArchStable:          "amd64",
				corev1.LabelHostname:            tc.node, // the kubelet's own label is kept
				stevedorev1.LabelInstanceFamily: "m5",
			}
			for k, v := range wantLabels {
				if got.Labels[k] != v {
					t.Errorf("node label %s = %q, want %q", k, got.Labels[k], v)
				}
			}
			if want := []string{"example.com/keep", stevedorev1.TerminationFinalizer}; !reflect.DeepEqual(got.Finalizers, want) {
				t.Errorf("node finalizers = %q, want %q", got.Finalizers, want)
			}
			if len(got.OwnerReferences) != 1 {
				t.Fatalf("node owner references = %+v, want the NodeClaim", got.OwnerReferences)
			}
			o := got.OwnerReferences[0]
			if o.Kind != "NodeClaim" || o.Name != "c1" || o.UID != claim.UID || o.APIVersion != stevedorev1.SchemeGroupVersion.String() ||
				o.BlockOwnerDeletion == nil || !*o.BlockOwnerDeletion {
				t.Errorf("node owner reference = %+v, want NodeClaim c1 blocking deletion", o)
			}
			wantTaints := []corev1.Taint{{Key: "dedicated", Value: "batch", Effect: corev1.TaintEffectNoSchedule},
				{Key: "example.com/agent", Effect: corev1.TaintEffectNoSchedule}}
			if !reflect.DeepEqual(got.Spec.Taints, wantTaints) {
				t.Errorf("node taints = %+v, want %+v", got.Spec.Taints, wantTaints)
			}
			c := condition(h.claim(), stevedorev1.ConditionRegistered)
			if c == nil || c.Status != metav1.ConditionTrue || c.Reason != "Registered" || c.Message != "node "+tc.node+" registered" {
				t.Errorf("Registered condition = %+v, want True", c)
			}
			if ev := h.Events(); len(ev) != 0 {
				t.Errorf("events = %q, want none (the Registered condition records it)", ev)
			}
		})
	}
}

func TestRegisterIsIdempotent(t *testing.T) {
	claim := launchedClaim().Obj()
	node := test.Node("n1").ProviderID(n1ProviderID).Ready(corev1.ConditionFalse).
		Taint(stevedorev1.TaintUnregistered, "true", corev1.TaintEffectNoSchedule).Obj()
	h := newHarness(t, claim, node)
	for i := 0; i < 2; i++ {
		if _, err := h.life.register(h.Ctx, claim); err != nil {
			t.Fatalf("register #%d: %v", i+1, err)
		}
		for _, obj := range []runtime.Object{h.Node("n1"), h.claim()} { // the informers catch up
			if err := h.Listers.Add(obj); err != nil {
				t.Fatal(err)
			}
		}
	}
	got := h.Node("n1")
	if !reflect.DeepEqual(got.Finalizers, []string{stevedorev1.TerminationFinalizer}) || len(got.OwnerReferences) != 1 || len(got.Spec.Taints) != 1 {
		t.Errorf("node after two registrations: finalizers %q, owners %d, taints %+v; want each once",
			got.Finalizers, len(got.OwnerReferences), got.Spec.Taints)
	}
	if ev := h.Events(); len(ev) != 0 {
		t.Errorf("events = %q, want none", ev)
	}
	if n := test.Updated(h.Stevedore.Actions(), "nodeclaims", "status"); n != 1 {
		t.Errorf("%d NodeClaim status updates, want 1", n)
	}
}

// TestANodeReadyWhenItRegistersIsInitializedInTheSameStep: a node Ready with no taint left to wait for once the
// unregistered one is gone is registered and initialized with one update of the node (labelled initialized) and
// one of the NodeClaim's status, and provisioning is told at once.
func TestANodeReadyWhenItRegistersIsInitializedInTheSameStep(t *testing.T) {
	claim := launchedClaim().Obj()
	node := test.Node("n1").ProviderID(n1ProviderID).Taint(stevedorev1.TaintUnregistered, "true", corev1.TaintEffectNoSchedule).Obj()
	h := newHarness(t, claim, node)
	if _, err := h.life.register(h.Ctx, claim); err != nil {
		t.Fatal(err)
	}
	for _, cond := range []string{stevedorev1.ConditionRegistered, stevedorev1.ConditionInitialized, stevedorev1.ConditionReady} {
		if c := condition(h.claim(), cond); c == nil || c.Status != metav1.ConditionTrue {
			t.Errorf("condition %s = %+v, want True", cond, c)
		}
	}
	if got := h.Node("n1").Labels[stevedorev1.LabelInitialized]; got != "true" {
		t.Errorf("node label %s = %q, want true", stevedorev1.LabelInitialized, got)
	}
	if n := test.Updated(h.Stevedore.Actions(), "nodeclaims", "status"); n != 1 {
		t.Errorf("%d NodeClaim status updates, want 1", n)
	}
	if ev := h.Events(); len(ev) != 0 {
		t.Errorf("events = %q, want none (the conditions record it)", ev)
	}
	if !slices.Contains(h.prov.told, "initialized c1") || !reflect.DeepEqual(h.initialized, []string{"n1"}) {
		t.Errorf("provisioning told %q, OnInitialized %q; want c1 initialized, node n1", h.prov.told, h.initialized)
	}
}

func TestRegisterWaitsForNode(t *testing.T) {
	tests := []struct {
		name    string
		nodes   []*corev1.Node
		elapsed time.Duration // since the launch
		want    time.Duration
		deleted bool
	}{
		{name: "no node yet", elapsed: time.Minute, want: testRegistrationTimeout - time.Minute + time.Second},
		{name: "a node with the launched name but another instance's provider ID is not the claim's",
			nodes:   []*corev1.Node{test.Node("n1").ProviderID("aws:///us-east-1a/i-old").Obj()},
			elapsed: time.Minute, want: testRegistrationTimeout - time.Minute + time.Second},
		{name: "a node of another provider ID under another name is not the claim's",
			nodes:   []*corev1.Node{test.Node("n2").ProviderID("aws:///us-east-1a/i-n2").Obj()},
			elapsed: 0, want: testRegistrationTimeout + time.Second},
		{name: "at the timeout it still waits", elapsed: testRegistrationTimeout, want: time.Second},
		{name: "past the timeout the NodeClaim is deleted", elapsed: testRegistrationTimeout + time.Second, deleted: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			claim := launchedClaim().Obj()
			web := test.Pod("web").Pending().Obj()
			h := newHarness(t, claim, web)
			for _, n := range tc.nodes {
				h.Add(n)
			}
			h.prov.assign(web)
			h.Clock.Step(tc.elapsed)

			after, err := h.life.register(h.Ctx, claim)
			if err != nil || after != tc.want {
				t.Fatalf("register = %v, %v; want %v, nil", after, err, tc.want)
			}
			got := h.claim()
			if deleted := got == nil || got.DeletionTimestamp != nil; deleted != tc.deleted {
				t.Errorf("NodeClaim deleted = %v, want %v", deleted, tc.deleted)
			}
			if got != nil && condition(got, stevedorev1.ConditionRegistered) != nil {
				t.Errorf("Registered condition set without a node: %+v", condition(got, stevedorev1.ConditionRegistered))
			}
			ev := h.Events()
			if tc.deleted {
				want := "Warning RegistrationTimeout node n1 did not register within 5m0s"
				if len(ev) != 1 || ev[0] != want {
					t.Errorf("events = %q, want [%q]", ev, want)
				}
			} else if len(ev) != 0 {
				t.Errorf("events = %q, want none", ev)
			}
			if calls := h.Cloud.Calls(); len(calls) != 0 {
				t.Errorf("cloud calls = %q; the instance goes with the NodeClaim's termination", calls)
			}
			for _, n := range tc.nodes {
				if got := h.Node(n.Name); got.Labels[stevedorev1.LabelNodeClaim] != "" || len(got.Finalizers) != 0 {
					t.Errorf("node %s not of the claim was synced: %+v", n.Name, got.ObjectMeta)
				}
			}
		})
	}
}

// TestRegistrationTimeoutTerminatesInstance follows a NodeClaim whose node never registers to its instance's end.
func TestRegistrationTimeoutTerminatesInstance(t *testing.T) {
	claim := launchedClaim().Obj()
	h := newHarness(t, claim)
	h.Clock.Step(testRegistrationTimeout + time.Second)
	if after, err := h.life.reconcile(h.Ctx, "c1"); err != nil || after != 0 {
		t.Fatalf("reconcile = %v, %v", after, err)
	}
	deleting := h.claim()
	if deleting == nil || deleting.DeletionTimestamp == nil {
		t.Fatalf("NodeClaim = %+v, want it deleted", deleting)
	}
	if err := h.Listers.Add(deleting); err != nil { // the informer catches up
		t.Fatal(err)
	}
	if after, err := h.life.reconcile(h.Ctx, "c1"); err != nil || after != 0 {
		t.Fatalf("reconcile of the deleted NodeClaim = %v, %v", after, err)
	}
	if calls := h.Cloud.Calls(); !reflect.DeepEqual(calls, []string{"Delete i-n1"}) {
		t.Errorf("cloud calls = %q, want the instance terminated", calls)
	}
	if got := h.claim(); got != nil {
		t.Errorf("NodeClaim still there with finalizers %q", got.Finalizers)
	}
}

// TestRegisterKeepsRoomForDaemonSets: before the node is opened to pods, provisioning keeps room on it for the
// DaemonSet pods that will run there.
func TestRegisterKeepsRoomForDaemonSets(t *testing.T) {
	claim := launchedClaim().Obj()
	node := test.Node("n1").ProviderID(n1ProviderID).Taint(stevedorev1.TaintUnregistered, "true", corev1.TaintEffectNoSchedule).Obj()
	h := newHarness(t, claim, node)
	agent := test.Pod("agent").OwnedBy("DaemonSet", "agent").Req("cpu", "500m").Obj()
	h.prov.daemonSet = []*corev1.Pod{agent}
	if _, err := h.life.register(h.Ctx, claim); err != nil {
		t.Fatal(err)
	}
	if got := h.prov.expected["n1"]; len(got) != 1 || got[0] != agent {
		t.Errorf("DaemonSet pods expected on n1 = %v, want the agent", got)
	}
}
