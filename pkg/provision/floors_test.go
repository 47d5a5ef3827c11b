/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package provision

import (
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/test"
)

// TestSpotRefusedHoldsTheFloorOverPlacedPods: the scheduler may put a pod of a workload with an on-demand floor on
// a spot node only while its siblings already on on-demand capacity (bound there, or planned on an on-demand
// NodeClaim) hold the floor with the pod counted.
func TestSpotRefusedHoldsTheFloorOverPlacedPods(t *testing.T) {
	web := func(i int, floorValue string) *test.PodWrapper {
		w := test.Pod(fmt.Sprintf("web-5f7c9-%d", i)).Labels("pod-template-hash", "5f7c9").OwnedBy("ReplicaSet", "web-5f7c9").
			Req("cpu", "100m")
		if floorValue != "" {
			w.Annotations(stevedorev1.AnnotationOnDemandFloor, floorValue)
		}
		return w
	}
	nodes := []runtime.Object{
		test.Node("od").Labels(stevedorev1.LabelCapacityType, "on-demand").Obj(),
		test.Node("spot").Labels(stevedorev1.LabelCapacityType, "spot").Obj(),
		test.Node("mng").Labels("eks.amazonaws.com/capacityType", "ON_DEMAND").Obj(),
	}
	cases := []struct {
		name    string
		objs    []runtime.Object
		planned map[string][]int // NodeClaim name: the web pods planned on it
		pod     *corev1.Pod
		refused bool
	}{
		{name: "the first pod of a workload with a floor", pod: web(0, "20%").Obj(), refused: true},
		{name: "a pod without a floor", pod: web(0, "").Obj()},
		{name: "one on on-demand holds 20% of five",
			objs: []runtime.Object{web(1, "20%").Node("od").Obj(), web(2, "20%").Node("spot").Obj(), web(3, "20%").Node("spot").Obj(),
				web(4, "20%").Node("spot").Obj()},
			pod: web(5, "20%").Obj()},
		{name: "but not 20% of six",
			objs: []runtime.Object{web(1, "20%").Node("od").Obj(), web(2, "20%").Node("spot").Obj(), web(3, "20%").Node("spot").Obj(),
				web(4, "20%").Node("spot").Obj(), web(5, "20%").Node("spot").Obj()},
			pod: web(6, "20%").Obj(), refused: true},
		{name: "a pod on a node being disrupted is being replaced: it does not count",
			objs: []runtime.Object{web(1, "50%").Node("leaving").Obj(), web(2, "50%").Node("od").Obj(),
				test.Node("leaving").Labels(stevedorev1.LabelCapacityType, "spot").Unschedulable().Obj()},
			pod: web(3, "50%").Obj(), refused: false},
		{name: "a managed node group's on-demand node counts",
			objs: []runtime.Object{web(1, "50%").Node("mng").Obj()}, pod: web(2, "50%").Obj()},
		{name: "a sibling planned on an on-demand NodeClaim counts",
			objs: []runtime.Object{web(1, "50%").Pending().Obj(),
				test.NodeClaim("od-claim", "default").Require(stevedorev1.LabelCapacityType, corev1.NodeSelectorOpIn, "on-demand").Obj()},
			planned: map[string][]int{"od-claim": {1}}, pod: web(2, "50%").Obj()},
		{name: "one planned on a NodeClaim that may launch spot does not",
			objs: []runtime.Object{web(1, "50%").Pending().Obj(),
				test.NodeClaim("any-claim", "default").Require(stevedorev1.LabelCapacityType, corev1.NodeSelectorOpIn, "spot", "on-demand").Obj()},
			planned: map[string][]int{"any-claim": {1}}, pod: web(2, "50%").Obj(), refused: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			objs := append(append([]runtime.Object{}, nodes...), tc.objs...)
			objs = append(objs, tc.pod)
			h := newHarness(t, objs...)
			for claim, pods := range tc.planned {
				var planned []*corev1.Pod
				for _, i := range pods {
					planned = append(planned, web(i, "50%").Pending().Obj())
				}
				h.prov.plans.Plan(h.Ctx, claim, planned)
			}
			why := h.prov.SpotRefused(tc.pod)
			if (why != "") != tc.refused {
				t.Fatalf("SpotRefused = %q, want refused %t", why, tc.refused)
			}
			if tc.refused && !strings.Contains(why, "ReplicaSet default/web-5f7c9") && !strings.Contains(why, "Deployment default/web") {
				t.Errorf("the reason %q does not name the workload", why)
			}
		})
	}
}
