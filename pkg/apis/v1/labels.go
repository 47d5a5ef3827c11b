/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package v1

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
)

// Labels that workloads select on. They keep Karpenter's spelling so that pod specs written for Karpenter
// schedule unchanged on Stevedore's nodes.
const (
	LabelCapacityType       = "karpenter.sh/capacity-type"
	LabelInstanceCategory   = "karpenter.k8s.aws/instance-category"
	LabelInstanceFamily     = "karpenter.k8s.aws/instance-family"
	LabelInstanceGeneration = "karpenter.k8s.aws/instance-generation"
	LabelInstanceSize       = "karpenter.k8s.aws/instance-size"
	LabelInstanceCPU        = "karpenter.k8s.aws/instance-cpu"
	LabelInstanceMemory     = "karpenter.k8s.aws/instance-memory"
	LabelInstanceHypervisor = "karpenter.k8s.aws/instance-hypervisor"
	// Accelerator, storage and network labels: only types that have them carry them.
	LabelInstanceGPUName                 = "karpenter.k8s.aws/instance-gpu-name"
	LabelInstanceGPUManufacturer         = "karpenter.k8s.aws/instance-gpu-manufacturer"
	LabelInstanceGPUCount                = "karpenter.k8s.aws/instance-gpu-count"
	LabelInstanceGPUMemory               = "karpenter.k8s.aws/instance-gpu-memory"
	LabelInstanceAcceleratorName         = "karpenter.k8s.aws/instance-accelerator-name"
	LabelInstanceAcceleratorManufacturer = "karpenter.k8s.aws/instance-accelerator-manufacturer"
	LabelInstanceAcceleratorCount        = "karpenter.k8s.aws/instance-accelerator-count"
	LabelInstanceLocalNVMe               = "karpenter.k8s.aws/instance-local-nvme"
	LabelInstanceNetworkBandwidth        = "karpenter.k8s.aws/instance-network-bandwidth"
	// Processor, storage and network labels every type carries, from DescribeInstanceTypes (the EBS bandwidth only
	// on types EBS-optimized by default).
	LabelInstanceCPUManufacturer        = "karpenter.k8s.aws/instance-cpu-manufacturer"
	LabelInstanceCPUSustainedClockSpeed = "karpenter.k8s.aws/instance-cpu-sustained-clock-speed-mhz"
	LabelInstanceEBSBandwidth           = "karpenter.k8s.aws/instance-ebs-bandwidth"
	LabelInstanceEncryptionInTransit    = "karpenter.k8s.aws/instance-encryption-in-transit-supported"
	LabelInstanceCapabilityFlex         = "karpenter.k8s.aws/instance-capability-flex"
	LabelInstanceTenancy                = "karpenter.k8s.aws/instance-tenancy"
	// LabelNodeClass is the name of the EC2NodeClass a node was launched with.
	LabelNodeClass = "karpenter.k8s.aws/ec2nodeclass"
	// LabelZoneID is the zone's ID (use1-az1), the same in every account, where zone names are not.
	LabelZoneID = "topology.k8s.aws/zone-id"
	// TenancyDefault is the only tenancy Stevedore launches (shared hardware).
	TenancyDefault       = "default"
	LabelInstanceType    = "node.kubernetes.io/instance-type"
	LabelZone            = "topology.kubernetes.io/zone"
	LabelRegion          = "topology.kubernetes.io/region"
	LabelArch            = "kubernetes.io/arch"
	LabelOS              = "kubernetes.io/os"
	LabelHostname        = "kubernetes.io/hostname"
	CapacityTypeSpot     = "spot"
	CapacityTypeOnDemand = "on-demand"
	// CapacityTypeReserved is an instance launched into a capacity reservation or Capacity Block.
	CapacityTypeReserved = "reserved"
	// LabelCapacityReservationID, LabelCapacityReservationType (default or capacity-block) and
	// LabelCapacityReservationInterruptible (true or false) mark reserved nodes.
	LabelCapacityReservationID            = "karpenter.k8s.aws/capacity-reservation-id"
	LabelCapacityReservationType          = "karpenter.k8s.aws/capacity-reservation-type"
	LabelCapacityReservationInterruptible = "karpenter.k8s.aws/capacity-reservation-interruptible"
	// Reservation types.
	ReservationTypeDefault       = "default"
	ReservationTypeCapacityBlock = "capacity-block"
	ArchitectureAMD64            = "amd64"
	ArchitectureARM64            = "arm64"
	KarpenterDoNotDisruptKey     = "karpenter.sh/do-not-disrupt"
	KarpenterNodeClassGroup      = "karpenter.k8s.aws"
	DefaultNodeClassKind         = "EC2NodeClass"
	DefaultExpireAfterDuration   = "720h"
)

// Extended resources of accelerated instance types, as their device plugins advertise them.
const (
	ResourceNVIDIAGPU     = "nvidia.com/gpu"
	ResourceAMDGPU        = "amd.com/gpu"
	ResourceHabanaGaudi   = "habana.ai/gaudi"
	ResourceAWSNeuron     = "aws.amazon.com/neuron"
	ResourceAWSNeuronCore = "aws.amazon.com/neuroncore"
	ResourceEFA           = "vpc.amazonaws.com/efa"
)

// AcceleratorResources are the extended resources of accelerated instance types, in the order the solver keeps them.
func AcceleratorResources() []string {
	return []string{ResourceNVIDIAGPU, ResourceAMDGPU, ResourceHabanaGaudi, ResourceAWSNeuron, ResourceAWSNeuronCore, ResourceEFA}
}

// UnregisteredTaint is the taint a node of Stevedore's registers with, removed once Stevedore has synced the node.
// Its effect is NoSchedule, not NoExecute (Karpenter's choice for its own key): the node carries no pod yet, so
// NoExecute would keep nothing more off it, but kube-controller-manager's taint-eviction controller acts on
// NoExecute taints from its own view of the node, and a pod the scheduler bound just after the taint went could
// be deleted by a controller that had not seen the node's update yet.
func UnregisteredTaint() corev1.Taint {
	return corev1.Taint{Key: TaintUnregistered, Value: "true", Effect: corev1.TaintEffectNoSchedule}
}

// Ownership and lifecycle keys are Stevedore's own, so that a cluster that also runs Karpenter never confuses
// the two.
const (
	LabelNodePool        = "stevedore.dev/nodepool"
	LabelNodeClaim       = "stevedore.dev/nodeclaim"
	LabelInitialized     = "stevedore.dev/initialized"
	TaintUnregistered    = "stevedore.dev/unregistered"
	TaintDisrupted       = "stevedore.dev/disrupted"
	TerminationFinalizer = "stevedore.dev/termination"
	DoNotDisruptKey      = "stevedore.dev/do-not-disrupt"
	// AnnotationReplacement on a pod (Surge or Evict) overrides its NodePool's spec.disruption.replacement.
	AnnotationReplacement = "stevedore.dev/replacement"
	// AnnotationSurge on a Deployment or ReplicaSet records a surge under way, as "<replicas before>:<replicas
	// during>": a process that takes over scales back a surge the one before it left.
	AnnotationSurge        = "stevedore.dev/surge"
	AnnotationNodePoolHash = "stevedore.dev/nodepool-hash"
	// AnnotationNodePoolHashVersion is the version of the hash function that computed AnnotationNodePoolHash.
	AnnotationNodePoolHashVersion = "stevedore.dev/nodepool-hash-version"
	AnnotationNodeClassHash       = "stevedore.dev/nodeclass-hash"
	// AnnotationPlannedPods on a NodeClaim lists the pods it was created for ("namespace/name", comma-separated): a
	// scheduler that takes over (a restart, a new leader) reads the plan back from it.
	AnnotationPlannedPods = "stevedore.dev/planned-pods"
	// AnnotationNodeClaimPrice on a NodeClaim is the hourly price planned for it, counted until its launch sets
	// status.price.
	AnnotationNodeClaimPrice = "stevedore.dev/price"
	// AnnotationCommitment on a NodeClaim names the Commitment its node was planned under: it counts against the
	// commitment's room until its launch says which type and zone it got.
	AnnotationCommitment = "stevedore.dev/commitment"
	// AnnotationLaunchOrder "listed" on a NodeClaim makes its launch try the instance types in the order listed
	// (a prioritized fleet): NodeOverlays changed their prices, so EC2's own order would not be the plan's.
	AnnotationLaunchOrder = "stevedore.dev/launch-order"
	// LaunchOrderListed is the value of AnnotationLaunchOrder for a launch in the listed order.
	LaunchOrderListed = "listed"
	// AnnotationLaunchGroup on a NodeClaim names the atomic launch it belongs to, as "<id>/<size>": the provisioner
	// gives one to the NodeClaims of a gang that have the same shape, and the cloud provider launches the group's
	// NodeClaims in one all-or-nothing CreateFleet (MinTargetCapacity = size, one instance type, one zone).
	AnnotationLaunchGroup = "stevedore.dev/launch-group"
	// AnnotationGang on a NodeClaim launched for a gang's pods names the gang ("<namespace>/<PodGroup>"); a gang's
	// placement group is tagged with it.
	AnnotationGang = "stevedore.dev/gang"
	// AnnotationOnDemandFloor on a pod (its template) sets its workload's on-demand floor: a percentage ("20%") or
	// a count ("2") of the workload's pods that run on on-demand or reserved capacity (package floor).
	AnnotationOnDemandFloor = "stevedore.dev/on-demand-floor"
	// AnnotationSpotPoolCap on a pod (its template) caps how many of its workload's pods may run in one Spot pool,
	// an instance type in a zone: a count ("2") (package poolcap).
	AnnotationSpotPoolCap = "stevedore.dev/spot-pool-cap"
	// AnnotationSpotFallback on a NodePool makes it fall back to on-demand after repeated Spot interruptions:
	// "<interruptions>/<window>" ("3/30m"), on-demand until the window passes without another (package spotrisk).
	AnnotationSpotFallback = "stevedore.dev/spot-fallback"
	// AnnotationProvisioningRequest on a NodeClaim names the ProvisioningRequest ("namespace/name") it was launched
	// for: disruption leaves its node alone while the request's booking holds.
	AnnotationProvisioningRequest = "stevedore.dev/provisioning-request"
	// AnnotationDrainDeadline on a NodeClaim (RFC 3339) ends the drain of its node: pods still there are deleted
	// and the instance terminated, as after the terminationGracePeriod (node repair sets it).
	AnnotationDrainDeadline = "stevedore.dev/drain-deadline"
)

// WellKnownLabels returns the node labels that every launched node carries and that Stevedore derives from the
// instance type and offering it launches.
func WellKnownLabels() []string {
	return []string{
		LabelCapacityType, LabelInstanceCategory, LabelInstanceFamily, LabelInstanceGeneration, LabelInstanceSize,
		LabelInstanceCPU, LabelInstanceMemory, LabelInstanceHypervisor, LabelInstanceType, LabelZone, LabelRegion,
		LabelArch, LabelOS,
	}
}

// HasTerminationFinalizer reports whether finalizers hold TerminationFinalizer.
func HasTerminationFinalizer(finalizers []string) bool {
	return slices.Contains(finalizers, TerminationFinalizer)
}
