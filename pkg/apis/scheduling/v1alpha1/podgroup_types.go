/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// PodGroupLabel on a pod names the PodGroup, in the pod's namespace, the pod belongs to.
const PodGroupLabel = "scheduling.x-k8s.io/pod-group"

// DefaultScheduleTimeoutSeconds is how long a gang's pods wait at Permit for the rest of the gang when the
// PodGroup does not say (scheduler-plugins' Coscheduling default).
const DefaultScheduleTimeoutSeconds = 60

// PodGroupPhase is where a PodGroup is in its life.
type PodGroupPhase string

// The phases of a PodGroup.
const (
	// PodGroupPending: fewer than minMember pods exist, or none is scheduled yet.
	PodGroupPending PodGroupPhase = "Pending"
	// PodGroupScheduling: at least minMember pods exist and some are being scheduled.
	PodGroupScheduling PodGroupPhase = "Scheduling"
	// PodGroupRunning: at least minMember pods are running.
	PodGroupRunning PodGroupPhase = "Running"
	// PodGroupFinished: at least minMember pods succeeded and none runs.
	PodGroupFinished PodGroupPhase = "Finished"
	// PodGroupFailed: a pod failed and fewer than minMember run or succeeded.
	PodGroupFailed PodGroupPhase = "Failed"
	// PodGroupUnknown: the group's state cannot be told.
	PodGroupUnknown PodGroupPhase = "Unknown"
)

// PodGroup is a gang: the pods labelled with its name are scheduled together, at least minMember at once or none.
//
// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:resource:shortName={pg,pgs}
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="MinMember",type=integer,JSONPath=`.spec.minMember`
// +kubebuilder:printcolumn:name="Running",type=integer,JSONPath=`.status.running`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type PodGroup struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   PodGroupSpec   `json:"spec,omitempty"`
	Status PodGroupStatus `json:"status,omitempty"`
}

// PodGroupSpec is what the gang needs.
type PodGroupSpec struct {
	// MinMember is how many of the group's pods must be placed at once; fewer are not bound at all.
	// +kubebuilder:validation:Minimum=1
	// +optional
	MinMember int32 `json:"minMember,omitempty"`
	// MinResources is the least the group needs in all before any of it is scheduled (informational for
	// Stevedore: the plan places minMember pods with their own requests).
	// +optional
	MinResources corev1.ResourceList `json:"minResources,omitempty"`
	// ScheduleTimeoutSeconds is how long the pods placed wait at Permit for the rest of the gang before all of
	// them are sent back. Default 60.
	// +kubebuilder:validation:Minimum=1
	// +optional
	ScheduleTimeoutSeconds *int32 `json:"scheduleTimeoutSeconds,omitempty"`
}

// PodGroupStatus is where the gang is.
type PodGroupStatus struct {
	// Phase is the group's phase.
	// +optional
	Phase PodGroupPhase `json:"phase,omitempty"`
	// OccupiedBy names the workload (its owner) that uses the group.
	// +optional
	OccupiedBy string `json:"occupiedBy,omitempty"`
	// Running counts the group's running pods.
	// +optional
	Running int32 `json:"running,omitempty"`
	// Succeeded counts the group's succeeded pods.
	// +optional
	Succeeded int32 `json:"succeeded,omitempty"`
	// Failed counts the group's failed pods.
	// +optional
	Failed int32 `json:"failed,omitempty"`
	// ScheduleStartTime is when the group's scheduling started.
	// +optional
	ScheduleStartTime metav1.Time `json:"scheduleStartTime,omitempty"`
}

// PodGroupList is a list of PodGroups.
//
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
type PodGroupList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []PodGroup `json:"items"`
}

// ScheduleTimeout returns how long the group's placed pods wait for the rest of it.
func (pg *PodGroup) ScheduleTimeout() int32 {
	if pg.Spec.ScheduleTimeoutSeconds == nil {
		return DefaultScheduleTimeoutSeconds
	}
	return *pg.Spec.ScheduleTimeoutSeconds
}
