/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package v1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// NodeOverlay adjusts what Stevedore assumes about the nodes it may launch: the price of the offerings its
// requirements select (a negotiated discount, a fee), or extended resources their nodes will report (hugepages, a
// device plugin's resources). It has the fields of Karpenter's NodeOverlay. Overlays change the plan (which
// instance types and capacity types are cheapest, which fit a pod) and consolidation's price comparisons; EC2
// still bills its own prices, and Fleet chooses among the types a NodeClaim allows by them.
//
// Where several overlays select an offering, the one of highest weight (then the first by name) decides its
// price, and each extended resource is taken from the highest-weight overlay that sets it. Two overlays of the
// same weight whose requirements can select the same offering and that set the same price field or resource to
// different values conflict: the one later by name is not applied, and its Ready condition says why.
//
// +genclient
// +genclient:nonNamespaced
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:resource:path=nodeoverlays,scope=Cluster,categories=stevedore,shortName=sdno
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Weight",type=integer,JSONPath=".spec.weight"
// +kubebuilder:printcolumn:name="Price",type=string,JSONPath=".spec.price"
// +kubebuilder:printcolumn:name="Adjustment",type=string,JSONPath=".spec.priceAdjustment"
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=".status.conditions[?(@.type==\"Ready\")].status"
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=".status.conditions[?(@.type==\"Ready\")].reason",priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=".metadata.creationTimestamp"
type NodeOverlay struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec NodeOverlaySpec `json:"spec"`
	// +optional
	Status NodeOverlayStatus `json:"status,omitempty"`
}

// NodeOverlaySpec selects offerings and says what to change about them.
// +kubebuilder:validation:XValidation:message="spec: set at most one of price and priceAdjustment",rule="!has(self.price) || !has(self.priceAdjustment)"
// +kubebuilder:validation:XValidation:message="spec: set price, priceAdjustment or capacity",rule="has(self.price) || has(self.priceAdjustment) || has(self.capacity)"
type NodeOverlaySpec struct {
	// Requirements select the offerings the overlay applies to, as a NodePool's requirements select nodes: on the
	// instance type's labels (node.kubernetes.io/instance-type, karpenter.k8s.aws/instance-family,
	// kubernetes.io/arch, ...), topology.kubernetes.io/zone, karpenter.sh/capacity-type, stevedore.dev/nodepool
	// (karpenter.sh/nodepool is read as stevedore.dev/nodepool, so that Karpenter's overlays carry over) and the
	// labels and requirements of the NodePool's template. Empty selects every offering. Gt, Lt, Gte and Lte take
	// one integer.
	// +kubebuilder:validation:MaxItems=100
	// +listType=atomic
	// +optional
	Requirements []NodeOverlayRequirement `json:"requirements,omitempty"`

	// PriceAdjustment changes the price of the selected offerings: a signed amount in dollars an hour ("+0.05",
	// "-0.1") or a signed percentage ("+10%", "-15%", at most "-100%"). A price never goes below zero.
	// +kubebuilder:validation:Pattern=`^([+-]\d*\.?\d+|\+\d*\.?\d+%|-(100|\d{1,2}(\.\d+)?)%)$`
	// +kubebuilder:validation:MaxLength=32
	// +optional
	PriceAdjustment *string `json:"priceAdjustment,omitempty"`

	// Price replaces the price of the selected offerings, in dollars an hour ("0.0832").
	// +kubebuilder:validation:Pattern=`^\d+(\.\d+)?$`
	// +kubebuilder:validation:MaxLength=32
	// +optional
	Price *string `json:"price,omitempty"`

	// Capacity adds extended resources to the nodes of the selected instance types (hugepages-2Mi, a device
	// plugin's resources); cpu, memory, ephemeral-storage and pods cannot be changed. A type is selected when
	// the requirements allow it and one of its offerings.
	// +kubebuilder:validation:MaxProperties=20
	// +kubebuilder:validation:XValidation:message="spec.capacity: cpu, memory, ephemeral-storage and pods cannot be set; only extended resources",rule="self.all(k, !(k in ['cpu', 'memory', 'ephemeral-storage', 'pods']))"
	// +optional
	Capacity corev1.ResourceList `json:"capacity,omitempty"`

	// Weight orders overlays that select the same offering: the highest decides. Default 0.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=10000
	// +optional
	Weight *int32 `json:"weight,omitempty"`
}

// NodeOverlayRequirement is a requirement on an offering's labels. It is Karpenter's shape: Gte and Lte join
// the node selector operators.
// +kubebuilder:validation:XValidation:message="requirements[]: In and NotIn need values",rule="!(self.operator in ['In', 'NotIn']) || (has(self.values) && size(self.values) > 0)"
// +kubebuilder:validation:XValidation:message="requirements[]: Exists and DoesNotExist take no values",rule="!(self.operator in ['Exists', 'DoesNotExist']) || !has(self.values) || size(self.values) == 0"
// +kubebuilder:validation:XValidation:message="requirements[]: Gt, Lt, Gte and Lte take one non-negative integer",rule="!(self.operator in ['Gt', 'Lt', 'Gte', 'Lte']) || (has(self.values) && size(self.values) == 1 && self.values[0].matches('^[0-9]+$'))"
type NodeOverlayRequirement struct {
	// Key is the label.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=316
	// +required
	Key string `json:"key"`
	// Operator is In, NotIn, Exists, DoesNotExist, Gt, Lt, Gte or Lte.
	// +kubebuilder:validation:Enum=In;NotIn;Exists;DoesNotExist;Gt;Lt;Gte;Lte
	// +required
	Operator string `json:"operator"`
	// Values of the label.
	// +kubebuilder:validation:MaxItems=100
	// +kubebuilder:validation:items:MaxLength=63
	// +listType=atomic
	// +optional
	Values []string `json:"values,omitempty"`
}

// NodeOverlayStatus reports whether the overlay is applied.
type NodeOverlayStatus struct {
	// Conditions: Ready (False with reason Conflict when another overlay of the same weight decides instead).
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// NodeOverlayList is a list of NodeOverlays.
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
type NodeOverlayList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []NodeOverlay `json:"items"`
}
