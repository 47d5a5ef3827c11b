/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

// Package metrics defines Stevedore's Prometheus metrics. They are registered in component-base's legacy
// registry, which kube-scheduler serves on /metrics, so one scrape of the scheduler pod returns the scheduler's
// metrics and Stevedore's. As everywhere in Kubernetes, the collectors are process-wide and registered once.
package metrics

import (
	"sync"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"

	"github.com/stevedore-dev/stevedore/pkg/version"
)

const namespace = "stevedore"

// Subsystems: the second part of the metrics' names.
const (
	subsystemDisruption        = "disruption"
	subsystemConsolidation     = "consolidation"
	subsystemNodeRepair        = "node_repair"
	subsystemCapacityBuffer    = "capacity_buffer"
	subsystemCapacityQuota     = "capacity_quota"
	subsystemDeletionCost      = "deletion_cost"
	subsystemTermination       = "termination"
	subsystemGarbageCollection = "garbage_collection"
	subsystemInterruption      = "interruption"
	subsystemNodeClaims        = "nodeclaims"
	subsystemNodes             = "nodes"
	subsystemPods              = "pods"
	subsystemProvisioning      = "provisioning"
	subsystemCloudProvider     = "cloudprovider"
	subsystemNodePool          = "nodepool"
	subsystemCluster           = "cluster"
	subsystemCost              = "cost"
	subsystemCommitment        = "commitment"
)

// Outcomes of stevedore_pods_admitted_total.
const (
	AdmittedToSchedule = "Schedule"
	AdmittedToPlan     = "Plan"
)

// Label names.
const (
	labelMethod       = "method"
	labelAction       = "action"
	labelResult       = "result"
	labelNodePool     = "nodepool"
	labelReason       = "reason"
	labelDecision     = "decision"
	labelCondition    = "condition"
	labelNamespace    = "namespace"
	labelGroup        = "group"
	labelQuota        = "quota"
	labelCommitment   = "commitment"
	labelUnit         = "unit"
	labelName         = "name"
	labelState        = "state"
	labelKind         = "kind"
	labelCapacityType = "capacity_type"
	labelZone         = "zone"
	labelInstanceType = "instance_type"
	labelService      = "service"
	labelOutcome      = "outcome"
	labelOperation    = "operation"
	labelError        = "error"
	labelResource     = "resource"
)

// Disruption metrics.
var (
	// DisruptionDecisions counts disruption commands by method, action (delete, replace) and result
	// (succeeded, failed).
	DisruptionDecisions = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace: namespace, Subsystem: subsystemDisruption, Name: "decisions_total",
		Help:           "Disruption commands carried out, by method, action and result.",
		StabilityLevel: metrics.ALPHA,
	}, []string{labelMethod, labelAction, labelResult})
	// NodesDisrupted counts nodes removed by disruption, by NodePool and reason.
	NodesDisrupted = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace: namespace, Subsystem: subsystemDisruption, Name: "nodes_disrupted_total",
		Help:           "Nodes removed by disruption, by NodePool and reason (Empty, Underutilized, Drifted, Expired, Interrupted).",
		StabilityLevel: metrics.ALPHA,
	}, []string{labelNodePool, labelReason})
	// DisruptionSavings sums the hourly price saved by disruption commands.
	DisruptionSavings = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace: namespace, Subsystem: subsystemDisruption, Name: "hourly_savings_dollars_total",
		Help:           "Hourly price (USD) saved by the disruption commands carried out, by method.",
		StabilityLevel: metrics.ALPHA,
	}, []string{labelMethod})
	// PodsSurged counts the pods disruption moved by surging their owners, by result.
	PodsSurged = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace: namespace, Subsystem: subsystemDisruption, Name: "pods_surged_total",
		Help:           "Pods of disrupted nodes moved make-before-break (their owner scaled up until the successor was Ready), by result: moved, or failed (then evicted, or the command abandoned).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"result"})
	// DisruptionEvaluation times how long each method takes to find a command.
	DisruptionEvaluation = metrics.NewHistogramVec(&metrics.HistogramOpts{
		Namespace: namespace, Subsystem: subsystemDisruption, Name: "evaluation_duration_seconds",
		Help:           "Time a disruption method took to evaluate the cluster, by method.",
		Buckets:        metrics.ExponentialBuckets(0.001, 2, 16),
		StabilityLevel: metrics.ALPHA,
	}, []string{labelMethod})
	// ConsolidationScore records the score of each move a Balanced NodePool's consolidation weighed, by NodePool and
	// decision (approved, rejected).
	ConsolidationScore = metrics.NewHistogramVec(&metrics.HistogramOpts{
		Namespace: namespace, Subsystem: subsystemConsolidation, Name: "score",
		Help:           "Score of each consolidation move weighed under the Balanced policy (share of the NodePool's cost saved over share of its disruption cost caused), by NodePool and decision.",
		Buckets:        []float64{0.1, 0.25, 0.33, 0.5, 1, 2, 5, 10},
		StabilityLevel: metrics.ALPHA,
	}, []string{labelNodePool, labelDecision})
	// ConsolidationMoves counts the moves a Balanced NodePool's consolidation weighed, by NodePool and decision.
	ConsolidationMoves = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace: namespace, Subsystem: subsystemConsolidation, Name: "moves_total",
		Help:           "Consolidation moves weighed under the Balanced policy, by NodePool and decision (approved, rejected).",
		StabilityLevel: metrics.ALPHA,
	}, []string{labelNodePool, labelDecision})
	// NodesRepaired counts unhealthy nodes repaired, by NodePool, condition and action (reboot, replace).
	NodesRepaired = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace: namespace, Subsystem: subsystemNodeRepair, Name: "actions_total",
		Help:           "Unhealthy nodes repaired, by NodePool, node condition and action (reboot, replace).",
		StabilityLevel: metrics.ALPHA,
	}, []string{labelNodePool, labelCondition, labelAction})
	// NodeRepairBlocked is 1 while repair waits for a NodePool with more unhealthy nodes than it may replace.
	NodeRepairBlocked = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Namespace: namespace, Subsystem: subsystemNodeRepair, Name: "blocked",
		Help:           "1 while node repair waits because more of the NodePool's nodes are unhealthy than it may replace at once.",
		StabilityLevel: metrics.ALPHA,
	}, []string{labelNodePool})
	// BufferChunks counts each capacity buffer's chunks by state: withRoom (room kept on a node), waiting (a node is
	// coming up for them, or none can be launched).
	BufferChunks = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Namespace: namespace, Subsystem: subsystemCapacityBuffer, Name: "chunks",
		Help:           "Chunks of each capacity buffer (group: its API group, stevedore.dev or autoscaling.x-k8s.io), by state: withRoom (room kept on a node) or waiting (a node is coming up for them, or none can be launched).",
		StabilityLevel: metrics.ALPHA,
	}, []string{labelGroup, labelNamespace, labelName, labelState})
	// QuotaUsage is what the nodes a CapacityQuota selects use, per limited resource.
	QuotaUsage = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Namespace: namespace, Subsystem: subsystemCapacityQuota, Name: "usage",
		Help:           "What the nodes each CapacityQuota selects use, per limited resource (nodes coming up included; stevedore.dev/hourly-cost in dollars an hour).",
		StabilityLevel: metrics.ALPHA,
	}, []string{labelQuota, labelResource})
	// QuotaLimit is each CapacityQuota's limit, per resource.
	QuotaLimit = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Namespace: namespace, Subsystem: subsystemCapacityQuota, Name: "limit",
		Help:           "Each CapacityQuota's limit, per resource.",
		StabilityLevel: metrics.ALPHA,
	}, []string{labelQuota, labelResource})
	// QuotaLimitedLaunches counts the plans in which a CapacityQuota kept a node from launching or growing.
	QuotaLimitedLaunches = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace: namespace, Subsystem: subsystemCapacityQuota, Name: "limited_total",
		Help:           "Plans (provisioning batches, static NodePools, capacity buffers, bookings) in which a CapacityQuota kept a node from launching or growing, by quota and the first resource it ran out of.",
		StabilityLevel: metrics.ALPHA,
	}, []string{labelQuota, labelResource})
	// PodDeletionCostPatches counts pods whose pod-deletion-cost Stevedore set or took off.
	PodDeletionCostPatches = metrics.NewCounter(&metrics.CounterOpts{
		Namespace: namespace, Subsystem: subsystemDeletionCost, Name: "pod_patches_total",
		Help:           "Pods whose controller.kubernetes.io/pod-deletion-cost Stevedore set or took off, steering scale-in to the nodes consolidation removes first.",
		StabilityLevel: metrics.ALPHA,
	})
	// PodsEvicted counts the pods termination evicted (or deleted when the drain's time was up).
	PodsEvicted = metrics.NewCounter(&metrics.CounterOpts{
		Namespace: namespace, Subsystem: subsystemTermination, Name: "pods_evicted_total",
		Help:           "Pods evicted by the drain of nodes being terminated (or deleted when the drain's time was up).",
		StabilityLevel: metrics.ALPHA,
	})
	// GarbageCollected counts instances and NodeClaims removed by garbage collection.
	GarbageCollected = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace: namespace, Subsystem: subsystemGarbageCollection, Name: "removed_total",
		Help:           "Orphaned instances terminated and NodeClaims deleted because their instance was gone, by kind.",
		StabilityLevel: metrics.ALPHA,
	}, []string{labelKind})
)

// Interruption metrics.
var (
	// InterruptionMessages counts the messages read from the interruption queue, by kind (SpotInterruption,
	// RebalanceRecommendation, StateChange, ScheduledChange, Noop, Unknown, Unparseable).
	InterruptionMessages = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace: namespace, Subsystem: subsystemInterruption, Name: "messages_total",
		Help:           "Messages read from the interruption queue, by kind (Unknown and Unparseable ones are deleted too).",
		StabilityLevel: metrics.ALPHA,
	}, []string{labelKind})
	// InterruptionActions counts what interruption notices led to, by action (replace-and-drain, drain, event,
	// deferred, unknown-instance, failed).
	InterruptionActions = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace: namespace, Subsystem: subsystemInterruption, Name: "actions_total",
		Help:           "Actions taken on interruption notices, by kind and action.",
		StabilityLevel: metrics.ALPHA,
	}, []string{labelKind, labelAction})
	// InterruptionLatency times from the notice's event time to the start of the node's drain.
	InterruptionLatency = metrics.NewHistogramVec(&metrics.HistogramOpts{
		Namespace: namespace, Subsystem: subsystemInterruption, Name: "notice_to_drain_seconds",
		Help:           "Time from an interruption notice's event time to the start of the node's drain, by kind.",
		Buckets:        metrics.ExponentialBuckets(0.25, 2, 12),
		StabilityLevel: metrics.ALPHA,
	}, []string{labelKind})
)

// Provisioning and node lifecycle metrics.
var (
	// NodeClaimsCreated counts NodeClaims created, by NodePool, capacity type planned and reason (provisioning,
	// replacement, booking: for a ProvisioningRequest).
	NodeClaimsCreated = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace: namespace, Subsystem: subsystemNodeClaims, Name: "created_total",
		Help:           "NodeClaims created, by NodePool, planned capacity type and reason (provisioning, replacement, booking).",
		StabilityLevel: metrics.ALPHA,
	}, []string{labelNodePool, labelCapacityType, labelReason})
	// GangNodeClaimsReleased counts NodeClaims deleted because the gang they were launched for cannot be placed
	// whole (a sibling's launch found no capacity).
	GangNodeClaimsReleased = metrics.NewCounter(&metrics.CounterOpts{
		Namespace: namespace, Subsystem: subsystemNodeClaims, Name: "gang_released_total",
		Help:           "NodeClaims deleted because the gang they were launched for cannot be placed whole.",
		StabilityLevel: metrics.ALPHA,
	})
	// NodesCreated counts nodes that registered, by NodePool, zone, capacity type and instance type.
	NodesCreated = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace: namespace, Subsystem: subsystemNodes, Name: "created_total",
		Help:           "Nodes launched by Stevedore that registered with the cluster, by NodePool, zone, capacity type and instance type.",
		StabilityLevel: metrics.ALPHA,
	}, []string{labelNodePool, labelZone, labelCapacityType, labelInstanceType})
	// NodesTerminated counts instances terminated after their node was drained, by NodePool, zone, capacity type
	// and reason (Empty, Underutilized, Drifted, Expired, SpotInterrupted, ..., Deleted).
	NodesTerminated = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace: namespace, Subsystem: subsystemNodes, Name: "terminated_total",
		Help:           "Instances terminated after their node was drained, by NodePool, zone, capacity type and reason.",
		StabilityLevel: metrics.ALPHA,
	}, []string{labelNodePool, labelZone, labelCapacityType, labelReason})
	// LaunchFailures counts failed launches, by NodePool and reason (InsufficientCapacity, RegistrationTimeout, ...).
	LaunchFailures = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace: namespace, Subsystem: subsystemNodeClaims, Name: "launch_failures_total",
		Help:           "NodeClaims whose launch failed, by NodePool and reason.",
		StabilityLevel: metrics.ALPHA,
	}, []string{labelNodePool, labelReason})
	// PodsBoundDuration times pods of Stevedore's profile from creation to binding.
	PodsBoundDuration = metrics.NewHistogram(&metrics.HistogramOpts{
		Namespace: namespace, Subsystem: subsystemPods, Name: "bound_duration_seconds",
		Help:           "Time from a pod's creation to its binding, for pods scheduled by Stevedore.",
		Buckets:        metrics.ExponentialBuckets(0.05, 2, 14),
		StabilityLevel: metrics.ALPHA,
	})
	// PodsStartupDuration times pods of Stevedore's profile from creation to Running.
	PodsStartupDuration = metrics.NewHistogram(&metrics.HistogramOpts{
		Namespace: namespace, Subsystem: subsystemPods, Name: "startup_duration_seconds",
		Help:           "Time from a pod's creation to its first Running status, for pods scheduled by Stevedore.",
		Buckets:        metrics.ExponentialBuckets(0.05, 2, 14),
		StabilityLevel: metrics.ALPHA,
	})
	// PodsReadyNodeWait times pods from the moment a node that can take them is ready (the node planned for them
	// initialized, or the plan made when it already was) to their binding: the time a pod waits on Stevedore's
	// bookkeeping rather than on EC2.
	PodsReadyNodeWait = metrics.NewHistogram(&metrics.HistogramOpts{
		Namespace: namespace, Subsystem: subsystemPods, Name: "ready_node_wait_seconds",
		Help:           "Time from the node planned for a pod being ready (initialized) to the pod's binding.",
		Buckets:        metrics.ExponentialBuckets(0.01, 2, 16),
		StabilityLevel: metrics.ALPHA,
	})
	// PodsParkedOnReadyNode is the number of pods planned on a node that is ready which are neither bound nor being
	// bound: each should bind within moments; a lasting non-zero value is a pod the scheduler is not retrying.
	PodsParkedOnReadyNode = metrics.NewGauge(&metrics.GaugeOpts{
		Namespace: namespace, Subsystem: subsystemPods, Name: "parked_on_ready_node",
		Help:           "Pods planned on a ready (initialized) node that are neither bound nor being bound.",
		StabilityLevel: metrics.ALPHA,
	})
	// PodsParkedOnReadyNodeOldest is how long the longest-parked of those pods has waited.
	PodsParkedOnReadyNodeOldest = metrics.NewGauge(&metrics.GaugeOpts{
		Namespace: namespace, Subsystem: subsystemPods, Name: "parked_on_ready_node_oldest_seconds",
		Help:           "How long the longest-waiting pod planned on a ready node has waited since the node was ready (0 when none).",
		StabilityLevel: metrics.ALPHA,
	})
	// PodsWoken counts pods Stevedore put back in the scheduler's active queue, by the reason that held them.
	PodsWoken = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace: namespace, Subsystem: subsystemPods, Name: "woken_total",
		Help:           "Pods moved back to the scheduler's active queue because what held them cleared, by what cleared.",
		StabilityLevel: metrics.ALPHA,
	}, []string{labelReason})
	// PodsAdmitted counts the pods that entered the scheduling queue unplanned, by what Stevedore did with them:
	// sent to a scheduling cycle (some node has room for them) or planned without one.
	PodsAdmitted = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace: namespace, Subsystem: subsystemPods, Name: "admitted_total",
		Help:           "Pods of this scheduler that entered the scheduling queue with no plan, by what was done: Schedule (some node may take them: a scheduling cycle now) or Plan (no node has room: batched for a new node without a failed cycle).",
		StabilityLevel: metrics.ALPHA,
	}, []string{labelOutcome})
	// BatchPods is the number of pods in each solved provisioning batch.
	BatchPods = metrics.NewHistogram(&metrics.HistogramOpts{
		Namespace: namespace, Subsystem: subsystemProvisioning, Name: "batch_pods",
		Help:           "Pods in each provisioning batch solved.",
		Buckets:        metrics.ExponentialBuckets(1, 2, 14),
		StabilityLevel: metrics.ALPHA,
	})
	// SolveDuration times the solver on each provisioning batch.
	SolveDuration = metrics.NewHistogram(&metrics.HistogramOpts{
		Namespace: namespace, Subsystem: subsystemProvisioning, Name: "solve_duration_seconds",
		Help:           "Time the solver took to plan a provisioning batch.",
		Buckets:        metrics.ExponentialBuckets(0.001, 2, 16),
		StabilityLevel: metrics.ALPHA,
	})
	// SolveTimeouts counts the batches whose improvement phase the solveTimeout safety stop ended before its work
	// bound did: their plans depend on the machine's speed.
	SolveTimeouts = metrics.NewCounter(&metrics.CounterOpts{
		Namespace: namespace, Subsystem: subsystemProvisioning, Name: "solve_timeouts_total",
		Help:           "Provisioning batches whose improvement phase solveTimeout stopped before its bound of moves.",
		StabilityLevel: metrics.ALPHA,
	})
	// UnschedulablePods counts pods no NodePool can run (each time a batch finds one; the pod's event says why).
	UnschedulablePods = metrics.NewCounter(&metrics.CounterOpts{
		Namespace: namespace, Subsystem: subsystemProvisioning, Name: "unschedulable_pods_total",
		Help:           "Pods a provisioning batch could place on no NodePool (the pod's FailedProvisioning event says why).",
		StabilityLevel: metrics.ALPHA,
	})
)

// Cloud provider metrics.
var (
	// CloudAPICalls counts AWS API calls (after retries), by service, operation and error code ("" on success).
	CloudAPICalls = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace: namespace, Subsystem: subsystemCloudProvider, Name: "api_calls_total",
		Help:           "AWS API calls, by service, operation and error code (empty on success), counted once whatever the retries.",
		StabilityLevel: metrics.ALPHA,
	}, []string{labelService, labelOperation, labelError})
	// CloudAPIDuration times AWS API calls, retries included.
	CloudAPIDuration = metrics.NewHistogramVec(&metrics.HistogramOpts{
		Namespace: namespace, Subsystem: subsystemCloudProvider, Name: "api_duration_seconds",
		Help:           "Duration of AWS API calls, retries included, by service and operation.",
		Buckets:        metrics.ExponentialBuckets(0.005, 2, 14),
		StabilityLevel: metrics.ALPHA,
	}, []string{labelService, labelOperation})
	// CatalogAge is how old the instance types and prices in use are; CatalogSource says where they came from.
	CatalogAge = metrics.NewGauge(&metrics.GaugeOpts{
		Namespace: namespace, Subsystem: subsystemCloudProvider, Name: "catalog_age_seconds",
		Help:           "Age of the instance types and prices in use (read from AWS, or the embedded catalog's age when it is used); -1 while none is known.",
		StabilityLevel: metrics.ALPHA,
	})
	// CatalogRefreshFailures counts failed reads of instance types and prices from AWS.
	CatalogRefreshFailures = metrics.NewCounter(&metrics.CounterOpts{
		Namespace: namespace, Subsystem: subsystemCloudProvider, Name: "catalog_refresh_failures_total",
		Help:           "Failed reads of the region's instance types and prices from the EC2 and pricing APIs.",
		StabilityLevel: metrics.ALPHA,
	})
	// CatalogEmbeddedPrices is 1 while the on-demand prices in use are the region's embedded ones (its partition has
	// no Price List API, or the API could not be read), else 0.
	CatalogEmbeddedPrices = metrics.NewGauge(&metrics.GaugeOpts{
		Namespace: namespace, Subsystem: subsystemCloudProvider, Name: "catalog_embedded_prices",
		Help:           "1 while the on-demand prices in use are the region's embedded ones (no Price List API in the partition, or it could not be read), else 0.",
		StabilityLevel: metrics.ALPHA,
	})
	// KubernetesVersionReadFailures counts failed reads of the API server's version.
	KubernetesVersionReadFailures = metrics.NewCounter(&metrics.CounterOpts{
		Namespace: namespace, Subsystem: subsystemCloudProvider, Name: "kubernetes_version_read_failures_total",
		Help:           "Failed reads of the API server's Kubernetes version, which picks the AMIs new nodes launch with (the version read before is kept).",
		StabilityLevel: metrics.ALPHA,
	})
	// UnavailableOfferings is the size of the unavailable-offerings (ICE) cache.
	UnavailableOfferings = metrics.NewGauge(&metrics.GaugeOpts{
		Namespace: namespace, Subsystem: subsystemCloudProvider, Name: "unavailable_offerings",
		Help:           "Offerings (instance type, zone, capacity type) currently skipped for lack of capacity.",
		StabilityLevel: metrics.ALPHA,
	})
)

// Cluster state metrics, refreshed every few seconds.
var (
	// NodePoolNodes is the number of live NodeClaims per NodePool.
	NodePoolNodes = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Namespace: namespace, Subsystem: subsystemNodePool, Name: "nodes",
		Help:           "Live NodeClaims of each NodePool.",
		StabilityLevel: metrics.ALPHA,
	}, []string{labelNodePool})
	// NodePoolUsage is the summed capacity of a NodePool's nodes (cpu in cores, memory in bytes, nodes).
	NodePoolUsage = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Namespace: namespace, Subsystem: subsystemNodePool, Name: "usage",
		Help:           "Summed capacity of a NodePool's nodes, by resource (cpu in cores, memory in bytes, nodes).",
		StabilityLevel: metrics.ALPHA,
	}, []string{labelNodePool, labelResource})
	// NodePoolLimit is a NodePool's limit per resource (absent when unlimited).
	NodePoolLimit = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Namespace: namespace, Subsystem: subsystemNodePool, Name: "limit",
		Help:           "A NodePool's spec.limits, by resource (cpu in cores, memory in bytes, nodes); absent when unlimited.",
		StabilityLevel: metrics.ALPHA,
	}, []string{labelNodePool, labelResource})
	// NodePoolHourlyCost is the summed hourly price of a NodePool's nodes.
	NodePoolHourlyCost = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Namespace: namespace, Subsystem: subsystemNodePool, Name: "hourly_cost_dollars",
		Help:           "Summed hourly price (USD) of a NodePool's nodes.",
		StabilityLevel: metrics.ALPHA,
	}, []string{labelNodePool})
	// NodePoolSpotFallback is 1 while a NodePool falls back to on-demand after repeated Spot interruptions
	// (its stevedore.dev/spot-fallback annotation), 0 otherwise.
	NodePoolSpotFallback = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Namespace: namespace, Subsystem: subsystemNodePool, Name: "spot_fallback",
		Help:           "1 while the NodePool plans on-demand instead of Spot after repeated Spot interruptions, 0 otherwise.",
		StabilityLevel: metrics.ALPHA,
	}, []string{labelNodePool})
	// NodePoolSpotFallbacks counts the times a NodePool fell back to on-demand.
	NodePoolSpotFallbacks = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace: namespace, Subsystem: subsystemNodePool, Name: "spot_fallbacks_total",
		Help:           "Times the NodePool fell back to on-demand after repeated Spot interruptions.",
		StabilityLevel: metrics.ALPHA,
	}, []string{labelNodePool})
	// ClusterUtilization is requested over allocatable on Stevedore's nodes.
	ClusterUtilization = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Namespace: namespace, Subsystem: subsystemCluster, Name: "utilization_ratio",
		Help:           "Requests of the pods on Stevedore's nodes over the nodes' allocatable, by resource (cpu, memory).",
		StabilityLevel: metrics.ALPHA,
	}, []string{labelResource})
	// CostNodes is what Stevedore's nodes cost an hour, as billed (the sum the cost metrics split).
	CostNodes = metrics.NewGauge(&metrics.GaugeOpts{
		Namespace: namespace, Subsystem: subsystemCost, Name: "nodes_hourly_dollars",
		Help:           "Hourly price (USD) of Stevedore's nodes as billed: the sum the namespaces, the DaemonSets and idle split.",
		StabilityLevel: metrics.ALPHA,
	})
	// CostNamespace is the hourly cost attributed to a namespace's pods (DaemonSet pods apart), for the costliest
	// namespaces; the others are summed under namespace "other".
	CostNamespace = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Namespace: namespace, Subsystem: subsystemCost, Name: "namespace_hourly_dollars",
		Help:           "Hourly cost (USD) attributed to a namespace's pods, DaemonSet pods apart: the costliest namespaces, the rest summed as \"other\".",
		StabilityLevel: metrics.ALPHA,
	}, []string{labelNamespace})
	// CostWorkload is the hourly cost attributed to a workload's pods, for the costliest workloads; the others are
	// summed under namespace, kind and name "other".
	CostWorkload = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Namespace: namespace, Subsystem: subsystemCost, Name: "workload_hourly_dollars",
		Help:           "Hourly cost (USD) attributed to a workload's pods (Deployment, StatefulSet, Job, ... or a bare pod): the costliest, the rest summed as \"other\".",
		StabilityLevel: metrics.ALPHA,
	}, []string{labelNamespace, labelKind, labelName})
	// CostUnattributed is the hourly cost of the nodes no workload pays: the DaemonSet pods' and the idle share.
	CostUnattributed = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Namespace: namespace, Subsystem: subsystemCost, Name: "unattributed_hourly_dollars",
		Help:           "Hourly cost (USD) of Stevedore's nodes paid by no workload, by share: daemonsets (DaemonSet pods) and idle.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"share"})
	// CommitmentCapacity is each Commitment's size, CommitmentUsed how much of it the cluster's on-demand nodes use.
	CommitmentCapacity = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Namespace: namespace, Subsystem: subsystemCommitment, Name: "capacity",
		Help:           "Each Commitment's size, in its unit: dollars an hour (Savings Plans), instances or normalized units (Reserved Instances).",
		StabilityLevel: metrics.ALPHA,
	}, []string{labelCommitment, labelKind, labelUnit})
	CommitmentUsed = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Namespace: namespace, Subsystem: subsystemCommitment, Name: "used",
		Help:           "How much of each Commitment the cluster's on-demand nodes use, in its unit.",
		StabilityLevel: metrics.ALPHA,
	}, []string{labelCommitment, labelKind, labelUnit})
	// CommitmentCoverage is the share of the on-demand nodes' list price the Commitments cover.
	CommitmentCoverage = metrics.NewGauge(&metrics.GaugeOpts{
		Namespace: namespace, Subsystem: subsystemCommitment, Name: "coverage_ratio",
		Help:           "Share (0 to 1) of the cluster's on-demand nodes' list price that the Commitments cover.",
		StabilityLevel: metrics.ALPHA,
	})
	// CommitmentBill is the hour's bill with the Commitments: their fees, the uncovered on-demand hours and the rest.
	CommitmentBill = metrics.NewGauge(&metrics.GaugeOpts{
		Namespace: namespace, Subsystem: subsystemCommitment, Name: "effective_hourly_dollars",
		Help:           "What the cluster's nodes cost an hour with the Commitments: their fees (where declared), the on-demand hours they do not cover at list price, and spot at list price.",
		StabilityLevel: metrics.ALPHA,
	})
	// PendingPods is the number of pods of Stevedore's profile not yet bound.
	PendingPods = metrics.NewGauge(&metrics.GaugeOpts{
		Namespace: namespace, Subsystem: subsystemPods, Name: "pending",
		Help:           "Pods of Stevedore's scheduler profile not yet bound to a node.",
		StabilityLevel: metrics.ALPHA,
	})
)

// BuildInfo is 1, labelled with what the binary is (its Stevedore version and commit, the Kubernetes version it
// is built on, its Go version), as kubernetes_build_info is for Kubernetes' components.
var BuildInfo = metrics.NewGaugeVec(&metrics.GaugeOpts{
	Namespace: namespace, Name: "build_info",
	Help:           "1, labelled with the binary's Stevedore version and commit, the Kubernetes version it is built on and its Go version.",
	StabilityLevel: metrics.ALPHA,
}, []string{"version", "commit", "kubernetes_version", "go_version"})

var registerOnce sync.Once

// All returns every Stevedore metric.
func All() []metrics.Registerable {
	return []metrics.Registerable{DisruptionDecisions, NodesDisrupted, DisruptionSavings, PodsSurged, DisruptionEvaluation,
		ConsolidationScore, ConsolidationMoves,
		GarbageCollected, NodesRepaired, NodeRepairBlocked, BufferChunks, QuotaUsage, QuotaLimit, QuotaLimitedLaunches, PodDeletionCostPatches, PodsEvicted, InterruptionMessages, InterruptionActions, InterruptionLatency,
		NodeClaimsCreated, GangNodeClaimsReleased, NodesCreated, NodesTerminated, LaunchFailures, PodsBoundDuration, PodsStartupDuration,
		PodsReadyNodeWait, PodsParkedOnReadyNode, PodsParkedOnReadyNodeOldest, PodsWoken, PodsAdmitted, BatchPods,
		SolveDuration, SolveTimeouts, UnschedulablePods, CloudAPICalls, CloudAPIDuration, UnavailableOfferings, CatalogAge, CatalogRefreshFailures, CatalogEmbeddedPrices,
		KubernetesVersionReadFailures,
		NodePoolNodes, NodePoolUsage, NodePoolLimit, NodePoolHourlyCost, NodePoolSpotFallback, NodePoolSpotFallbacks, ClusterUtilization, PendingPods, BuildInfo,
		CostNodes, CostNamespace, CostWorkload, CostUnattributed, CommitmentCapacity, CommitmentUsed, CommitmentCoverage, CommitmentBill}
}

// Register registers every Stevedore metric in the legacy registry (once per process).
func Register() {
	registerOnce.Do(func() {
		for _, m := range All() {
			legacyregistry.MustRegister(m)
		}
		build := version.Get()
		BuildInfo.WithLabelValues(build.Stevedore, build.Commit, build.Kubernetes, build.Go).Set(1)
	})
}
