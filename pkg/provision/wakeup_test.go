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
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/component-base/metrics/testutil"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	internalqueue "k8s.io/kubernetes/pkg/scheduler/backend/queue"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	schedmetrics "k8s.io/kubernetes/pkg/scheduler/metrics"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/decision"
	"github.com/stevedore-dev/stevedore/pkg/metrics"
	"github.com/stevedore-dev/stevedore/pkg/test"
)

// parkedQueue is kube-scheduler's real scheduling queue holding pods as unschedulable, rejected by the
// Provisioner plugin, as a scheduling cycle that failed leaves them.
type parkedQueue struct {
	t *testing.T
	*internalqueue.PriorityQueue
}

func lessByTimestamp(a, b fwk.QueuedEntityInfo) bool {
	return a.GetTimestamp().Before(b.GetTimestamp())
}

// park adds pods to the queue and moves them through a failed scheduling cycle into the unschedulable pool.
func (q *parkedQueue) park(logger klog.Logger, pods ...*corev1.Pod) {
	q.t.Helper()
	for _, pod := range pods {
		q.Add(q.t.Context(), pod)
		entity, err := q.Pop(logger)
		if err != nil {
			q.t.Fatal(err)
		}
		pInfo := entity.(*framework.QueuedPodInfo)
		pInfo.UnschedulablePlugins = sets.New("Provisioner")
		if err := q.AddUnschedulablePodIfNotPresent(logger, pInfo, q.SchedulingCycle()); err != nil {
			q.t.Fatal(err)
		}
	}
	if got := names(q.UnschedulablePods()); len(got) != len(pods) {
		q.t.Fatalf("parked %v, want %d pods", got, len(pods))
	}
}

func names(pods []*corev1.Pod) []string {
	out := make([]string, 0, len(pods))
	for _, p := range pods {
		out = append(out, p.Name)
	}
	slices.Sort(out)
	return out
}

func TestEveryInternalRefusalIsWokenWhenItClears(t *testing.T) {
	node := func(name string) *corev1.Node {
		return test.Node(name).Labels(stevedorev1.LabelNodePool, "default").Obj()
	}
	launched := func(name, node string) *stevedorev1.NodeClaim {
		return test.NodeClaim(name, "default").Launched(node, "m5.large", "us-east-1a", "on-demand", "0.096").Obj()
	}
	initialized := func(c *stevedorev1.NodeClaim) *stevedorev1.NodeClaim {
		c.Status.Conditions = append(c.Status.Conditions, metav1.Condition{Type: stevedorev1.ConditionInitialized, Status: metav1.ConditionTrue})
		return c
	}
	pending := func(name string) *corev1.Pod { return test.Pod(name).Pending().Req("cpu", "1").Obj() }
	tests := []struct {
		name string
		// objects in the listers: nodes, NodeClaims, pods
		objects []*corev1.Node
		claims  []*stevedorev1.NodeClaim
		// plan maps NodeClaims to the pods planned on them (the first pod of c1 is the one parked, "waiter")
		plan map[string][]*corev1.Pod
		// act changes the provisioner's state as the event named does
		act func(h *harness, pods map[string]*corev1.Pod)
		// notRefused: the parked pod's last cycle was not refused by c1's node (the others were)
		notRefused bool
		want       []string // pods back in the active queue; the others stay parked
	}{
		{name: "a pod planned on the same node binds: the room kept for it is the scheduler's to count",
			objects: []*corev1.Node{node("n1")}, claims: []*stevedorev1.NodeClaim{initialized(launched("c1", "n1"))},
			plan: map[string][]*corev1.Pod{"c1": {pending("waiter"), pending("first")}},
			act: func(h *harness, pods map[string]*corev1.Pod) {
				h.prov.PodBound(h.Ctx, pods["first"].UID, "n1")
			},
			want: []string{"waiter"}},
		{name: "a pod planned on the same node binds, the pod was not refused there: it waits for its own event",
			objects: []*corev1.Node{node("n1")}, claims: []*stevedorev1.NodeClaim{initialized(launched("c1", "n1"))},
			plan: map[string][]*corev1.Pod{"c1": {pending("waiter"), pending("first")}}, notRefused: true,
			act: func(h *harness, pods map[string]*corev1.Pod) {
				h.prov.PodBound(h.Ctx, pods["first"].UID, "n1")
			},
			want: nil},
		{name: "a pod planned on another node binds: nothing changes here",
			objects: []*corev1.Node{node("n1"), node("n2")},
			claims:  []*stevedorev1.NodeClaim{initialized(launched("c1", "n1")), initialized(launched("c2", "n2"))},
			plan:    map[string][]*corev1.Pod{"c1": {pending("waiter")}, "c2": {pending("elsewhere")}},
			act: func(h *harness, pods map[string]*corev1.Pod) {
				h.prov.PodBound(h.Ctx, pods["elsewhere"].UID, "n2")
			},
			want: nil},
		{name: "a pod planned on the same node is deleted: its room is free",
			objects: []*corev1.Node{node("n1")}, claims: []*stevedorev1.NodeClaim{initialized(launched("c1", "n1"))},
			plan: map[string][]*corev1.Pod{"c1": {pending("waiter"), pending("gone")}},
			act:  func(h *harness, pods map[string]*corev1.Pod) { h.prov.plans.Deleted(h.Ctx, pods["gone"]) },
			want: []string{"waiter"}},
		{name: "a pod planned on the same node is planned elsewhere: its room is free",
			objects: []*corev1.Node{node("n1")}, claims: []*stevedorev1.NodeClaim{initialized(launched("c1", "n1")), launched("c2", "n2")},
			plan: map[string][]*corev1.Pod{"c1": {pending("waiter"), pending("moved")}},
			act: func(h *harness, pods map[string]*corev1.Pod) {
				h.prov.plans.Plan(h.Ctx, "c2", []*corev1.Pod{pods["moved"]})
			},
			want: []string{"waiter"}},
		{name: "the pod's NodeClaim goes away: it is planned again",
			claims: []*stevedorev1.NodeClaim{launched("c1", "n1")},
			plan:   map[string][]*corev1.Pod{"c1": {pending("waiter")}},
			act:    func(h *harness, _ map[string]*corev1.Pod) { h.prov.plans.ForgetClaim(h.Ctx, "c1") },
			want:   []string{"waiter"}},
		{name: "the pod is planned on a node that is ready already",
			objects: []*corev1.Node{node("n1")}, claims: []*stevedorev1.NodeClaim{initialized(launched("c1", "n1"))},
			plan: map[string][]*corev1.Pod{},
			act: func(h *harness, pods map[string]*corev1.Pod) {
				h.prov.plans.Plan(h.Ctx, "c1", []*corev1.Pod{pods["waiter"]})
				h.prov.nominate(h.Ctx, initialized(launched("c1", "n1")), []*corev1.Pod{pods["waiter"]})
			},
			want: []string{"waiter"}},
		{name: "the pod is planned on a node that has registered and is initializing: it waits for the node to be ready",
			objects: []*corev1.Node{node("n1")}, claims: []*stevedorev1.NodeClaim{launched("c1", "n1")},
			plan: map[string][]*corev1.Pod{},
			act: func(h *harness, pods map[string]*corev1.Pod) {
				h.prov.plans.Plan(h.Ctx, "c1", []*corev1.Pod{pods["waiter"]})
				h.prov.nominate(h.Ctx, launched("c1", "n1"), []*corev1.Pod{pods["waiter"]})
			},
			want: nil},
		{name: "the pod is nominated to a node not registered yet: its Node event will wake it",
			claims: []*stevedorev1.NodeClaim{launched("c1", "n1")},
			plan:   map[string][]*corev1.Pod{"c1": {pending("waiter")}},
			act: func(h *harness, pods map[string]*corev1.Pod) {
				h.prov.nominate(h.Ctx, launched("c1", "n1"), []*corev1.Pod{pods["waiter"]})
			},
			want: nil},
		{name: "the node planned for the pod finishes initializing",
			objects: []*corev1.Node{node("n1")}, claims: []*stevedorev1.NodeClaim{launched("c1", "n1")},
			plan: map[string][]*corev1.Pod{"c1": {pending("waiter")}},
			act:  func(h *harness, _ map[string]*corev1.Pod) { h.prov.ClaimInitialized(h.Ctx, "c1") },
			want: []string{"waiter"}},
		{name: "another node finishes initializing",
			objects: []*corev1.Node{node("n1"), node("n2")}, claims: []*stevedorev1.NodeClaim{launched("c1", "n1"), launched("c2", "n2")},
			plan: map[string][]*corev1.Pod{"c1": {pending("waiter")}},
			act:  func(h *harness, _ map[string]*corev1.Pod) { h.prov.ClaimInitialized(h.Ctx, "c2") },
			want: nil},
		{name: "a pod no NodePool could take, after the NodePools change",
			plan: map[string][]*corev1.Pod{},
			act: func(h *harness, pods map[string]*corev1.Pod) {
				h.prov.refused.add(pods["waiter"], "no NodePool", h.prov.refused.seen())
				h.prov.NodePoolsChanged(h.Ctx)
			},
			want: []string{"waiter"}},
		{name: "a pod a solve found no NodePool for, when the NodePools changed while it ran: it is planned again",
			plan: map[string][]*corev1.Pod{},
			act: func(h *harness, pods map[string]*corev1.Pod) {
				seen := h.prov.refused.seen() // the solve reads its input
				h.prov.NodePoolsChanged(h.Ctx)
				h.prov.refuse(h.Ctx, []*corev1.Pod{pods["waiter"]}, map[types.UID]string{pods["waiter"].UID: "no NodePool"}, seen)
				if h.prov.refused.recent(pods["waiter"].UID) {
					h.T.Error("refused for NodePools that have changed since")
				}
				h.prov.wakeUnplanned(h.Ctx, []*corev1.Pod{pods["waiter"]})
			},
			want: []string{"waiter"}},
		{name: "a pod no NodePool could take, a minute later: it is planned again",
			plan: map[string][]*corev1.Pod{},
			act: func(h *harness, pods map[string]*corev1.Pod) {
				h.prov.refused.add(pods["waiter"], "no NodePool", h.prov.refused.seen())
				h.prov.retryUnprovisionable(h.Ctx)
				if !h.prov.refused.recent(pods["waiter"].UID) {
					h.T.Error("forgotten before its minute")
				}
				h.Clock.Step(unprovisionableFor + time.Second)
				h.prov.retryUnprovisionable(h.Ctx)
			},
			want: []string{"waiter"}},
		{name: "the pod's planned node has no room for it: the others planned there are woken, the pod is planned again",
			objects: []*corev1.Node{node("n1")}, claims: []*stevedorev1.NodeClaim{initialized(launched("c1", "n1"))},
			plan: map[string][]*corev1.Pod{"c1": {pending("waiter"), pending("crowded")}},
			act: func(h *harness, pods map[string]*corev1.Pod) {
				d := h.prov.Consider(h.Ctx, pods["crowded"], func(string) (string, string) { return "NodeResourcesFit", "Insufficient cpu" })
				if d.Kind != decision.Batched {
					h.T.Errorf("crowded pod: decision %v, want batched", d.Kind)
				}
			},
			want: []string{"waiter"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var objs []runtime.Object
			for _, n := range tc.objects {
				objs = append(objs, n)
			}
			for _, c := range tc.claims {
				objs = append(objs, c)
			}
			pods := map[string]*corev1.Pod{"waiter": pending("waiter")}
			for _, planned := range tc.plan {
				for _, p := range planned {
					pods[p.Name] = p
				}
			}
			for _, p := range pods {
				objs = append(objs, p)
			}
			h := newHarness(t, objs...)
			schedmetrics.Register()
			q := &parkedQueue{t: t, PriorityQueue: internalqueue.NewTestQueue(t.Context(), lessByTimestamp)}
			h.prov.opts.Queue = q
			for claim, planned := range tc.plan {
				h.prov.plans.Plan(h.Ctx, claim, planned)
			}
			q.park(klog.FromContext(h.Ctx), pods["waiter"])
			if !tc.notRefused {
				h.prov.refusedOn("c1", pods["waiter"], "PodTopologySpread", "test")
			}
			tc.act(h, pods)
			if got := names(q.PodsInActiveQ()); !slices.Equal(got, tc.want) && !(len(got) == 0 && len(tc.want) == 0) {
				t.Errorf("active queue holds %v, want %v (parked: %v)", got, tc.want, names(q.UnschedulablePods()))
			}
		})
	}
}

// TestNodesComingUpWaitForTheAdoptedPlan: until the provisioner has adopted the previous leader's plan, the nodes
// Stevedore is bringing up are refused to every pod; initialized ones and others are not; the pods refused are
// woken once it has.
func TestNodesComingUpWaitForTheAdoptedPlan(t *testing.T) {
	coming := test.Node("coming").Labels(stevedorev1.LabelNodePool, "default", stevedorev1.LabelNodeClaim, "c1").Obj()
	unsynced := test.Node("unsynced").Labels(stevedorev1.LabelNodePool, "default").Obj()
	up := test.Node("up").Labels(stevedorev1.LabelNodePool, "default", stevedorev1.LabelNodeClaim, "c2").Obj()
	plain := test.Node("plain").Obj()
	c1 := test.NodeClaim("c1", "default").Launched("coming", "m5.large", "us-east-1a", "on-demand", "0.096").Obj()
	c2 := test.NodeClaim("c2", "default").Launched("up", "m5.large", "us-east-1a", "on-demand", "0.096").Obj()
	c2.Status.Conditions = append(c2.Status.Conditions, metav1.Condition{Type: stevedorev1.ConditionInitialized, Status: metav1.ConditionTrue})
	waiter := test.Pod("waiter").Pending().Req("cpu", "1").Obj()
	h := newHarness(t, c1, c2, waiter)
	schedmetrics.Register()
	q := &parkedQueue{t: t, PriorityQueue: internalqueue.NewTestQueue(t.Context(), lessByTimestamp)}
	h.prov.opts.Queue = q
	refused := func(node *corev1.Node) bool {
		ni := framework.NewNodeInfo()
		ni.SetNode(node)
		return h.prov.RoomRefused(waiter, ni, false) != ""
	}
	for _, tc := range []struct {
		node *corev1.Node
		want bool
	}{{coming, true}, {unsynced, true}, {up, false}, {plain, false}} {
		if got := refused(tc.node); got != tc.want {
			t.Errorf("before the plan is adopted, node %s refused: %v, want %v", tc.node.Name, got, tc.want)
		}
	}
	q.park(klog.FromContext(h.Ctx), waiter)
	h.prov.AdoptNominations(h.Ctx)
	if got := names(q.PodsInActiveQ()); !slices.Equal(got, []string{"waiter"}) {
		t.Errorf("after the plan is adopted the active queue holds %v, want [waiter]", got)
	}
	if refused(coming) || refused(unsynced) {
		t.Error("after the plan is adopted, nodes coming up are still refused to a pod planned nowhere")
	}
}

// TestAPodParkedOnItsReadyNodeIsRetriedThenPlannedAgain: a pod planned on a node that has been ready for
// replanAfter and still has not taken it is retried; if the node still refuses it then (its spread broken by pods
// put there in its stead, its room taken), it is planned again and woken. A refusal before replanAfter (the node
// just up, the pod's siblings not bound yet) does not count.
func TestAPodParkedOnItsReadyNodeIsRetriedThenPlannedAgain(t *testing.T) {
	claim := test.NodeClaim("c1", "default").Launched("n1", "m5.large", "us-east-1a", "on-demand", "0.096").Obj()
	waiter := test.Pod("waiter").Pending().Req("cpu", "1").Obj()
	h := newHarness(t, claim, test.Node("n1").Obj(), waiter)
	schedmetrics.Register()
	q := &parkedQueue{t: t, PriorityQueue: internalqueue.NewTestQueue(t.Context(), lessByTimestamp)}
	h.prov.opts.Queue = q
	h.prov.plans.Plan(h.Ctx, "c1", []*corev1.Pod{waiter})
	h.prov.ClaimInitialized(h.Ctx, "c1")
	logger := klog.FromContext(h.Ctx)
	q.park(logger, waiter)

	h.Clock.Step(replanAfter / 2)
	h.prov.refusedOn("c1", waiter, "PodTopologySpread", "test") // early: the node refuses it for now
	h.prov.reviewParked(h.Ctx)
	if h.prov.PlannedClaim(waiter.UID) != "c1" || len(q.PodsInActiveQ()) != 0 {
		t.Fatalf("after %s the pod is planned on %q and woken %v; want still planned on c1, parked", replanAfter/2,
			h.prov.PlannedClaim(waiter.UID), names(q.PodsInActiveQ()))
	}
	if got, err := testutil.GetGaugeMetricValue(metrics.PodsParkedOnReadyNode); err != nil || got != 1 {
		t.Errorf("parked gauge %v (%v), want 1", got, err)
	}

	h.Clock.Step(replanAfter)
	h.prov.reviewParked(h.Ctx)
	if got := h.prov.PlannedClaim(waiter.UID); got != "c1" {
		t.Errorf("after %s, refused only early, the pod is planned on %q, want still c1", replanAfter*3/2, got)
	}
	if got := names(q.PodsInActiveQ()); !slices.Equal(got, []string{"waiter"}) {
		t.Fatalf("after %s the active queue holds %v, want [waiter] retried", replanAfter*3/2, got)
	}

	// the retry: its node refuses it again, well after it was ready
	entity, err := q.Pop(logger)
	if err != nil {
		t.Fatal(err)
	}
	pInfo := entity.(*framework.QueuedPodInfo)
	pInfo.UnschedulablePlugins = sets.New("Provisioner")
	if err := q.AddUnschedulablePodIfNotPresent(logger, pInfo, q.SchedulingCycle()); err != nil {
		t.Fatal(err)
	}
	h.prov.refusedOn("c1", waiter, "TaintToleration", "node(s) had untolerated taint(s)")
	h.Clock.Step(3 * time.Second)
	h.prov.reviewParked(h.Ctx)
	if got := h.prov.PlannedClaim(waiter.UID); got != "c1" {
		t.Errorf("refused for the node's taints (its state, not the plan), the pod is planned on %q, want still c1", got)
	}
	h.prov.refusedOn("c1", waiter, "PodTopologySpread", "node(s) didn't match pod topology spread constraints")
	h.Clock.Step(3 * time.Second)
	h.prov.reviewParked(h.Ctx)
	if got := h.prov.PlannedClaim(waiter.UID); got != "" {
		t.Errorf("refused again after %s, the pod is still planned on %q", replanAfter, got)
	}
	if got := names(q.PodsInActiveQ()); !slices.Equal(got, []string{"waiter"}) {
		t.Errorf("active queue %v, want [waiter] (to be planned again)", got)
	}
}

// TestAPodTriedLateIsNotPlannedAgainForItsFirstRefusals: in a busy queue, a pod planned on a ready node may be
// tried first long after the node was ready; a spread refusal then (its siblings in the other zones not bound yet)
// is not a stale plan until it lasted replanAfter.
func TestAPodTriedLateIsNotPlannedAgainForItsFirstRefusals(t *testing.T) {
	claim := test.NodeClaim("c1", "default").Launched("n1", "m5.large", "us-east-1a", "on-demand", "0.096").Obj()
	waiter := test.Pod("waiter").Pending().Req("cpu", "1").Obj()
	h := newHarness(t, claim, test.Node("n1").Obj(), waiter)
	h.prov.plans.Plan(h.Ctx, "c1", []*corev1.Pod{waiter})
	h.prov.ClaimInitialized(h.Ctx, "c1")
	for _, step := range []struct {
		after   time.Duration // since the last step
		planned string        // the pod's plan after this step's refusal and review
	}{
		{replanAfter - time.Second, "c1"}, // first tried, refused
		{2 * time.Second, "c1"},           // refused again, 2 s after its first refusal
		{replanAfter / 2, "c1"},
		{replanAfter / 2, ""}, // refused replanAfter after its first refusal: planned again
	} {
		h.Clock.Step(step.after)
		h.prov.refusedOn("c1", waiter, "PodTopologySpread", "node(s) didn't match pod topology spread constraints")
		h.prov.reviewParked(h.Ctx)
		if got := h.prov.PlannedClaim(waiter.UID); got != step.planned {
			t.Fatalf("%s after the node was ready: planned on %q, want %q", h.Clock.Since(t0), got, step.planned)
		}
	}
}
