/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package provision

import (
	"context"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/test"
)

func TestRoomRefusedKeepsPlannedPodsOnTheirOwnNodes(t *testing.T) {
	cache := func() *corev1.Pod { return test.Pod("cache").Pending().Req("cpu", "250m").Obj() }
	other := func() *corev1.Pod { return test.Pod("other").Pending().Req("cpu", "250m").Obj() }
	tests := []struct {
		name string
		// plan assigns pods to NodeClaims; nodes maps node names to the NodeClaim launched as them.
		plan  map[string][]*corev1.Pod
		nodes map[string]string
		pod   *corev1.Pod
		node  string
		want  bool // refused
	}{
		{name: "a pod planned on another NodeClaim is refused while that node still has planned pods",
			plan:  map[string][]*corev1.Pod{"c1": {other()}, "c2": {cache()}},
			nodes: map[string]string{"n1": "c1"}, pod: cache(), node: "n1", want: true},
		{name: "a pod planned on another NodeClaim is refused once that node's planned pods are all bound",
			plan:  map[string][]*corev1.Pod{"c2": {cache()}},
			nodes: map[string]string{"n1": "c1"}, pod: cache(), node: "n1", want: true},
		{name: "a pod planned on this node's NodeClaim is taken",
			plan:  map[string][]*corev1.Pod{"c1": {cache()}},
			nodes: map[string]string{"n1": "c1"}, pod: cache(), node: "n1", want: false},
		{name: "a pod planned nowhere may use the room left",
			plan:  map[string][]*corev1.Pod{},
			nodes: map[string]string{"n1": "c1"}, pod: cache(), node: "n1", want: false},
		{name: "a node Stevedore did not launch for planned pods is not refused",
			plan:  map[string][]*corev1.Pod{"c2": {cache()}},
			nodes: map[string]string{}, pod: cache(), node: "n1", want: false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			for claim, pods := range tc.plan {
				h.prov.plans.Plan(context.Background(), claim, pods)
			}
			node := test.Node(tc.node)
			for name, claim := range tc.nodes {
				h.Add(test.NodeClaim(claim, "default").Launched(name, "m5.large", "us-east-1a", "on-demand", "0.096").Initialized().Obj())
				h.prov.plans.Nominate(claim, name)
				if name == tc.node {
					node.Labels(stevedorev1.LabelNodePool, "default", stevedorev1.LabelNodeClaim, claim)
				}
			}
			h.knowNodes(node.Obj())
			ni := framework.NewNodeInfo()
			ni.SetNode(node.Obj())
			why := h.prov.RoomRefused(tc.pod, ni, false)
			if refused := why != ""; refused != tc.want {
				t.Errorf("RoomRefused = %q, want refused %v", why, tc.want)
			}
			// PreFilter's narrowing must agree with Filter: a node left out is one Filter refuses
			names, planned := h.prov.NodesFor(tc.pod, []fwk.NodeInfo{ni})
			switch {
			case !planned && tc.want:
				t.Errorf("NodesFor: every node may take the pod, but RoomRefused refuses %s", tc.node)
			case planned && names.Has(tc.node) == tc.want:
				t.Errorf("NodesFor = %v, RoomRefused refused %s: %v", sets.List(names), tc.node, tc.want)
			}
		})
	}
}

func TestNodesForLeavesOutOnlyNodesThatCannotTakeThePod(t *testing.T) {
	pod := func() *corev1.Pod { return test.Pod("web").Pending().Req("cpu", "250m").Obj() }
	initialized := func(c *stevedorev1.NodeClaim) *stevedorev1.NodeClaim {
		c.Status.Conditions = []metav1.Condition{{Type: stevedorev1.ConditionInitialized, Status: metav1.ConditionTrue}}
		return c
	}
	// nodes: "plain" was not launched by Stevedore; "own" is c-own's, "up" c-up's (initialized), "coming"
	// c-coming's (not initialized yet)
	tests := []struct {
		name       string
		plannedOn  string // the NodeClaim the pod is planned on, "" for none
		want       []string
		restricted bool
	}{
		{name: "a pod planned on a node coming: that node and the nodes Stevedore did not launch",
			plannedOn: "c-own", want: []string{"own", "plain"}, restricted: true},
		{name: "a pod planned on an initialized node: the same (the others were launched for other pods)",
			plannedOn: "c-up", want: []string{"plain", "up"}, restricted: true},
		{name: "a pod not planned: every node but those still initializing",
			want: []string{"plain", "up"}, restricted: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			h.Add(test.NodeClaim("c-own", "default").Launched("own", "m5.large", "us-east-1a", "on-demand", "0.096").Obj())
			h.Add(test.NodeClaim("c-coming", "default").Launched("coming", "m5.large", "us-east-1a", "on-demand", "0.096").Obj())
			h.Add(initialized(test.NodeClaim("c-up", "default").Launched("up", "m5.large", "us-east-1a", "on-demand", "0.096").Obj()))
			p := pod()
			if tc.plannedOn != "" {
				h.prov.plans.Plan(context.Background(), tc.plannedOn, []*corev1.Pod{p})
			}
			h.prov.plans.Nominate("c-own", "own")
			h.prov.plans.Nominate("c-up", "up")
			h.prov.plans.Nominate("c-coming", "coming")
			var nodes []fwk.NodeInfo
			for _, name := range []string{"coming", "own", "plain", "up"} {
				node := test.Node(name)
				if name != "plain" {
					node.Labels(stevedorev1.LabelNodePool, "default")
				}
				h.knowNodes(node.Obj())
				ni := framework.NewNodeInfo()
				ni.SetNode(node.Obj())
				nodes = append(nodes, ni)
			}
			names, restricted := h.prov.NodesFor(p, nodes)
			if restricted != tc.restricted || !slices.Equal(sets.List(names), tc.want) {
				t.Errorf("NodesFor = %v (restricted %v), want %v (restricted %v)", sets.List(names), restricted, tc.want, tc.restricted)
			}
		})
	}
	t.Run("no node initializing and the pod planned nowhere: every node", func(t *testing.T) {
		h := newHarness(t)
		h.Add(initialized(test.NodeClaim("c-up", "default").Obj()))
		h.prov.plans.Nominate("c-up", "up")
		ni := framework.NewNodeInfo()
		ni.SetNode(test.Node("up").Obj())
		if names, restricted := h.prov.NodesFor(pod(), []fwk.NodeInfo{ni}); restricted {
			t.Errorf("NodesFor = %v, want every node", sets.List(names))
		}
	})
}

// nominatedQueue is a SchedulingQueue whose nominator holds the given pods on a node.
type nominatedQueue map[string][]*corev1.Pod

func (q nominatedQueue) Activate(klog.Logger, map[string]*corev1.Pod) {}

func (q nominatedQueue) NominatedPodsForNode(node string) []fwk.PodInfo {
	var out []fwk.PodInfo
	for _, p := range q[node] {
		pi, _ := framework.NewPodInfo(p)
		out = append(out, pi)
	}
	return out
}

func TestKeptRoomCountsEachPlannedPodOnce(t *testing.T) {
	pending := func(name string) *corev1.Pod { return test.Pod(name).Pending().Req("cpu", "1").Obj() }
	tests := []struct {
		name string
		// the other planned pod "other" is reserved (binding) to reservedOn, nominated in the scheduler's queue
		// to queued, and nominated by this provisioner to provisionerNominated
		reservedOn, queued, provisionerNominated string
		otherPriority                            int32
		wantKept                                 int64 // millicores kept for others on n1
	}{
		{name: "a planned pod nobody counts is kept for", wantKept: 1000},
		{name: "a planned pod the scheduler counts as nominated is not", queued: "n1", provisionerNominated: "n1", wantKept: 0},
		{name: "a planned pod nominated by the provisioner but not yet in the scheduler's queue is kept for",
			provisionerNominated: "n1", wantKept: 1000},
		{name: "a nominated pod of lower priority is kept for (the scheduler does not add it for this pod)",
			queued: "n1", provisionerNominated: "n1", otherPriority: -1, wantKept: 1000},
		{name: "a planned pod being bound here is counted by the scheduler's cache, not kept for", reservedOn: "n1", wantKept: 0},
		{name: "a planned pod being bound elsewhere leaves its room", reservedOn: "n2", wantKept: 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			waiter, other := pending("waiter"), pending("other")
			other.Spec.Priority = &tc.otherPriority
			h := newHarness(t, waiter, other)
			h.prov.plans.Plan(context.Background(), "c1", []*corev1.Pod{waiter, other})
			h.prov.plans.Nominate("c1", "n1")
			if tc.provisionerNominated != "" {
				h.prov.plans.Nominate("c1", tc.provisionerNominated, other.UID)
			}
			q := nominatedQueue{}
			if tc.queued != "" {
				q[tc.queued] = []*corev1.Pod{other}
			}
			h.prov.opts.Queue = q
			if tc.reservedOn != "" {
				h.prov.PodReserved(other, tc.reservedOn)
			}
			ni := framework.NewNodeInfo()
			ni.SetNode(test.Node("n1").Obj())
			kept, names, refuse := h.prov.KeptRoom(waiter, ni)
			if refuse != "" || kept.MilliCPU != tc.wantKept {
				t.Errorf("KeptRoom = %d millicores for %v (refuse %q), want %d", kept.MilliCPU, names, refuse, tc.wantKept)
			}
		})
	}
}

// TestNodesForLeavesOutInitializedNodesWhoseRoomIsPlanned: a pod planned nowhere skips a node Stevedore launched
// whose room, less what it keeps for the pods planned there (nominated or not), cannot hold it: the scheduler
// would refuse it there anyway, after copying the node with every nominated pod.
func TestNodesForLeavesOutInitializedNodesWhoseRoomIsPlanned(t *testing.T) {
	up := test.NodeClaim("c-up", "default").Obj()
	up.Status.Conditions = []metav1.Condition{{Type: stevedorev1.ConditionInitialized, Status: metav1.ConditionTrue}}
	planned := []*corev1.Pod{test.Pod("a").Pending().Req("cpu", "750m").Obj(), test.Pod("b").Pending().Req("cpu", "750m").Obj()}
	for _, tc := range []struct {
		name  string
		cpu   string
		taken bool
	}{
		{"a pod the room left holds", "250m", true},
		{"a pod the room left cannot hold", "1", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, up, planned[0], planned[1])
			h.prov.plans.Plan(context.Background(), "c-up", planned)
			h.prov.plans.Nominate("c-up", "up", planned[0].UID)
			ni := framework.NewNodeInfo()
			ni.SetNode(test.Node("up").Allocatable("cpu", "2", "memory", "8Gi", "pods", "29").Obj())
			pod := test.Pod("new").Pending().Req("cpu", tc.cpu).Obj()
			names, restricted := h.prov.NodesFor(pod, []fwk.NodeInfo{ni})
			if taken := !restricted || names.Has("up"); taken != tc.taken {
				t.Errorf("NodesFor = %v (restricted %v), want the node taken: %v", sets.List(names), restricted, tc.taken)
			}
			// Filter agrees, on the node as the scheduler evaluates it: with the pods nominated there added
			withNominated := framework.NewNodeInfo(planned[0])
			withNominated.SetNode(ni.Node())
			if refused := h.prov.RoomRefused(pod, withNominated, false) != ""; refused == tc.taken {
				t.Errorf("RoomRefused: refused %v, NodesFor took the node: %v", refused, tc.taken)
			}
			// a refusal is recorded, for the wake-up when the node's plan changes
			refused := h.prov.plans.TakeRefused("c-up")
			// so Filter need not weigh the room again on a node NodesFor named (the plugin's PreFilter says it did)
			if tc.taken && h.prov.RoomRefused(pod, withNominated, true) != "" {
				t.Error("RoomRefused after NodesFor weighed the room: refused")
			}
			if recorded := len(refused) == 1 && refused[0].Name == "new"; recorded == tc.taken {
				t.Errorf("the refusal recorded: %v, want %v", recorded, !tc.taken)
			}
		})
	}
}

// A pod waiting for a plan or for its planned node to be ready is not helped by room freed elsewhere (the
// AssignedPod Delete hint asks AwaitsNode); a pod planned on a ready node, or planned nowhere, may be.
func TestOnlyPodsWaitingForTheirNodeAreNotHelpedByRoomFreedElsewhere(t *testing.T) {
	for _, tc := range []struct {
		name      string
		plannedOn string
		batched   bool
		want      bool
	}{
		{name: "planned on a NodeClaim coming up", plannedOn: "c-launched", want: true},
		{name: "planned on a NodeClaim not launched yet", plannedOn: "c-pending", want: true},
		{name: "planned on a ready node", plannedOn: "c-ready", want: false},
		{name: "batched for the next solve", batched: true, want: true},
		{name: "planned nowhere", want: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			h.Add(test.NodeClaim("c-launched", "default").Launched("launched", "m5.large", "us-east-1a", "on-demand", "0.096").Obj())
			h.Add(test.NodeClaim("c-ready", "default").Launched("ready", "m5.large", "us-east-1a", "on-demand", "0.096").Initialized().Obj())
			h.Add(test.NodeClaim("c-pending", "default").Obj())
			p := test.Pod("p").Pending().Obj()
			if tc.plannedOn != "" {
				h.prov.plans.Plan(context.Background(), tc.plannedOn, []*corev1.Pod{p})
			}
			if tc.batched {
				h.prov.batcher.Add(p)
			}
			if got := h.prov.AwaitsNode(p); got != tc.want {
				t.Errorf("AwaitsNode = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestTheSnapshotCountsPodsPlannedOnReadyNodes: the next solve sees, on a node that finished initializing, the
// pods planned there that are not bound yet (their room and their spread domains are taken), besides the bound
// ones; a planned pod that bound meanwhile counts once.
func TestTheSnapshotCountsPodsPlannedOnReadyNodes(t *testing.T) {
	up := test.NodeClaim("c-up", "default").Obj()
	up.Status.NodeName = "up"
	up.Status.Conditions = []metav1.Condition{{Type: stevedorev1.ConditionInitialized, Status: metav1.ConditionTrue}}
	node := test.Node("up").Allocatable("cpu", "4", "memory", "16Gi", "pods", "29").Obj()
	waiting := test.Pod("waiting").Pending().Req("cpu", "1").Obj()
	boundSince := test.Pod("bound-since").Node("up").Req("cpu", "1").Obj()
	other := test.Pod("other").Node("up").Req("cpu", "500m").Obj()
	h := newHarness(t, up, node, waiting, boundSince, other)
	h.prov.plans.Plan(context.Background(), "c-up", []*corev1.Pod{waiting, boundSince})
	snap, inflight, _, err := h.prov.clusterSnapshot(context.Background(), []*stevedorev1.NodeClaim{up}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(inflight) != 0 {
		t.Errorf("in-flight nodes %v, want none: the node is ready", inflight)
	}
	ni := snap.NodeInfo("up")
	if ni == nil {
		t.Fatal("the ready node is not in the snapshot")
	}
	var got []string
	for _, pi := range ni.GetPods() {
		got = append(got, pi.GetPod().Name)
	}
	slices.Sort(got)
	if want := []string{"bound-since", "other", "waiting"}; !slices.Equal(got, want) {
		t.Errorf("pods on the ready node in the snapshot %v, want %v", got, want)
	}
}
