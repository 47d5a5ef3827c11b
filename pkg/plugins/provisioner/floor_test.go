/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package provisioner

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/test"
)

// floorBackend refuses spot to the pods it names, with why; it plans nothing and keeps no room.
type floorBackend struct {
	Backend
	refused map[string]string
}

func (b floorBackend) SpotRefused(pod *corev1.Pod) string { return b.refused[pod.Name] }
func (floorBackend) PlannedClaim(types.UID) string        { return "" }
func (floorBackend) NodesFor(*corev1.Pod, []fwk.NodeInfo) (sets.Set[string], bool) {
	return nil, false
}
func (floorBackend) RoomRefused(*corev1.Pod, fwk.NodeInfo, bool) string { return "" }

// TestFilterKeepsAPodItsFloorNeedsOnOnDemandOffSpot: a pod whose workload's on-demand floor needs it on on-demand
// capacity is refused every node not known to be on-demand (spot, and a node with no capacity type), and passes on
// on-demand and reserved nodes; a pod the floor does not hold back passes everywhere.
func TestFilterKeepsAPodItsFloorNeedsOnOnDemandOffSpot(t *testing.T) {
	plugin := &Provisioner{shared: &Shared{prov: floorBackend{refused: map[string]string{"held": "the on-demand floor of Deployment default/web (20%) needs this pod on on-demand capacity"}}}}
	nodes := map[string]*corev1.Node{
		"spot":      test.Node("spot").Labels(stevedorev1.LabelCapacityType, "spot").Obj(),
		"on-demand": test.Node("on-demand").Labels(stevedorev1.LabelCapacityType, "on-demand").Obj(),
		"reserved":  test.Node("reserved").Labels(stevedorev1.LabelCapacityType, "reserved").Obj(),
		"unknown":   test.Node("unknown").Obj(),
	}
	for _, tc := range []struct {
		pod    string
		passes []string
	}{
		{"held", []string{"on-demand", "reserved"}},
		{"free", []string{"on-demand", "reserved", "spot", "unknown"}},
	} {
		pod := test.Pod(tc.pod).Req("cpu", "100m").Obj()
		state := framework.NewCycleState()
		if _, st := plugin.PreFilter(context.Background(), state, pod, nil); !st.IsSuccess() && !st.IsSkip() {
			t.Fatalf("PreFilter: %v", st)
		}
		for name, node := range nodes {
			ni := framework.NewNodeInfo()
			ni.SetNode(node)
			st := plugin.Filter(context.Background(), state, pod, ni)
			want := false
			for _, p := range tc.passes {
				want = want || p == name
			}
			if st.IsSuccess() != want {
				t.Errorf("pod %s on node %s: %v, want passing %t", tc.pod, name, st, want)
			}
		}
	}
}
