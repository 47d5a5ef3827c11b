package provision

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"

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
