/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

// Package v1 holds Stevedore's API, group stevedore.dev: NodePool (what nodes may be launched and how they are
// disrupted), EC2NodeClass (how an EC2 instance is configured) and NodeClaim (one node Stevedore launched).
// Field names follow Karpenter v1 so that users' manifests carry over by changing the apiVersion.
//
// +k8s:deepcopy-gen=package
// +groupName=stevedore.dev
package v1
