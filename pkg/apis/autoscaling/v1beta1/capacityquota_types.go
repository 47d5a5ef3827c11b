/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package v1beta1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ResourceHourlyCost is Stevedore's quota resource for the selected nodes' summed hourly price, in US dollars an
// hour. Other autoscalers do not read it.
const ResourceHourlyCost corev1.ResourceName = "stevedore.dev/hourly-cost"

// ConditionLimitReached is True while a quota keeps a node from launching or its usage is at a limit.
const ConditionLimitReached = "LimitReached"

// CapacityQuota is a ceiling on the nodes an autoscaler launches: the nodes its selector matches may add up to no
// more than its limits (cpu, memory, nodes, any extended resource, and with Stevedore their hourly cost). A node
// is launched only if every quota selecting it leaves room for it.
//
// +genclient
// +genclient:nonNamespaced
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:storageversion
// +kubebuilder:resource:path=capacityquotas,scope=Cluster,shortName=cq,categories=autoscaling
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Limited",type=string,JSONPath=".status.conditions[?(@.type==\"LimitReached\")].status"
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=".status.conditions[?(@.type==\"LimitReached\")].message",priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=".metadata.creationTimestamp"
type CapacityQuota struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec CapacityQuotaSpec `json:"spec"`
	// +optional
	Status CapacityQuotaStatus `json:"status,omitempty"`
}

// CapacityQuotaSpec selects nodes and caps what they add up to.
type CapacityQuotaSpec struct {
	// Selector selects the nodes the quota counts, by their labels; empty or unset selects every node.
	// +optional
	Selector *metav1.LabelSelector `json:"selector,omitempty"`
	// Limits caps the selected nodes' summed capacity.
	// +required
	Limits CapacityQuotaLimits `json:"limits"`
}

// CapacityQuotaLimits are a quota's limits.
type CapacityQuotaLimits struct {
	// Resources are the limits: cpu, memory, nodes (their count), extended resources (nvidia.com/gpu...) and
	// stevedore.dev/hourly-cost (US dollars an hour). Whole numbers, except the hourly cost.
	// +kubebuilder:validation:MaxProperties=20
	// +kubebuilder:validation:XValidation:message="spec.limits.resources: resource names are at most 63 characters",rule="self.all(k, size(k) <= 63)"
	// +kubebuilder:validation:XValidation:message="spec.limits.resources: quantities cannot be negative",rule="self.all(k, type(self[k]) == int ? self[k] >= 0 : !self[k].startsWith('-'))"
	// +kubebuilder:validation:XValidation:message="spec.limits.resources: quantities are whole numbers (only stevedore.dev/hourly-cost may have decimals)",rule="self.all(k, k == 'stevedore.dev/hourly-cost' || type(self[k]) == int || quantity(self[k]).isInteger())"
	// +required
	Resources corev1.ResourceList `json:"resources"`
}

// CapacityQuotaStatus reports what the selected nodes use.
type CapacityQuotaStatus struct {
	// Used is what the selected nodes add up to, for each limited resource (nodes coming up included).
	// +optional
	Used *CapacityQuotaUsage `json:"used,omitempty"`
	// Conditions: LimitReached.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// ObservedGeneration is the generation the status was written for.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
}

// CapacityQuotaUsage is a quota's usage.
type CapacityQuotaUsage struct {
	Resources corev1.ResourceList `json:"resources"`
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
