/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package disruption

import (
	"context"
	"slices"
	"sort"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/test"
)

// twoPools is two on-demand NodePools, each with an m5.2xlarge running one small pod that only its NodePool may
// run: each node is replaced on its own by a t3.small.
func twoPools() []runtime.Object {
	var objs []runtime.Object
	for _, p := range []string{"a", "b"} {
		objs = append(objs, objects(
			test.NodePool("pool-"+p).Budgets(budget("100%", "", 0)).Require(stevedorev1.LabelCapacityType, corev1.NodeSelectorOpIn, onDemand),
			machine{name: "big-" + p, pool: "pool-" + p, typ: "m5.2xlarge"},
			pod("web-"+p, "big-"+p, "100m", "64Mi").NodeSelector(stevedorev1.LabelNodePool, "pool-"+p))...)
	}
	return objs
}

// catchUp shows the listers what the fake API server holds (nodes and NodeClaims), as informers would.
func (h *harness) catchUp() {
	h.T.Helper()
	nodes, err := h.Kube.CoreV1().Nodes().List(h.Ctx, metav1.ListOptions{})
	if err != nil {
		h.T.Fatal(err)
	}
	for i := range nodes.Items {
		if err := h.Listers.Add(&nodes.Items[i]); err != nil {
			h.T.Fatal(err)
		}
	}
	claims, err := h.Stevedore.StevedoreV1().NodeClaims().List(h.Ctx, metav1.ListOptions{})
	if err != nil {
		h.T.Fatal(err)
	}
	for i := range claims.Items {
		if err := h.Listers.Add(&claims.Items[i]); err != nil {
			h.T.Fatal(err)
		}
	}
}

// replacements lists the replacement NodeClaims the fake API server holds, by name.
func (h *harness) replacements() []*stevedorev1.NodeClaim {
	h.T.Helper()
	claims, err := h.Stevedore.StevedoreV1().NodeClaims().List(h.Ctx, metav1.ListOptions{})
	if err != nil {
		h.T.Fatal(err)
	}
	var out []*stevedorev1.NodeClaim
	for i := range claims.Items {
		if claims.Items[i].Annotations[AnnotationReplaces] != "" {
			out = append(out, &claims.Items[i])
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// gone reports whether a NodeClaim is deleted from the fake API server, or being deleted (its termination
// finalizer waits for a terminator the harness does not run).
func (h *harness) gone(name string) bool {
	h.T.Helper()
	cl, err := h.Stevedore.StevedoreV1().NodeClaims().Get(h.Ctx, name, metav1.GetOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		h.T.Fatal(err)
	}
	return apierrors.IsNotFound(err) || cl.DeletionTimestamp != nil
}

// TestPassesGoOnWhileReplacementsComeUp: a command waiting for its replacement is finished by the queue, and the
// next pass takes another node meanwhile; each node goes once its replacement is ready.
func TestPassesGoOnWhileReplacementsComeUp(t *testing.T) {
	// a command that held the pass until its replacement is ready would fail the pass after 30s
	h := newHarness(t, harnessConfig{opts: func(o *Options) { o.Args.RegistrationTimeout.Duration = 30 * time.Second }}, twoPools()...)
	h.Ctx = t.Context() // the commands finishing in the background end with the test
	t.Cleanup(h.c.queue.wait)

	for i, want := range []string{"big-a", "big-b"} {
		acted, err := h.c.pass(h.Ctx)
		if err != nil || !acted {
			t.Fatalf("pass %d = %v, %v; want a command", i+1, acted, err)
		}
		if held := h.c.queue.nodes(); !slices.Contains(held, want) {
			t.Fatalf("after pass %d the queue holds %q, want %s under way", i+1, held, want)
		}
		if h.gone("claim-" + want) {
			t.Fatalf("claim-%s deleted before its replacement was ready", want)
		}
		h.catchUp() // the next pass sees the node tainted and its replacement coming
	}
	if got := h.c.queue.nodes(); !slices.Equal(got, []string{"big-a", "big-b"}) {
		t.Fatalf("queue holds %q, want both nodes under way", got)
	}
	if acted, err := h.c.pass(h.Ctx); err != nil || acted {
		t.Fatalf("third pass = %v, %v; want nothing left to do", acted, err)
	}
	repl := h.replacements()
	if len(repl) != 2 {
		t.Fatalf("%d replacement NodeClaims, want 2", len(repl))
	}
	// big-a's replacement comes up: big-a goes, big-b waits for its own
	var ofA, ofB *stevedorev1.NodeClaim
	for _, r := range repl {
		switch r.Annotations[AnnotationReplaces] {
		case "big-a":
			ofA = r
		case "big-b":
			ofB = r
		}
	}
	if ofA == nil || ofB == nil {
		t.Fatalf("replacements %v do not replace one node each", repl)
	}
	ready := func(cl *stevedorev1.NodeClaim) {
		t.Helper()
		if err := h.Listers.Add(test.NodeClaimFrom(cl).Initialized().Obj()); err != nil {
			t.Fatal(err)
		}
	}
	ready(ofA)
	waitFor(t, "claim-big-a deleted once its replacement is ready", func() bool { return h.gone("claim-big-a") })
	if h.gone("claim-big-b") {
		t.Fatal("claim-big-b deleted before its replacement was ready")
	}
	ready(ofB)
	waitFor(t, "claim-big-b deleted once its replacement is ready", func() bool { return h.gone("claim-big-b") })
	waitFor(t, "the queue empty", func() bool { return len(h.c.queue.nodes()) == 0 })
}

// TestAReplacementDeletedRollsTheQueuedCommandBack: a replacement deleted before it is ready (no capacity) rolls
// the voluntary command back: the node is untainted and stays, the queue lets it go.
func TestAReplacementDeletedRollsTheQueuedCommandBack(t *testing.T) {
	h := newHarness(t, harnessConfig{}, twoPools()[:4]...) // pool-a only
	h.Ctx = t.Context()                                    // the commands finishing in the background end with the test
	t.Cleanup(h.c.queue.wait)
	if acted, err := h.c.pass(h.Ctx); err != nil || !acted {
		t.Fatalf("pass = %v, %v; want a command", acted, err)
	}
	repl := h.replacements()
	if len(repl) != 1 {
		t.Fatalf("%d replacements, want 1", len(repl))
	}
	deleting := test.NodeClaimFrom(repl[0]).Deleting(t0).Obj()
	if err := h.Listers.Add(deleting); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the command rolled back", func() bool { return len(h.c.queue.nodes()) == 0 })
	n, err := h.Kube.CoreV1().Nodes().Get(h.Ctx, "big-a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if stevedorev1.IsDisrupted(n) || h.gone("claim-big-a") {
		t.Errorf("after the rollback: node tainted %v, NodeClaim deleted %v; want the node kept and untainted", stevedorev1.IsDisrupted(n), h.gone("claim-big-a"))
	}
}

// TestStartClearsMarksAStoppedCommandLeft: when the controller starts, a node marked for disruption whose NodeClaim
// is not being deleted (its command stopped with the process that ran it) is untainted; one being deleted, and one
// a command of this process holds, keep their mark.
func TestStartClearsMarksAStoppedCommandLeft(t *testing.T) {
	marked := func(name string, claim func(*test.NodeClaimWrapper)) machine {
		return machine{name: name, pool: "default", typ: "m5.large", claim: func(w *test.NodeClaimWrapper) {
			w.Status.DisruptionReason = string(stevedorev1.DisruptionReasonUnderutilized)
			if claim != nil {
				claim(w)
			}
		}, node: func(w *test.NodeWrapper) {
			w.Taint(stevedorev1.TaintDisrupted, "", corev1.TaintEffectNoSchedule)
		}}
	}
	h := newHarness(t, harnessConfig{}, objects(pool(),
		marked("stale", nil),
		marked("going", func(w *test.NodeClaimWrapper) { w.Deleting(t0) }),
		marked("held", nil),
		node("plain", "m5.large"))...)
	h.c.queue.hold(&Command{Candidates: []*Candidate{h.view().candidate("plain"), {Node: test.Node("held").Obj()}}})
	h.c.clearStaleMarks(h.Ctx)
	for name, want := range map[string]bool{"stale": false, "going": true, "held": true, "plain": false} {
		n, err := h.Kube.CoreV1().Nodes().Get(h.Ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got := stevedorev1.IsDisrupted(n); got != want {
			t.Errorf("node %s tainted = %v, want %v", name, got, want)
		}
	}
	if reason := h.claim("claim-stale").Status.DisruptionReason; reason != "" {
		t.Errorf("claim-stale disruption reason = %q, want it cleared", reason)
	}
}

// waitFor polls cond until it holds, failing the test after a generous timeout.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	err := wait.PollUntilContextTimeout(t.Context(), 10*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) { return cond(), nil })
	if err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

// TestAMoveUnderWayPinsItsPodsUntilItIsDone: the nodes a command under way planned for the pods it moves are what
// the next passes' models keep their room on, until the command is released.
func TestAMoveUnderWayPinsItsPodsUntilItIsDone(t *testing.T) {
	q := newCommandQueue()
	moving := test.Pod("web").Node("old").Obj()
	other := test.Pod("api").Node("elsewhere").Obj()
	cmd := &Command{Candidates: []*Candidate{{Node: test.Node("old").Obj(), Pods: []*corev1.Pod{moving}}}}
	q.hold(cmd)
	q.pin(map[types.UID]string{moving.UID: "new"})
	q.pin(map[types.UID]string{other.UID: "b"})
	pins := q.pins()
	if pins[moving.UID] != "new" || pins[other.UID] != "b" {
		t.Fatalf("pins = %v", pins)
	}
	pins[moving.UID] = "changed"
	if q.pins()[moving.UID] != "new" {
		t.Error("pins returned the queue's own map")
	}
	q.release(cmd)
	if got := q.pins(); len(got) != 1 || got[other.UID] != "b" {
		t.Errorf("after the command is released, pins = %v, want only the other command's", got)
	}
}
