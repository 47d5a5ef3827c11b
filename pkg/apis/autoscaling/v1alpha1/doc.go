/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

// Package v1alpha1 is the deprecated first version of the autoscaling.x-k8s.io CapacityBuffer and CapacityQuota,
// served beside v1beta1 with the same schema so that manifests written for it are read unchanged. Stevedore reads
// v1beta1 only.
//
// +k8s:deepcopy-gen=package
// +groupName=autoscaling.x-k8s.io
package v1alpha1
