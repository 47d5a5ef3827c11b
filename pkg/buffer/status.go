/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package buffer

import (
	"context"
	"fmt"
	"math"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	autoscalingv1beta1 "github.com/stevedore-dev/stevedore/pkg/apis/autoscaling/v1beta1"
	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/reconcile"
)

// Reasons of an autoscaling.x-k8s.io buffer's conditions, beside those of Ready.
const (
	// ReasonResolved: ReadyForProvisioning is True, the template and the chunk count are known.
	ReasonResolved = "Resolved"
	// ReasonNotReadyForProvisioning: Provisioning is False because ReadyForProvisioning is.
	ReasonNotReadyForProvisioning = "NotReadyForProvisioning"
)

// ownBuffer serves a stevedore.dev CapacityBuffer: replicas and percentage give the smaller count, and the Ready
// condition says whether every chunk has room.
func (c *Controller) ownBuffer(b *stevedorev1.CapacityBuffer) buffer {
	out := buffer{group: stevedorev1.GroupName, namespace: b.Namespace, name: b.Name,
		request: Request{Replicas: b.Spec.Replicas, Percentage: b.Spec.Percentage, Limits: b.Spec.Limits}}
	if ref := b.Spec.PodTemplateRef; ref != nil {
		out.podTemplate = ref.Name
	}
	if ref := b.Spec.ScalableRef; ref != nil {
		out.scalable = newScalable(ref.APIGroup, ref.Kind, ref.Name)
	}
	out.write = func(ctx context.Context, r result) error { return c.writeOwn(ctx, b, r) }
	return out
}

func (c *Controller) writeOwn(ctx context.Context, b *stevedorev1.CapacityBuffer, r result) error {
	replicas := int32(min(max(r.chunks, 0), math.MaxInt32))
	cond := r.provisioned(stevedorev1.ConditionReady, ReasonInvalid)
	cur := meta.FindStatusCondition(b.Status.Conditions, cond.Type)
	if b.Status.Replicas == replicas && cur != nil && cur.Status == cond.Status && cur.Reason == cond.Reason && cur.Message == cond.Message {
		return nil
	}
	written, err := reconcile.UpdateStatus(ctx, c.opts.Stevedore.StevedoreV1().CapacityBuffers(b.Namespace), b.Name,
		func(next *stevedorev1.CapacityBuffer) bool {
			next.Status.Replicas = replicas
			cond.ObservedGeneration = next.Generation
			meta.SetStatusCondition(&next.Status.Conditions, cond)
			return true
		})
	if written {
		c.event(ctx, b, cur, cond)
	}
	return err
}

// sharedBuffer serves an autoscaling.x-k8s.io CapacityBuffer as Cluster Autoscaler and Karpenter read it:
// replicas and percentage give the larger count, a scalableRef without apiGroup names an apps workload, and a
// buffer of a provisioning strategy other than active capacity is left alone (false).
func (c *Controller) sharedBuffer(b *autoscalingv1beta1.CapacityBuffer) (buffer, bool) {
	if s := b.Spec.ProvisioningStrategy; s != nil && *s != "" && *s != autoscalingv1beta1.ProvisioningStrategyActiveCapacity {
		return buffer{}, false
	}
	out := buffer{group: autoscalingv1beta1.GroupName, namespace: b.Namespace, name: b.Name,
		request: Request{Replicas: b.Spec.Replicas, Percentage: b.Spec.Percentage, Limits: b.Spec.Limits, Larger: true}}
	if ref := b.Spec.PodTemplateRef; ref != nil {
		out.podTemplate = ref.Name
	}
	if ref := b.Spec.ScalableRef; ref != nil {
		out.scalable = newScalable(ref.APIGroup, ref.Kind, ref.Name)
	}
	out.write = func(ctx context.Context, r result) error { return c.writeShared(ctx, b, r) }
	return out, true
}

// sharedStatus is the status an autoscaling.x-k8s.io buffer gets for a pass's result (conditions without
// observedGeneration or transition times).
func sharedStatus(b *autoscalingv1beta1.CapacityBuffer, r result) autoscalingv1beta1.CapacityBufferStatus {
	strategy := autoscalingv1beta1.ProvisioningStrategyActiveCapacity
	if s := b.Spec.ProvisioningStrategy; s != nil && *s != "" {
		strategy = *s
	}
	st := autoscalingv1beta1.CapacityBufferStatus{ProvisioningStrategy: &strategy}
	ready := metav1.Condition{Type: autoscalingv1beta1.ConditionReadyForProvisioning, Status: metav1.ConditionTrue, Reason: ReasonResolved,
		Message: fmt.Sprintf("%d chunks", r.chunks)}
	provisioning := r.provisioned(autoscalingv1beta1.ConditionProvisioning, ReasonNotReadyForProvisioning)
	if r.err != nil {
		ready.Status, ready.Reason, ready.Message = metav1.ConditionFalse, ReasonInvalid, r.err.Error()
	} else {
		replicas := int32(min(max(r.chunks, 0), math.MaxInt32))
		st.Replicas = &replicas
		if ref := b.Spec.PodTemplateRef; ref != nil {
			st.PodTemplateRef = &autoscalingv1beta1.LocalObjectRef{Name: ref.Name}
			st.PodTemplateGeneration = r.templateGeneration
		}
	}
	st.Conditions = []metav1.Condition{ready, provisioning}
	return st
}

// sameStatus reports whether a buffer's status already says what want does, ignoring the conditions' times and
// observed generations.
func sameStatus(have, want autoscalingv1beta1.CapacityBufferStatus) bool {
	for _, w := range want.Conditions {
		h := meta.FindStatusCondition(have.Conditions, w.Type)
		if h == nil || h.Status != w.Status || h.Reason != w.Reason || h.Message != w.Message {
			return false
		}
	}
	have.Conditions, want.Conditions = nil, nil
	return equality.Semantic.DeepEqual(have, want)
}

func (c *Controller) writeShared(ctx context.Context, b *autoscalingv1beta1.CapacityBuffer, r result) error {
	want := sharedStatus(b, r)
	if sameStatus(b.Status, want) {
		return nil
	}
	before := meta.FindStatusCondition(b.Status.Conditions, autoscalingv1beta1.ConditionProvisioning)
	written, err := reconcile.UpdateStatus(ctx, c.opts.Stevedore.AutoscalingXV1beta1().CapacityBuffers(b.Namespace), b.Name,
		func(next *autoscalingv1beta1.CapacityBuffer) bool {
			conditions := next.Status.Conditions
			for _, cond := range want.Conditions {
				cond.ObservedGeneration = next.Generation
				meta.SetStatusCondition(&conditions, cond)
			}
			next.Status = want
			next.Status.Conditions = conditions
			return true
		})
	if written {
		c.event(ctx, b, before, want.Conditions[1])
	}
	return err
}
