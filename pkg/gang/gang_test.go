/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package gang

import (
	"errors"
	"slices"
	"sort"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	schedv1alpha1 "github.com/stevedore-dev/stevedore/pkg/apis/scheduling/v1alpha1"
)

// groups answers Get with its PodGroup or its error.
type groups struct {
	pg  *schedv1alpha1.PodGroup
	err error
}

func (g groups) Get(Key) (*schedv1alpha1.PodGroup, error) { return g.pg, g.err }

func TestOfAndLookup(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: "w0", Labels: map[string]string{schedv1alpha1.PodGroupLabel: "train"}}}
	key, ok := Of(pod)
	if !ok || key != (Key{Namespace: "ml", Name: "train"}) || key.String() != "ml/train" {
		t.Fatalf("Of = %v, %v; want ml/train", key, ok)
	}
	if _, ok := Of(&corev1.Pod{}); ok {
		t.Errorf("a pod without the label is in a gang")
	}
	train := &schedv1alpha1.PodGroup{}
	for _, tc := range []struct {
		name    string
		groups  Groups
		wantErr string
	}{
		{name: "found", groups: groups{pg: train}},
		{name: "not served", wantErr: "the cluster does not serve PodGroups"},
		{name: "not found", groups: groups{err: apierrors.NewNotFound(schedv1alpha1.Resource("podgroups"), "train")},
			wantErr: "PodGroup ml/train (label scheduling.x-k8s.io/pod-group of the pod) does not exist"},
		{name: "another error", groups: groups{err: errors.New("boom")}, wantErr: "PodGroup ml/train: boom"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pg, err := Lookup(tc.groups, key)
			if tc.wantErr == "" {
				if err != nil || pg != train {
					t.Errorf("Lookup = %v, %v; want the PodGroup", pg, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("Lookup error %v, want it to say %q", err, tc.wantErr)
			}
		})
	}
}

func TestMinMemberIsAtLeastOne(t *testing.T) {
	for in, want := range map[int32]int{0: 1, 1: 1, 8: 8} {
		if got := MinMember(&schedv1alpha1.PodGroup{Spec: schedv1alpha1.PodGroupSpec{MinMember: in}}); got != want {
			t.Errorf("MinMember(%d) = %d, want %d", in, got, want)
		}
	}
}

// workloadGroups answers Get with its PodGroup or its error.
type workloadGroups struct {
	pg  *schedulingv1beta1.PodGroup
	err error
}

func (g workloadGroups) Get(Key) (*schedulingv1beta1.PodGroup, error) { return g.pg, g.err }

func inWorkloadGroup(name, group string, labels map[string]string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: name, Labels: labels},
		Spec: corev1.PodSpec{SchedulingGroup: &corev1.PodSchedulingGroup{PodGroupName: &group}}}
}

func TestOfReadsTheWorkloadAPIFirst(t *testing.T) {
	for _, tc := range []struct {
		name     string
		pod      *corev1.Pod
		want     Key
		wantOK   bool
		wantCosc bool // CoschedulingOf finds the label's gang
	}{
		{name: "spec.schedulingGroup", pod: inWorkloadGroup("w0", "train", nil), want: Key{API: Workload, Namespace: "ml", Name: "train"}, wantOK: true},
		{name: "both: the Workload API's group", pod: inWorkloadGroup("w0", "train", map[string]string{schedv1alpha1.PodGroupLabel: "old"}),
			want: Key{API: Workload, Namespace: "ml", Name: "train"}, wantOK: true, wantCosc: true},
		{name: "the label", pod: &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Labels: map[string]string{schedv1alpha1.PodGroupLabel: "old"}}},
			want: Key{API: Coscheduling, Namespace: "ml", Name: "old"}, wantOK: true, wantCosc: true},
		{name: "an empty schedulingGroup", pod: &corev1.Pod{Spec: corev1.PodSpec{SchedulingGroup: &corev1.PodSchedulingGroup{}}}},
		{name: "none", pod: &corev1.Pod{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key, ok := Of(tc.pod)
			if key != tc.want || ok != tc.wantOK {
				t.Errorf("Of = %+v, %v; want %+v, %v", key, ok, tc.want, tc.wantOK)
			}
			if _, ok := CoschedulingOf(tc.pod); ok != tc.wantCosc {
				t.Errorf("CoschedulingOf found a gang: %v, want %v", ok, tc.wantCosc)
			}
		})
	}
}

func TestNeedReadsBothAPIs(t *testing.T) {
	workload := Key{API: Workload, Namespace: "ml", Name: "train"}
	coscheduling := Key{API: Coscheduling, Namespace: "ml", Name: "train"}
	gangOf := func(minCount int32) *schedulingv1beta1.PodGroup {
		return &schedulingv1beta1.PodGroup{Spec: schedulingv1beta1.PodGroupSpec{SchedulingPolicy: schedulingv1beta1.PodGroupSchedulingPolicy{
			Gang: &schedulingv1beta1.GangSchedulingPolicy{MinCount: minCount}}}}
	}
	for _, tc := range []struct {
		name      string
		key       Key
		groups    Groups
		workloads WorkloadGroups
		want      int
		wantGang  bool
		wantErr   string
	}{
		{name: "coscheduling minMember", key: coscheduling, groups: groups{pg: &schedv1alpha1.PodGroup{Spec: schedv1alpha1.PodGroupSpec{MinMember: 4}}},
			want: 4, wantGang: true},
		{name: "coscheduling not served", key: coscheduling, workloads: workloadGroups{pg: gangOf(4)}, wantErr: "does not serve PodGroups (scheduling.x-k8s.io/v1alpha1)"},
		{name: "gang policy minCount", key: workload, workloads: workloadGroups{pg: gangOf(8)}, want: 8, wantGang: true},
		{name: "gang policy minCount 0 counts as 1", key: workload, workloads: workloadGroups{pg: gangOf(0)}, want: 1, wantGang: true},
		{name: "basic policy: no gang", key: workload, workloads: workloadGroups{pg: &schedulingv1beta1.PodGroup{Spec: schedulingv1beta1.PodGroupSpec{
			SchedulingPolicy: schedulingv1beta1.PodGroupSchedulingPolicy{Basic: &schedulingv1beta1.BasicSchedulingPolicy{}}}}}},
		{name: "Workload API not served", key: workload, groups: groups{pg: &schedv1alpha1.PodGroup{}},
			wantErr: "the pod is in PodGroup ml/train (spec.schedulingGroup) but the cluster does not serve PodGroups (scheduling.k8s.io/v1beta1)"},
		{name: "Workload PodGroup missing", key: workload, workloads: workloadGroups{err: apierrors.NewNotFound(schedulingv1beta1.Resource("podgroups"), "train")},
			wantErr: "PodGroup ml/train (spec.schedulingGroup of the pod, scheduling.k8s.io/v1beta1) does not exist"},
		{name: "Workload lister error", key: workload, workloads: workloadGroups{err: errors.New("boom")}, wantErr: "PodGroup ml/train: boom"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			need, isGang, err := Need(tc.groups, tc.workloads, tc.key)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Errorf("Need error %v, want it to say %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || need != tc.want || isGang != tc.wantGang {
				t.Errorf("Need = %d, %v, %v; want %d, %v", need, isGang, err, tc.want, tc.wantGang)
			}
		})
	}
}

func TestMembersFindsEachAPIsPods(t *testing.T) {
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	for _, p := range []*corev1.Pod{
		inWorkloadGroup("w0", "train", nil), inWorkloadGroup("w1", "train", nil), inWorkloadGroup("e0", "eval", nil),
		{ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: "c0", Labels: map[string]string{schedv1alpha1.PodGroupLabel: "train"}}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: "other", Name: "w9"}, Spec: inWorkloadGroup("w9", "train", nil).Spec},
		{ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: "plain"}},
	} {
		if err := indexer.Add(p); err != nil {
			t.Fatal(err)
		}
	}
	lister := corelisters.NewPodLister(indexer)
	for key, want := range map[Key][]string{
		{API: Workload, Namespace: "ml", Name: "train"}:     {"w0", "w1"},
		{API: Coscheduling, Namespace: "ml", Name: "train"}: {"c0"},
		{API: Workload, Namespace: "ml", Name: "none"}:      nil,
	} {
		pods, err := Members(lister, key)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, p := range pods {
			got = append(got, p.Name)
		}
		sort.Strings(got)
		if !slices.Equal(got, want) {
			t.Errorf("Members(%+v) = %v, want %v", key, got, want)
		}
	}
}
