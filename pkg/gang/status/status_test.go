/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package status

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	clocktesting "k8s.io/utils/clock/testing"

	schedv1alpha1 "github.com/stevedore-dev/stevedore/pkg/apis/scheduling/v1alpha1"
	"github.com/stevedore-dev/stevedore/pkg/generated/clientset/versioned/fake"
	schedlisters "github.com/stevedore-dev/stevedore/pkg/generated/listers/scheduling/v1alpha1"
)

var now = time.Date(2026, 12, 2, 8, 0, 0, 0, time.UTC)

func pod(name string, phase corev1.PodPhase) *corev1.Pod {
	yes := true
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: name, UID: types.UID(name),
		Labels:          map[string]string{schedv1alpha1.PodGroupLabel: "train"},
		OwnerReferences: []metav1.OwnerReference{{Kind: "Job", Name: "train", Controller: &yes}}},
		Status: corev1.PodStatus{Phase: phase}}
}

func pods(phases ...corev1.PodPhase) []*corev1.Pod {
	var out []*corev1.Pod
	for i, ph := range phases {
		out = append(out, pod(string(rune('a'+i)), ph))
	}
	return out
}

func TestComputeFollowsTheGangsPods(t *testing.T) {
	started := metav1.NewTime(now.Add(-time.Hour))
	const (
		pending   = corev1.PodPending
		running   = corev1.PodRunning
		succeeded = corev1.PodSucceeded
		failed    = corev1.PodFailed
	)
	for _, tc := range []struct {
		name  string
		pods  []*corev1.Pod
		start metav1.Time
		want  schedv1alpha1.PodGroupStatus
	}{
		{name: "too few pods", pods: pods(pending, pending),
			want: schedv1alpha1.PodGroupStatus{Phase: schedv1alpha1.PodGroupPending, OccupiedBy: "Job/train"}},
		{name: "enough pods, not all running", pods: pods(pending, running, pending),
			want: schedv1alpha1.PodGroupStatus{Phase: schedv1alpha1.PodGroupScheduling, Running: 1, OccupiedBy: "Job/train",
				ScheduleStartTime: metav1.NewTime(now)}},
		{name: "minMember running", pods: pods(running, running, running, pending), start: started,
			want: schedv1alpha1.PodGroupStatus{Phase: schedv1alpha1.PodGroupRunning, Running: 3, OccupiedBy: "Job/train", ScheduleStartTime: started}},
		{name: "running and succeeded count together", pods: pods(running, succeeded, succeeded), start: started,
			want: schedv1alpha1.PodGroupStatus{Phase: schedv1alpha1.PodGroupRunning, Running: 1, Succeeded: 2, OccupiedBy: "Job/train",
				ScheduleStartTime: started}},
		{name: "minMember succeeded", pods: pods(succeeded, succeeded, succeeded), start: started,
			want: schedv1alpha1.PodGroupStatus{Phase: schedv1alpha1.PodGroupFinished, Succeeded: 3, OccupiedBy: "Job/train",
				ScheduleStartTime: started}},
		{name: "a failure the rest cannot make up for", pods: pods(running, failed, running), start: started,
			want: schedv1alpha1.PodGroupStatus{Phase: schedv1alpha1.PodGroupFailed, Running: 2, Failed: 1, OccupiedBy: "Job/train",
				ScheduleStartTime: started}},
		{name: "pods of several owners", pods: append(pods(pending), &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: "bare",
			Labels: map[string]string{schedv1alpha1.PodGroupLabel: "train"}}}),
			want: schedv1alpha1.PodGroupStatus{Phase: schedv1alpha1.PodGroupPending}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pg := &schedv1alpha1.PodGroup{Spec: schedv1alpha1.PodGroupSpec{MinMember: 3}, Status: schedv1alpha1.PodGroupStatus{ScheduleStartTime: tc.start}}
			if diff := cmp.Diff(tc.want, Compute(pg, tc.pods, now)); diff != "" {
				t.Errorf("status (-want +got):\n%s", diff)
			}
		})
	}
}

func TestReconcileWritesOnlyWhatChanged(t *testing.T) {
	pg := &schedv1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: "train"}, Spec: schedv1alpha1.PodGroupSpec{MinMember: 2}}
	client := fake.NewSimpleClientset(pg)
	groups := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	podIdx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	for _, p := range pods(corev1.PodRunning, corev1.PodRunning) {
		if err := podIdx.Add(p); err != nil {
			t.Fatal(err)
		}
	}
	c := &Controller{opts: Options{Client: client, PodGroups: schedlisters.NewPodGroupLister(groups), Pods: corelisters.NewPodLister(podIdx),
		Clock: clocktesting.NewFakeClock(now)}}
	ctx := context.Background()
	for round := range 2 {
		// the lister shows what the API server has, as the informer would
		cur, err := client.CoschedulingV1alpha1().PodGroups("ml").Get(ctx, "train", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if err := groups.Update(cur); err != nil {
			t.Fatal(err)
		}
		client.ClearActions()
		if err := c.Reconcile(ctx, "ml/train"); err != nil {
			t.Fatal(err)
		}
		if writes := len(client.Actions()); writes != 1-round {
			t.Errorf("round %d: %d writes (%v), want %d", round, writes, client.Actions(), 1-round)
		}
	}
	got, err := client.CoschedulingV1alpha1().PodGroups("ml").Get(ctx, "train", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Status.Phase != schedv1alpha1.PodGroupRunning || got.Status.Running != 2 {
		t.Errorf("status %+v, want Running with 2 pods running", got.Status)
	}
	if err := c.Reconcile(ctx, "ml/gone"); err != nil {
		t.Errorf("a PodGroup gone: %v, want nothing to do", err)
	}
}
