/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package provisioner

import (
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"

	"github.com/stevedore-dev/stevedore/pkg/disruption"
	"github.com/stevedore-dev/stevedore/pkg/operator"
)

// defaultPermitTimeout and maxPermitTimeout bound how long Permit holds a pod for an initializing node (the
// framework's own limit is 15 minutes).
const (
	defaultPermitTimeout = 5 * time.Minute
	maxPermitTimeout     = 15 * time.Minute
)

// Environment variables that fill arguments left empty in the scheduler configuration, so that one
// KubeSchedulerConfiguration serves every cluster and the Deployment (or the sandbox's --env-out file) supplies
// what differs.
const (
	EnvClusterName       = "STEVEDORE_CLUSTER_NAME"
	EnvClusterEndpoint   = "STEVEDORE_CLUSTER_ENDPOINT"
	EnvInterruptionQueue = "STEVEDORE_INTERRUPTION_QUEUE_URL"
	EnvRegion            = "AWS_REGION"
)

// minValues policies.
const (
	MinValuesStrict     = "Strict"
	MinValuesBestEffort = "BestEffort"
)

// Args are the Provisioner plugin's arguments, set under pluginConfig in the KubeSchedulerConfiguration.
type Args struct {
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
	// SolveTimeout bounds the time the solver may spend improving one batch's packing. Default 2s.
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
	// RebalanceAction is what an EC2 rebalance recommendation does: Replace (pre-launch a replacement and drain
	// within the NodePool's budget, the default) or Event (record an event only, as Karpenter does).
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
	// DisruptionValidationDelay is how long an emptiness or consolidation decision waits before it is checked
	// again against the cluster and carried out. Default 15s.
	DisruptionValidationDelay metav1.Duration `json:"disruptionValidationDelay,omitempty"`
	// SpotToSpotConsolidation lets consolidation replace a spot node by a cheaper spot node when at least 15
	// cheaper types can be chosen from. Default false (spot nodes are only deleted), as in Karpenter.
	SpotToSpotConsolidation bool `json:"spotToSpotConsolidation,omitempty"`
	// GarbageCollectionInterval separates runs of the garbage collector (instances with no NodeClaim, NodeClaims
	// with no instance). Default 1m.
	GarbageCollectionInterval metav1.Duration `json:"garbageCollectionInterval,omitempty"`
	// NodeRepair replaces nodes that stay unhealthy. Default on, with the default policies.
	NodeRepair *NodeRepairArgs `json:"nodeRepair,omitempty"`
	// PodDeletionCost sets controller.kubernetes.io/pod-deletion-cost on the ReplicaSet pods of Stevedore's nodes,
	// lowest on the nodes consolidation would remove first, so that a Deployment's scale-in empties nodes instead
	// of leaving consolidation pods to evict. Pods whose cost the user set are left alone. Default true.
	PodDeletionCost *bool `json:"podDeletionCost,omitempty"`
}

// NodeRepairArgs configure node auto-repair.
type NodeRepairArgs struct {
	// Enabled turns repair on or off. Default true.
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

// Defaults returns the arguments with every unset field defaulted, empty strings taken from env.
func (a Args) Defaults(env func(string) string) Args {
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
	def := operator.DefaultOptions()
	defDuration(&a.BatchIdleDuration, def.BatchIdle)
	defDuration(&a.BatchMaxDuration, def.BatchMax)
	defDuration(&a.SolveTimeout, def.SolveTimeout)
	defDuration(&a.RegistrationTimeout, def.RegistrationTimeout)
	defDuration(&a.PermitTimeout, defaultPermitTimeout)
	defDuration(&a.DisruptionPollInterval, def.DisruptionPollInterval)
	defDuration(&a.DisruptionValidationDelay, def.DisruptionValidationDelay)
	defDuration(&a.GarbageCollectionInterval, def.GarbageCollectionInterval)
	defDuration(&a.SpotInterruptionNotice, def.SpotInterruptionNotice)
	if a.MaxInstanceTypes == 0 {
		a.MaxInstanceTypes = def.MaxInstanceTypes
	}
	if a.VMMemoryOverheadPercent == nil {
		v := def.VMMemoryOverheadPercent
		a.VMMemoryOverheadPercent = &v
	}
	if a.RebalanceAction == "" {
		a.RebalanceAction = def.RebalanceAction
	}
	if a.MinValuesPolicy == "" {
		a.MinValuesPolicy = MinValuesStrict
	}
	a.NodeRepair = a.NodeRepair.defaults()
	if a.PodDeletionCost == nil {
		on := true
		a.PodDeletionCost = &on
	}
	return a
}

// defaults returns a defaulted copy (never nil).
func (r *NodeRepairArgs) defaults() *NodeRepairArgs {
	out := NodeRepairArgs{}
	if r != nil {
		out = *r
		out.Policies = slices.Clone(r.Policies)
	}
	if out.Enabled == nil {
		on := true
		out.Enabled = &on
	}
	if len(out.Policies) == 0 {
		for _, p := range disruption.DefaultRepairPolicies() {
			out.Policies = append(out.Policies, RepairPolicyArgs{ConditionType: string(p.ConditionType),
				ConditionStatus: string(p.Status), Toleration: metav1.Duration{Duration: p.Toleration}, Reboot: p.Reboot})
		}
	}
	if out.MaxUnhealthyPercent == 0 {
		out.MaxUnhealthyPercent = disruption.DefaultMaxUnhealthyPercent
	}
	if out.DrainTimeout.Duration == 0 {
		out.DrainTimeout.Duration = disruption.DefaultRepairDrainTimeout
	}
	if out.RebootWait.Duration == 0 {
		out.RebootWait.Duration = disruption.DefaultRebootWait
	}
	return &out
}

// validate reports the invalid fields of defaulted repair arguments.
func (r *NodeRepairArgs) validate(path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if r.MaxUnhealthyPercent < 1 || r.MaxUnhealthyPercent > 100 {
		errs = append(errs, field.Invalid(path.Child("maxUnhealthyPercent"), r.MaxUnhealthyPercent, "must be between 1 and 100"))
	}
	if r.DrainTimeout.Duration < 0 {
		errs = append(errs, field.Invalid(path.Child("drainTimeout"), r.DrainTimeout.Duration.String(), "must be positive"))
	}
	if r.RebootWait.Duration < 0 {
		errs = append(errs, field.Invalid(path.Child("rebootWait"), r.RebootWait.Duration.String(), "must be positive"))
	}
	seen := map[string]bool{}
	for i, p := range r.Policies {
		pp := path.Child("policies").Index(i)
		if p.ConditionType == "" {
			errs = append(errs, field.Required(pp.Child("conditionType"), "a node condition type, such as Ready or KernelReady"))
		}
		switch p.ConditionStatus {
		case "True", "False", "Unknown":
		default:
			errs = append(errs, field.NotSupported(pp.Child("conditionStatus"), p.ConditionStatus, []string{"True", "False", "Unknown"}))
		}
		if p.ConditionType == "Ready" && p.ConditionStatus == "True" {
			errs = append(errs, field.Invalid(pp.Child("conditionStatus"), p.ConditionStatus, "Ready True is a healthy node"))
		}
		if p.Toleration.Duration <= 0 {
			errs = append(errs, field.Invalid(pp.Child("toleration"), p.Toleration.Duration.String(), "must be positive"))
		}
		key := p.ConditionType + "=" + p.ConditionStatus
		if seen[key] {
			errs = append(errs, field.Duplicate(pp, key))
		}
		seen[key] = true
	}
	return errs
}

// options converts defaulted, valid repair arguments (nil when repair is off).
func (r *NodeRepairArgs) options() *disruption.RepairOptions {
	if r == nil || r.Enabled == nil || !*r.Enabled {
		return nil
	}
	out := &disruption.RepairOptions{MaxUnhealthyPercent: r.MaxUnhealthyPercent, DrainTimeout: r.DrainTimeout.Duration,
		RebootWait: r.RebootWait.Duration}
	for _, p := range r.Policies {
		out.Policies = append(out.Policies, disruption.RepairPolicy{ConditionType: corev1.NodeConditionType(p.ConditionType),
			Status: corev1.ConditionStatus(p.ConditionStatus), Toleration: p.Toleration.Duration, Reboot: p.Reboot})
	}
	return out
}

// Validate reports every invalid field of defaulted arguments, each error naming its field.
func (a Args) Validate() field.ErrorList {
	var errs field.ErrorList
	if a.ClusterName == "" {
		errs = append(errs, field.Required(field.NewPath("clusterName"), "set it, or $"+EnvClusterName))
	} else if len(a.ClusterName) > 100 || strings.ContainsAny(a.ClusterName, " /\t") {
		errs = append(errs, field.Invalid(field.NewPath("clusterName"), a.ClusterName, "must be an EKS cluster name"))
	}
	if a.ClusterEndpoint != "" {
		if u, err := url.Parse(a.ClusterEndpoint); err != nil || u.Scheme != "https" || u.Host == "" {
			errs = append(errs, field.Invalid(field.NewPath("clusterEndpoint"), a.ClusterEndpoint, "must be an https:// URL"))
		}
	}
	positive := func(name string, d metav1.Duration) {
		if d.Duration <= 0 {
			errs = append(errs, field.Invalid(field.NewPath(name), d.Duration.String(), "must be positive"))
		}
	}
	positive("batchIdleDuration", a.BatchIdleDuration)
	positive("batchMaxDuration", a.BatchMaxDuration)
	positive("solveTimeout", a.SolveTimeout)
	positive("registrationTimeout", a.RegistrationTimeout)
	positive("permitTimeout", a.PermitTimeout)
	positive("disruptionPollInterval", a.DisruptionPollInterval)
	positive("disruptionValidationDelay", a.DisruptionValidationDelay)
	positive("garbageCollectionInterval", a.GarbageCollectionInterval)
	positive("spotInterruptionNotice", a.SpotInterruptionNotice)
	if a.BatchMaxDuration.Duration < a.BatchIdleDuration.Duration {
		errs = append(errs, field.Invalid(field.NewPath("batchMaxDuration"), a.BatchMaxDuration.Duration.String(),
			"must not be shorter than batchIdleDuration ("+a.BatchIdleDuration.Duration.String()+")"))
	}
	if a.PermitTimeout.Duration > maxPermitTimeout {
		errs = append(errs, field.Invalid(field.NewPath("permitTimeout"), a.PermitTimeout.Duration.String(),
			"must be at most 15m, the scheduler's cap on Permit waits"))
	}
	if a.MaxInstanceTypes < 1 || a.MaxInstanceTypes > 200 {
		errs = append(errs, field.Invalid(field.NewPath("maxInstanceTypes"), a.MaxInstanceTypes, "must be between 1 and 200"))
	}
	switch p := *a.VMMemoryOverheadPercent; {
	case p < 0 || p >= 50:
		errs = append(errs, field.Invalid(field.NewPath("vmMemoryOverheadPercent"), p, "must be at least 0 and below 50"))
	case p > 0 && p < 1:
		// Karpenter's VM_MEMORY_OVERHEAD_PERCENT is a fraction (0.075); here it is a percent (7.5)
		errs = append(errs, field.Invalid(field.NewPath("vmMemoryOverheadPercent"), p, fmt.Sprintf(
			"is a percent (7.5 means 7.5%%); %g looks like Karpenter's fraction: write %g, or 0 for no overhead", p, p*100)))
	}
	if !slices.Contains(operator.RebalanceActions(), a.RebalanceAction) {
		errs = append(errs, field.NotSupported(field.NewPath("rebalanceAction"), a.RebalanceAction,
			operator.RebalanceActions()))
	}
	if a.MinValuesPolicy != MinValuesStrict && a.MinValuesPolicy != MinValuesBestEffort {
		errs = append(errs, field.NotSupported(field.NewPath("minValuesPolicy"), a.MinValuesPolicy,
			[]string{MinValuesStrict, MinValuesBestEffort}))
	}
	errs = append(errs, a.NodeRepair.validate(field.NewPath("nodeRepair"))...)
	if q := a.InterruptionQueue; strings.Contains(q, "://") {
		if u, err := url.Parse(q); err != nil || u.Host == "" || strings.Trim(u.Path, "/") == "" {
			errs = append(errs, field.Invalid(field.NewPath("interruptionQueue"), q, "must be an SQS queue URL or a queue name"))
		}
	}
	return errs
}

// DecodeArgs reads the plugin's pluginConfig args strictly (an unknown or misspelt field is an error), applies
// defaults and validates them.
func DecodeArgs(obj runtime.Object, env func(string) string) (Args, error) {
	var a Args
	if obj != nil {
		raw, ok := obj.(*runtime.Unknown)
		if !ok {
			return a, fmt.Errorf("%s args: want runtime.Unknown, got %T", Name, obj)
		}
		if len(raw.Raw) > 0 {
			if err := yaml.UnmarshalStrict(raw.Raw, &a); err != nil {
				return a, fmt.Errorf("%s args: %w", Name, err)
			}
		}
	}
	a = a.Defaults(env)
	if errs := a.Validate(); len(errs) > 0 {
		return a, fmt.Errorf("%s args: %w", Name, errs.ToAggregate())
	}
	return a, nil
}

// operatorOptions are the controllers' options from defaulted, validated arguments.
func (a Args) operatorOptions(env func(string) string) operator.Options {
	return operator.Options{
		ClusterName: a.ClusterName, ClusterEndpoint: a.ClusterEndpoint, Region: a.Region, InterruptionQueue: a.InterruptionQueue,
		BatchIdle: a.BatchIdleDuration.Duration, BatchMax: a.BatchMaxDuration.Duration, SolveTimeout: a.SolveTimeout.Duration,
		RegistrationTimeout: a.RegistrationTimeout.Duration, MaxInstanceTypes: a.MaxInstanceTypes, EmbeddedCatalog: a.EmbeddedCatalog,
		VMMemoryOverheadPercent: *a.VMMemoryOverheadPercent, MinValuesBestEffort: a.MinValuesPolicy == MinValuesBestEffort,
		RebalanceAction: a.RebalanceAction, SpotInterruptionNotice: a.SpotInterruptionNotice.Duration,
		DisableDisruption: a.DisableDisruption, SpotToSpotConsolidation: a.SpotToSpotConsolidation,
		DisruptionPollInterval: a.DisruptionPollInterval.Duration, DisruptionValidationDelay: a.DisruptionValidationDelay.Duration,
		GarbageCollectionInterval: a.GarbageCollectionInterval.Duration, Repair: a.NodeRepair.options(), PodDeletionCost: *a.PodDeletionCost, Env: env,
	}
}
