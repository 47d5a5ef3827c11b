/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package config

import (
	"slices"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Defaults of the arguments; the controllers default their own options from these.
const (
	DefaultBatchIdle                 = time.Second
	DefaultBatchMax                  = 10 * time.Second
	DefaultSolveTimeout              = 10 * time.Second
	DefaultRegistrationTimeout       = 15 * time.Minute
	DefaultMaxInstanceTypes          = 60
	DefaultVMMemoryOverheadPercent   = 7.5
	DefaultSpotInterruptionNotice    = 2 * time.Minute
	DefaultDisruptionPollInterval    = 10 * time.Second
	DefaultDisruptionValidationDelay = 15 * time.Second
	DefaultGarbageCollectionInterval = time.Minute
	// DefaultCostMetricsTop is how many namespaces and workloads the cost metrics name.
	DefaultCostMetricsTop int32 = 20
	// DefaultProvisioningRequestBookingTime is how long a ProvisioningRequest's room is held (Cluster
	// Autoscaler's).
	DefaultProvisioningRequestBookingTime = 10 * time.Minute
	// DefaultKubernetesVersionCheckInterval separates reads of the API server's version.
	DefaultKubernetesVersionCheckInterval = 5 * time.Minute
	// DefaultPermitTimeout and MaxPermitTimeout bound how long Permit holds a pod for an initializing node (the
	// framework's own limit is 15 minutes).
	DefaultPermitTimeout = 5 * time.Minute
	MaxPermitTimeout     = 15 * time.Minute
	// Node repair.
	DefaultMaxUnhealthyPercent = 20
	DefaultRepairDrainTimeout  = 5 * time.Minute
	DefaultRebootWait          = 10 * time.Minute
	// The admission webhook.
	DefaultWebhookPort          = 9443
	DefaultWebhookNamespace     = "stevedore"
	DefaultWebhookService       = "stevedore-webhook"
	DefaultWebhookSecret        = "stevedore-webhook-cert"
	DefaultWebhookConfiguration = "stevedore-scheduling"
)

// Node conditions of the EKS node monitoring agent (node-problem-detector style) that repair acts on.
const (
	ConditionAcceleratedHardwareReady = "AcceleratedHardwareReady"
	ConditionStorageReady             = "StorageReady"
	ConditionNetworkingReady          = "NetworkingReady"
	ConditionKernelReady              = "KernelReady"
	ConditionContainerRuntimeReady    = "ContainerRuntimeReady"
)

// DefaultRepairPolicies are the kubelet's Ready condition and the EKS node monitoring agent's conditions, with
// Karpenter's tolerations; kernel and container-runtime faults reboot the instance first.
func DefaultRepairPolicies() []RepairPolicyArgs {
	d := func(t time.Duration) metav1.Duration { return metav1.Duration{Duration: t} }
	return []RepairPolicyArgs{
		{ConditionType: string(corev1.NodeReady), ConditionStatus: string(corev1.ConditionFalse), Toleration: d(30 * time.Minute)},
		{ConditionType: string(corev1.NodeReady), ConditionStatus: string(corev1.ConditionUnknown), Toleration: d(30 * time.Minute)},
		{ConditionType: ConditionAcceleratedHardwareReady, ConditionStatus: string(corev1.ConditionFalse), Toleration: d(10 * time.Minute)},
		{ConditionType: ConditionStorageReady, ConditionStatus: string(corev1.ConditionFalse), Toleration: d(30 * time.Minute)},
		{ConditionType: ConditionNetworkingReady, ConditionStatus: string(corev1.ConditionFalse), Toleration: d(30 * time.Minute)},
		{ConditionType: ConditionKernelReady, ConditionStatus: string(corev1.ConditionFalse), Toleration: d(30 * time.Minute), Reboot: true},
		{ConditionType: ConditionContainerRuntimeReady, ConditionStatus: string(corev1.ConditionFalse), Toleration: d(30 * time.Minute), Reboot: true},
	}
}

// Defaults returns the arguments with every unset field defaulted, empty strings taken from env.
func (a ProvisionerArgs) Defaults(env func(string) string) ProvisionerArgs {
	fromEnv := func(v *string, key string) {
		if *v == "" && env != nil {
			*v = env(key)
		}
	}
	fromEnv(&a.ClusterName, EnvClusterName)
	fromEnv(&a.ClusterEndpoint, EnvClusterEndpoint)
	fromEnv(&a.Region, EnvRegion)
	fromEnv(&a.InterruptionQueue, EnvInterruptionQueue)
	defDuration := func(d *metav1.Duration, v time.Duration) {
		if d.Duration == 0 {
			d.Duration = v
		}
	}
	defDuration(&a.BatchIdleDuration, DefaultBatchIdle)
	defDuration(&a.BatchMaxDuration, DefaultBatchMax)
	defDuration(&a.SolveTimeout, DefaultSolveTimeout)
	defDuration(&a.RegistrationTimeout, DefaultRegistrationTimeout)
	defDuration(&a.PermitTimeout, DefaultPermitTimeout)
	defDuration(&a.DisruptionPollInterval, DefaultDisruptionPollInterval)
	defDuration(&a.DisruptionValidationDelay, DefaultDisruptionValidationDelay)
	defDuration(&a.GarbageCollectionInterval, DefaultGarbageCollectionInterval)
	defDuration(&a.ProvisioningRequestBookingTime, DefaultProvisioningRequestBookingTime)
	defDuration(&a.SpotInterruptionNotice, DefaultSpotInterruptionNotice)
	defDuration(&a.KubernetesVersionCheckInterval, DefaultKubernetesVersionCheckInterval)
	if a.MaxInstanceTypes == 0 {
		a.MaxInstanceTypes = DefaultMaxInstanceTypes
	}
	if a.CostMetricsTop == nil {
		v := DefaultCostMetricsTop
		a.CostMetricsTop = &v
	}
	if a.VMMemoryOverheadPercent == nil {
		v := DefaultVMMemoryOverheadPercent
		a.VMMemoryOverheadPercent = &v
	}
	if a.RebalanceAction == "" {
		a.RebalanceAction = RebalanceEvent // as Karpenter: a recommendation is often a false alarm
	}
	if a.MinValuesPolicy == "" {
		a.MinValuesPolicy = MinValuesStrict
	}
	a.NodeRepair = a.NodeRepair.defaults()
	a.AdmissionWebhook = a.AdmissionWebhook.defaults(env)
	if a.PodDeletionCost == nil {
		on := true
		a.PodDeletionCost = &on
	}
	if a.Surge == nil {
		on := true
		a.Surge = &on
	}
	if len(a.GitOpsFieldManagers) == 0 {
		a.GitOpsFieldManagers = DefaultGitOpsFieldManagers()
	}
	if a.SharedCapacityBuffers == nil {
		on := true
		a.SharedCapacityBuffers = &on
	}
	if a.SharedCapacityQuotas == nil {
		on := true
		a.SharedCapacityQuotas = &on
	}
	return a
}

// defaults returns a defaulted copy (nil when the webhook is off).
func (w *AdmissionWebhookArgs) defaults(env func(string) string) *AdmissionWebhookArgs {
	if w == nil && env != nil && env(EnvAdmissionWebhookPort) != "" {
		port, err := strconv.Atoi(env(EnvAdmissionWebhookPort))
		if err != nil {
			port = -1 // refused by validation
		}
		w = &AdmissionWebhookArgs{Port: port}
	}
	if w == nil {
		return nil
	}
	out := *w
	if out.Port == 0 {
		out.Port = DefaultWebhookPort
	}
	if out.Namespace == "" && env != nil {
		out.Namespace = env(EnvNamespace)
	}
	for _, d := range []struct {
		v   *string
		def string
	}{{&out.Namespace, DefaultWebhookNamespace}, {&out.Service, DefaultWebhookService}, {&out.Secret, DefaultWebhookSecret},
		{&out.Configuration, DefaultWebhookConfiguration}} {
		if *d.v == "" {
			*d.v = d.def
		}
	}
	return &out
}

// defaults returns a defaulted copy (never nil).
func (r *NodeRepairArgs) defaults() *NodeRepairArgs {
	out := NodeRepairArgs{}
	if r != nil {
		out = *r
		out.Policies = slices.Clone(r.Policies)
	}
	if out.Enabled == nil {
		off := false // as Karpenter, whose node repair is off until its feature gate is turned on
		out.Enabled = &off
	}
	if len(out.Policies) == 0 {
		out.Policies = DefaultRepairPolicies()
	}
	if out.MaxUnhealthyPercent == 0 {
		out.MaxUnhealthyPercent = DefaultMaxUnhealthyPercent
	}
	if out.DrainTimeout.Duration == 0 {
		out.DrainTimeout.Duration = DefaultRepairDrainTimeout
	}
	if out.RebootWait.Duration == 0 {
		out.RebootWait.Duration = DefaultRebootWait
	}
	return &out
}

// DefaultGitOpsFieldManagers are the field managers of the GitOps controllers that put a field they own back when
// someone else changes it: Argo CD's server-side apply (argocd-controller) and Flux's kustomize-controller and
// helm-controller.
func DefaultGitOpsFieldManagers() []string {
	return []string{"argocd-controller", "kustomize-controller", "helm-controller"}
}
