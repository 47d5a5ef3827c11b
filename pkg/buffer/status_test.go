/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package buffer

import (
	"errors"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	autoscalingv1beta1 "github.com/stevedore-dev/stevedore/pkg/apis/autoscaling/v1beta1"
)

func TestSharedBuffersAreReadAsTheOtherAutoscalersReadThem(t *testing.T) {
	str := func(s string) *string { return &s }
	i32 := func(v int32) *int32 { return &v }
	c := &Controller{}
	for _, tc := range []struct {
		name       string
		spec       autoscalingv1beta1.CapacityBufferSpec
		served     bool
		wantGroup  string
		wantLarger bool
	}{
		{name: "no strategy is active capacity", spec: autoscalingv1beta1.CapacityBufferSpec{PodTemplateRef: &autoscalingv1beta1.LocalObjectRef{Name: "t"}, Replicas: i32(1)},
			served: true, wantLarger: true},
		{name: "empty strategy", spec: autoscalingv1beta1.CapacityBufferSpec{ProvisioningStrategy: str(""), PodTemplateRef: &autoscalingv1beta1.LocalObjectRef{Name: "t"}, Replicas: i32(1)},
			served: true, wantLarger: true},
		{name: "active capacity", spec: autoscalingv1beta1.CapacityBufferSpec{ProvisioningStrategy: str(autoscalingv1beta1.ProvisioningStrategyActiveCapacity),
			ScalableRef: &autoscalingv1beta1.ScalableRef{Kind: "Deployment", Name: "web"}, Percentage: i32(20)}, served: true, wantGroup: "apps", wantLarger: true},
		{name: "a scalableRef's explicit group is kept", spec: autoscalingv1beta1.CapacityBufferSpec{
			ScalableRef: &autoscalingv1beta1.ScalableRef{APIGroup: "batch", Kind: "Job", Name: "j"}, Replicas: i32(1)}, served: true, wantGroup: "batch", wantLarger: true},
		{name: "another strategy is left alone", spec: autoscalingv1beta1.CapacityBufferSpec{ProvisioningStrategy: str("buffer.gke.io/standby-capacity"),
			PodTemplateRef: &autoscalingv1beta1.LocalObjectRef{Name: "t"}, Replicas: i32(1)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, ok := c.sharedBuffer(&autoscalingv1beta1.CapacityBuffer{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "b"}, Spec: tc.spec})
			if ok != tc.served {
				t.Fatalf("served = %v, want %v", ok, tc.served)
			}
			if !ok {
				return
			}
			if b.group != autoscalingv1beta1.GroupName || b.request.Larger != tc.wantLarger {
				t.Errorf("group %q, larger %v", b.group, b.request.Larger)
			}
			if tc.wantGroup != "" && (b.scalable == nil || b.scalable.group != tc.wantGroup) {
				t.Errorf("scalable = %+v, want group %q", b.scalable, tc.wantGroup)
			}
		})
	}
}

func TestSharedStatus(t *testing.T) {
	gen := int64(3)
	withTemplate := &autoscalingv1beta1.CapacityBuffer{Spec: autoscalingv1beta1.CapacityBufferSpec{PodTemplateRef: &autoscalingv1beta1.LocalObjectRef{Name: "web"}}}
	withWorkload := &autoscalingv1beta1.CapacityBuffer{Spec: autoscalingv1beta1.CapacityBufferSpec{ScalableRef: &autoscalingv1beta1.ScalableRef{Kind: "Deployment", Name: "api"}}}
	type want struct {
		replicas          int32 // -1: unset
		template          string
		ready, provisions metav1.ConditionStatus
		reason            string // of Provisioning
	}
	for _, tc := range []struct {
		name string
		b    *autoscalingv1beta1.CapacityBuffer
		r    result
		want want
	}{
		{"every chunk has room", withTemplate, result{chunks: 5, placed: 5, templateGeneration: &gen}, want{5, "web", metav1.ConditionTrue, metav1.ConditionTrue, ReasonProvisioned}},
		{"nodes coming up", withTemplate, result{chunks: 5, placed: 2, templateGeneration: &gen}, want{5, "web", metav1.ConditionTrue, metav1.ConditionFalse, ReasonProvisioning}},
		{"a chunk fits no node", withWorkload, result{chunks: 2, placed: 1, unschedulable: 1, why: "no NodePool"}, want{2, "", metav1.ConditionTrue, metav1.ConditionFalse, ReasonUnschedulable}},
		{"no template", withTemplate, result{err: errors.New("spec.podTemplateRef: PodTemplate ns/web: not found")}, want{-1, "", metav1.ConditionFalse, metav1.ConditionFalse, ReasonNotReadyForProvisioning}},
		{"an empty buffer", withWorkload, result{}, want{0, "", metav1.ConditionTrue, metav1.ConditionTrue, ReasonProvisioned}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := sharedStatus(tc.b, tc.r)
			if got := st.ProvisioningStrategy; got == nil || *got != autoscalingv1beta1.ProvisioningStrategyActiveCapacity {
				t.Errorf("provisioningStrategy = %v", got)
			}
			switch {
			case tc.want.replicas < 0 && st.Replicas != nil:
				t.Errorf("replicas = %d, want unset", *st.Replicas)
			case tc.want.replicas >= 0 && (st.Replicas == nil || *st.Replicas != tc.want.replicas):
				t.Errorf("replicas = %v, want %d", st.Replicas, tc.want.replicas)
			}
			if tc.want.template != "" {
				if st.PodTemplateRef == nil || st.PodTemplateRef.Name != tc.want.template || st.PodTemplateGeneration == nil || *st.PodTemplateGeneration != gen {
					t.Errorf("podTemplateRef %v generation %v, want %q at %d", st.PodTemplateRef, st.PodTemplateGeneration, tc.want.template, gen)
				}
			} else if st.PodTemplateRef != nil || st.PodTemplateGeneration != nil {
				t.Errorf("podTemplateRef %v generation %v, want neither", st.PodTemplateRef, st.PodTemplateGeneration)
			}
			ready := meta.FindStatusCondition(st.Conditions, autoscalingv1beta1.ConditionReadyForProvisioning)
			provisioning := meta.FindStatusCondition(st.Conditions, autoscalingv1beta1.ConditionProvisioning)
			if ready == nil || ready.Status != tc.want.ready {
				t.Errorf("ReadyForProvisioning = %+v, want %s", ready, tc.want.ready)
			}
			if provisioning == nil || provisioning.Status != tc.want.provisions || provisioning.Reason != tc.want.reason {
				t.Errorf("Provisioning = %+v, want %s/%s", provisioning, tc.want.provisions, tc.want.reason)
			}
			// a status already written says the same: nothing to write
			written := st.DeepCopy()
			for i := range written.Conditions {
				written.Conditions[i].ObservedGeneration, written.Conditions[i].LastTransitionTime = 7, metav1.Now()
			}
			if !sameStatus(*written, st) {
				t.Error("the status as written differs from the same result")
			}
			if other := sharedStatus(tc.b, result{chunks: 9, placed: 9}); sameStatus(*written, other) {
				t.Error("a different result reads as the same status")
			}
		})
	}
}
