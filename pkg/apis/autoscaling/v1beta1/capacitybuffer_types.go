/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package v1beta1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ProvisioningStrategyActiveCapacity is the strategy Stevedore serves (and the default): nodes are launched so
// that the buffer's chunks have room. Buffers of any other strategy are left to whatever serves it.
const ProvisioningStrategyActiveCapacity = "buffer.x-k8s.io/active-capacity"

// Condition types of a CapacityBuffer.
const (
	// ConditionReadyForProvisioning is True when the buffer's template and chunk count are resolved.
	ConditionReadyForProvisioning = "ReadyForProvisioning"
	// ConditionProvisioning is True when every chunk has room on a node.
	ConditionProvisioning = "Provisioning"
)

// CapacityBuffer keeps room for pods that have not arrived yet: each chunk is one pod of a template, and room is
// kept for the chunks as if they were pending pods, without creating any.
//
// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:storageversion
// +kubebuilder:resource:path=capacitybuffers,scope=Namespaced,shortName=cb,categories=autoscaling
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Strategy",type=string,JSONPath=".spec.provisioningStrategy"
// +kubebuilder:printcolumn:name="Template",type=string,JSONPath=".spec.podTemplateRef.name"
// +kubebuilder:printcolumn:name="Workload",type=string,JSONPath=".spec.scalableRef.name"
// +kubebuilder:printcolumn:name="Replicas",type=integer,JSONPath=".status.replicas"
// +kubebuilder:printcolumn:name="Provisioning",type=string,JSONPath=".status.conditions[?(@.type==\"Provisioning\")].status"
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=".status.conditions[?(@.type==\"Provisioning\")].reason",priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=".metadata.creationTimestamp"
type CapacityBuffer struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec CapacityBufferSpec `json:"spec"`
	// +optional
	Status CapacityBufferStatus `json:"status,omitempty"`
}

// CapacityBufferSpec says what one chunk of the buffer looks like and how many chunks to keep.
// +kubebuilder:validation:XValidation:message="spec: podTemplateRef and scalableRef cannot both be set",rule="!(has(self.podTemplateRef) && has(self.scalableRef))"
// +kubebuilder:validation:XValidation:message="spec: with podTemplateRef, set replicas or limits (how many chunks to keep)",rule="!has(self.podTemplateRef) || has(self.replicas) || has(self.limits)"
type CapacityBufferSpec struct {
	// ProvisioningStrategy says how the buffer is served; Stevedore serves buffer.x-k8s.io/active-capacity.
	// +kubebuilder:default="buffer.x-k8s.io/active-capacity"
	// +optional
	ProvisioningStrategy *string `json:"provisioningStrategy,omitempty"`
	// PodTemplateRef names a PodTemplate in the buffer's namespace: one chunk is one pod of its template.
	// +optional
	PodTemplateRef *LocalObjectRef `json:"podTemplateRef,omitempty"`
	// ScalableRef names a workload in the buffer's namespace: one chunk is one pod of its template, and
	// percentage counts its replicas.
	// +optional
	ScalableRef *ScalableRef `json:"scalableRef,omitempty"`
	// Replicas is the number of chunks to keep; with percentage, the larger of the two; with limits, no more than
	// fit in them.
	// +kubebuilder:validation:Minimum=0
	// +optional
	Replicas *int32 `json:"replicas,omitempty"`
	// Percentage of the workload's replicas to keep as chunks, rounded up (scalableRef only).
	// +kubebuilder:validation:Minimum=0
	// +optional
	Percentage *int32 `json:"percentage,omitempty"`
	// Limits caps the chunks' summed requests; alone, as many chunks as fit.
	// +optional
	Limits corev1.ResourceList `json:"limits,omitempty"`
}

// LocalObjectRef names an object in the buffer's namespace.
type LocalObjectRef struct {
	// +kubebuilder:validation:MinLength=1
	// +required
	Name string `json:"name"`
}

// ScalableRef names a workload in the buffer's namespace.
type ScalableRef struct {
	// APIGroup of the workload; empty is read as apps.
	// +optional
	APIGroup string `json:"apiGroup,omitempty"`
	// Kind of the workload.
	// +kubebuilder:validation:MinLength=1
	// +required
	Kind string `json:"kind"`
	// +kubebuilder:validation:MinLength=1
	// +required
	Name string `json:"name"`
}

// CapacityBufferStatus reports how the buffer is served.
type CapacityBufferStatus struct {
	// PodTemplateRef is the PodTemplate the chunks copy (set for podTemplateRef buffers).
	// +optional
	PodTemplateRef *LocalObjectRef `json:"podTemplateRef,omitempty"`
	// Replicas is the number of chunks kept now.
	// +optional
	Replicas *int32 `json:"replicas,omitempty"`
	// PodTemplateGeneration is the generation of that PodTemplate when the status was written.
	// +optional
	PodTemplateGeneration *int64 `json:"podTemplateGeneration,omitempty"`
	// Conditions: ReadyForProvisioning and Provisioning.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// ProvisioningStrategy is the strategy the buffer is served with.
	// +optional
	ProvisioningStrategy *string `json:"provisioningStrategy,omitempty"`
}

// CapacityBufferList is a list of CapacityBuffers.
//
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
type CapacityBufferList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []CapacityBuffer `json:"items"`
}
