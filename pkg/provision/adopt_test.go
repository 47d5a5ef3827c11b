/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package provision

import (
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/test"
)

func TestANewLeaderAdoptsThePodsNominatedToNodesComingUp(t *testing.T) {
	launched := test.NodeClaim("c1", "default").Launched("n1", "m5.large", "us-east-1a", "on-demand", "0.096").Obj()
	up := test.NodeClaim("c2", "default").Launched("n2", "m5.large", "us-east-1a", "on-demand", "0.096").Obj()
	up.Status.Conditions = append(up.Status.Conditions, metav1.Condition{Type: stevedorev1.ConditionInitialized, Status: metav1.ConditionTrue})
	pods := []*corev1.Pod{
		test.Pod("planned").Pending().Nominated("n1").Req("cpu", "1").Obj(),
		test.Pod("on-a-ready-node").Pending().Nominated("n2").Req("cpu", "1").Obj(),
		test.Pod("elsewhere").Pending().Nominated("bootstrap").Req("cpu", "1").Obj(),
		test.Pod("bound").Node("n1").Nominated("n1").Req("cpu", "1").Obj(),
	}
	other := test.Pod("other-scheduler").Pending().Nominated("n1").Obj()
	other.Spec.SchedulerName = "default-scheduler"
	h := newHarness(t, test.NodePool("default").Obj(), launched, up, pods[0], pods[1], pods[2], pods[3], other)
	h.prov.opts.SchedulerName = "stevedore"
	h.prov.AdoptNominations(h.Ctx)
	checkAdopted(t, h)
	// a solve adopts them too, before it plans anything
	h = newHarness(t, test.NodePool("default").Obj(), launched, up, pods[0], pods[1], pods[2], pods[3], other)
	h.prov.opts.SchedulerName = "stevedore"
	in, claimByNode, err := h.prov.input(h.Ctx, []*corev1.Pod{test.Pod("new").Pending().Req("cpu", "1").Obj()})
	if err != nil {
		t.Fatal(err)
	}
	checkAdopted(t, h)
	// the next solve sees n1's room taken by the adopted pod, as the node the previous leader planned
	if claimByNode["n1"] == nil {
		t.Fatalf("n1 is not in flight in the solver's input")
	}
	var on []string
	for _, pi := range in.Snapshot.NodeInfo("n1").GetPods() {
		on = append(on, pi.GetPod().Name)
	}
	slices.Sort(on)
	if !slices.Equal(on, []string{"bound", "planned"}) {
		t.Errorf("pods counted on n1 in the solver's input: %v, want [bound planned]", on)
	}
}

func checkAdopted(t *testing.T, h *harness) {
	t.Helper()
	if got := names(h.prov.AssignedPods("c1")); len(got) != 1 || got[0] != "planned" {
		t.Errorf("pods planned on c1 after adoption: %v, want [planned]", got)
	}
	if got := h.prov.AssignedPods("c2"); len(got) != 0 {
		t.Errorf("pods planned on the initialized c2: %v, want none (the scheduler places pods on it as on any node)", names(got))
	}
}

// TestANewLeaderReadsThePlanBackFromTheNodeClaims: the plan lives on in the NodeClaims' planned-pods annotations
// (and in the nominations of pods the scheduler nominated after a failed attempt): the new leader adopts those pods
// and knows the node each waits for. A nomination wins over the annotation, and of two NodeClaims listing a pod the
// newer.
func TestANewLeaderReadsThePlanBackFromTheNodeClaims(t *testing.T) {
	older := test.NodeClaim("c-old", "default").Created(t0).Annotations(stevedorev1.AnnotationPlannedPods, "default/moved,default/stale").
		Launched("n-old", "m5.large", "us-east-1a", "on-demand", "0.096").Obj()
	newer := test.NodeClaim("c-new", "default").Created(t0.Add(time.Second)).
		Annotations(stevedorev1.AnnotationPlannedPods, "default/gone,default/moved,default/unnominated,default/nominated-elsewhere").
		Launched("n-new", "m5.large", "us-east-1b", "on-demand", "0.096").Obj()
	unlaunched := test.NodeClaim("c-unlaunched", "default").Created(t0).Annotations(stevedorev1.AnnotationPlannedPods, "default/waiting").Obj()
	pods := []runtime.Object{
		test.Pod("moved").Pending().Req("cpu", "1").Obj(),
		test.Pod("stale").Pending().Req("cpu", "1").Obj(),
		test.Pod("unnominated").Pending().Req("cpu", "1").Obj(),
		test.Pod("nominated-elsewhere").Pending().Nominated("n-old").Req("cpu", "1").Obj(),
		test.Pod("waiting").Pending().Req("cpu", "1").Obj(),
	}
	h := newHarness(t, append([]runtime.Object{older, newer, unlaunched}, pods...)...)
	h.prov.opts.SchedulerName = "stevedore"
	h.prov.AdoptNominations(h.Ctx)
	for claim, want := range map[string][]string{
		"c-old":        {"nominated-elsewhere", "stale"},
		"c-new":        {"moved", "unnominated"},
		"c-unlaunched": {"waiting"},
	} {
		if got := names(h.prov.AssignedPods(claim)); !slices.Equal(got, want) {
			t.Errorf("pods planned on %s: %v, want %v", claim, got, want)
		}
	}
	// the node each pod waits for is known from its NodeClaim; nothing is written on the pods
	for pod, node := range map[string]string{"moved": "n-new", "unnominated": "n-new", "stale": "n-old"} {
		cur := h.Pod(pod)
		if !h.prov.plans.IsNominated(cur.UID, node) {
			t.Errorf("pod %s is not planned for node %s", pod, node)
		}
		if cur.Status.NominatedNodeName != "" {
			t.Errorf("pod %s was written nominated to %q", pod, cur.Status.NominatedNodeName)
		}
	}
}
