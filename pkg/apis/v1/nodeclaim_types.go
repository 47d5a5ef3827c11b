/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package v1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// NodeClaim is one node Stevedore launched or is launching. Stevedore creates them; users read and delete them
// (deleting a NodeClaim drains and terminates its node).
//
// +genclient
// +genclient:nonNamespaced
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:resource:path=nodeclaims,scope=Cluster,categories=stevedore,shortName=sdnc
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Type",type=string,JSONPath=".status.instanceType"
// +kubebuilder:printcolumn:name="Capacity",type=string,JSONPath=".status.capacityType"
// +kubebuilder:printcolumn:name="Zone",type=string,JSONPath=".status.zone"
// +kubebuilder:printcolumn:name="Node",type=string,JSONPath=".status.nodeName"
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=".status.conditions[?(@.type==\"Ready\")].status"
// +kubebuilder:printcolumn:name="Price/h",type=string,JSONPath=".status.price"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=".metadata.creationTimestamp"
// +kubebuilder:printcolumn:name="ID",type=string,JSONPath=".status.instanceID",priority=1
// +kubebuilder:printcolumn:name="NodePool",type=string,JSONPath=".metadata.labels.stevedore\\.dev/nodepool",priority=1
// +kubebuilder:printcolumn:name="Disruption",type=string,JSONPath=".status.disruptionReason",priority=1
// +kubebuilder:printcolumn:name="GPUs",type=string,JSONPath=".status.capacity.nvidia\\.com/gpu",priority=1
// +kubebuilder:printcolumn:name="Neuron",type=string,JSONPath=".status.capacity.aws\\.amazon\\.com/neuron",priority=1
// +kubebuilder:printcolumn:name="Reservation",type=string,JSONPath=".metadata.labels.karpenter\\.k8s\\.aws/capacity-reservation-id",priority=1
type NodeClaim struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec NodeClaimSpec `json:"spec"`
	// +optional
	Status NodeClaimStatus `json:"status,omitempty"`
}

// NodeClaimSpec is the node Stevedore asked for. The node.kubernetes.io/instance-type requirement lists the
// compatible instance types cheapest first; the cloud picks one of them.
// +kubebuilder:validation:XValidation:message="spec is immutable",rule="self == oldSelf"
type NodeClaimSpec struct {
	// Taints of the node.
	// +optional
	Taints []corev1.Taint `json:"taints,omitempty"`
	// StartupTaints of the node, expected to be removed by another agent.
	// +optional
	StartupTaints []corev1.Taint `json:"startupTaints,omitempty"`
	// Requirements the node satisfies.
	// +kubebuilder:validation:MaxItems=100
	// +optional
	Requirements []NodeSelectorRequirementWithMinValues `json:"requirements,omitempty"`
	// Resources the pods placed on this node request in total.
	// +optional
	Resources ResourceRequirements `json:"resources,omitempty"`
	// NodeClassRef names the EC2NodeClass of the instance.
	// +required
	NodeClassRef *NodeClassReference `json:"nodeClassRef"`
	// ExpireAfter from the NodePool at launch.
	// +kubebuilder:validation:Pattern=`^(([0-9]+(s|m|h))+|Never)$`
	// +kubebuilder:validation:Type=string
	// +optional
	ExpireAfter *NillableDuration `json:"expireAfter,omitempty"`
	// TerminationGracePeriod from the NodePool at launch.
	// +kubebuilder:validation:Type=string
	// +optional
	TerminationGracePeriod *metav1.Duration `json:"terminationGracePeriod,omitempty"`
}

// ResourceRequirements of a NodeClaim.
type ResourceRequirements struct {
	// Requests summed over the pods the node was launched for, plus DaemonSet overhead.
	// +optional
	Requests corev1.ResourceList `json:"requests,omitempty"`
}

// NodeClaim condition types.
const (
	ConditionLaunched       = "Launched"
	ConditionRegistered     = "Registered"
	ConditionInitialized    = "Initialized"
	ConditionReady          = "Ready"
	ConditionDrifted        = "Drifted"
	ConditionConsolidatable = "Consolidatable"
	ConditionDisrupting     = "Disrupting"
)

// NodeClaimStatus is what became of a NodeClaim.
type NodeClaimStatus struct {
	// ProviderID of the node: aws:///<zone>/<instance id>.
	// +optional
	ProviderID string `json:"providerID,omitempty"`
	// InstanceID of the EC2 instance.
	// +optional
	InstanceID string `json:"instanceID,omitempty"`
	// NodeName is the name the node registers with (the instance's private DNS name).
	// +optional
	NodeName string `json:"nodeName,omitempty"`
	// ImageID of the instance.
	// +optional
	ImageID string `json:"imageID,omitempty"`
	// InstanceType chosen by EC2.
	// +optional
	InstanceType string `json:"instanceType,omitempty"`
	// Zone of the instance.
	// +optional
	Zone string `json:"zone,omitempty"`
	// ZoneID of the instance's zone (use1-az1), when known; the node is labelled topology.k8s.aws/zone-id with it.
	// +optional
	ZoneID string `json:"zoneID,omitempty"`
	// CapacityType: spot or on-demand.
	// +optional
	CapacityType string `json:"capacityType,omitempty"`
	// Price per hour in USD of the offering launched.
	// +optional
	Price string `json:"price,omitempty"`
	// Capacity of the node.
	// +optional
	Capacity corev1.ResourceList `json:"capacity,omitempty"`
	// Allocatable of the node.
	// +optional
	Allocatable corev1.ResourceList `json:"allocatable,omitempty"`
	// LastPodEventTime is when a pod last arrived on or left the node; consolidateAfter counts from it.
	// +optional
	LastPodEventTime metav1.Time `json:"lastPodEventTime,omitempty"`
	// DisruptionReason is set while the node is being disrupted: Empty, Underutilized, Drifted, Expired,
	// Interrupted, Deleted.
	// +optional
	DisruptionReason string `json:"disruptionReason,omitempty"`
	// Conditions: Launched, Registered, Initialized, Ready, Drifted, Consolidatable, Disrupting.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// NodeClaimList is a list of NodeClaims.
//
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
type NodeClaimList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []NodeClaim `json:"items"`
}
