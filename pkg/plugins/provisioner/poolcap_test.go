/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package provisioner

import (
	"context"
	"fmt"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/poolcap"
	"github.com/stevedore-dev/stevedore/pkg/test"
)

// TestFilterHoldsACapPerSpotPool: a pod whose workload caps its pods per Spot pool at 2 is refused the nodes of a
// pool holding 2 of them already (on any of the pool's nodes), and a node that may be Spot but whose pool is not
// known; it passes on a pool with room, on on-demand nodes and on a node of unknown origin. Another workload's
// pods do not count, and a pod without the annotation passes everywhere.
func TestFilterHoldsACapPerSpotPool(t *testing.T) {
	plugin := &Provisioner{shared: &Shared{prov: floorBackend{}}}
	spot := func(name, it, zone string) *corev1.Node {
		return test.Node(name).Labels(stevedorev1.LabelNodePool, "default", stevedorev1.LabelCapacityType, "spot",
			corev1.LabelInstanceTypeStable, it, corev1.LabelTopologyZone, zone).Obj()
	}
	nodes := []*corev1.Node{
		spot("full-1", "m5.large", "us-east-1a"),
		spot("full-2", "m5.large", "us-east-1a"), // same pool as full-1
		spot("room", "m5.large", "us-east-1b"),
		test.Node("mng-spot").Labels("eks.amazonaws.com/capacityType", "SPOT", corev1.LabelInstanceTypeStable, "c5.large",
			corev1.LabelTopologyZone, "us-east-1a").Obj(),
		test.Node("on-demand").Labels(stevedorev1.LabelNodePool, "default", stevedorev1.LabelCapacityType, "on-demand",
			corev1.LabelInstanceTypeStable, "m5.large", corev1.LabelTopologyZone, "us-east-1a").Obj(),
		test.Node("undecided").Labels(stevedorev1.LabelNodePool, "default").Obj(),
		test.Node("foreign").Obj(),
	}
	pod := func(name, deployment, capValue string) *corev1.Pod {
		w := test.Pod(name).Labels("pod-template-hash", "h1").OwnedBy("ReplicaSet", deployment+"-h1").Req("cpu", "100m")
		if capValue != "" {
			w = w.Annotations(poolcap.Annotation, capValue)
		}
		return w.Obj()
	}
	// web has one pod on each of full-1 and full-2 (pool m5.large/us-east-1a holds 2), one on room and two on mng-spot
	bound := map[string][]*corev1.Pod{
		"full-1":   {pod("web-1", "web", "2")},
		"full-2":   {pod("web-2", "web", "2")},
		"room":     {pod("web-3", "web", "2")},
		"mng-spot": {pod("web-4", "web", "2"), pod("web-5", "web", "2")},
	}
	var infos []fwk.NodeInfo
	for _, n := range nodes {
		ni := framework.NewNodeInfo(bound[n.Name]...)
		ni.SetNode(n)
		infos = append(infos, ni)
	}
	for _, tc := range []struct {
		pod    *corev1.Pod
		passes []string
	}{
		{pod("web-new", "web", "2"), []string{"room", "on-demand", "foreign"}},
		{pod("web-cap3", "web", "3"), []string{"full-1", "full-2", "room", "mng-spot", "on-demand", "foreign"}},
		{pod("api-new", "api", "2"), []string{"full-1", "full-2", "room", "mng-spot", "on-demand", "foreign"}},
		{pod("web-uncapped", "web", ""), []string{"full-1", "full-2", "room", "mng-spot", "on-demand", "undecided", "foreign"}},
	} {
		state := framework.NewCycleState()
		if _, st := plugin.PreFilter(context.Background(), state, tc.pod, infos); !st.IsSuccess() && !st.IsSkip() {
			t.Fatalf("PreFilter: %v", st)
		}
		var passed []string
		for _, ni := range infos {
			st := plugin.Filter(context.Background(), state, tc.pod, ni)
			if st.IsSuccess() {
				passed = append(passed, ni.Node().Name)
			} else if st.Message() == "" {
				t.Errorf("pod %s refused on %s without a reason", tc.pod.Name, ni.Node().Name)
			}
		}
		if !slices.Equal(passed, tc.passes) {
			t.Errorf("pod %s (cap %q) passes on %v, want %v", tc.pod.Name, tc.pod.Annotations[poolcap.Annotation], passed, tc.passes)
		}
	}
	state := framework.NewCycleState()
	web := pod("web-new", "web", "2")
	_, _ = plugin.PreFilter(context.Background(), state, web, infos)
	if got, want := plugin.Filter(context.Background(), state, web, infos[0]).Message(),
		fmt.Sprintf("%s 2: Spot pool m5.large/us-east-1a holds 2 of the workload's pods", poolcap.Annotation); got != want {
		t.Errorf("refusal says %q, want %q", got, want)
	}
}
