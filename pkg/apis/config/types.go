/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

// Package config holds the arguments of Stevedore's scheduler plugin (set under pluginConfig in the
// KubeSchedulerConfiguration): their types, defaults, validation and decoding, as kube-scheduler keeps its plugins'
// arguments in its apis/config. The controllers take their defaults from here, so each is stated once.
package config

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// PluginName is the Provisioner plugin's name in the scheduler configuration, and the prefix of its errors.
const PluginName = "Provisioner"

// Environment variables that fill arguments left empty in the scheduler configuration, so that one
// KubeSchedulerConfiguration serves every cluster and the Deployment (or the sandbox's --env-out file) supplies
// what differs.
const (
	EnvClusterName       = "STEVEDORE_CLUSTER_NAME"
	EnvClusterEndpoint   = "STEVEDORE_CLUSTER_ENDPOINT"
	EnvInterruptionQueue = "STEVEDORE_INTERRUPTION_QUEUE_URL"
	EnvRegion            = "AWS_REGION"
	// EnvNamespace is the namespace the scheduler runs in (the Deployment sets it from the pod's own).
	EnvNamespace = "STEVEDORE_NAMESPACE"
	// EnvAdmissionWebhookPort, when admissionWebhook is not set, turns the webhook on at that port (the installs for
	// API servers without MutatingAdmissionPolicy set it).
	EnvAdmissionWebhookPort = "STEVEDORE_ADMISSION_WEBHOOK_PORT"
)

// minValues policies.
const (
	MinValuesStrict     = "Strict"
	MinValuesBestEffort = "BestEffort"
)

// ProvisionerArgs are the Provisioner plugin's arguments, set under pluginConfig in the KubeSchedulerConfiguration.
type ProvisionerArgs struct {
	metav1.TypeMeta `json:",inline"`

	// ClusterName names the EKS cluster: nodes join it, and EC2 resources are tagged
	// kubernetes.io/cluster/<name>=owned. Required (or $STEVEDORE_CLUSTER_NAME).
	ClusterName string `json:"clusterName,omitempty"`
	// ClusterEndpoint is the API server URL new nodes join. Default $STEVEDORE_CLUSTER_ENDPOINT, else the
	// endpoint eks:DescribeCluster gives (which also gives the certificate authority and the Service range; the
	// scheduler does not start without it).
	ClusterEndpoint string `json:"clusterEndpoint,omitempty"`
	// Region of the cluster. Default $AWS_REGION, else the SDK's default chain (IMDS on EC2).
	Region string `json:"region,omitempty"`
	// InterruptionQueue is the SQS queue URL or name fed by the EventBridge interruption rules. Empty turns
	// interruption handling off. Default $STEVEDORE_INTERRUPTION_QUEUE_URL.
	InterruptionQueue string `json:"interruptionQueue,omitempty"`
	// BatchIdleDuration closes a provisioning batch when no new pod arrived for this long. Default 1s.
	BatchIdleDuration metav1.Duration `json:"batchIdleDuration,omitempty"`
	// BatchMaxDuration closes a provisioning batch this long after its first pod at the latest. Default 10s.
	BatchMaxDuration metav1.Duration `json:"batchMaxDuration,omitempty"`
	// SolveTimeout is a safety stop on the time the solver may spend improving one batch's packing, whose work is
	// bounded by a count of moves; a batch it stops is counted and logged. Default 10s.
	SolveTimeout metav1.Duration `json:"solveTimeout,omitempty"`
	// RegistrationTimeout is how long a launched node may take to register before its NodeClaim and instance
	// are deleted and its pods provisioned again. Default 15m.
	RegistrationTimeout metav1.Duration `json:"registrationTimeout,omitempty"`
	// PermitTimeout bounds how long a pod bound for a registered but not yet initialized node is held in
	// Permit. Default 5m; at most 15m (the scheduler's cap).
	PermitTimeout metav1.Duration `json:"permitTimeout,omitempty"`
	// MaxInstanceTypes caps the instance types (cheapest first) offered to one CreateFleet call. Default 60.
	MaxInstanceTypes int `json:"maxInstanceTypes,omitempty"`
	// EmbeddedCatalog lets the scheduler use the instance types and prices embedded in the binary when the EC2 and
	// pricing APIs cannot be read at start-up, and only in the region the embedded catalog was built for. Default
	// false: nothing is launched until the APIs answer (a catalog read before is kept through later failures).
	EmbeddedCatalog bool `json:"embeddedCatalog,omitempty"`
	// VMMemoryOverheadPercent is subtracted from an instance type's memory until a node of that type reports
	// its real capacity. Default 7.5.
	VMMemoryOverheadPercent *float64 `json:"vmMemoryOverheadPercent,omitempty"`
	// RebalanceAction is what an EC2 rebalance recommendation does: Event (record an event only, the default, as
	// Karpenter does) or Replace (pre-launch a replacement and drain within the NodePool's budget).
	RebalanceAction string `json:"rebalanceAction,omitempty"`
	// MinValuesPolicy is what happens to pods whose nodes cannot meet a NodePool requirement's minValues:
	// Strict (the default, as Karpenter) leaves them unschedulable with the requirement named; BestEffort plans
	// the node with as many distinct values as the pods allow.
	MinValuesPolicy string `json:"minValuesPolicy,omitempty"`
	// SpotInterruptionNotice is how long AWS gives between a spot interruption warning and the termination; the
	// wait for replacements ends early enough to drain within it. Default 2m (AWS's notice; change it only for an
	// emulator).
	SpotInterruptionNotice metav1.Duration `json:"spotInterruptionNotice,omitempty"`
	// DisableDisruption turns the voluntary disruption loop (emptiness, drift, consolidation) off; expiry,
	// interruption and manual deletion still work.
	DisableDisruption bool `json:"disableDisruption,omitempty"`
	// DisruptionPollInterval separates disruption passes that found nothing to do. Default 10s.
	DisruptionPollInterval metav1.Duration `json:"disruptionPollInterval,omitempty"`
	// CostMetricsTop is how many namespaces and workloads the cost metrics name, costliest first; the rest are
	// summed under "other" (the metrics' cardinality stays bounded). Default 20.
	CostMetricsTop *int32 `json:"costMetricsTop,omitempty"`
	// ProvisioningRequestBookingTime is how long the room found or launched for a ProvisioningRequest is held for
	// its pods once it is Provisioned. Default 10m (Cluster Autoscaler's).
	ProvisioningRequestBookingTime metav1.Duration `json:"provisioningRequestBookingTime,omitempty"`
	// DisruptionValidationDelay is how long an emptiness or consolidation decision waits before it is checked
	// again against the cluster and carried out. Default 15s.
	DisruptionValidationDelay metav1.Duration `json:"disruptionValidationDelay,omitempty"`
	// SpotToSpotConsolidation lets consolidation replace a spot node by a cheaper spot node when at least 15
	// cheaper types can be chosen from. Default false (spot nodes are only deleted), as in Karpenter.
	SpotToSpotConsolidation bool `json:"spotToSpotConsolidation,omitempty"`
	// GarbageCollectionInterval separates runs of the garbage collector (instances with no NodeClaim, NodeClaims
	// with no instance). Default 1m.
	GarbageCollectionInterval metav1.Duration `json:"garbageCollectionInterval,omitempty"`
	// NodeRepair replaces nodes that stay unhealthy. Default off (as Karpenter); enabled: true turns it on with
	// the default policies.
	NodeRepair *NodeRepairArgs `json:"nodeRepair,omitempty"`
	// PodDeletionCost sets controller.kubernetes.io/pod-deletion-cost on the ReplicaSet pods of Stevedore's nodes,
	// lowest on the nodes consolidation would remove first, so that a Deployment's scale-in empties nodes instead
	// of leaving consolidation pods to evict. Pods whose cost the user set are left alone. Default true.
	PodDeletionCost *bool `json:"podDeletionCost,omitempty"`
	// Surge lets a disrupted node's Deployment and ReplicaSet pods move make-before-break (their owner scaled up
	// until the successor is Ready, then back) where their NodePool's replacement or their own annotation says
	// Surge. False evicts every pod whatever those say, and Stevedore then writes no Deployment or ReplicaSet (the
	// chart drops those rights). Default true.
	Surge *bool `json:"surge,omitempty"`
	// GitOpsFieldManagers are the field managers of GitOps controllers that put back a field they own when someone
	// else changes it (Argo CD and Flux with self-heal): the pods of a Deployment or ReplicaSet whose spec.replicas
	// one of them owns are evicted, not surged, with a SurgeSkippedForGitOps event on the owner. Argo CD's client-side
	// apply, which has no field manager of its own, is recognised by its tracking annotation. Default
	// argocd-controller, kustomize-controller, helm-controller; a list given replaces it.
	GitOpsFieldManagers []string `json:"gitOpsFieldManagers,omitempty"`
	// SharedCapacityBuffers serves the CapacityBuffers of SIG Autoscaling's API group (autoscaling.x-k8s.io), the
	// ones Cluster Autoscaler and Karpenter read, as well as Stevedore's own (stevedore.dev), where their CRD is
	// installed. Turn it off where another autoscaler serves them in the same cluster. Default true.
	SharedCapacityBuffers *bool `json:"sharedCapacityBuffers,omitempty"`
	// SharedCapacityQuotas keeps every launch within the CapacityQuotas of SIG Autoscaling's API group
	// (autoscaling.x-k8s.io), Cluster Autoscaler's cluster-wide ceilings, and writes their status, where their CRD
	// is installed. Turn it off where another autoscaler serves them in the same cluster. Default true.
	SharedCapacityQuotas *bool `json:"sharedCapacityQuotas,omitempty"`
	// KubernetesVersionCheckInterval is how often the API server's Kubernetes version is read: AMI aliases resolve
	// to the images of that version, so after a control-plane upgrade new nodes launch with the new minor's images
	// and nodes with the old ones drift. Default 5m.
	KubernetesVersionCheckInterval metav1.Duration `json:"kubernetesVersionCheckInterval,omitempty"`
	// AdmissionWebhook serves, from every replica, the admission webhook that does what the stevedore-scheduling
	// MutatingAdmissionPolicy does (opt labelled namespaces in, keep Karpenter off Stevedore's pods), for API
	// servers that do not serve MutatingAdmissionPolicy (Kubernetes 1.34 and 1.35). Unset: on at the port
	// $STEVEDORE_ADMISSION_WEBHOOK_PORT when that is set, else off.
	AdmissionWebhook *AdmissionWebhookArgs `json:"admissionWebhook,omitempty"`
}

// AdmissionWebhookArgs configure the admission webhook.
type AdmissionWebhookArgs struct {
	// Port the webhook serves HTTPS on. Default 9443.
	Port int `json:"port,omitempty"`
	// Namespace the scheduler runs in: where the Service and the Secret holding the certificates are. Default
	// $STEVEDORE_NAMESPACE, else stevedore.
	Namespace string `json:"namespace,omitempty"`
	// Service in front of the scheduler's pods that the webhook configuration calls; the serving certificate is
	// issued for its DNS names. Default stevedore-webhook.
	Service string `json:"service,omitempty"`
	// Secret that holds the webhook's certificate authority and serving certificate, created by the first replica.
	// Default stevedore-webhook-cert.
	Secret string `json:"secret,omitempty"`
	// Configuration is the MutatingWebhookConfiguration whose caBundle the scheduler keeps. Default
	// stevedore-scheduling.
	Configuration string `json:"configuration,omitempty"`
}

// NodeRepairArgs configure node auto-repair.
type NodeRepairArgs struct {
	// Enabled turns repair on or off. Default false.
	Enabled *bool `json:"enabled,omitempty"`
	// Policies replace the default policies (Ready False/Unknown 30m; AcceleratedHardwareReady False 10m;
	// StorageReady, NetworkingReady False 30m; KernelReady, ContainerRuntimeReady False 30m, rebooted first).
	Policies []RepairPolicyArgs `json:"policies,omitempty"`
	// MaxUnhealthyPercent of a NodePool's nodes (rounded down, at least one) are repaired at once; while more
	// are unhealthy, repair waits. Default 20.
	MaxUnhealthyPercent int `json:"maxUnhealthyPercent,omitempty"`
	// DrainTimeout bounds the drain of a node being repaired. Default 5m.
	DrainTimeout metav1.Duration `json:"drainTimeout,omitempty"`
	// RebootWait is how long a rebooted node has to recover before it is replaced. Default 10m.
	RebootWait metav1.Duration `json:"rebootWait,omitempty"`
}

// RepairPolicyArgs is one repair policy: a node condition, its status, and how long it is tolerated.
type RepairPolicyArgs struct {
	ConditionType   string          `json:"conditionType"`
	ConditionStatus string          `json:"conditionStatus"`
	Toleration      metav1.Duration `json:"toleration"`
	// Reboot restarts the instance once before replacing it (only where the kubelet still reports).
	Reboot bool `json:"reboot,omitempty"`
}

// Rebalance actions: what an EC2 rebalance recommendation does.
const (
	RebalanceReplace = "Replace"
	RebalanceEvent   = "Event"
)

// RebalanceActions are the values RebalanceAction accepts.
func RebalanceActions() []string { return []string{RebalanceReplace, RebalanceEvent} }
