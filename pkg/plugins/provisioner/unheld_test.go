/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package provisioner

import (
	"context"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/tools/cache"
	featuregatetesting "k8s.io/component-base/featuregate/testing"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/features"
	internalqueue "k8s.io/kubernetes/pkg/scheduler/backend/queue"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	schedmetrics "k8s.io/kubernetes/pkg/scheduler/metrics"

	"github.com/stevedore-dev/stevedore/pkg/test"
)

func pod(name, uid string) *corev1.Pod {
	p := test.Pod(name).Pending().Obj()
	p.UID = types.UID(uid)
	return p
}

func bound(p *corev1.Pod) *corev1.Pod {
	p = p.DeepCopy()
	p.Spec.NodeName = "node"
	return p
}

func names(u *unheldPods) []string {
	var got []string
	for _, n := range u.Pods() {
		got = append(got, n.Name)
	}
	slices.Sort(got)
	return got
}

// TestUnheldPodsAreThePendingPodsPreEnqueueDidNotHold plays, in every order the pod informer and the scheduling
// queue (PreEnqueue) may deliver them, what happens to pods, and checks the pods left to weigh.
func TestUnheldPodsAreThePendingPodsPreEnqueueDidNotHold(t *testing.T) {
	a, a2, b := pod("a", "a-1"), pod("a", "a-2"), pod("b", "b-1")
	for _, tc := range []struct {
		name  string
		steps func(u *unheldPods, h cache.ResourceEventHandler)
		want  []string
	}{
		{"seen, then held", func(u *unheldPods, h cache.ResourceEventHandler) { h.OnAdd(a, false); u.Held(a) }, nil},
		{"held, then seen", func(u *unheldPods, h cache.ResourceEventHandler) { u.Held(a); h.OnAdd(a, false) }, nil},
		{"held, updated, then let in", func(u *unheldPods, h cache.ResourceEventHandler) {
			u.Held(a)
			h.OnUpdate(a, a)
			u.Passed(a)
		}, []string{"a"}},
		{"let in before the informer tells", func(u *unheldPods, _ cache.ResourceEventHandler) { u.Passed(a) }, []string{"a"}},
		{"a pod no PreEnqueue of the plugin saw (another profile, an earlier gate)", func(_ *unheldPods, h cache.ResourceEventHandler) {
			h.OnAdd(b, false)
		}, []string{"b"}},
		{"bound", func(u *unheldPods, h cache.ResourceEventHandler) { u.Passed(a); h.OnUpdate(a, bound(a)) }, nil},
		{"deleted while held", func(u *unheldPods, h cache.ResourceEventHandler) {
			u.Held(a)
			h.OnDelete(a)
			h.OnAdd(b, false)
		}, []string{"b"}},
		{"deleted, as the informer's tombstone", func(u *unheldPods, h cache.ResourceEventHandler) {
			h.OnAdd(a, false)
			h.OnDelete(cache.DeletedFinalStateUnknown{Key: "default/a", Obj: a})
		}, nil},
		{"recreated under its name, let in before the old one's deletion is told", func(u *unheldPods, h cache.ResourceEventHandler) {
			h.OnAdd(a, false)
			u.Passed(a2)
			h.OnDelete(a)
		}, []string{"a"}},
		{"recreated under its name and held before the old one's deletion is told", func(u *unheldPods, h cache.ResourceEventHandler) {
			u.Held(a)
			u.Held(a2)
			h.OnDelete(a)
			h.OnAdd(a2, false)
		}, nil},
		{"not a pod", func(_ *unheldPods, h cache.ResourceEventHandler) { h.OnAdd("nonsense", false) }, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u := newUnheldPods()
			tc.steps(u, u.Handler())
			if diff := cmp.Diff(tc.want, names(u)); diff != "" {
				t.Errorf("pods to weigh (-want +got):\n%s", diff)
			}
		})
	}
}

// TestSweepDropsThePodsThatAreGone checks the backstop for PreEnqueue running after the informer told of a pod's
// deletion: the pods no longer there, or bound, or there under another UID, are dropped; a failed read keeps them.
func TestSweepDropsThePodsThatAreGone(t *testing.T) {
	u := newUnheldPods()
	for _, p := range []*corev1.Pod{pod("gone", "1"), pod("bound", "2"), pod("replaced", "3"), pod("waiting", "4"), pod("unreadable", "5")} {
		u.Passed(p)
	}
	u.Held(pod("held-gone", "6"))
	u.Held(pod("held", "7"))
	now := map[string]*corev1.Pod{"bound": bound(pod("bound", "2")), "replaced": pod("replaced", "3b"), "waiting": pod("waiting", "4"),
		"held": pod("held", "7")}
	u.Sweep(func(name types.NamespacedName) (*corev1.Pod, error) {
		if name.Name == "unreadable" {
			return nil, context.DeadlineExceeded
		}
		if p, ok := now[name.Name]; ok {
			return p, nil
		}
		return nil, apierrors.NewNotFound(corev1.Resource("pods"), name.Name)
	})
	if diff := cmp.Diff([]string{"unreadable", "waiting"}, names(u)); diff != "" {
		t.Errorf("pods to weigh (-want +got):\n%s", diff)
	}
	if _, ok := u.held[types.NamespacedName{Namespace: "default", Name: "held"}]; !ok || len(u.held) != 1 {
		t.Errorf("held after the sweep: %v, want only default/held", u.held)
	}
}

// admitBackend holds, in Admit, the pods named in hold; the rest of Backend is not used by PreEnqueue.
type admitBackend struct {
	Backend
	hold sets.Set[string]
}

func (admitBackend) Hold(context.Context, *corev1.Pod) string { return "" }

func (b admitBackend) Admit(_ context.Context, pod *corev1.Pod) string {
	if b.hold.Has(pod.Name) {
		return "waiting for its node"
	}
	return ""
}

// TestTheQueueWeighsOnlyThePodsThePluginDoesNotHold runs kube-scheduler's real scheduling queue, with the
// SchedulerPreQueueingHints gate on, the plugin at PreEnqueue and its events, beside another plugin whose hint
// requeues every pod it refused at each node event and bind. A pod that plugin refused is retried at each such
// event; a pod the plugin holds stays held; and a pod the narrowing leaves out (the plugin believes it held) is
// not weighed at all, which shows the queue narrows.
func TestTheQueueWeighsOnlyThePodsThePluginDoesNotHold(t *testing.T) {
	featuregatetesting.SetFeatureGateDuringTest(t, utilfeature.DefaultFeatureGate, features.SchedulerPreQueueingHints, true)
	schedmetrics.Register()
	const other = "Other"
	for _, tc := range []struct {
		name     string
		event    fwk.ClusterEvent
		old, new any
	}{
		{"a node registers", fwk.ClusterEvent{Resource: fwk.Node, ActionType: fwk.Add}, nil, test.Node("n").Obj()},
		{"a node's labels change", fwk.ClusterEvent{Resource: fwk.Node, ActionType: fwk.UpdateNodeLabel}, test.Node("n").Obj(), test.Node("n").Obj()},
		{"a pod binds", fwk.ClusterEvent{Resource: fwk.AssignedPod, ActionType: fwk.Add}, nil, test.Pod("x").Node("n").Obj()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := t.Context()
			logger := klog.FromContext(ctx)
			unheld := newUnheldPods()
			plugin := &Provisioner{shared: &Shared{prov: admitBackend{hold: sets.New("held")}, unheld: unheld}}
			events, err := plugin.EventsToRegister(ctx)
			if err != nil {
				t.Fatal(err)
			}
			hints := internalqueue.QueueingHintMap{}
			for _, e := range events {
				hints[e.Event] = append(hints[e.Event], &internalqueue.QueueingHintFunction{PluginName: Name, QueueingHintFn: e.QueueingHintFn,
					PreQueueingHintFn: e.PreQueueingHintFn})
			}
			requeue := func(klog.Logger, *corev1.Pod, any, any) (fwk.QueueingHint, error) { return fwk.Queue, nil }
			for _, e := range []fwk.ClusterEvent{{Resource: fwk.Node, ActionType: fwk.All}, {Resource: fwk.AssignedPod, ActionType: fwk.All}} {
				hints[e] = append(hints[e], &internalqueue.QueueingHintFunction{PluginName: other, QueueingHintFn: requeue})
			}
			q := internalqueue.NewTestQueue(ctx, func(a, b fwk.QueuedEntityInfo) bool { return a.GetTimestamp().Before(b.GetTimestamp()) },
				internalqueue.WithQueueingHintMapPerProfile(internalqueue.QueueingHintMapPerProfile{"stevedore": hints}),
				internalqueue.WithPreEnqueuePluginMap(map[string]map[string]fwk.PreEnqueuePlugin{"stevedore": {Name: plugin}}))
			park := func(p *corev1.Pod) {
				q.Add(ctx, p)
				entity, err := q.Pop(logger)
				if err != nil {
					t.Fatal(err)
				}
				pInfo := entity.(*framework.QueuedPodInfo)
				pInfo.UnschedulablePlugins = sets.New(other)
				if err := q.AddUnschedulablePodIfNotPresent(logger, pInfo, q.SchedulingCycle()); err != nil {
					t.Fatal(err)
				}
			}
			for _, name := range []string{"held", "refused", "left-out"} {
				p := test.Pod(name).Pending().Obj()
				p.Spec.SchedulerName = "stevedore"
				p.UID = types.UID(name)
				if name == "held" {
					q.Add(ctx, p) // PreEnqueue holds it
					continue
				}
				park(p)
				if name == "left-out" {
					unheld.Held(p)
				}
			}
			q.MoveAllToActiveOrBackoffQueue(logger, tc.event, tc.old, tc.new, nil)
			var parked []string
			for _, p := range q.UnschedulablePods() {
				parked = append(parked, p.Name)
			}
			slices.Sort(parked)
			if diff := cmp.Diff([]string{"held", "left-out"}, parked); diff != "" {
				t.Errorf("pods parked after the event (-want +got):\n%s", diff)
			}
		})
	}
}

func TestEventsToRegisterNarrowOnlyWithTheGate(t *testing.T) {
	for _, tc := range []struct {
		name   string
		plugin *Provisioner
		want   []string
	}{
		{"gate off", &Provisioner{shared: &Shared{}}, []string{"AssignedPodDelete"}},
		{"gate on", &Provisioner{shared: &Shared{unheld: newUnheldPods()}}, []string{"AssignedPodAdd (narrowed)", "AssignedPodDelete", "Node (narrowed)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			events, err := tc.plugin.EventsToRegister(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, e := range events {
				label := e.Event.Label()
				if e.PreQueueingHintFn != nil {
					label += " (narrowed)"
				}
				got = append(got, label)
			}
			slices.Sort(got)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
		})
	}
}
