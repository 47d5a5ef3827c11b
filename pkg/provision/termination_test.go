/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package provision

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/cloud"
	"github.com/stevedore-dev/stevedore/pkg/cloud/fake"
	"github.com/stevedore-dev/stevedore/pkg/test"
)

// onN1 is a pod of a ReplicaSet running on node n1.
func onN1(name string) *test.PodWrapper { return test.Pod(name).Node("n1").OwnedBy("ReplicaSet", "rs") }

// mirrorOnN1 is static pod etcd's mirror on n1.
func mirrorOnN1() *test.PodWrapper {
	return test.Pod("etcd").Node("n1").OwnedBy("Node", "n1").Annotations(corev1.MirrorPodAnnotationKey, "hash")
}

// daemonOnN1 is a DaemonSet's pod on n1 that does not tolerate the disrupted taint.
func daemonOnN1(name string) *test.PodWrapper {
	return test.Pod(name).Node("n1").OwnedBy("DaemonSet", name)
}

func TestDrainNode(t *testing.T) {
	deleting := metav1.NewTime(t0)
	// n1 is the node of c1, deleted at t0 and held by the termination finalizer
	n1 := func() *test.NodeWrapper {
		return launchedClaim().NodeFor().Finalizers(stevedorev1.TerminationFinalizer).Deleting(deleting)
	}
	c1 := func() *test.NodeClaimWrapper { return launchedClaim().Initialized() }
	dnd := func() *corev1.Pod { return onN1("batch").Annotations(stevedorev1.DoNotDisruptKey, "true").Obj() }
	type want struct {
		done         bool
		err          bool
		tainted      bool
		evicted      []string
		deletedPods  []string
		calls        []string
		claimDeleted bool
		finalizers   []string // the node's after; nil with nodeGone
		nodeGone     bool
	}
	tests := []struct {
		name     string
		node     *corev1.Node
		claim    *stevedorev1.NodeClaim
		pods     []*corev1.Pod
		elapsed  time.Duration
		cloudErr error
		want     want
	}{
		{name: "a node that is gone is done", claim: c1().Obj(), want: want{done: true, nodeGone: true}},
		{name: "a node not deleted is not drained",
			node: launchedClaim().NodeFor().Finalizers(stevedorev1.TerminationFinalizer).Obj(), claim: c1().Obj(),
			pods: []*corev1.Pod{onN1("web").Obj()},
			want: want{done: true, finalizers: []string{stevedorev1.TerminationFinalizer}}},
		{name: "a deleted node without the termination finalizer is not Stevedore's",
			node: launchedClaim().NodeFor().Finalizers("example.com/keep").Deleting(deleting).Obj(), claim: c1().Obj(),
			pods: []*corev1.Pod{onN1("web").Obj()},
			want: want{done: true, finalizers: []string{"example.com/keep"}}},
		{name: "a deleted node with pods is tainted and its first tier evicted",
			node: n1().Obj(), claim: c1().Obj(),
			pods: []*corev1.Pod{onN1("web").Obj(), daemonOnN1("logs").Obj()},
			want: want{tainted: true, evicted: []string{"default/web"}, finalizers: []string{stevedorev1.TerminationFinalizer}}},
		{name: "a drained node has its NodeClaim deleted, its instance terminated and its finalizer removed",
			node: n1().Obj(), claim: c1().Obj(), pods: []*corev1.Pod{mirrorOnN1().Obj()},
			want: want{done: true, calls: []string{"Delete i-n1"}, claimDeleted: true, nodeGone: true}},
		{name: "other finalizers stay",
			node: n1().Finalizers("example.com/keep").Obj(), claim: c1().Obj(),
			want: want{done: true, tainted: true, calls: []string{"Delete i-n1"}, claimDeleted: true, finalizers: []string{"example.com/keep"}}},
		{name: "a NodeClaim already deleted is not deleted again",
			node: n1().Obj(), claim: c1().Deleting(t0).Obj(),
			want: want{done: true, calls: []string{"Delete i-n1"}, nodeGone: true}},
		{name: "a failed instance termination keeps the finalizer and is retried",
			node: n1().Obj(), claim: c1().Obj(), cloudErr: errors.New("RequestLimitExceeded"),
			want: want{err: true, tainted: true, calls: []string{"Delete i-n1"}, claimDeleted: true,
				finalizers: []string{stevedorev1.TerminationFinalizer}}},
		{name: "an instance already gone is done",
			node: n1().Obj(), claim: c1().Obj(), cloudErr: fmt.Errorf("i-n1: %w", cloud.ErrNotFound),
			want: want{done: true, calls: []string{"Delete i-n1"}, claimDeleted: true, nodeGone: true}},
		{name: "a node without a NodeClaim loses its finalizer without a cloud call",
			node: n1().Obj(),
			want: want{done: true, nodeGone: true}},
		{name: "a do-not-disrupt pod holds the drain within the grace period",
			node: n1().Obj(), claim: c1().TerminationGracePeriod(10 * time.Minute).Obj(), pods: []*corev1.Pod{dnd()},
			elapsed: 10 * time.Minute,
			want:    want{tainted: true, finalizers: []string{stevedorev1.TerminationFinalizer}}},
		{name: "past the grace period the remaining pods are deleted",
			node: n1().Obj(), claim: c1().TerminationGracePeriod(10 * time.Minute).Obj(), pods: []*corev1.Pod{dnd()},
			elapsed: 10*time.Minute + time.Second,
			want:    want{tainted: true, deletedPods: []string{"batch grace=0"}, finalizers: []string{stevedorev1.TerminationFinalizer}}},
		{name: "without a grace period a do-not-disrupt pod holds the drain indefinitely",
			node: n1().Obj(), claim: c1().Obj(), pods: []*corev1.Pod{dnd()},
			elapsed: 30 * 24 * time.Hour,
			want:    want{tainted: true, finalizers: []string{stevedorev1.TerminationFinalizer}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newLifecycleHarness(t)
			if tc.node != nil {
				h.add(tc.node)
			}
			if tc.claim != nil {
				h.add(tc.claim)
			}
			for _, p := range tc.pods {
				h.add(p)
			}
			if tc.cloudErr != nil {
				h.cloud.FailNext(fake.CallDelete, tc.cloudErr)
			}
			h.clock.Step(tc.elapsed)
			h.kube.ClearActions()
			h.sd.ClearActions()

			done, err := h.term.DrainNode(h.ctx, "n1")
			if (err != nil) != tc.want.err || done != tc.want.done {
				t.Fatalf("drainNode = %v, %v; want done %v, error %v", done, err, tc.want.done, tc.want.err)
			}
			node := h.node("n1")
			if (node == nil) != tc.want.nodeGone {
				t.Fatalf("node gone = %v, want %v", node == nil, tc.want.nodeGone)
			}
			if node != nil {
				if tainted := hasTaint(node.Spec.Taints, corev1.Taint{Key: stevedorev1.TaintDisrupted, Effect: corev1.TaintEffectNoSchedule}); tainted != tc.want.tainted {
					t.Errorf("node tainted disrupted = %v, want %v", tainted, tc.want.tainted)
				}
				if !reflect.DeepEqual(node.Finalizers, tc.want.finalizers) {
					t.Errorf("node finalizers = %q, want %q", node.Finalizers, tc.want.finalizers)
				}
			}
			if got := h.evicted(); !reflect.DeepEqual(got, tc.want.evicted) {
				t.Errorf("evictions = %q, want %q", got, tc.want.evicted)
			}
			if got := test.Deleted(h.kube.Actions(), "pods"); !reflect.DeepEqual(got, tc.want.deletedPods) {
				t.Errorf("pod deletions = %q, want %q", got, tc.want.deletedPods)
			}
			if calls := h.cloud.Calls(); !reflect.DeepEqual(calls, tc.want.calls) {
				t.Errorf("cloud calls = %q, want %q", calls, tc.want.calls)
			}
			if got := test.Deleted(h.sd.Actions(), "nodeclaims"); (len(got) > 0) != tc.want.claimDeleted {
				t.Errorf("NodeClaim deletions = %q, want deleted %v", got, tc.want.claimDeleted)
			}
		})
	}
}

func TestTerminateClaim(t *testing.T) {
	deleted1 := func() *test.NodeClaimWrapper { return launchedClaim().Initialized().Deleting(t0) }
	node := func() *test.NodeWrapper { return launchedClaim().NodeFor() }
	type want struct {
		after        time.Duration
		err          bool
		calls        []string
		released     bool     // the finalizer is removed (the NodeClaim goes)
		nodesDeleted []string // node deletions asked for
		events       []string
	}
	terminated := "Normal Terminated terminated instance i-n1"
	tests := []struct {
		name     string
		claim    *stevedorev1.NodeClaim
		node     *corev1.Node
		cloudErr error
		want     want
	}{
		{name: "a NodeClaim without the finalizer is left to go",
			claim: func() *stevedorev1.NodeClaim { c := deleted1().Obj(); c.Finalizers = nil; return c }(),
			node:  node().Obj(), want: want{}},
		{name: "its node is deleted first and its drain awaited",
			claim: deleted1().Obj(), node: node().Finalizers(stevedorev1.TerminationFinalizer).Obj(),
			want: want{after: 2 * time.Second, nodesDeleted: []string{"n1"}}},
		{name: "a node being drained is awaited, not deleted again",
			claim: deleted1().Obj(), node: node().Finalizers(stevedorev1.TerminationFinalizer).Deleting(metav1.NewTime(t0)).Obj(),
			want: want{after: 2 * time.Second}},
		{name: "a node without the finalizer is deleted and the instance terminated at once",
			claim: deleted1().Obj(), node: node().Obj(),
			want: want{calls: []string{"Delete i-n1"}, released: true, nodesDeleted: []string{"n1"}, events: []string{terminated}}},
		{name: "without a node the instance is terminated and the finalizer removed",
			claim: deleted1().Obj(),
			want:  want{calls: []string{"Delete i-n1"}, released: true, events: []string{terminated}}},
		{name: "a NodeClaim that never launched is released without a cloud call",
			claim: launchClaim().Deleting(t0).Obj(),
			want:  want{released: true}},
		{name: "an instance already gone is terminated",
			claim: deleted1().Obj(), cloudErr: fmt.Errorf("i-n1: %w", cloud.ErrNotFound),
			want: want{calls: []string{"Delete i-n1"}, released: true, events: []string{terminated}}},
		{name: "an instance this cluster does not own is left running and the NodeClaim released",
			claim: deleted1().Obj(), cloudErr: fmt.Errorf("i-n1: %w", cloud.ErrNotOwned),
			want: want{calls: []string{"Delete i-n1"}, released: true,
				events: []string{"Warning NotOwned instance i-n1 lacks this cluster's ownership tag: left running"}}},
		{name: "a cloud error is returned and the finalizer kept",
			claim: deleted1().Obj(), cloudErr: errors.New("RequestLimitExceeded: slow down"),
			want: want{err: true, calls: []string{"Delete i-n1"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newLifecycleHarness(t, tc.claim)
			if tc.node != nil {
				h.add(tc.node)
			}
			if tc.cloudErr != nil {
				h.cloud.FailNext(fake.CallDelete, tc.cloudErr)
			}
			h.prov.assign(context.Background(), "c1", []*corev1.Pod{test.Pod("web").Pending().Obj()})
			h.prov.ExpectDaemons("n1", []*corev1.Pod{daemonOnN1("logs").Obj()})
			h.kube.ClearActions()

			after, err := h.term.TerminateClaim(h.ctx, tc.claim)
			if (err != nil) != tc.want.err || after != tc.want.after {
				t.Fatalf("terminateClaim = %v, %v; want %v, error %v", after, err, tc.want.after, tc.want.err)
			}
			if calls := h.cloud.Calls(); !reflect.DeepEqual(calls, tc.want.calls) {
				t.Errorf("cloud calls = %q, want %q", calls, tc.want.calls)
			}
			got := h.claim()
			if released := got == nil; released != tc.want.released {
				t.Errorf("NodeClaim released = %v, want %v", released, tc.want.released)
			}
			if got != nil && len(tc.claim.Finalizers) > 0 && !stevedorev1.HasTerminationFinalizer(got.Finalizers) {
				t.Errorf("NodeClaim lost its finalizer: %q", got.Finalizers)
			}
			if d := test.Deleted(h.kube.Actions(), "nodes"); !reflect.DeepEqual(d, tc.want.nodesDeleted) {
				t.Errorf("node deletions = %q, want %q", d, tc.want.nodesDeleted)
			}
			if ev := h.events(); !reflect.DeepEqual(ev, tc.want.events) {
				t.Errorf("events = %q, want %q", ev, tc.want.events)
			}
			if len(h.prov.AssignedPods("c1")) != 0 {
				t.Error("pods still planned on a deleted NodeClaim")
			}
			_, expected := h.prov.daemons.byNode["n1"]
			// the room goes as soon as the node is gone, whatever happens to the instance
			if wantForgotten := stevedorev1.HasTerminationFinalizer(tc.claim.Finalizers) && tc.want.after == 0 && tc.claim.Status.NodeName != ""; expected == wantForgotten {
				t.Errorf("DaemonSet room of n1 kept = %v, want %v", expected, !wantForgotten)
			}
		})
	}
}

func TestTerminateClaimRetriesCloudDelete(t *testing.T) {
	claim := launchedClaim().Deleting(t0).Obj()
	h := newLifecycleHarness(t, claim)
	h.cloud.FailNext(fake.CallDelete, errors.New("InternalError"))
	if _, err := h.term.TerminateClaim(h.ctx, claim); err == nil {
		t.Fatal("terminateClaim swallowed the cloud's error")
	}
	if h.claim() == nil {
		t.Fatal("NodeClaim released although its instance may still run")
	}
	if _, err := h.term.TerminateClaim(h.ctx, claim); err != nil {
		t.Fatalf("retry: %v", err)
	}
	if calls := h.cloud.Calls(); !reflect.DeepEqual(calls, []string{"Delete i-n1", "Delete i-n1"}) {
		t.Errorf("cloud calls = %q, want the termination tried twice", calls)
	}
	if h.claim() != nil {
		t.Error("NodeClaim not released once its instance was terminated")
	}
}

// TestTerminationFlow follows a deleted NodeClaim with a running node: the node is deleted and drained, the
// instance terminated, the node and then the NodeClaim let go.
func TestTerminationFlow(t *testing.T) {
	claim := launchedClaim().Initialized().Deleting(t0).Obj()
	node := launchedClaim().NodeFor().Finalizers(stevedorev1.TerminationFinalizer).Obj()
	h := newLifecycleHarness(t, claim, node, onN1("web").Obj())
	sync := func() { // the informers catch up
		t.Helper()
		if n := h.node("n1"); n != nil {
			if err := h.listers.Add(n); err != nil {
				t.Fatal(err)
			}
		} else if err := h.listers.Delete(node); err != nil {
			t.Fatal(err)
		}
	}

	if after, err := h.life.reconcile(h.ctx, "c1"); err != nil || after != 2*time.Second {
		t.Fatalf("reconcile = %v, %v; want to wait for the node's drain", after, err)
	}
	sync()
	if n := h.node("n1"); n == nil || n.DeletionTimestamp == nil {
		t.Fatal("node not deleted")
	}
	if done, err := h.term.DrainNode(h.ctx, "n1"); err != nil || done {
		t.Fatalf("drainNode = %v, %v; want the pod evicted first", done, err)
	}
	if got := h.evicted(); !reflect.DeepEqual(got, []string{"default/web"}) {
		t.Fatalf("evictions = %q", got)
	}
	if len(h.cloud.Calls()) != 0 {
		t.Fatalf("instance terminated before the node was drained: %q", h.cloud.Calls())
	}
	if err := h.listers.Delete(onN1("web").Obj()); err != nil {
		t.Fatal(err)
	}
	if done, err := h.term.DrainNode(h.ctx, "n1"); err != nil || !done {
		t.Fatalf("drainNode = %v, %v; want done", done, err)
	}
	sync()
	if h.node("n1") != nil {
		t.Fatal("node kept after its drain")
	}
	if h.claim() == nil {
		t.Fatal("NodeClaim released before its own termination")
	}
	if after, err := h.life.reconcile(h.ctx, "c1"); err != nil || after != 0 {
		t.Fatalf("reconcile = %v, %v", after, err)
	}
	if h.claim() != nil {
		t.Error("NodeClaim not released")
	}
	if calls := h.cloud.Calls(); !reflect.DeepEqual(calls, []string{"Delete i-n1", "Delete i-n1"}) {
		t.Errorf("cloud calls = %q; the drain and the NodeClaim each terminate the instance", calls)
	}
}
