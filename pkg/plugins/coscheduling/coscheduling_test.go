/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package coscheduling

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	schedcache "k8s.io/kubernetes/pkg/scheduler/backend/cache"

	schedv1alpha1 "github.com/stevedore-dev/stevedore/pkg/apis/scheduling/v1alpha1"
	"github.com/stevedore-dev/stevedore/pkg/gang"
	"github.com/stevedore-dev/stevedore/pkg/test"
)

// fakeHandle is the part of the framework's handle the plugin uses: the snapshot, the pods waiting at Permit and
// the event recorder.
type fakeHandle struct {
	fwk.Handle
	snapshot *schedcache.Snapshot
	waiting  []*fakeWaiting
	recorder *events.FakeRecorder
}

func (h *fakeHandle) SnapshotSharedLister() fwk.SharedLister    { return h.snapshot }
func (h *fakeHandle) EventRecorder() events.EventRecorderLogger { return h.recorder }
func (h *fakeHandle) IterateOverWaitingPods(f func(fwk.WaitingPod)) {
	for _, w := range h.waiting {
		f(w)
	}
}

// fakeWaiting is a pod waiting at Permit that records what it was told.
type fakeWaiting struct {
	fwk.WaitingPod
	pod    *v1.Pod
	answer string
}

func (w *fakeWaiting) GetPod() *v1.Pod { return w.pod }
func (w *fakeWaiting) Allow(string)    { w.answer = "allowed" }
func (w *fakeWaiting) Reject(_, msg string) bool {
	w.answer = "rejected: " + msg
	return true
}

func member(name, group string, mutate ...func(*v1.Pod)) *v1.Pod {
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: name, UID: types.UID(name), Labels: map[string]string{}}}
	if group != "" {
		p.Labels[schedv1alpha1.PodGroupLabel] = group
	}
	for _, m := range mutate {
		m(p)
	}
	return p
}

// bound puts a pod on node n1.
func bound(p *v1.Pod) { p.Spec.NodeName = "n1" }

// train is PodGroup ml/train of minMember 3.
func train(timeout *int32) *schedv1alpha1.PodGroup {
	return &schedv1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: "train"},
		Spec: schedv1alpha1.PodGroupSpec{MinMember: 3, ScheduleTimeoutSeconds: timeout}}
}

func podLister(t *testing.T, pods ...*v1.Pod) corelisters.PodLister {
	t.Helper()
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	for _, p := range pods {
		if err := idx.Add(p); err != nil {
			t.Fatal(err)
		}
	}
	return corelisters.NewPodLister(idx)
}

func TestPreEnqueueHoldsAGangUntilItsPodGroupAndMinMemberPodsExist(t *testing.T) {
	finished := func(p *v1.Pod) { p.Status.Phase = v1.PodSucceeded }
	for _, tc := range []struct {
		name   string
		groups gang.Groups
		pods   []*v1.Pod
		// want is a part of the status message ("" for success); wantEvent whether a warning is recorded
		want      string
		wantEvent bool
	}{
		{name: "a pod of no gang", groups: test.PodGroups{}, pods: []*v1.Pod{member("a", "")}},
		{name: "the cluster does not serve PodGroups", pods: []*v1.Pod{member("a", "train")},
			want: "the cluster does not serve PodGroups", wantEvent: true},
		{name: "no PodGroup", groups: test.PodGroups{}, pods: []*v1.Pod{member("a", "train")},
			want: "PodGroup ml/train (label scheduling.x-k8s.io/pod-group of the pod) does not exist", wantEvent: true},
		{name: "fewer pods than minMember, finished ones not counted",
			groups: test.PodGroups{{Namespace: "ml", Name: "train"}: train(nil)},
			pods:   []*v1.Pod{member("a", "train"), member("b", "train"), member("c", "train", finished), member("d", "other")},
			want:   "gang ml/train has 2 of the 3 pods (minMember) it needs to start scheduling"},
		{name: "minMember pods", groups: test.PodGroups{{Namespace: "ml", Name: "train"}: train(nil)},
			pods: []*v1.Pod{member("a", "train"), member("b", "train"), member("c", "train")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			recorder := events.NewFakeRecorder(10)
			c := &Coscheduling{handle: &fakeHandle{recorder: recorder}, groups: tc.groups, pods: podLister(t, tc.pods...),
				synced: func() bool { return true }, warned: map[types.UID]string{}}
			for range 2 { // asked twice, it warns once
				st := c.PreEnqueue(context.Background(), tc.pods[0])
				if tc.want == "" {
					if !st.IsSuccess() {
						t.Fatalf("PreEnqueue: %v, want success", st)
					}
					continue
				}
				if st.Code() != fwk.UnschedulableAndUnresolvable || !strings.Contains(st.Message(), tc.want) {
					t.Fatalf("PreEnqueue: %v, want UnschedulableAndUnresolvable saying %q", st, tc.want)
				}
			}
			if got := len(recorder.Events); got != map[bool]int{true: 1}[tc.wantEvent] {
				t.Errorf("%d events recorded, want one warning: %v", got, tc.wantEvent)
			}
		})
	}
}

func TestPermitLetsAGangBindOnlyWhole(t *testing.T) {
	ten := int32(10)
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}
	for _, tc := range []struct {
		name    string
		group   *schedv1alpha1.PodGroup
		placed  []*v1.Pod // in the scheduler's snapshot
		waiting []*v1.Pod
		pod     *v1.Pod
		// wantCode and wantTimeout are Permit's answer; wantAnswers what each waiting pod was told
		wantCode    fwk.Code
		wantTimeout time.Duration
		wantAnswers map[string]string
	}{
		{name: "a pod of no gang binds", group: train(nil), pod: member("x", ""), wantCode: fwk.Success},
		{name: "too few placed: wait the default timeout", group: train(nil),
			placed: []*v1.Pod{member("a", "train", bound)}, waiting: []*v1.Pod{member("a", "train")},
			pod: member("b", "train"), wantCode: fwk.Wait, wantTimeout: time.Minute, wantAnswers: map[string]string{"a": ""}},
		{name: "the PodGroup's timeout", group: train(&ten), pod: member("b", "train"), wantCode: fwk.Wait,
			wantTimeout: 10 * time.Second},
		{name: "the last one lets the waiting ones of its gang bind, not another gang's", group: train(nil),
			placed:  []*v1.Pod{member("a", "train", bound), member("b", "train", bound), member("o", "other", bound)},
			waiting: []*v1.Pod{member("a", "train"), member("b", "train"), member("o", "other")},
			pod:     member("c", "train"), wantCode: fwk.Success,
			wantAnswers: map[string]string{"a": "allowed", "b": "allowed", "o": ""}},
		{name: "finished members do not count", group: train(nil),
			placed: []*v1.Pod{member("a", "train", bound), member("b", "train", bound, func(p *v1.Pod) { p.Status.Phase = v1.PodFailed })},
			pod:    member("c", "train"), wantCode: fwk.Wait, wantTimeout: time.Minute},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := &fakeHandle{snapshot: schedcache.NewSnapshot(tc.placed, []*v1.Node{node})}
			for _, p := range tc.waiting {
				h.waiting = append(h.waiting, &fakeWaiting{pod: p})
			}
			c := &Coscheduling{handle: h, groups: test.PodGroups{{Namespace: "ml", Name: tc.group.Name}: tc.group}, synced: func() bool { return true }}
			st, timeout := c.Permit(context.Background(), nil, tc.pod, "n1")
			if st.Code() != tc.wantCode || timeout != tc.wantTimeout {
				t.Errorf("Permit = %v, %s; want %s, %s", st, timeout, tc.wantCode, tc.wantTimeout)
			}
			got := map[string]string{}
			for _, w := range h.waiting {
				got[w.pod.Name] = w.answer
			}
			if tc.wantAnswers == nil {
				tc.wantAnswers = map[string]string{}
			}
			if diff := cmp.Diff(tc.wantAnswers, got); diff != "" {
				t.Errorf("waiting pods were told (-want +got):\n%s", diff)
			}
		})
	}
}

func TestUnreserveSendsTheGangsWaitingPodsBack(t *testing.T) {
	h := &fakeHandle{}
	for _, p := range []*v1.Pod{member("a", "train"), member("b", "train"), member("o", "other")} {
		h.waiting = append(h.waiting, &fakeWaiting{pod: p})
	}
	c := &Coscheduling{handle: h}
	c.Unreserve(context.Background(), nil, member("c", "train"), "n1")
	got := map[string]string{}
	for _, w := range h.waiting {
		got[w.pod.Name] = w.answer
	}
	want := map[string]string{"a": "rejected: pod c of gang ml/train did not bind", "b": "rejected: pod c of gang ml/train did not bind", "o": ""}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("waiting pods were told (-want +got):\n%s", diff)
	}
}

func TestSameGangQueuesOnlyForAPodOfTheGang(t *testing.T) {
	for _, tc := range []struct {
		name       string
		pod, added *v1.Pod
		want       fwk.QueueingHint
	}{
		{name: "same gang", pod: member("a", "train"), added: member("b", "train"), want: fwk.Queue},
		{name: "another gang", pod: member("a", "train"), added: member("b", "other"), want: fwk.QueueSkip},
		{name: "no gang added", pod: member("a", "train"), added: member("b", ""), want: fwk.QueueSkip},
		{name: "same name, another namespace", pod: member("a", "train"), added: func() *v1.Pod {
			p := member("b", "train")
			p.Namespace = "other"
			return p
		}(), want: fwk.QueueSkip},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := sameGang(klog.Background(), tc.pod, nil, tc.added)
			if err != nil || got != tc.want {
				t.Errorf("sameGang = %v, %v; want %v", got, err, tc.want)
			}
		})
	}
}
