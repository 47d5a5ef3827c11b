/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package termination

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clienttesting "k8s.io/client-go/testing"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/cloud"
	"github.com/stevedore-dev/stevedore/pkg/cloud/fake"
	"github.com/stevedore-dev/stevedore/pkg/test"
)

// t0 is when every termination test starts.
var t0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

// harness is a Terminator over a test environment (cluster, fake cloud, fake time).
type harness struct {
	*test.Env
	Cloud  *fake.Provider
	term   *Terminator
	forgot []string
}

// ForgetDaemons records what the terminator tells provisioning.
func (h *harness) ForgetDaemons(node string) { h.forgot = append(h.forgot, "daemons "+node) }

// newHarness puts objs into the listers and into the clientset that serves them.
func newHarness(t *testing.T, objs ...runtime.Object) *harness {
	t.Helper()
	env := test.NewEnv(t, t0, objs...)
	h := &harness{Env: env, Cloud: fake.ForTest(t, env.Clock.Now, []string{"us-east-1a"}, "m5.large")}
	l := h.Listers
	h.term = New(Options{Kube: h.Kube, Stevedore: h.Stevedore, Cloud: h.Cloud, Nodes: l.Nodes, Pods: l.Pods, NodeClaims: l.NodeClaims,
		Recorder: h.Recorder, Clock: h.Clock, Provisioning: h})
	return h
}

// claim reads NodeClaim c1 back from the clientset; nil when it is gone.
func (h *harness) claim() *stevedorev1.NodeClaim { h.T.Helper(); return h.NodeClaim("c1") }

// launchClaim is NodeClaim c1 before its launch.
func launchClaim() *test.NodeClaimWrapper { return test.NodeClaim("c1", "default").Created(t0) }

// launchedClaim is NodeClaim c1 whose m5.large i-n1 was launched at t0 as node n1.
func launchedClaim() *test.NodeClaimWrapper {
	return launchClaim().Launched("n1", "m5.large", "us-east-1a", stevedorev1.CapacityTypeOnDemand, "0.0960")
}

// onN1 is a pod of a ReplicaSet running on node n1.
func onN1(name string) *test.PodWrapper { return test.Pod(name).Node("n1").OwnedBy("ReplicaSet", "rs") }

// daemonOnN1 is a DaemonSet's pod on n1 that does not tolerate the disrupted taint.
func daemonOnN1(name string) *test.PodWrapper {
	return test.Pod(name).Node("n1").OwnedBy("DaemonSet", name)
}

// mirrorOnN1 is static pod etcd's mirror on n1.
func mirrorOnN1() *test.PodWrapper {
	return test.Pod("etcd").Node("n1").OwnedBy("Node", "n1").Annotations(corev1.MirrorPodAnnotationKey, "hash")
}

// tolerantOnN1 tolerates every taint, the disrupted one included.
func tolerantOnN1(name string) *test.PodWrapper {
	return daemonOnN1(name).Toleration("", corev1.TolerationOpExists, "", "")
}

// failEvictions makes the Eviction API answer err.
func (h *harness) failEvictions(err error) {
	h.Kube.PrependReactor("create", "pods", func(a clienttesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() != "eviction" {
			return false, nil, nil
		}
		return true, nil, err
	})
}

func TestDrainTier(t *testing.T) {
	tests := []struct {
		name string
		pod  *corev1.Pod
		want int
	}{
		{name: "regular", pod: onN1("web").Obj(), want: 0},
		{name: "bare pod", pod: test.Pod("bare").Obj(), want: 0},
		{name: "high priority below the critical range", pod: onN1("p").Priority(1000000000).Obj(), want: 0},
		{name: "system-cluster-critical", pod: onN1("dns").PriorityClass("system-cluster-critical").Obj(), want: 1},
		{name: "system-node-critical", pod: onN1("cni").PriorityClass("system-node-critical").Obj(), want: 1},
		{name: "priority in the critical range", pod: onN1("p").Priority(2000000000).Obj(), want: 1},
		{name: "DaemonSet pod", pod: daemonOnN1("logs").Obj(), want: 2},
		{name: "critical DaemonSet pod goes last", pod: daemonOnN1("cni").PriorityClass("system-node-critical").Obj(), want: 2},
		{name: "mirror pod (owned by its node)", pod: mirrorOnN1().Obj(), want: 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := drainTier(tc.pod); got != tc.want {
				t.Errorf("drainTier = %d, want %d", got, tc.want)
			}
		})
	}
}

// TestEvictTierOrder drains a node tier by tier: regular pods, then critical ones, then DaemonSet pods; mirror
// pods, finished pods and other nodes' pods are never touched.
func TestEvictTierOrder(t *testing.T) {
	pods := []*corev1.Pod{
		onN1("web").Obj(), onN1("api").Obj(),
		onN1("dns").PriorityClass("system-cluster-critical").Obj(), onN1("metrics").Priority(2000001000).Obj(),
		daemonOnN1("logs").Obj(),
		mirrorOnN1().Obj(),
		onN1("done").Phase(corev1.PodSucceeded).Obj(), onN1("crashed").Phase(corev1.PodFailed).Obj(),
		test.Pod("elsewhere").Node("n2").Obj(),
	}
	objs := []runtime.Object{test.Node("n1").Obj()}
	for _, p := range pods {
		objs = append(objs, p)
	}
	h := newHarness(t, objs...)
	node := test.Node("n1").Obj()
	steps := []struct {
		evicted   []string
		remaining int
	}{
		{evicted: []string{"default/api", "default/web"}, remaining: 5},
		{evicted: []string{"default/dns", "default/metrics"}, remaining: 3},
		{evicted: []string{"default/logs"}, remaining: 1},
		{evicted: nil, remaining: 0},
	}
	seen := 0
	for i, step := range steps {
		remaining, err := h.term.evictTier(h.Ctx, node, false)
		if err != nil {
			t.Fatalf("step %d: %v", i+1, err)
		}
		all := h.Evicted()
		got := all[seen:]
		seen = len(all)
		sort.Strings(got)
		if len(got) == 0 {
			got = nil
		}
		if remaining != step.remaining || !reflect.DeepEqual(got, step.evicted) {
			t.Fatalf("step %d: evicted %q with %d left, want %q with %d left", i+1, got, remaining, step.evicted, step.remaining)
		}
		if ev := h.Events(); len(ev) != len(step.evicted) || len(ev) > 0 && ev[0] != "Normal Evicted evicted: node n1 is being terminated" {
			t.Errorf("step %d: events = %q, want one Evicted event per eviction", i+1, ev)
		}
		for _, name := range got { // the evicted pods go
			ns, n := "default", name[len("default/"):]
			if err := h.Listers.Delete(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: n}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if d := test.Deleted(h.Kube.Actions(), "pods"); len(d) != 0 {
		t.Errorf("pods deleted %q; within the grace period pods are only evicted", d)
	}
}

func TestEvictTier(t *testing.T) {
	tests := []struct {
		name          string
		pods          []*corev1.Pod
		notInAPI      bool  // the pods are in the cache but gone from the API server
		evictErr      error // what the Eviction API answers
		expired       bool  // the termination grace period is over
		wantEvicted   []string
		wantDeleted   []string
		wantRemaining int
		wantErr       bool
		wantEvents    int
	}{
		{name: "a terminating pod is waited for, not evicted again",
			pods: []*corev1.Pod{onN1("web").Deleting(metav1.NewTime(t0)).Obj()}, wantRemaining: 1},
		{name: "a pod tolerating the disrupted taint goes with the node",
			pods: []*corev1.Pod{tolerantOnN1("agent").Obj()}, wantRemaining: 0},
		{name: "a tolerating pod is not waited for while others are evicted",
			pods:        []*corev1.Pod{tolerantOnN1("agent").Obj(), onN1("web").Obj()},
			wantEvicted: []string{"default/web"}, wantRemaining: 1, wantEvents: 1},
		{name: "a do-not-disrupt pod is held while the others are evicted",
			pods:        []*corev1.Pod{onN1("web").Obj(), onN1("batch").Annotations(stevedorev1.DoNotDisruptKey, "true").Obj()},
			wantEvicted: []string{"default/web"}, wantRemaining: 2, wantEvents: 1},
		{name: "Karpenter's do-not-disrupt is honoured",
			pods:          []*corev1.Pod{onN1("batch").Annotations(stevedorev1.KarpenterDoNotDisruptKey, "true").Obj()},
			wantRemaining: 1},
		{name: "do-not-disrupt for a while holds the pod while it lasts",
			pods: []*corev1.Pod{onN1("batch").Annotations(stevedorev1.DoNotDisruptKey, "1h").
				Started(t0.Add(-30 * time.Minute)).Obj()},
			wantRemaining: 1},
		{name: "do-not-disrupt for a while that is over lets the pod be evicted",
			pods: []*corev1.Pod{onN1("batch").Annotations(stevedorev1.DoNotDisruptKey, "1h").
				Started(t0.Add(-2 * time.Hour)).Obj()},
			wantEvicted: []string{"default/batch"}, wantRemaining: 1, wantEvents: 1},
		{name: "a held regular pod does not hold back the critical tier",
			pods: []*corev1.Pod{onN1("batch").Annotations(stevedorev1.DoNotDisruptKey, "true").Obj(),
				onN1("dns").PriorityClass("system-cluster-critical").Obj()},
			wantEvicted: []string{"default/dns"}, wantRemaining: 2, wantEvents: 1},
		{name: "a terminating regular pod holds back the critical and DaemonSet tiers until it is gone",
			pods: []*corev1.Pod{onN1("web").Deleting(metav1.NewTime(t0)).Obj(),
				onN1("dns").PriorityClass("system-cluster-critical").Obj(), daemonOnN1("logs").Obj()},
			wantRemaining: 3},
		{name: "a terminating critical pod holds back the DaemonSet tier",
			pods: []*corev1.Pod{onN1("dns").PriorityClass("system-cluster-critical").Deleting(metav1.NewTime(t0)).Obj(),
				daemonOnN1("logs").Obj()},
			wantRemaining: 2},
		{name: "mirror pods are never evicted", pods: []*corev1.Pod{mirrorOnN1().Obj()}, wantRemaining: 0},
		{name: "grace period over: every pod is deleted at once, mirror pods excepted", expired: true,
			pods: []*corev1.Pod{onN1("web").Obj(), onN1("batch").Annotations(stevedorev1.DoNotDisruptKey, "true").Obj(),
				onN1("stuck").Deleting(metav1.NewTime(t0.Add(-time.Hour))).Obj(), tolerantOnN1("agent").Obj(),
				daemonOnN1("logs").Obj(), onN1("dns").PriorityClass("system-cluster-critical").Obj(), mirrorOnN1().Obj()},
			wantDeleted:   []string{"agent grace=0", "batch grace=0", "dns grace=0", "logs grace=0", "stuck grace=0", "web grace=0"},
			wantRemaining: 6},
		{name: "a PodDisruptionBudget's refusal is retried",
			pods:     []*corev1.Pod{onN1("web").Obj()},
			evictErr: apierrors.NewTooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.", 10),
			// the pod is attempted and stays to be evicted on the next pass
			wantEvicted: []string{"default/web"}, wantRemaining: 1},
		{name: "a pod gone from the API server is not an error",
			pods: []*corev1.Pod{onN1("web").Obj()}, notInAPI: true,
			wantEvicted: []string{"default/web"}, wantRemaining: 1},
		{name: "another eviction error is returned",
			pods:     []*corev1.Pod{onN1("web").Obj()},
			evictErr: apierrors.NewInternalError(errors.New("etcd unavailable")),
			wantErr:  true, wantEvicted: []string{"default/web"}},
		{name: "finished pods and other nodes' pods are not drained",
			pods: []*corev1.Pod{onN1("done").Phase(corev1.PodSucceeded).Obj(), onN1("crashed").Phase(corev1.PodFailed).Obj(),
				test.Pod("elsewhere").Node("n2").Obj()},
			wantRemaining: 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			for _, p := range tc.pods {
				if tc.notInAPI {
					if err := h.Listers.Add(p); err != nil {
						t.Fatal(err)
					}
				} else {
					h.Add(p)
				}
			}
			if tc.evictErr != nil {
				h.failEvictions(tc.evictErr)
			}
			h.Kube.ClearActions()

			remaining, err := h.term.evictTier(h.Ctx, test.Node("n1").Obj(), tc.expired)
			if (err != nil) != tc.wantErr {
				t.Fatalf("evictTier error = %v, want error %v", err, tc.wantErr)
			}
			if err == nil && remaining != tc.wantRemaining {
				t.Errorf("remaining = %d, want %d", remaining, tc.wantRemaining)
			}
			got := h.Evicted()
			sort.Strings(got)
			if diff := cmp.Diff(tc.wantEvicted, got); diff != "" {
				t.Errorf("evictions (-want +got):\n%s", diff)
			}
			d := test.Deleted(h.Kube.Actions(), "pods")
			sort.Strings(d)
			if diff := cmp.Diff(tc.wantDeleted, d); diff != "" {
				t.Errorf("pod deletions (-want +got):\n%s", diff)
			}
			if ev := h.Events(); len(ev) != tc.wantEvents {
				t.Errorf("events = %q, want %d", ev, tc.wantEvents)
			}
		})
	}
}

func TestTaintDisrupted(t *testing.T) {
	h := newHarness(t, test.Node("n1").Taint("dedicated", "batch", corev1.TaintEffectNoSchedule).Obj())
	for i := 0; i < 2; i++ {
		if err := h.term.taintDisrupted(h.Ctx, h.Node("n1")); err != nil {
			t.Fatalf("taintDisrupted #%d: %v", i+1, err)
		}
	}
	want := []corev1.Taint{{Key: "dedicated", Value: "batch", Effect: corev1.TaintEffectNoSchedule},
		{Key: stevedorev1.TaintDisrupted, Value: "true", Effect: corev1.TaintEffectNoSchedule}}
	if got := h.Node("n1").Spec.Taints; !reflect.DeepEqual(got, want) {
		t.Errorf("taints = %+v, want %+v", got, want)
	}
	if n := test.Updated(h.Kube.Actions(), "nodes", ""); n != 1 {
		t.Errorf("%d node updates, want 1", n)
	}
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
			h := newHarness(t)
			if tc.node != nil {
				h.Add(tc.node)
			}
			if tc.claim != nil {
				h.Add(tc.claim)
			}
			for _, p := range tc.pods {
				h.Add(p)
			}
			if tc.cloudErr != nil {
				h.Cloud.FailNext(fake.CallDelete, tc.cloudErr)
			}
			h.Clock.Step(tc.elapsed)
			h.Kube.ClearActions()
			h.Stevedore.ClearActions()

			done, err := h.term.DrainNode(h.Ctx, "n1")
			if (err != nil) != tc.want.err || done != tc.want.done {
				t.Fatalf("drainNode = %v, %v; want done %v, error %v", done, err, tc.want.done, tc.want.err)
			}
			node := h.Node("n1")
			if (node == nil) != tc.want.nodeGone {
				t.Fatalf("node gone = %v, want %v", node == nil, tc.want.nodeGone)
			}
			if node != nil {
				if tainted := stevedorev1.IsDisrupted(node); tainted != tc.want.tainted {
					t.Errorf("node tainted disrupted = %v, want %v", tainted, tc.want.tainted)
				}
				if diff := cmp.Diff(tc.want.finalizers, node.Finalizers); diff != "" {
					t.Errorf("node finalizers (-want +got):\n%s", diff)
				}
			}
			if diff := cmp.Diff(tc.want.evicted, h.Evicted()); diff != "" {
				t.Errorf("evictions (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.want.deletedPods, test.Deleted(h.Kube.Actions(), "pods")); diff != "" {
				t.Errorf("pod deletions (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.want.calls, h.Cloud.Calls()); diff != "" {
				t.Errorf("cloud calls (-want +got):\n%s", diff)
			}
			if got := test.Deleted(h.Stevedore.Actions(), "nodeclaims"); (len(got) > 0) != tc.want.claimDeleted {
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
			h := newHarness(t, tc.claim)
			if tc.node != nil {
				h.Add(tc.node)
			}
			if tc.cloudErr != nil {
				h.Cloud.FailNext(fake.CallDelete, tc.cloudErr)
			}
			h.Kube.ClearActions()

			after, err := h.term.TerminateClaim(h.Ctx, tc.claim)
			if (err != nil) != tc.want.err || after != tc.want.after {
				t.Fatalf("terminateClaim = %v, %v; want %v, error %v", after, err, tc.want.after, tc.want.err)
			}
			if diff := cmp.Diff(tc.want.calls, h.Cloud.Calls()); diff != "" {
				t.Errorf("cloud calls (-want +got):\n%s", diff)
			}
			got := h.claim()
			if released := got == nil; released != tc.want.released {
				t.Errorf("NodeClaim released = %v, want %v", released, tc.want.released)
			}
			if got != nil && len(tc.claim.Finalizers) > 0 && !stevedorev1.HasTerminationFinalizer(got.Finalizers) {
				t.Errorf("NodeClaim lost its finalizer: %q", got.Finalizers)
			}
			if diff := cmp.Diff(tc.want.nodesDeleted, test.Deleted(h.Kube.Actions(), "nodes")); diff != "" {
				t.Errorf("node deletions (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.want.events, h.Events()); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
			// the room goes as soon as the node is gone, whatever happens to the instance
			wantForgotten := stevedorev1.HasTerminationFinalizer(tc.claim.Finalizers) && tc.want.after == 0 && tc.claim.Status.NodeName != ""
			if forgotten := slices.Contains(h.forgot, "daemons n1"); forgotten != wantForgotten {
				t.Errorf("DaemonSet room of n1 forgotten = %v, want %v (provisioning told %q)", forgotten, wantForgotten, h.forgot)
			}
		})
	}
}

func TestTerminateClaimRetriesCloudDelete(t *testing.T) {
	claim := launchedClaim().Deleting(t0).Obj()
	h := newHarness(t, claim)
	h.Cloud.FailNext(fake.CallDelete, errors.New("InternalError"))
	if _, err := h.term.TerminateClaim(h.Ctx, claim); err == nil {
		t.Fatal("terminateClaim swallowed the cloud's error")
	}
	if h.claim() == nil {
		t.Fatal("NodeClaim released although its instance may still run")
	}
	if _, err := h.term.TerminateClaim(h.Ctx, claim); err != nil {
		t.Fatalf("retry: %v", err)
	}
	if calls := h.Cloud.Calls(); !reflect.DeepEqual(calls, []string{"Delete i-n1", "Delete i-n1"}) {
		t.Errorf("cloud calls = %q, want the termination tried twice", calls)
	}
	if h.claim() != nil {
		t.Error("NodeClaim not released once its instance was terminated")
	}
}
