/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package provisioner

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	internalqueue "k8s.io/kubernetes/pkg/scheduler/backend/queue"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	schedmetrics "k8s.io/kubernetes/pkg/scheduler/metrics"
	testingclock "k8s.io/utils/clock/testing"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/test"
)

func TestQueueingHintsRequeueOnlyForEventsThatMayHelp(t *testing.T) {
	bound := test.Pod("bound").Node("a").Obj()
	unbound := test.Pod("unbound").Pending().Obj()
	pending := test.Pod("pending").Pending().Obj()
	awaiting := &Provisioner{shared: &Shared{prov: awaitBackend{waiting: sets.New(pending.UID)}}}
	awaitingOther := &Provisioner{shared: &Shared{prov: awaitBackend{waiting: sets.New[types.UID]("another")}}}
	for _, tc := range []struct {
		name string
		fn   fwk.QueueingHintFn
		old  any
		new  any
		want fwk.QueueingHint
	}{
		{"a bound pod leaving", (&Provisioner{}).boundPodDeleted, bound, nil, fwk.Queue},
		{"an unbound pod leaving", (&Provisioner{}).boundPodDeleted, unbound, nil, fwk.QueueSkip},
		{"a bound pod leaving, for a pod that waits for its planned node", awaiting.boundPodDeleted, bound, nil, fwk.QueueSkip},
		{"a bound pod leaving, for a pod that waits for nothing", awaitingOther.boundPodDeleted, bound, nil, fwk.Queue},
	} {
		got, err := tc.fn(klog.Background(), pending, tc.old, tc.new)
		if err != nil || got != tc.want {
			t.Errorf("%s: %v %v, want %v", tc.name, got, err, tc.want)
		}
	}
	if _, err := (&Provisioner{}).boundPodDeleted(klog.Background(), pending, "not a pod", nil); err == nil {
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
		// the provisioner wakes the pods a node of its own helps (Activate): the queue need not weigh them all
		{"a node Stevedore launched registers", fwk.ClusterEvent{Resource: fwk.Node, ActionType: fwk.Add}, nil, ours, false},
		{"a node Stevedore launched is labelled initialized", fwk.ClusterEvent{Resource: fwk.Node, ActionType: fwk.UpdateNodeLabel}, ours, ours, false},
		{"another node registers", fwk.ClusterEvent{Resource: fwk.Node, ActionType: fwk.Add}, nil, theirs, false},
		{"a bound pod is deleted", fwk.ClusterEvent{Resource: fwk.AssignedPod, ActionType: fwk.Delete}, test.Pod("x").Node("a").Obj(), nil, true},
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

// awaitBackend answers AwaitsNode from a set; the rest of Backend is not used by the hint.
type awaitBackend struct {
	Backend
	waiting sets.Set[types.UID]
}

func (b awaitBackend) AwaitsNode(pod *corev1.Pod) bool { return b.waiting.Has(pod.UID) }

// readyBackend answers NodeReadyFor from a set; the rest of Backend is not used by the queue's order.
type readyBackend struct {
	Backend
	ready sets.Set[types.UID]
}

func (b readyBackend) NodeReadyFor(uid types.UID) bool { return b.ready.Has(uid) }

// TestTheQueueTakesPodsWhoseNodeIsReadyBeforePodsNotTriedYet fills kube-scheduler's real scheduling queue, ordered
// by ReadyNodeFirst, and pops it: priority first, then the pods planned on a ready node, then arrival.
func TestTheQueueTakesPodsWhoseNodeIsReadyBeforePodsNotTriedYet(t *testing.T) {
	schedmetrics.Register()
	ctx := t.Context()
	logger := klog.FromContext(ctx)
	clk := testingclock.NewFakeClock(time.Now())
	ready := test.Pod("ready").Pending().Obj()
	ready.UID = "ready-uid"
	later := test.Pod("ready-later").Pending().Obj()
	later.UID = "ready-later-uid"
	plugin := &ReadyNodeFirst{shared: &Shared{prov: readyBackend{ready: sets.New(ready.UID, later.UID)}}}
	q := internalqueue.NewTestQueue(ctx, plugin.Less, internalqueue.WithClock(clk))
	urgent := test.Pod("urgent").Pending().Priority(10).Obj()
	for _, pod := range []*corev1.Pod{test.Pod("untried-1").Pending().Obj(), test.Pod("untried-2").Pending().Obj(), ready,
		test.Pod("planned-not-ready").Pending().Obj(), later, urgent} {
		q.Add(ctx, pod)
		clk.Step(time.Second)
	}
	var got []string
	for range 6 {
		entity, err := q.Pop(logger)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, entity.(*framework.QueuedPodInfo).Pod.Name)
	}
	want := []string{"urgent", "ready", "ready-later", "untried-1", "untried-2", "planned-not-ready"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("pop order (-want +got):\n%s", diff)
	}
	// without a backend (before it is built) the order is PrioritySort's, and nothing panics
	info := func(pod *corev1.Pod) *framework.QueuedPodInfo {
		return &framework.QueuedPodInfo{PodInfo: &framework.PodInfo{Pod: pod}}
	}
	if (&ReadyNodeFirst{}).Less(info(later), info(test.Pod("x").Pending().Obj())) {
		t.Error("Less without a backend put a pod first for its node")
	}
}
