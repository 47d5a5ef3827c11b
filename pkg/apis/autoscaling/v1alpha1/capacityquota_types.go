/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stevedore-dev/stevedore/pkg/apis/autoscaling/v1beta1"
)

// CapacityQuota is a ceiling on the nodes an autoscaler launches (deprecated version: use v1beta1).
//
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:deprecatedversion:warning="autoscaling.x-k8s.io/v1alpha1 CapacityQuota is deprecated; use autoscaling.x-k8s.io/v1beta1"
// +kubebuilder:resource:path=capacityquotas,scope=Cluster,shortName=cq,categories=autoscaling
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Limited",type=string,JSONPath=".status.conditions[?(@.type==\"LimitReached\")].status"
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=".status.conditions[?(@.type==\"LimitReached\")].message",priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=".metadata.creationTimestamp"
type CapacityQuota struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec v1beta1.CapacityQuotaSpec `json:"spec"`
	// +optional
	Status v1beta1.CapacityQuotaStatus `json:"status,omitempty"`
}

// CapacityQuotaList is a list of CapacityQuotas.
//
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
type CapacityQuotaList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []CapacityQuota `json:"items"`
}
