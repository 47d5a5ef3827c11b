/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package provision

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	internalqueue "k8s.io/kubernetes/pkg/scheduler/backend/queue"
	schedmetrics "k8s.io/kubernetes/pkg/scheduler/metrics"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/test"
)

// admitHarness is a started provisioner (its previous leader's plan adopted) with a scheduling queue, whose free
// room index holds the objects' nodes and pods.
func admitHarness(t *testing.T, objs ...runtime.Object) *harness {
	t.Helper()
	h := newHarness(t, objs...)
	schedmetrics.Register()
	h.prov.opts.Queue = internalqueue.NewTestQueue(t.Context(), lessByTimestamp)
	h.prov.started.Store(true)
	onNode, onPod := h.prov.free.Handlers()
	for _, obj := range objs {
		switch o := obj.(type) {
		case *corev1.Node:
			onNode.OnAdd(o, true)
		case *corev1.Pod:
			onPod.OnAdd(o, true)
		}
	}
	return h
}

func TestAPodEntersTheQueueOnlyWhenSomeNodeMayTakeIt(t *testing.T) {
	ours := func(name, claim string, initialized bool) *corev1.Node {
		w := test.Node(name).Labels(stevedorev1.LabelNodePool, "default", stevedorev1.LabelNodeClaim, claim)
		if initialized {
			w.Labels(stevedorev1.LabelInitialized, "true")
		}
		return w.Obj()
	}
	claim := func(name, node string, initialized bool) *stevedorev1.NodeClaim {
		w := test.NodeClaim(name, "default")
		if node != "" {
			w.Launched(node, "m5.xlarge", "us-east-1a", "on-demand", "0.192")
		}
		if initialized {
			w.Initialized()
		}
		return w.Obj()
	}
	pod := func(name string) *corev1.Pod { return test.Pod(name).Pending().Req("cpu", "1").Obj() }
	tests := []struct {
		name    string
		objects []runtime.Object
		// plan puts pods (by name) on NodeClaims, and nominate names the node each NodeClaim's pods were nominated to
		plan     map[string][]string
		nominate map[string]string
		setup    func(h *harness, pod *corev1.Pod)
		pod      *corev1.Pod
		// wait is a part of the reason the pod waits ("" when it enters the queue); batched whether it was batched
		wait    string
		batched bool
	}{
		{name: "no node at all: the pod is planned before any scheduling cycle",
			pod: pod("p"), wait: WaitPlanning, batched: true},
		{name: "a node with room: the scheduler tries it",
			objects: []runtime.Object{test.Node("n1").Obj()}, pod: pod("p")},
		{name: "the only room is on a node coming up for other pods: planned",
			objects: []runtime.Object{ours("n1", "c1", false), claim("c1", "n1", false)}, pod: pod("p"), wait: WaitPlanning, batched: true},
		{name: "the room of a ready node is kept for the pods planned there: planned",
			objects: []runtime.Object{ours("n1", "c1", true), claim("c1", "n1", true),
				test.Pod("a").Pending().Req("cpu", "2").Obj(), test.Pod("b").Pending().Req("cpu", "1500m").Obj()},
			plan: map[string][]string{"c1": {"a", "b"}}, nominate: map[string]string{"c1": "n1"},
			pod: pod("p"), wait: WaitPlanning, batched: true},
		{name: "a ready node's room beyond what its planned pods keep: the scheduler tries it",
			objects: []runtime.Object{ours("n1", "c1", true), claim("c1", "n1", true), test.Pod("a").Pending().Req("cpu", "2").Obj()},
			plan:    map[string][]string{"c1": {"a"}}, nominate: map[string]string{"c1": "n1"}, pod: pod("p")},
		{name: "planned on a NodeClaim not launched yet: waits for it",
			objects: []runtime.Object{claim("c1", "", false)}, plan: map[string][]string{"c1": {"p"}}, pod: pod("p"),
			wait: "waiting for NodeClaim c1 to launch"},
		{name: "planned on a NodeClaim whose node is initializing: waits for that node",
			objects: []runtime.Object{ours("n1", "c1", false), claim("c1", "n1", false)}, plan: map[string][]string{"c1": {"p"}},
			pod: pod("p"), wait: "waiting for node n1"},
		{name: "planned on a NodeClaim whose node is ready: the scheduler tries it",
			objects: []runtime.Object{ours("n1", "c1", true), claim("c1", "n1", true)}, plan: map[string][]string{"c1": {"p"}}, pod: pod("p")},
		{name: "planned on a NodeClaim being deleted: planned again",
			objects: []runtime.Object{test.NodeClaim("c1", "default").Deleting(t0).Obj()},
			plan:    map[string][]string{"c1": {"p"}}, pod: pod("p"), wait: WaitPlanning, batched: true},
		{name: "no node can be launched for it: the scheduler tries it, says why and may preempt",
			setup: func(h *harness, p *corev1.Pod) {
				h.prov.refused.add(p, "no NodePool", h.prov.refused.seen())
			},
			pod: pod("p")},
		{name: "nominated by preemption to a node of the cluster: the scheduler uses it",
			pod: test.Pod("p").Pending().Req("cpu", "1").Nominated("victims-node").Obj()},
		{name: "in the batch being solved: waits",
			setup: func(h *harness, p *corev1.Pod) { h.prov.solving.set([]*corev1.Pod{p}, true) },
			pod:   pod("p"), wait: WaitPlanning},
		{name: "refused by the solve still running: the scheduler tries it",
			setup: func(h *harness, p *corev1.Pod) {
				h.prov.solving.set([]*corev1.Pod{p}, true)
				h.prov.refuse(h.Ctx, []*corev1.Pod{p}, map[types.UID]string{p.UID: "no NodePool"}, h.prov.refused.seen())
			},
			pod: pod("p")},
		{name: "a DaemonSet's pod goes to the scheduler",
			pod: test.Pod("p").Pending().Req("cpu", "1").OwnedBy("DaemonSet", "agent").Obj()},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			objs := append([]runtime.Object{test.NodePool("default").Obj(), tc.pod}, tc.objects...)
			h := admitHarness(t, objs...)
			for claim, names := range tc.plan {
				var pods []*corev1.Pod
				for _, n := range names {
					pods = append(pods, h.Pod(n))
				}
				h.prov.plans.Plan(h.Ctx, claim, pods)
			}
			for claim, node := range tc.nominate {
				h.prov.plans.Nominate(claim, node)
			}
			if tc.setup != nil {
				tc.setup(h, tc.pod)
			}
			got := h.prov.Admit(h.Ctx, tc.pod)
			if tc.wait == "" && got != "" || tc.wait != "" && !strings.Contains(got, tc.wait) {
				t.Errorf("Admit = %q, want %q", got, tc.wait)
			}
			if batched := h.prov.batcher.Contains(tc.pod.UID); batched != tc.batched {
				t.Errorf("batched: %v, want %v", batched, tc.batched)
			}
		})
	}
}

// TestBeforeTheProvisionerStartsEveryPodGoesToTheScheduler: until the previous leader's plan is adopted (or in a
// process with no scheduling queue), pods take the scheduling cycle first, as the plan of the nodes coming up is
// not known yet.
func TestBeforeTheProvisionerStartsEveryPodGoesToTheScheduler(t *testing.T) {
	p := test.Pod("p").Pending().Req("cpu", "1").Obj()
	h := admitHarness(t, test.NodePool("default").Obj(), p)
	h.prov.started.Store(false)
	if got := h.prov.Admit(h.Ctx, p); got != "" || h.prov.batcher.Contains(p.UID) {
		t.Errorf("before the start: Admit = %q, batched %v; want the pod to go to the scheduler", got, h.prov.batcher.Contains(p.UID))
	}
	h = newHarness(t, test.NodePool("default").Obj(), p)
	h.prov.started.Store(true)
	if got := h.prov.Admit(h.Ctx, p); got != "" {
		t.Errorf("without a scheduling queue: Admit = %q, want the pod to go to the scheduler", got)
	}
}

// TestAPodSentToANodeHoldsItsRoomUntilItsAttemptEnds: two pods for the room of one: the first goes to the
// scheduler, the second is planned; once the first's attempt failed (PostFilter), its room is offered again.
func TestAPodSentToANodeHoldsItsRoomUntilItsAttemptEnds(t *testing.T) {
	first := test.Pod("first").Pending().Req("cpu", "3").Obj()
	second := test.Pod("second").Pending().Req("cpu", "3").Obj()
	third := test.Pod("third").Pending().Req("cpu", "3").Obj()
	h := admitHarness(t, test.NodePool("default").Obj(), test.Node("n1").Obj(), first, second, third)
	if got := h.prov.Admit(h.Ctx, first); got != "" {
		t.Fatalf("first: Admit = %q, want the scheduler to try it", got)
	}
	if got := h.prov.Admit(h.Ctx, second); got != WaitPlanning {
		t.Fatalf("second: Admit = %q, want it planned (the first holds the room)", got)
	}
	h.prov.Consider(h.Ctx, first, nil) // the first's attempt failed
	if got := h.prov.Admit(h.Ctx, third); got != "" {
		t.Errorf("third: Admit = %q, want the scheduler to try it (the first's room is free again)", got)
	}
}

// TestAPodBatchedBeforeANodeWasReadyGoesToThatNode: a pod batched while the only node with room was still coming up
// for nothing (a repair's replacement whose pod left) is sent to the scheduler when its batch is solved, once that
// node is ready, rather than planned on a new one; a pod the scheduler already tried and failed is planned.
func TestAPodBatchedBeforeANodeWasReadyGoesToThatNode(t *testing.T) {
	node := test.Node("n1").Labels(stevedorev1.LabelNodePool, "default", stevedorev1.LabelNodeClaim, "c1").Obj()
	claim := test.NodeClaim("c1", "default").Launched("n1", "m5.xlarge", "us-east-1a", "on-demand", "0.192").Obj()
	untried := test.Pod("untried").Pending().Req("cpu", "1").Obj()
	tried := test.Pod("tried").Pending().Req("cpu", "1").Obj()
	h := admitHarness(t, test.NodePool("default").Obj(), node, claim, untried, tried)
	h.prov.plans.Nominate("c1", "n1")
	if got := h.prov.Admit(h.Ctx, untried); got != WaitPlanning {
		t.Fatalf("Admit = %q while the only node is coming up, want it planned", got)
	}
	h.prov.Consider(h.Ctx, tried, nil) // batched after a failed cycle
	h.prov.ClaimInitialized(h.Ctx, "c1")
	onNode, _ := h.prov.free.Handlers()
	ready := node.DeepCopy()
	ready.Labels[stevedorev1.LabelInitialized] = "true"
	onNode.OnUpdate(node, ready)
	left := h.prov.sendUntried(h.Ctx, []*corev1.Pod{untried, tried})
	if got := names(left); !slices.Equal(got, []string{"tried"}) {
		t.Errorf("pods left to solve %v, want [tried]", got)
	}
}
