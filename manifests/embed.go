/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

// Package manifests embeds the CustomResourceDefinitions and the examples, so that the sandbox installs exactly
// what `kubectl apply -k manifests/` installs and its scenarios apply the examples a user would.
package manifests

import "embed"

// CRDs holds crds/stevedore.dev_*.yaml, the coscheduling PodGroup's, crds/scheduling.x-k8s.io_*.yaml, and the
// ProvisioningRequest's, crds/autoscaling.x-k8s.io_*.yaml.
//
//go:embed crds/stevedore.dev_*.yaml crds/scheduling.x-k8s.io_*.yaml crds/autoscaling.x-k8s.io_*.yaml
var CRDs embed.FS

// Examples holds examples/*.yaml.
//
//go:embed examples/*.yaml
var Examples embed.FS

// SchedulingPolicy is deploy/scheduling-policy.yaml: the admission policy that opts labelled namespaces in to
// Stevedore and keeps a Karpenter running beside it off Stevedore's pods.
//
//go:embed deploy/scheduling-policy.yaml
var SchedulingPolicy []byte

// SchedulingWebhook is admission-webhook/webhook.yaml: the webhook configuration (with its Service and RBAC) that
// takes the policy's place where the API server does not serve MutatingAdmissionPolicy.
//
//go:embed admission-webhook/webhook.yaml
var SchedulingWebhook []byte

// FlowControl is deploy/flowcontrol.yaml: the FlowSchemas and PriorityLevelConfiguration that serve Stevedore's
// ServiceAccount at kube-scheduler's API priority.
//
//go:embed deploy/flowcontrol.yaml
var FlowControl []byte
