/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

// Package v1 holds Stevedore's definition of the ProvisioningRequest, group autoscaling.x-k8s.io, the API Kueue's
// ProvisioningRequest admission check and Cluster Autoscaler use to ask for capacity for a set of pods before the
// pods exist: check that it is there (check-capacity.autoscaling.x-k8s.io) or launch it all at once
// (best-effort-atomic-scale-up.autoscaling.x-k8s.io), then hold it for the pods that carry the
// autoscaling.x-k8s.io/consume-provisioning-request annotation. The types are written from the API's documented
// fields; manifests and controllers written for Cluster Autoscaler's CRD work unchanged.
//
// +k8s:deepcopy-gen=package
// +groupName=autoscaling.x-k8s.io
// +groupGoName=AutoscalingX
package v1
