/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package ledger

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sort"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	clocktesting "k8s.io/utils/clock/testing"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/test"
)

var t0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

// fixture is a Ledger over listers holding objs, on a fake clock, recording what it wakes.
type fixture struct {
	*Ledger
	clock *clocktesting.FakeClock
	woken map[string][]string // reason → pod names, sorted
	pods  map[string]*corev1.Pod
}

func newFixture(t *testing.T, objs ...runtime.Object) *fixture {
	t.Helper()
	listers, err := test.NewListers(objs...)
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{clock: clocktesting.NewFakeClock(t0), woken: map[string][]string{}, pods: map[string]*corev1.Pod{}}
	for _, o := range objs {
		if pod, ok := o.(*corev1.Pod); ok {
			f.pods[pod.Name] = pod
		}
	}
	f.Ledger = New(Options{Clock: f.clock, Pods: listers.Pods, NodeClaims: listers.NodeClaims,
		Wake: func(_ context.Context, reason string, pods []*corev1.Pod) {
			for _, pod := range pods {
				f.woken[reason] = append(f.woken[reason], pod.Name)
			}
			sort.Strings(f.woken[reason])
		}})
	return f
}

// plan returns, for each pod of the fixture, the NodeClaim it is planned on ("" when none).
func (f *fixture) plan() map[string]string {
	out := map[string]string{}
	for name, pod := range f.pods {
		claim, _ := f.ClaimOf(pod.UID)
		out[name] = claim
	}
	return out
}

func pending(name string) *corev1.Pod { return test.Pod(name).Pending().Req("cpu", "1").Obj() }

// TestEveryChangeWakesThePodsItMayHelp drives each change the ledger makes through its one way in or out, or
// through the informer events it follows, and checks the pods it wakes (by reason) and the plan it leaves.
func TestEveryChangeWakesThePodsItMayHelp(t *testing.T) {
	deleting := test.NodeClaim("c1", "default").Deleting(t0).Obj()
	tests := []struct {
		name string
		// plan puts pods on NodeClaims; refused records the pods each NodeClaim's node refused
		plan    map[string][]string
		refused map[string][]string
		change  func(ctx context.Context, f *fixture)
		// wantWoken maps reasons to the pods woken for them; wantPlan the pods to their NodeClaim after the change
		wantWoken map[string][]string
		wantPlan  map[string]string
	}{
		{name: "a pod is planned: nobody is woken",
			change:   func(ctx context.Context, f *fixture) { f.Plan(ctx, "c1", []*corev1.Pod{f.pods["a"]}) },
			wantPlan: map[string]string{"a": "c1"}},
		{name: "a pod planned on the same node binds: the pods that node refused are woken",
			plan: map[string][]string{"c1": {"a", "b", "c"}}, refused: map[string][]string{"c1": {"b"}},
			change:    func(ctx context.Context, f *fixture) { f.Bound(ctx, f.pods["a"].UID) },
			wantWoken: map[string][]string{WakePlannedPodBound: {"b"}},
			wantPlan:  map[string]string{"b": "c1", "c": "c1"}},
		{name: "a pod planned on another node binds: nobody here is woken",
			plan: map[string][]string{"c1": {"a"}, "c2": {"b"}}, refused: map[string][]string{"c1": {"a"}},
			change:   func(ctx context.Context, f *fixture) { f.Bound(ctx, f.pods["b"].UID) },
			wantPlan: map[string]string{"a": "c1"}},
		{name: "a pod planned nowhere binds: nobody is woken",
			plan: map[string][]string{"c1": {"a"}}, refused: map[string][]string{"c1": {"a"}},
			change:   func(ctx context.Context, f *fixture) { f.Bound(ctx, f.pods["d"].UID) },
			wantPlan: map[string]string{"a": "c1"}},
		{name: "a planned pod is deleted: the pods its node refused are woken",
			plan: map[string][]string{"c1": {"a", "b"}}, refused: map[string][]string{"c1": {"b"}},
			change:    func(ctx context.Context, f *fixture) { f.Deleted(ctx, f.pods["a"]) },
			wantWoken: map[string][]string{WakePlannedPodGone: {"b"}},
			wantPlan:  map[string]string{"b": "c1"}},
		{name: "a planned pod's deletion seen by the pod informer, as a tombstone",
			plan: map[string][]string{"c1": {"a", "b"}}, refused: map[string][]string{"c1": {"b"}},
			change: func(ctx context.Context, f *fixture) {
				f.podEvents(ctx).OnDelete(cache.DeletedFinalStateUnknown{Key: "default/a", Obj: f.pods["a"]})
			},
			wantWoken: map[string][]string{WakePlannedPodGone: {"b"}},
			wantPlan:  map[string]string{"b": "c1"}},
		{name: "a planned pod is planned elsewhere: the pods its old node refused are woken",
			plan: map[string][]string{"c1": {"a", "b"}}, refused: map[string][]string{"c1": {"b"}},
			change:    func(ctx context.Context, f *fixture) { f.Plan(ctx, "c2", []*corev1.Pod{f.pods["a"]}) },
			wantWoken: map[string][]string{WakePlannedPodGone: {"b"}},
			wantPlan:  map[string]string{"a": "c2", "b": "c1"}},
		{name: "a pod planned again on the same NodeClaim: nobody is woken",
			plan: map[string][]string{"c1": {"a", "b"}}, refused: map[string][]string{"c1": {"b"}},
			change:   func(ctx context.Context, f *fixture) { f.Plan(ctx, "c1", []*corev1.Pod{f.pods["a"]}) },
			wantPlan: map[string]string{"a": "c1", "b": "c1"}},
		{name: "a planned pod finds no room on its node and is dropped: the pods that node refused are woken",
			plan: map[string][]string{"c1": {"a", "b"}}, refused: map[string][]string{"c1": {"b"}},
			change:    func(ctx context.Context, f *fixture) { f.Drop(ctx, f.pods["a"].UID) },
			wantWoken: map[string][]string{WakePlannedPodGone: {"b"}},
			wantPlan:  map[string]string{"b": "c1"}},
		{name: "a plan is forgotten: nobody is woken",
			plan: map[string][]string{"c1": {"a", "b"}}, refused: map[string][]string{"c1": {"b"}},
			change:   func(ctx context.Context, f *fixture) { f.Forget(f.pods["a"].UID) },
			wantPlan: map[string]string{"b": "c1"}},
		{name: "a NodeClaim goes: its pods and those its node refused are planned again",
			plan: map[string][]string{"c1": {"a", "b"}, "c2": {"c"}}, refused: map[string][]string{"c1": {"d"}},
			change:    func(ctx context.Context, f *fixture) { f.ForgetClaim(ctx, "c1") },
			wantWoken: map[string][]string{WakePlanDropped: {"a", "b", "d"}},
			wantPlan:  map[string]string{"c": "c2"}},
		{name: "a NodeClaim the ledger has no plan for goes: nobody is woken",
			plan:     map[string][]string{"c2": {"c"}},
			change:   func(ctx context.Context, f *fixture) { f.ForgetClaim(ctx, "c1") },
			wantPlan: map[string]string{"c": "c2"}},
		{name: "a NodeClaim marked for deletion, whatever deleted it: its pods are planned again",
			plan: map[string][]string{"c1": {"a"}, "c2": {"c"}},
			change: func(ctx context.Context, f *fixture) {
				f.claimEvents(ctx).OnUpdate(test.NodeClaim("c1", "default").Obj(), deleting)
			},
			wantWoken: map[string][]string{WakePlanDropped: {"a"}},
			wantPlan:  map[string]string{"c": "c2"}},
		{name: "a NodeClaim updated and not deleted keeps its plan",
			plan: map[string][]string{"c1": {"a"}},
			change: func(ctx context.Context, f *fixture) {
				f.claimEvents(ctx).OnUpdate(test.NodeClaim("c1", "default").Obj(), test.NodeClaim("c1", "default").Obj())
			},
			wantPlan: map[string]string{"a": "c1"}},
		{name: "a NodeClaim deleted, seen as a tombstone: its pods are planned again",
			plan: map[string][]string{"c1": {"a"}},
			change: func(ctx context.Context, f *fixture) {
				f.claimEvents(ctx).OnDelete(cache.DeletedFinalStateUnknown{Key: "c1", Obj: deleting})
			},
			wantWoken: map[string][]string{WakePlanDropped: {"a"}}},
		{name: "a NodeClaim's node initializes: the pods planned there and those it refused are woken",
			plan: map[string][]string{"c1": {"a"}, "c2": {"b"}}, refused: map[string][]string{"c1": {"c"}, "c2": {"d"}},
			change:    func(ctx context.Context, f *fixture) { f.Initialized(ctx, "c1") },
			wantWoken: map[string][]string{WakeNodeInitialized: {"a", "c"}},
			wantPlan:  map[string]string{"a": "c1", "b": "c2"}},
		{name: "the pods bound or gone are swept: nobody is woken",
			plan: map[string][]string{"c1": {"a", "b"}}, refused: map[string][]string{"c1": {"b"}},
			change: func(_ context.Context, f *fixture) {
				f.ForgetAllBut(map[types.UID]bool{f.pods["b"].UID: true}, f.clock.Now())
			},
			wantPlan: map[string]string{"b": "c1"}},
		{name: "a pod planned after the sweep read the cache keeps its plan",
			plan: map[string][]string{"c1": {"a", "b"}},
			change: func(ctx context.Context, f *fixture) {
				listedAt := f.clock.Now()
				f.clock.Step(time.Second)
				f.Plan(ctx, "c2", []*corev1.Pod{f.pods["c"]}) // created and planned after the list
				f.ForgetAllBut(map[types.UID]bool{f.pods["b"].UID: true}, listedAt)
			},
			wantPlan: map[string]string{"b": "c1", "c": "c2"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var objs []runtime.Object
			for _, name := range []string{"a", "b", "c", "d"} {
				objs = append(objs, pending(name))
			}
			f := newFixture(t, objs...)
			ctx := t.Context()
			for claim, names := range tc.plan {
				for _, name := range names {
					f.Plan(ctx, claim, []*corev1.Pod{f.pods[name]})
				}
			}
			for claim, names := range tc.refused {
				for _, name := range names {
					f.Refused(claim, f.pods[name], false, "")
				}
			}
			f.woken = map[string][]string{}
			tc.change(ctx, f)
			if tc.wantWoken == nil {
				tc.wantWoken = map[string][]string{}
			}
			if diff := cmp.Diff(tc.wantWoken, f.woken); diff != "" {
				t.Errorf("pods woken (-want +got):\n%s", diff)
			}
			wantPlan := map[string]string{"a": "", "b": "", "c": "", "d": ""}
			for pod, claim := range tc.wantPlan {
				wantPlan[pod] = claim
			}
			if diff := cmp.Diff(wantPlan, f.plan()); diff != "" {
				t.Errorf("plan after the change (-want +got):\n%s", diff)
			}
		})
	}
}

// TestANodeClaimGoneTakesEverythingKeptForIt: once a NodeClaim goes, nothing of its plan is left: its pods'
// nominations, the node named as its, its node's readiness and the pods queued first for it.
func TestANodeClaimGoneTakesEverythingKeptForIt(t *testing.T) {
	a := pending("a")
	f := newFixture(t, a)
	ctx := t.Context()
	f.Plan(ctx, "c1", []*corev1.Pod{a})
	f.Nominate("c1", "n1", a.UID)
	f.Initialized(ctx, "c1")
	f.Reserved(a, "n1")
	f.ForgetClaim(ctx, "c1")
	got := map[string]any{
		"planned":       f.Pods("c1"),
		"nominated":     f.IsNominated(a.UID, "n1"),
		"nominatedTo":   f.NominatedTo("n1"),
		"readyFirst":    f.ReadyFirst(a.UID),
		"readySince":    f.ReadySince("c1"),
		"binding":       f.IsBinding(a.UID), // the reservation is the scheduler's: it stays until the pod binds
		"unboundParked": f.UnboundOnReadyNodes(),
	}
	_, nodeKnown := f.ClaimOfNode("n1")
	got["nodeKnown"] = nodeKnown
	want := map[string]any{
		"planned": []*corev1.Pod{}, "nominated": false, "nominatedTo": []*corev1.Pod(nil), "readyFirst": false,
		"readySince": time.Time{}, "binding": true, "unboundParked": []Parked(nil), "nodeKnown": false,
	}
	if diff := cmp.Diff(want, got, cmp.Comparer(func(a, b []*corev1.Pod) bool { return len(a) == len(b) })); diff != "" {
		t.Errorf("what is left of a NodeClaim gone (-want +got):\n%s", diff)
	}
}

// TestACreatedNodeClaimCountsUntilTheCacheShowsIt: a NodeClaim this process created is listed with the cache's
// until the cache shows it, or five minutes after its creation (it was deleted before the cache saw it).
func TestACreatedNodeClaimCountsUntilTheCacheShowsIt(t *testing.T) {
	created := func(name string) *stevedorev1.NodeClaim {
		c := test.NodeClaim(name, "default").Obj()
		c.CreationTimestamp = metav1.NewTime(t0)
		return c
	}
	names := func(claims []*stevedorev1.NodeClaim) []string {
		var out []string
		for _, c := range claims {
			out = append(out, c.Name)
		}
		return out
	}
	f := newFixture(t)
	f.Created(created("new-b"))
	f.Created(created("new-a"))
	listed := []*stevedorev1.NodeClaim{created("old")}
	if diff := cmp.Diff([]string{"old", "new-a", "new-b"}, names(f.WithCreated(listed))); diff != "" {
		t.Errorf("listed right after the creates (-want +got):\n%s", diff)
	}
	listed = append(listed, created("new-a"))
	if diff := cmp.Diff([]string{"old", "new-a", "new-b"}, names(f.WithCreated(listed))); diff != "" {
		t.Errorf("listed once the cache shows new-a (-want +got):\n%s", diff)
	}
	f.clock.Step(5*time.Minute + time.Second)
	if diff := cmp.Diff([]string{"old"}, names(f.WithCreated(listed[:1]))); diff != "" {
		t.Errorf("listed five minutes on, new-a gone and new-b never seen (-want +got):\n%s", diff)
	}
}

// TestTheKeptRoomRunningSumFollowsEveryChange: the running sum of each NodeClaim's kept room (which NodesFor reads
// for every node) equals the sum over the pods planned there that are not being bound, through every way a plan and
// a binding change: planning, planning elsewhere, reserving, unreserving, binding, deletion, the sweep of bound and
// gone pods, a NodeClaim going away.
func TestTheKeptRoomRunningSumFollowsEveryChange(t *testing.T) {
	pods := make([]*corev1.Pod, 12)
	objs := make([]runtime.Object, len(pods))
	for i := range pods {
		pods[i] = test.Pod(fmt.Sprintf("p%02d", i)).Pending().Req("cpu", fmt.Sprintf("%dm", 100*(i+1))).Obj()
		objs[i] = pods[i]
	}
	f := newFixture(t, objs...)
	claims := []string{"c0", "c1", "c2"}
	check := func(step string) {
		t.Helper()
		for _, c := range claims {
			_, reqs := f.KeptPlanned(c, "", nil)
			var want int64
			for _, r := range reqs {
				want += r.MilliCPU
			}
			f.mu.Lock()
			var got int64
			if cp := f.claims[c]; cp != nil {
				got = cp.kept.MilliCPU
			}
			f.mu.Unlock()
			if got != want {
				t.Fatalf("after %s: NodeClaim %s keeps %dm by its running sum, %dm summed", step, c, got, want)
			}
		}
	}
	rng := rand.New(rand.NewPCG(7, 7)) //nolint:gosec // G404: a reproducible sequence of changes
	ctx := t.Context()
	for i := 0; i < 2000; i++ {
		pod := pods[rng.IntN(len(pods))]
		claim := claims[rng.IntN(len(claims))]
		var step string
		switch rng.IntN(8) {
		case 0, 1:
			f.Plan(ctx, claim, []*corev1.Pod{pod})
			step = "plan " + pod.Name + " on " + claim
		case 2:
			f.Reserved(pod, "n1")
			step = "reserve " + pod.Name
		case 3:
			f.Unreserved(pod.UID)
			step = "unreserve " + pod.Name
		case 4:
			f.Bound(ctx, pod.UID)
			f.clock.Step(40 * time.Second)
			step = "bind " + pod.Name
		case 5:
			f.Deleted(ctx, pod)
			step = "delete " + pod.Name
		case 6:
			live := map[types.UID]bool{}
			for _, q := range pods[:rng.IntN(len(pods))] {
				live[q.UID] = true
			}
			f.ForgetAllBut(live, f.clock.Now())
			step = "sweep"
		default:
			if rng.IntN(4) == 0 {
				f.ForgetClaim(ctx, claim)
				step = "forget " + claim
			} else {
				f.Binding()
				step = "list the pods being bound"
			}
		}
		check(step)
	}
}

// TestNominatedToFollowsEveryNomination: the pods a node has nominated to it, through nominations, renominations
// to another node, a pod planned anew elsewhere, forgotten pods and NodeClaims gone.
func TestNominatedToFollowsEveryNomination(t *testing.T) {
	a, b, c, d := pending("a"), pending("b"), pending("c"), pending("d")
	f := newFixture(t, a, b, c, d)
	ctx := t.Context()
	names := func(node string) []string {
		var out []string
		for _, pod := range f.NominatedTo(node) {
			out = append(out, pod.Name)
		}
		sort.Strings(out)
		return out
	}
	f.Plan(ctx, "c1", []*corev1.Pod{a, b, c})
	f.Plan(ctx, "c2", []*corev1.Pod{d})
	f.Nominate("c1", "n1", a.UID, b.UID, c.UID)
	f.Nominate("c2", "n2", d.UID)
	f.Plan(ctx, "c2", []*corev1.Pod{b}) // planned anew on c2, and nominated to its node
	f.Nominate("c2", "n2", b.UID)
	f.Forget(c.UID)
	f.Nominate("c1", "n1", "not-planned")
	got := map[string][]string{"n1": names("n1"), "n2": names("n2")}
	want := map[string][]string{"n1": {"a"}, "n2": {"b", "d"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("nominated (-want +got):\n%s", diff)
	}
	f.ForgetClaim(ctx, "c2")
	if got := names("n2"); len(got) != 0 {
		t.Errorf("after its NodeClaim went, n2 has %v nominated", got)
	}
	if got := names("n1"); !cmp.Equal(got, []string{"a"}) {
		t.Errorf("n1 has %v nominated, want [a]", got)
	}
	if len(f.nominatedOn) != 1 {
		t.Errorf("the index keeps %d nodes, want 1 (no empty entries)", len(f.nominatedOn))
	}
}

// TestUnboundOnReadyNodesListsOnlyThePodsWhoseNodeIsReady: of the pods planned and not bound, those on a node this
// process saw initialize, or that the NodeClaim's condition says is initialized (a previous leader's), with when
// it became ready; not those whose node is still coming, nor those being bound.
func TestUnboundOnReadyNodesListsOnlyThePodsWhoseNodeIsReady(t *testing.T) {
	a, b, c, d := pending("a"), pending("b"), pending("c"), pending("d")
	earlier := t0.Add(-time.Hour)
	adopted := test.NodeClaim("c-adopted", "default").Created(earlier).Initialized().Obj()
	coming := test.NodeClaim("c-coming", "default").Created(earlier).Registered().Obj()
	f := newFixture(t, a, b, c, d, adopted, coming)
	ctx := t.Context()
	f.Plan(ctx, "c-seen", []*corev1.Pod{a, b})
	f.Plan(ctx, "c-adopted", []*corev1.Pod{c})
	f.Plan(ctx, "c-coming", []*corev1.Pod{d})
	f.Initialized(ctx, "c-seen")
	f.Reserved(b, "n-seen")
	got := map[string]time.Time{}
	for _, p := range f.UnboundOnReadyNodes() {
		got[p.Pod.Name] = p.ReadyAt
	}
	want := map[string]time.Time{"a": t0, "c": earlier}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("unbound on ready nodes (-want +got):\n%s", diff)
	}
}
