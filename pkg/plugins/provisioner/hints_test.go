/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package provisioner

import (
	"testing"

	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	internalqueue "k8s.io/kubernetes/pkg/scheduler/backend/queue"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	schedmetrics "k8s.io/kubernetes/pkg/scheduler/metrics"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/test"
)

func TestQueueingHintsRequeueOnlyForEventsThatMayHelp(t *testing.T) {
	ours := test.Node("a").Labels(stevedorev1.LabelNodePool, "np").Obj()
	theirs := test.Node("b").Obj()
	bound := test.Pod("bound").Node("a").Obj()
	unbound := test.Pod("unbound").Pending().Obj()
	pending := test.Pod("pending").Pending().Obj()
	for _, tc := range []struct {
		name string
		fn   fwk.QueueingHintFn
		old  any
		new  any
		want fwk.QueueingHint
	}{
		{"a node Stevedore launched", (&Provisioner{}).onStevedoreNode, nil, ours, fwk.Queue},
		{"another node", (&Provisioner{}).onStevedoreNode, nil, theirs, fwk.QueueSkip},
		{"a bound pod leaving", fromStevedoreNode, bound, nil, fwk.Queue},
		{"an unbound pod leaving", fromStevedoreNode, unbound, nil, fwk.QueueSkip},
	} {
		got, err := tc.fn(klog.Background(), pending, tc.old, tc.new)
		if err != nil || got != tc.want {
			t.Errorf("%s: %v %v, want %v", tc.name, got, err, tc.want)
		}
	}
	if _, err := (&Provisioner{}).onStevedoreNode(klog.Background(), pending, nil, "not a node"); err == nil {
		t.Error("a wrong object type is not an error")
	}
}

// TestTheSchedulingQueueRetriesHeldPodsOnlyOnEventsThatMayHelp parks a pod the plugin refused in kube-scheduler's
// real scheduling queue, with the plugin's registered events and hints, and sends it cluster events.
func TestTheSchedulingQueueRetriesHeldPodsOnlyOnEventsThatMayHelp(t *testing.T) {
	schedmetrics.Register()
	ours := test.Node("a").Labels(stevedorev1.LabelNodePool, "np").Obj()
	theirs := test.Node("b").Obj()
	for _, tc := range []struct {
		name     string
		event    fwk.ClusterEvent
		old, new any
		retried  bool
	}{
		{"a node Stevedore launched registers", fwk.ClusterEvent{Resource: fwk.Node, ActionType: fwk.Add}, nil, ours, true},
		{"a node Stevedore launched loses a taint", fwk.ClusterEvent{Resource: fwk.Node, ActionType: fwk.UpdateNodeTaint}, ours, ours, true},
		{"a node Stevedore launched is labelled initialized", fwk.ClusterEvent{Resource: fwk.Node, ActionType: fwk.UpdateNodeLabel}, ours, ours, true},
		{"another node registers", fwk.ClusterEvent{Resource: fwk.Node, ActionType: fwk.Add}, nil, theirs, false},
		{"a bound pod is deleted", fwk.ClusterEvent{Resource: fwk.AssignedPod, ActionType: fwk.Delete}, test.Pod("x").Node("a").Obj(), nil, true},
		{"a node's allocatable changes (not an event the plugin registers)", fwk.ClusterEvent{Resource: fwk.Node, ActionType: fwk.UpdateNodeAllocatable}, ours, ours, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := t.Context()
			logger := klog.FromContext(ctx)
			events, err := (&Provisioner{}).EventsToRegister(ctx)
			if err != nil {
				t.Fatal(err)
			}
			hints := internalqueue.QueueingHintMap{}
			for _, e := range events {
				hints[e.Event] = append(hints[e.Event], &internalqueue.QueueingHintFunction{PluginName: Name, QueueingHintFn: e.QueueingHintFn})
			}
			q := internalqueue.NewTestQueue(ctx, func(a, b fwk.QueuedEntityInfo) bool { return a.GetTimestamp().Before(b.GetTimestamp()) },
				internalqueue.WithQueueingHintMapPerProfile(internalqueue.QueueingHintMapPerProfile{"stevedore": hints}))
			pod := test.Pod("held").Pending().Obj()
			q.Add(ctx, pod)
			entity, err := q.Pop(logger)
			if err != nil {
				t.Fatal(err)
			}
			pInfo := entity.(*framework.QueuedPodInfo)
			pInfo.UnschedulablePlugins = sets.New(Name)
			if err := q.AddUnschedulablePodIfNotPresent(logger, pInfo, q.SchedulingCycle()); err != nil {
				t.Fatal(err)
			}
			q.MoveAllToActiveOrBackoffQueue(logger, tc.event, tc.old, tc.new, nil)
			parked := len(q.UnschedulablePods()) == 1
			if parked == tc.retried {
				t.Errorf("after the event the pod is parked: %v, want retried: %v", parked, tc.retried)
			}
		})
	}
}
