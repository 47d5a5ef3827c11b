/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stevedore-dev/stevedore/pkg/apis/autoscaling/v1beta1"
)

// CapacityBuffer is v1beta1's CapacityBuffer under the deprecated version.
//
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:deprecatedversion:warning="autoscaling.x-k8s.io/v1alpha1 CapacityBuffer is deprecated; use autoscaling.x-k8s.io/v1beta1"
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
	Spec v1beta1.CapacityBufferSpec `json:"spec"`
	// +optional
	Status v1beta1.CapacityBufferStatus `json:"status,omitempty"`
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
