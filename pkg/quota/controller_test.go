/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package quota

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	autoscalingv1beta1 "github.com/stevedore-dev/stevedore/pkg/apis/autoscaling/v1beta1"
	"github.com/stevedore-dev/stevedore/pkg/state"
)

func TestLimitReached(t *testing.T) {
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	cq := &autoscalingv1beta1.CapacityQuota{Spec: autoscalingv1beta1.CapacityQuotaSpec{Limits: autoscalingv1beta1.CapacityQuotaLimits{
		Resources: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("16"), "nodes": resource.MustParse("4")}}}}
	used := func(cpu, nodes string) corev1.ResourceList {
		return corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), "nodes": resource.MustParse(nodes)}
	}
	for _, tc := range []struct {
		name    string
		used    corev1.ResourceList
		last    state.QuotaReached
		status  metav1.ConditionStatus
		reason  string
		message string
	}{
		{"room left", used("8", "2"), state.QuotaReached{}, metav1.ConditionFalse, ReasonWithinLimits, "room left in every limit"},
		{"a node kept from launching just now", used("14", "3"), state.QuotaReached{At: now.Add(-10 * time.Second), Resource: "cpu"},
			metav1.ConditionTrue, ReasonLaunchLimited, "kept a node from launching: not enough cpu left"},
		{"a node kept from launching long ago", used("14", "3"), state.QuotaReached{At: now.Add(-ReachedFor), Resource: "cpu"},
			metav1.ConditionFalse, ReasonWithinLimits, "room left in every limit"},
		{"every CPU used", used("16", "4"), state.QuotaReached{}, metav1.ConditionTrue, ReasonAtLimit, "the selected nodes use cpu 16 of 16, nodes 4 of 4"},
		{"over the limit (nodes added by hand)", used("20", "3"), state.QuotaReached{}, metav1.ConditionTrue, ReasonAtLimit, "the selected nodes use cpu 20 of 16"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cond := condition(cq, tc.used, tc.last, now)
			if cond.Status != tc.status || cond.Reason != tc.reason || cond.Message != tc.message {
				t.Errorf("LimitReached = %s/%s %q, want %s/%s %q", cond.Status, cond.Reason, cond.Message, tc.status, tc.reason, tc.message)
			}
		})
	}
}

func TestAStatusAlreadyWrittenIsNotWrittenAgain(t *testing.T) {
	want := autoscalingv1beta1.CapacityQuotaStatus{ObservedGeneration: 2,
		Used: &autoscalingv1beta1.CapacityQuotaUsage{Resources: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8")}},
		Conditions: []metav1.Condition{{Type: autoscalingv1beta1.ConditionLimitReached, Status: metav1.ConditionFalse, Reason: ReasonWithinLimits,
			Message: "room left in every limit"}}}
	have := *want.DeepCopy()
	have.Conditions[0].ObservedGeneration, have.Conditions[0].LastTransitionTime = 2, metav1.Now()
	// another writer's condition is kept and ignored
	have.Conditions = append(have.Conditions, metav1.Condition{Type: "cluster-autoscaler.kubernetes.io/valid", Status: metav1.ConditionTrue})
	if !sameStatus(have, want) {
		t.Error("the status as written reads as different")
	}
	changed := *want.DeepCopy()
	changed.Used.Resources[corev1.ResourceCPU] = resource.MustParse("12")
	if sameStatus(have, changed) {
		t.Error("a different usage reads as the same status")
	}
	regenerated := *want.DeepCopy()
	regenerated.ObservedGeneration = 3
	if sameStatus(have, regenerated) {
		t.Error("a new generation reads as the same status")
	}
}
