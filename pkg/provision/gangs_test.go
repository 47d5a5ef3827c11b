/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package provision

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	schedv1alpha1 "github.com/stevedore-dev/stevedore/pkg/apis/scheduling/v1alpha1"
	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/gang"
	"github.com/stevedore-dev/stevedore/pkg/solver/simulation"
	"github.com/stevedore-dev/stevedore/pkg/test"
)

// A gang's batch takes its pending members along, and is planned whole or not at all.
func TestGangsArePlannedWholeWithTheirPendingMembers(t *testing.T) {
	// m5.xlarge nodes (4 vCPUs), at most three: one 3-CPU worker each
	pool := test.NodePool("workers").Obj()
	pool.Spec.Template.Spec.Requirements = []stevedorev1.NodeSelectorRequirementWithMinValues{
		{Key: corev1.LabelInstanceTypeStable, Operator: "In", Values: []string{"m5.xlarge"}}}
	pool.Spec.Limits = stevedorev1.Limits{corev1.ResourceCPU: resource.MustParse("12")}
	worker := func(name string) *corev1.Pod {
		return test.Pod(name).Pending().Req("cpu", "3").Labels(schedv1alpha1.PodGroupLabel, "train").Obj()
	}
	train := func(minMember int32) test.PodGroups {
		return test.PodGroups{{Namespace: "default", Name: "train"}: {Spec: schedv1alpha1.PodGroupSpec{MinMember: minMember}}}
	}
	tests := []struct {
		name    string
		groups  test.PodGroups
		batch   []*corev1.Pod
		pending []*corev1.Pod
		// wantPlanned are the pods planned; wantReason a part of the reason the others are given
		wantPlanned []string
		wantReason  string
	}{
		{name: "the member the scheduler has not tried yet joins the batch", groups: train(3),
			batch: []*corev1.Pod{worker("w0"), worker("w1")}, pending: []*corev1.Pod{worker("w2")},
			wantPlanned: []string{"w0", "w1", "w2"}},
		{name: "room for three of four: none", groups: train(4),
			batch: []*corev1.Pod{worker("w0"), worker("w1")}, pending: []*corev1.Pod{worker("w2"), worker("w3")},
			wantReason: "gang default/train needs 4 pods placed at once and only 3 can be"},
		{name: "no PodGroup: none", groups: test.PodGroups{}, batch: []*corev1.Pod{worker("w0")},
			wantReason: "PodGroup default/train (label scheduling.x-k8s.io/pod-group of the pod) does not exist"},
		{name: "PodGroups not served: none", batch: []*corev1.Pod{worker("w0")},
			wantReason: "the cluster does not serve PodGroups"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			objs := []runtime.Object{pool}
			all := append(append([]*corev1.Pod(nil), tc.batch...), tc.pending...)
			for _, pod := range all {
				objs = append(objs, pod)
			}
			h := newSolvingHarness(t, objs...)
			if tc.groups != nil {
				h.prov.opts.Gangs = tc.groups
			}
			if err := h.prov.solveBatch(h.Ctx, tc.batch); err != nil {
				t.Fatal(err)
			}
			var planned []string
			for _, pod := range all {
				if _, ok := h.prov.plans.ClaimOf(pod.UID); ok {
					planned = append(planned, pod.Name)
					continue
				}
				if why := h.prov.refused.byPod[pod.UID].reason; tc.wantReason != "" && !strings.Contains(why, tc.wantReason) &&
					contains(tc.batch, pod) {
					t.Errorf("pod %s: reason %q, want it to say %q", pod.Name, why, tc.wantReason)
				}
			}
			if diff := cmp.Diff(tc.wantPlanned, planned); diff != "" {
				t.Errorf("pods planned (-want +got):\n%s", diff)
			}
		})
	}
}

func contains(pods []*corev1.Pod, pod *corev1.Pod) bool {
	for _, p := range pods {
		if p.UID == pod.UID {
			return true
		}
	}
	return false
}

// TestAGangsNodesOfOneShapeLaunchAsOneGroup: the NodeClaims of a gang's nodes of one shape carry one launch group
// of their number, for an all-or-nothing fleet; nodes of plain pods and a gang that fits one node carry none.
func TestAGangsNodesOfOneShapeLaunchAsOneGroup(t *testing.T) {
	pool := test.NodePool("workers").Obj()
	pool.Spec.Template.Spec.Requirements = []stevedorev1.NodeSelectorRequirementWithMinValues{
		{Key: corev1.LabelInstanceTypeStable, Operator: "In", Values: []string{"m5.xlarge"}}}
	member := func(name, group, cpu string) *corev1.Pod {
		return test.Pod(name).Pending().Req("cpu", cpu).Labels(schedv1alpha1.PodGroupLabel, group).Obj()
	}
	batch := []*corev1.Pod{
		member("train-0", "train", "3"), member("train-1", "train", "3"), member("train-2", "train", "3"), member("train-3", "train", "3"),
		member("eval-0", "eval", "1"), member("eval-1", "eval", "1"),
		test.Pod("plain-0").Pending().Req("cpu", "3").Obj(), test.Pod("plain-1").Pending().Req("cpu", "3").Obj(),
	}
	objs := []runtime.Object{pool}
	for _, pod := range batch {
		objs = append(objs, pod)
	}
	h := newSolvingHarness(t, objs...)
	h.prov.opts.Gangs = test.PodGroups{
		{Namespace: "default", Name: "train"}: {Spec: schedv1alpha1.PodGroupSpec{MinMember: 4}},
		{Namespace: "default", Name: "eval"}:  {Spec: schedv1alpha1.PodGroupSpec{MinMember: 2}},
	}
	if err := h.prov.solveBatch(h.Ctx, batch); err != nil {
		t.Fatal(err)
	}
	claims, err := h.prov.opts.Stevedore.StevedoreV1().NodeClaims().List(h.Ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// the launch group of each pod's NodeClaim
	groupOf := map[string]string{}
	for _, c := range claims.Items {
		for _, pod := range strings.Split(c.Annotations[stevedorev1.AnnotationPlannedPods], ",") {
			groupOf[strings.TrimPrefix(pod, "default/")] = c.Annotations[stevedorev1.AnnotationLaunchGroup]
		}
	}
	if len(groupOf) != len(batch) {
		t.Fatalf("%d pods planned, want %d: %v", len(groupOf), len(batch), groupOf)
	}
	train := groupOf["train-0"]
	if id, size, ok := (&stevedorev1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{
		stevedorev1.AnnotationLaunchGroup: train}}}).LaunchGroup(); !ok || size != 4 || id == "" {
		t.Errorf("train's launch group %q, want an id and size 4", train)
	}
	for _, name := range []string{"train-1", "train-2", "train-3"} {
		if groupOf[name] != train {
			t.Errorf("%s in launch group %q, want train-0's %q", name, groupOf[name], train)
		}
	}
	for _, name := range []string{"eval-0", "eval-1", "plain-0", "plain-1"} {
		if groupOf[name] != "" {
			t.Errorf("%s in launch group %q, want none", name, groupOf[name])
		}
	}
}

// TestWorkloadAPIGangsArePlannedWhole: pods whose spec.schedulingGroup names a Workload API PodGroup of the gang
// policy are planned whole or not at all, as coscheduling gangs are; the basic policy plans them one by one.
func TestWorkloadAPIGangsArePlannedWhole(t *testing.T) {
	// m5.xlarge nodes (4 vCPUs), at most three: one 3-CPU worker each
	pool := test.NodePool("workers").Obj()
	pool.Spec.Template.Spec.Requirements = []stevedorev1.NodeSelectorRequirementWithMinValues{
		{Key: corev1.LabelInstanceTypeStable, Operator: "In", Values: []string{"m5.xlarge"}}}
	pool.Spec.Limits = stevedorev1.Limits{corev1.ResourceCPU: resource.MustParse("12")}
	group := "train"
	worker := func(name string) *corev1.Pod {
		p := test.Pod(name).Pending().Req("cpu", "3").Obj()
		p.Spec.SchedulingGroup = &corev1.PodSchedulingGroup{PodGroupName: &group}
		return p
	}
	key := gang.Key{API: gang.Workload, Namespace: "default", Name: "train"}
	withPolicy := func(policy schedulingv1beta1.PodGroupSchedulingPolicy) test.WorkloadPodGroups {
		return test.WorkloadPodGroups{key: {Spec: schedulingv1beta1.PodGroupSpec{SchedulingPolicy: policy}}}
	}
	gangOf := func(minCount int32) test.WorkloadPodGroups {
		return withPolicy(schedulingv1beta1.PodGroupSchedulingPolicy{Gang: &schedulingv1beta1.GangSchedulingPolicy{MinCount: minCount}})
	}
	batch := []*corev1.Pod{worker("w0"), worker("w1"), worker("w2"), worker("w3")}
	for _, tc := range []struct {
		name        string
		groups      gang.WorkloadGroups
		wantPlanned int
		wantReason  string
	}{
		{name: "minCount 4, room for three: none", groups: gangOf(4), wantReason: "gang default/train needs 4 pods placed at once and only 3 can be"},
		{name: "minCount 3, room for three: three", groups: gangOf(3), wantPlanned: 3},
		{name: "the basic policy: each pod on its own", groups: withPolicy(schedulingv1beta1.PodGroupSchedulingPolicy{Basic: &schedulingv1beta1.BasicSchedulingPolicy{}}),
			wantPlanned: 3},
		{name: "no PodGroup: none", groups: test.WorkloadPodGroups{}, wantReason: "PodGroup default/train (spec.schedulingGroup of the pod, scheduling.k8s.io/v1beta1) does not exist"},
		{name: "the Workload API not served: none", wantReason: "the cluster does not serve PodGroups (scheduling.k8s.io/v1beta1)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs := []runtime.Object{pool}
			pods := make([]*corev1.Pod, len(batch))
			for i, pod := range batch {
				pods[i] = pod.DeepCopy()
				objs = append(objs, pods[i])
			}
			h := newSolvingHarness(t, objs...)
			if tc.groups != nil {
				h.prov.opts.WorkloadGroups = tc.groups
			}
			if err := h.prov.solveBatch(h.Ctx, pods); err != nil {
				t.Fatal(err)
			}
			planned := 0
			for _, pod := range pods {
				if _, ok := h.prov.plans.ClaimOf(pod.UID); ok {
					planned++
					continue
				}
				if why := h.prov.refused.byPod[pod.UID].reason; tc.wantReason != "" && !strings.Contains(why, tc.wantReason) {
					t.Errorf("pod %s: reason %q, want it to say %q", pod.Name, why, tc.wantReason)
				}
			}
			if planned != tc.wantPlanned {
				t.Errorf("%d pods planned, want %d", planned, tc.wantPlanned)
			}
		})
	}
}

// newSolvingHarness is a harness whose provisioner solves with a real simulator (the scheduler's Filter plugins).
func newSolvingHarness(t *testing.T, objs ...runtime.Object) *harness {
	t.Helper()
	h := newHarness(t, objs...)
	sim, err := simulation.New(context.Background(), simulation.NewSnapshot(), simulation.Options{})
	if err != nil {
		t.Fatal(err)
	}
	h.prov.opts.Simulator, h.prov.planner.sim, h.prov.opts.SchedulerName = sim, sim, "stevedore"
	return h
}
