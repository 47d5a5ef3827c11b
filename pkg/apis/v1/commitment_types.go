/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Commitment declares capacity the account has already paid for: a Savings Plan (EC2 Instance or Compute) or
// Reserved Instances. The hours a commitment covers cost nothing more, so Stevedore fills them before it buys
// anything else, Spot included: an on-demand offering the commitment still has room for is priced at nearly
// nothing, and its room is used up node by node as nodes are planned. Beyond the room, offerings cost their list
// price again. Consolidation prices a covered node the same way, so it never replaces one by a cheaper list price.
//
// Declare the share of the commitment this cluster's nodes may use: usage elsewhere in the account (other
// clusters, other services) is not visible to Stevedore.
//
// +genclient
// +genclient:nonNamespaced
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:resource:path=commitments,scope=Cluster,categories=stevedore,shortName=sdcm
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Kind",type=string,JSONPath=".status.kind"
// +kubebuilder:printcolumn:name="Capacity",type=string,JSONPath=".status.capacity"
// +kubebuilder:printcolumn:name="Used",type=string,JSONPath=".status.used"
// +kubebuilder:printcolumn:name="Utilization",type=string,JSONPath=".status.utilization"
// +kubebuilder:printcolumn:name="Nodes",type=integer,JSONPath=".status.coveredNodes"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=".metadata.creationTimestamp"
type Commitment struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec CommitmentSpec `json:"spec"`
	// +optional
	Status CommitmentStatus `json:"status,omitempty"`
}

// CommitmentSpec is one Savings Plan or one lot of Reserved Instances.
// +kubebuilder:validation:XValidation:message="spec: set exactly one of savingsPlan and reservedInstances",rule="has(self.savingsPlan) != has(self.reservedInstances)"
type CommitmentSpec struct {
	// SavingsPlan is a Savings Plan's share for this cluster.
	// +optional
	SavingsPlan *SavingsPlan `json:"savingsPlan,omitempty"`
	// ReservedInstances are Reserved Instances of one type, in one zone or regional.
	// +optional
	ReservedInstances *ReservedInstances `json:"reservedInstances,omitempty"`
}

// Savings Plan types.
const (
	// SavingsPlanEC2Instance covers one instance family in the region.
	SavingsPlanEC2Instance = "EC2Instance"
	// SavingsPlanCompute covers every instance family.
	SavingsPlanCompute = "Compute"
)

// SavingsPlan is an hourly spend committed at Savings Plan rates.
// +kubebuilder:validation:XValidation:message="spec.savingsPlan.instanceFamily: required for an EC2Instance plan, not allowed for a Compute plan",rule="(self.type == 'EC2Instance') == has(self.instanceFamily)"
type SavingsPlan struct {
	// Type is EC2Instance (one family in the region) or Compute (every family).
	// +kubebuilder:validation:Enum=EC2Instance;Compute
	// +required
	Type string `json:"type"`
	// InstanceFamily is the family an EC2Instance plan covers (m5, c7g...).
	// +kubebuilder:validation:Pattern=`^[a-z][a-z0-9-]*$`
	// +kubebuilder:validation:MaxLength=32
	// +optional
	InstanceFamily string `json:"instanceFamily,omitempty"`
	// HourlyCommitment is the dollars an hour of usage, at Savings Plan rates, the plan pays for ("2.50").
	// +kubebuilder:validation:Pattern=`^\d+(\.\d+)?$`
	// +kubebuilder:validation:MaxLength=32
	// +required
	HourlyCommitment string `json:"hourlyCommitment"`
	// DiscountPercent is how far below the on-demand list price the plan's rates are, in percent ("28", "27.5"):
	// an instance uses the plan's commitment at its list price less that much.
	// +kubebuilder:validation:Pattern=`^\d{1,2}(\.\d+)?$`
	// +kubebuilder:validation:MaxLength=16
	// +required
	DiscountPercent string `json:"discountPercent"`
}

// ReservedInstances are a count of Reserved Instances of one type. Zonal ones (with a zone) cover that type in
// that zone; regional ones cover any zone and, for a type with sizes, any size of its family by the sizes'
// normalization factors (four large for one 2xlarge), as EC2 applies regional Linux reservations.
type ReservedInstances struct {
	// InstanceType reserved (m5.xlarge).
	// +kubebuilder:validation:Pattern=`^[a-z][a-z0-9-]*\.[a-z0-9-]+$`
	// +kubebuilder:validation:MaxLength=64
	// +required
	InstanceType string `json:"instanceType"`
	// Zone of zonal reservations; empty for regional ones.
	// +kubebuilder:validation:MaxLength=64
	// +optional
	Zone string `json:"zone,omitempty"`
	// Count of instances reserved.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100000
	// +required
	Count int32 `json:"count"`
	// HourlyRate is what one reserved instance costs an hour, upfront payment spread over the term ("0.121"), for
	// the bill `scheduler cost` shows; it does not change decisions (the hours are paid whether used or not).
	// +kubebuilder:validation:Pattern=`^\d+(\.\d+)?$`
	// +kubebuilder:validation:MaxLength=32
	// +optional
	HourlyRate string `json:"hourlyRate,omitempty"`
}

// CommitmentStatus says how much of the commitment the cluster's on-demand nodes use.
type CommitmentStatus struct {
	// Kind is SavingsPlan/EC2Instance, SavingsPlan/Compute or ReservedInstances.
	// +optional
	Kind string `json:"kind,omitempty"`
	// Capacity is the commitment's size: dollars an hour for a Savings Plan, instances for zonal Reserved
	// Instances, normalized units (a large is 4) for regional ones.
	// +optional
	Capacity string `json:"capacity,omitempty"`
	// Used is how much of Capacity the cluster's on-demand nodes use, in the same unit.
	// +optional
	Used string `json:"used,omitempty"`
	// Utilization is Used over Capacity, in percent.
	// +optional
	Utilization string `json:"utilization,omitempty"`
	// CoveredNodes counts the nodes the commitment covers, wholly or in part.
	// +optional
	CoveredNodes int32 `json:"coveredNodes,omitempty"`
	// Conditions: Ready (False with reason Invalid when the commitment cannot be applied).
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// CommitmentList is a list of Commitments.
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
type CommitmentList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Commitment `json:"items"`
}
