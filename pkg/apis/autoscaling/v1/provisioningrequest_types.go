/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The provisioning classes Stevedore serves.
const (
	// ClassCheckCapacity asks whether the cluster's nodes have room for the pods now; no node is launched. Room
	// found is held for the pods while the booking lasts.
	ClassCheckCapacity = "check-capacity.autoscaling.x-k8s.io"
	// ClassBestEffortAtomicScaleUp asks for nodes for all the pods at once, or none; they are held for the pods
	// while the booking lasts.
	ClassBestEffortAtomicScaleUp = "best-effort-atomic-scale-up.autoscaling.x-k8s.io"
)

// Pod annotations.
const (
	// AnnotationConsume on a pod names the ProvisioningRequest, in the pod's namespace, whose capacity it takes.
	AnnotationConsume = "autoscaling.x-k8s.io/consume-provisioning-request"
	// AnnotationClass on a pod names the provisioning class of the request it consumes.
	AnnotationClass = "autoscaling.x-k8s.io/provisioning-class-name"
)

// Condition types of a ProvisioningRequest.
const (
	// ConditionAccepted: the request's class is served and its pod templates are read.
	ConditionAccepted = "Accepted"
	// ConditionProvisioned: room for every pod of the request is on registered nodes and held for them.
	ConditionProvisioned = "Provisioned"
	// ConditionFailed: the request cannot be served; nothing more is tried.
	ConditionFailed = "Failed"
	// ConditionBookingExpired: the room was held for its time and is no longer.
	ConditionBookingExpired = "BookingExpired"
	// ConditionCapacityRevoked: the room held is gone (its nodes went away) before the pods took it.
	ConditionCapacityRevoked = "CapacityRevoked"
)

// Parameters of the classes.
const (
	// ParameterValidUntilSeconds (best-effort-atomic-scale-up): how long after the request's creation Stevedore
	// keeps trying; then the request fails.
	ParameterValidUntilSeconds = "ValidUntilSeconds"
	// ParameterNoRetry (check-capacity): "true" fails the request the first time the room is not there, instead
	// of checking again.
	ParameterNoRetry = "noRetry"
)

// ProvisioningRequest asks for capacity for pods that do not exist yet: room for podSets' pods, checked or
// launched as its class says, then held for the pods that name it in their
// autoscaling.x-k8s.io/consume-provisioning-request annotation.
//
// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:resource:shortName={provreq,provreqs}
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Class",type=string,JSONPath=`.spec.provisioningClassName`
// +kubebuilder:printcolumn:name="Accepted",type=string,JSONPath=`.status.conditions[?(@.type=="Accepted")].status`
// +kubebuilder:printcolumn:name="Provisioned",type=string,JSONPath=`.status.conditions[?(@.type=="Provisioned")].status`
// +kubebuilder:printcolumn:name="Failed",type=string,JSONPath=`.status.conditions[?(@.type=="Failed")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type ProvisioningRequest struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec ProvisioningRequestSpec `json:"spec"`
	// +optional
	Status ProvisioningRequestStatus `json:"status,omitempty"`
}

// ProvisioningRequestSpec is the capacity asked for. It cannot change: a different request is a new object.
type ProvisioningRequestSpec struct {
	// PodSets are the groups of pods to find room for.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec.podSets cannot change"
	PodSets []PodSet `json:"podSets"`
	// ProvisioningClassName says how the room is found: check-capacity.autoscaling.x-k8s.io or
	// best-effort-atomic-scale-up.autoscaling.x-k8s.io (Stevedore leaves requests of other classes to whoever
	// serves them).
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec.provisioningClassName cannot change"
	ProvisioningClassName string `json:"provisioningClassName"`
	// Parameters tune the class (ValidUntilSeconds, noRetry).
	// +kubebuilder:validation:MaxProperties=100
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec.parameters cannot change"
	// +optional
	Parameters map[string]Parameter `json:"parameters,omitempty"`
}

// Parameter is a class parameter's value.
// +kubebuilder:validation:MaxLength=255
type Parameter string

// PodSet is count pods made from one PodTemplate.
type PodSet struct {
	// PodTemplateRef names the PodTemplate, in the request's namespace, the pods are made from. The pods that
	// consume the request should ask for what it asks (requests, node selector, affinity, tolerations).
	PodTemplateRef Reference `json:"podTemplateRef"`
	// Count is how many pods.
	// +kubebuilder:validation:Minimum=1
	Count int32 `json:"count"`
}

// Reference names an object in the request's namespace.
type Reference struct {
	// Name of the object.
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	// +optional
	Name string `json:"name,omitempty"`
}

// ProvisioningRequestStatus is where the request is.
type ProvisioningRequestStatus struct {
	// Conditions: Accepted, Provisioned, Failed, BookingExpired, CapacityRevoked.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// ProvisioningClassDetails are further facts the class reports.
	// +kubebuilder:validation:MaxProperties=64
	// +optional
	ProvisioningClassDetails map[string]Detail `json:"provisioningClassDetails,omitempty"`
}

// Detail is a class detail's value.
// +kubebuilder:validation:MaxLength=32768
type Detail string

// ProvisioningRequestList is a list of ProvisioningRequests.
//
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
type ProvisioningRequestList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ProvisioningRequest `json:"items"`
}
