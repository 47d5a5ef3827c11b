/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

// Package v1beta1 holds Stevedore's definitions of two kinds of SIG Autoscaling's API group autoscaling.x-k8s.io:
// the CapacityBuffer, the warm-capacity API Cluster Autoscaler and Karpenter read (a buffer names one pod shape, a
// PodTemplate or a workload, and how many of them to keep room for), and Cluster Autoscaler's CapacityQuota, a
// ceiling on the nodes a label selector matches. The types are written from the API's documented fields, so
// manifests written for those autoscalers are read unchanged.
//
// +k8s:deepcopy-gen=package
// +groupName=autoscaling.x-k8s.io
// +groupGoName=AutoscalingX
package v1beta1
