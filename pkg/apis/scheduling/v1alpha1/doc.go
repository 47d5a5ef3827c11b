/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

// Package v1alpha1 holds Stevedore's definition of the coscheduling PodGroup, group scheduling.x-k8s.io, the API
// Kubeflow's training operators and scheduler-plugins' Coscheduling plugin use for gangs: pods labelled
// scheduling.x-k8s.io/pod-group=<name> are scheduled all or nothing, at least spec.minMember of them at once.
// The types are written from the API's documented fields (the scheduler-plugins module cannot be imported with
// this Kubernetes minor); manifests written for scheduler-plugins apply unchanged.
//
// +k8s:deepcopy-gen=package
// +groupName=scheduling.x-k8s.io
// +groupGoName=Coscheduling
package v1alpha1
