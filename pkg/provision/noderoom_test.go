package provision

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
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
			h := newLifecycleHarness(t)
			for claim, pods := range tc.plan {
				h.prov.assign(claim, pods)
			}
			h.prov.mu.Lock()
			for node, claim := range tc.nodes {
				h.prov.claimOfNode[node] = claim
			}
			h.prov.mu.Unlock()
			ni := framework.NewNodeInfo()
			ni.SetNode(test.Node(tc.node).Obj())
			why := h.prov.RoomRefused(tc.pod, ni)
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
			h := newLifecycleHarness(t)
			h.add(test.NodeClaim("c-own", "default").Obj())
			h.add(test.NodeClaim("c-coming", "default").Obj())
			h.add(initialized(test.NodeClaim("c-up", "default").Obj()))
			p := pod()
			if tc.plannedOn != "" {
				h.prov.assign(tc.plannedOn, []*corev1.Pod{p})
			}
			h.prov.mu.Lock()
			h.prov.claimOfNode["own"], h.prov.claimOfNode["up"], h.prov.claimOfNode["coming"] = "c-own", "c-up", "c-coming"
			h.prov.mu.Unlock()
			var nodes []fwk.NodeInfo
			for _, name := range []string{"coming", "own", "plain", "up"} {
				ni := framework.NewNodeInfo()
				ni.SetNode(test.Node(name).Obj())
				nodes = append(nodes, ni)
			}
			names, restricted := h.prov.NodesFor(p, nodes)
			if restricted != tc.restricted || !slices.Equal(sets.List(names), tc.want) {
				t.Errorf("NodesFor = %v (restricted %v), want %v (restricted %v)", sets.List(names), restricted, tc.want, tc.restricted)
			}
		})
	}
	t.Run("no node initializing and the pod planned nowhere: every node", func(t *testing.T) {
		h := newLifecycleHarness(t)
		h.add(initialized(test.NodeClaim("c-up", "default").Obj()))
		h.prov.mu.Lock()
		h.prov.claimOfNode["up"] = "c-up"
		h.prov.mu.Unlock()
		ni := framework.NewNodeInfo()
		ni.SetNode(test.Node("up").Obj())
		if names, restricted := h.prov.NodesFor(pod(), []fwk.NodeInfo{ni}); restricted {
			t.Errorf("NodesFor = %v, want every node", sets.List(names))
		}
	})
}
