/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package v1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// CapacityBuffer keeps warm capacity for pods that have not arrived yet: Stevedore plans nodes for its chunks (each
// a pod of the template) as if they were pending pods, without creating any pod. Real pods take that room first
// (the scheduler sees free room on ready nodes), after which the buffer is provisioned again. The shape follows the
// Kubernetes autoscaling CapacityBuffer (autoscaling.x-k8s.io), in Stevedore's group.
//
// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:resource:path=capacitybuffers,scope=Namespaced,categories=stevedore,shortName=sdcb
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Template",type=string,JSONPath=".spec.podTemplateRef.name"
// +kubebuilder:printcolumn:name="Workload",type=string,JSONPath=".spec.scalableRef.name"
// +kubebuilder:printcolumn:name="Replicas",type=integer,JSONPath=".status.replicas"
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=".status.conditions[?(@.type==\"Ready\")].status"
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=".status.conditions[?(@.type==\"Ready\")].reason",priority=1
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
// +kubebuilder:validation:XValidation:message="spec: set exactly one of podTemplateRef and scalableRef",rule="has(self.podTemplateRef) != has(self.scalableRef)"
// +kubebuilder:validation:XValidation:message="spec: set replicas, percentage or limits (how many chunks to keep)",rule="has(self.replicas) || has(self.percentage) || has(self.limits)"
// +kubebuilder:validation:XValidation:message="spec.percentage: a percentage of a workload's replicas needs scalableRef",rule="!has(self.percentage) || has(self.scalableRef)"
type CapacityBufferSpec struct {
	// PodTemplateRef names a PodTemplate in the buffer's namespace: one chunk is one pod of its template.
	// +optional
	PodTemplateRef *LocalObjectReference `json:"podTemplateRef,omitempty"`
	// ScalableRef names a workload in the buffer's namespace (Deployment, StatefulSet or ReplicaSet): one chunk
	// is one pod of its template, and percentage counts its replicas.
	// +optional
	ScalableRef *ScalableReference `json:"scalableRef,omitempty"`
	// Replicas is the number of chunks to keep. With percentage, the smaller of the two; with limits, no more
	// than fit in them.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=10000
	// +optional
	Replicas *int32 `json:"replicas,omitempty"`
	// Percentage of the workload's replicas to keep as chunks, rounded up, at least one when the workload has
	// replicas (scalableRef only).
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1000
	// +optional
	Percentage *int32 `json:"percentage,omitempty"`
	// Limits caps the buffer's total requests (cpu, memory, any resource): no more chunks than fit. Alone, it
	// keeps as many chunks as fit.
	// +kubebuilder:validation:MaxProperties=20
	// +optional
	Limits corev1.ResourceList `json:"limits,omitempty"`
}

// LocalObjectReference names an object in the same namespace.
type LocalObjectReference struct {
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +required
	Name string `json:"name"`
}

// ScalableReference names a workload in the same namespace.
type ScalableReference struct {
	// APIGroup of the workload: apps.
	// +kubebuilder:default=apps
	// +kubebuilder:validation:Enum=apps
	// +optional
	APIGroup string `json:"apiGroup,omitempty"`
	// Kind of the workload.
	// +kubebuilder:validation:Enum=Deployment;StatefulSet;ReplicaSet
	// +required
	Kind string `json:"kind"`
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +required
	Name string `json:"name"`
}

// CapacityBufferStatus reports the buffer's chunks.
type CapacityBufferStatus struct {
	// Replicas is the number of chunks the buffer keeps now.
	// +optional
	Replicas int32 `json:"replicas,omitempty"`
	// Conditions: Ready (every chunk has room on a node, or on a node coming up).
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
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
