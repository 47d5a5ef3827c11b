/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package v1

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// EC2NodeClass says how an EC2 instance launched for a NodePool is configured: AMI, subnets, security groups,
// IAM role, user data, disks, instance metadata options and kubelet settings.
//
// +genclient
// +genclient:nonNamespaced
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:resource:path=ec2nodeclasses,scope=Cluster,categories=stevedore,shortName=sdec2nc
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="AMIFamily",type=string,JSONPath=".spec.amiFamily"
// +kubebuilder:printcolumn:name="Role",type=string,JSONPath=".spec.role"
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=".status.conditions[?(@.type==\"Ready\")].status"
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=".status.conditions[?(@.type==\"Ready\")].reason",priority=1
// +kubebuilder:printcolumn:name="Reservations",type=string,JSONPath=".status.capacityReservations[*].id",priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=".metadata.creationTimestamp"
type EC2NodeClass struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec EC2NodeClassSpec `json:"spec"`
	// +optional
	Status EC2NodeClassStatus `json:"status,omitempty"`
}

// AMI families.
const (
	AMIFamilyAL2023       = "AL2023"
	AMIFamilyBottlerocket = "Bottlerocket"
	AMIFamilyCustom       = "Custom"
)

// EC2NodeClassSpec is what the user asks of an EC2NodeClass.
// +kubebuilder:validation:XValidation:message="spec: exactly one of role and instanceProfile must be set",rule="has(self.role) != has(self.instanceProfile)"
// +kubebuilder:validation:XValidation:message="spec.amiSelectorTerms: amiFamily Custom needs amiSelectorTerms (images by id, name, tags or ssmParameter, or an alias; the user data is used as is)",rule="!has(self.amiFamily) || self.amiFamily != 'Custom' || has(self.amiSelectorTerms)"
// +kubebuilder:validation:XValidation:message="spec.amiFamily: with an alias term, amiFamily is the alias's family or Custom",rule="!has(self.amiFamily) || self.amiFamily == 'Custom' || !has(self.amiSelectorTerms) || self.amiSelectorTerms.all(t, !has(t.alias) || t.alias.startsWith(self.amiFamily.lowerAscii() + '@'))"
// +kubebuilder:validation:XValidation:message="spec.userData: amiFamily Custom needs userData to join the cluster",rule="!has(self.amiFamily) || self.amiFamily != 'Custom' || has(self.userData)"
// +kubebuilder:validation:XValidation:message="spec: placementGroupSelector and gangPlacementGroup cannot both be set (a gang's group replaces the selected one)",rule="!(has(self.placementGroupSelector) && has(self.gangPlacementGroup))"
type EC2NodeClassSpec struct {
	// AMIFamily selects the bootstrap format of the user data: AL2023 (nodeadm), Bottlerocket (TOML) or Custom
	// (user data passed as given). Default AL2023, or the family of an amiSelectorTerms alias.
	// +kubebuilder:validation:Enum=AL2023;Bottlerocket;Custom
	// +optional
	AMIFamily *string `json:"amiFamily,omitempty"`

	// AMISelectorTerms select the AMIs; terms are ORed. Default: the alias of the AMI family at latest
	// (al2023@latest).
	// +kubebuilder:validation:MaxItems=30
	// +kubebuilder:validation:XValidation:message="spec.amiSelectorTerms: an alias term must be the only term",rule="!self.exists(t, has(t.alias)) || self.size() == 1"
	// +optional
	AMISelectorTerms []AMISelectorTerm `json:"amiSelectorTerms,omitempty"`

	// SubnetSelectorTerms select the subnets nodes launch into; terms are ORed, fields of a term ANDed.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=30
	// +required
	SubnetSelectorTerms []SubnetSelectorTerm `json:"subnetSelectorTerms"`

	// SecurityGroupSelectorTerms select the security groups of the nodes. Default: the EKS cluster security
	// group (tag aws:eks:cluster-name=<cluster>).
	// +kubebuilder:validation:MaxItems=30
	// +optional
	SecurityGroupSelectorTerms []SecurityGroupSelectorTerm `json:"securityGroupSelectorTerms,omitempty"`

	// CapacityReservationSelectorTerms select On-Demand Capacity Reservations and Capacity Blocks to launch into
	// (capacity type reserved); terms are ORed, fields of a term ANDed. Reserved offerings are used first while
	// they have room; a NodePool that also allows on-demand or spot falls back to them.
	// +kubebuilder:validation:MaxItems=30
	// +optional
	CapacityReservationSelectorTerms []CapacityReservationSelectorTerm `json:"capacityReservationSelectorTerms,omitempty"`

	// PlacementGroupSelector selects an existing placement group, by name, id or tags (exactly one group must
	// match), that every instance of the node class launches into; its strategy (cluster, partition or spread) is
	// the group's. A cluster group keeps its instances in one Availability Zone: give the NodePools of such a node
	// class one zone. status.placementGroup names the group resolved.
	// +optional
	PlacementGroupSelector *PlacementGroupSelector `json:"placementGroupSelector,omitempty"`

	// GangPlacementGroup Cluster gives each gang launched from the node class (the NodeClaims of a PodGroup's
	// pods, launched all or nothing) a cluster placement group of its own: Stevedore creates it before the launch,
	// tagged for the cluster and the gang, launches every node of the gang into it, and deletes it once no instance
	// runs in it.
	// +kubebuilder:validation:Enum=Cluster
	// +optional
	GangPlacementGroup string `json:"gangPlacementGroup,omitempty"`

	// Role is the IAM role of the nodes, by name or ARN. Stevedore creates an instance profile for it, named
	// <cluster>_<hash of cluster, region and EC2NodeClass> under the path /stevedore/<region>/<cluster>/ and
	// tagged kubernetes.io/cluster/<cluster>=owned, puts this role in it (replacing any other), and deletes it
	// once the EC2NodeClass is deleted and its last NodeClaim is gone. status.instanceProfile names it.
	// +kubebuilder:validation:MinLength=1
	// +optional
	Role string `json:"role,omitempty"`

	// InstanceProfile is an existing IAM instance profile to use instead of Role; Stevedore checks that it exists
	// and holds a role, and never changes it.
	// +kubebuilder:validation:MinLength=1
	// +optional
	InstanceProfile *string `json:"instanceProfile,omitempty"`

	// UserData is merged with the user data Stevedore generates (AL2023: a MIME part before the NodeConfig;
	// Bottlerocket: TOML merged under ours) or used as is (Custom).
	// +optional
	UserData *string `json:"userData,omitempty"`

	// Tags are put on instances, volumes and launch templates.
	// +kubebuilder:validation:MaxProperties=40
	// +kubebuilder:validation:XValidation:message="spec.tags: keys kubernetes.io/cluster/*, stevedore.dev/nodepool, stevedore.dev/nodeclaim and eks:eks-cluster-name are set by Stevedore",rule="self.all(k, !k.startsWith('kubernetes.io/cluster/') && k != 'stevedore.dev/nodepool' && k != 'stevedore.dev/nodeclaim' && k != 'eks:eks-cluster-name')"
	// +optional
	Tags map[string]string `json:"tags,omitempty"`

	// BlockDeviceMappings of the instances. Default: the root volume, gp3 20Gi, encrypted.
	// +kubebuilder:validation:MaxItems=50
	// +kubebuilder:validation:XValidation:message="spec.blockDeviceMappings: at most one mapping may be the root volume",rule="self.filter(x, has(x.rootVolume) && x.rootVolume).size() <= 1"
	// +optional
	BlockDeviceMappings []BlockDeviceMapping `json:"blockDeviceMappings,omitempty"`

	// MetadataOptions of the instance metadata service. Default: IMDSv2 required, hop limit 1.
	// +kubebuilder:default={httpEndpoint: enabled, httpProtocolIPv6: disabled, httpPutResponseHopLimit: 1, httpTokens: required}
	// +optional
	MetadataOptions *MetadataOptions `json:"metadataOptions,omitempty"`

	// Kubelet settings; they also change the allocatable Stevedore plans with.
	// +optional
	Kubelet *KubeletConfiguration `json:"kubelet,omitempty"`

	// AssociatePublicIPAddress overrides the subnet's setting for the node's primary network interface.
	// +optional
	AssociatePublicIPAddress *bool `json:"associatePublicIPAddress,omitempty"`

	// ConnectionTracking sets the idle timeouts of tracked connections on the node's primary network interface.
	// +optional
	ConnectionTracking *ConnectionTracking `json:"connectionTracking,omitempty"`

	// DetailedMonitoring turns on CloudWatch detailed monitoring.
	// +optional
	DetailedMonitoring *bool `json:"detailedMonitoring,omitempty"`

	// InstanceStorePolicy RAID0 stripes the NVMe instance-store volumes of the types that have them into one
	// RAID0 array that holds the kubelet's, the container runtime's and the pods' log directories (AL2023:
	// nodeadm's localStorage strategy; Bottlerocket: its ephemeral-storage bootstrap command), and such a
	// node's ephemeral-storage is the instance store's size instead of the root volume's. Unset, instance-store
	// volumes are left alone.
	// +kubebuilder:validation:Enum=RAID0
	// +optional
	InstanceStorePolicy *string `json:"instanceStorePolicy,omitempty"`
}

// InstanceStorePolicyRAID0 is the instanceStorePolicy that stripes the instance-store volumes.
const InstanceStorePolicyRAID0 = "RAID0"

// AMISelectorTerm selects AMIs. Alias stands alone; the other fields are ANDed.
// +kubebuilder:validation:XValidation:message="amiSelectorTerms[]: set one of alias, id, name, tags or ssmParameter",rule="has(self.alias) || has(self.id) || has(self.name) || has(self.tags) || has(self.ssmParameter)"
// +kubebuilder:validation:XValidation:message="amiSelectorTerms[]: alias cannot be combined with other fields",rule="!has(self.alias) || (!has(self.id) && !has(self.name) && !has(self.tags) && !has(self.ssmParameter) && !has(self.owner))"
// +kubebuilder:validation:XValidation:message="amiSelectorTerms[]: id cannot be combined with other fields",rule="!has(self.id) || (!has(self.alias) && !has(self.name) && !has(self.tags) && !has(self.ssmParameter) && !has(self.owner))"
type AMISelectorTerm struct {
	// Alias is family@version: al2023@latest, bottlerocket@latest, or a pinned version (al2023@v20251120).
	// +kubebuilder:validation:Pattern=`^(al2023|bottlerocket)@(latest|v?[0-9][0-9a-zA-Z.\-]*)$`
	// +kubebuilder:validation:MaxLength=40
	// +optional
	Alias string `json:"alias,omitempty"`
	// ID is an AMI id.
	// +kubebuilder:validation:Pattern=`^ami-[0-9a-z]+$`
	// +optional
	ID string `json:"id,omitempty"`
	// Name is an AMI name; * wildcards are allowed.
	// +optional
	Name string `json:"name,omitempty"`
	// Owner is an account id, or self or amazon; default self and amazon.
	// +optional
	Owner string `json:"owner,omitempty"`
	// SSMParameter is the name of an SSM parameter holding an AMI id.
	// +optional
	SSMParameter string `json:"ssmParameter,omitempty"`
	// Tags the AMI must carry; a value of * matches any value.
	// +kubebuilder:validation:MaxProperties=20
	// +kubebuilder:validation:XValidation:message="amiSelectorTerms[].tags: empty keys or values are not allowed",rule="self.all(k, k != '' && self[k] != '')"
	// +optional
	Tags map[string]string `json:"tags,omitempty"`
}

// SubnetSelectorTerm selects subnets by id, or by tags (ANDed).
// +kubebuilder:validation:XValidation:message="subnetSelectorTerms[]: set id or tags",rule="has(self.id) || has(self.tags)"
// +kubebuilder:validation:XValidation:message="subnetSelectorTerms[]: id cannot be combined with tags",rule="!(has(self.id) && has(self.tags))"
type SubnetSelectorTerm struct {
	// ID is a subnet id.
	// +kubebuilder:validation:Pattern=`^subnet-[0-9a-z]+$`
	// +optional
	ID string `json:"id,omitempty"`
	// Tags the subnet must carry; a value of * matches any value. A common choice is karpenter.sh/discovery: <cluster>.
	// +kubebuilder:validation:MaxProperties=20
	// +kubebuilder:validation:XValidation:message="subnetSelectorTerms[].tags: empty keys or values are not allowed",rule="self.all(k, k != '' && self[k] != '')"
	// +optional
	Tags map[string]string `json:"tags,omitempty"`
}

// PlacementGroupSelector selects one placement group by name, id or tags.
// +kubebuilder:validation:XValidation:message="placementGroupSelector: set exactly one of name, id and tags",rule="[has(self.name), has(self.id), has(self.tags)].filter(x, x).size() == 1"
type PlacementGroupSelector struct {
	// Name of the placement group.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=255
	// +optional
	Name string `json:"name,omitempty"`
	// ID of the placement group.
	// +kubebuilder:validation:Pattern=`^pg-[0-9a-z]+$`
	// +optional
	ID string `json:"id,omitempty"`
	// Tags the placement group carries (exactly one group may match).
	// +kubebuilder:validation:MinProperties=1
	// +kubebuilder:validation:MaxProperties=20
	// +kubebuilder:validation:XValidation:message="placementGroupSelector.tags: empty keys or values are not allowed",rule="self.all(k, k != '' && self[k] != '')"
	// +optional
	Tags map[string]string `json:"tags,omitempty"`
}

// Gang placement group strategies.
const (
	// GangPlacementGroupCluster gives each gang a cluster placement group of its own.
	GangPlacementGroupCluster = "Cluster"
)

// CapacityReservationSelectorTerm selects capacity reservations by id, or by tags, owner and instance match criteria
// (ANDed).
// +kubebuilder:validation:XValidation:message="capacityReservationSelectorTerms[]: set id, tags or instanceMatchCriteria",rule="has(self.id) || has(self.tags) || has(self.instanceMatchCriteria)"
// +kubebuilder:validation:XValidation:message="capacityReservationSelectorTerms[]: id cannot be combined with other fields",rule="!has(self.id) || (!has(self.tags) && !has(self.ownerID) && !has(self.instanceMatchCriteria))"
type CapacityReservationSelectorTerm struct {
	// ID is a capacity reservation id.
	// +kubebuilder:validation:Pattern=`^cr-[0-9a-z]+$`
	// +optional
	ID string `json:"id,omitempty"`
	// OwnerID is the AWS account that owns the reservation (default: any the account can use).
	// +kubebuilder:validation:Pattern=`^[0-9]{12}$`
	// +optional
	OwnerID string `json:"ownerID,omitempty"`
	// Tags the reservation must carry; a value of * matches any value.
	// +kubebuilder:validation:MaxProperties=20
	// +kubebuilder:validation:XValidation:message="capacityReservationSelectorTerms[].tags: empty keys or values are not allowed",rule="self.all(k, k != '' && self[k] != '')"
	// +optional
	Tags map[string]string `json:"tags,omitempty"`
	// InstanceMatchCriteria selects reservations that take any matching instance (open) or only instances that
	// name them (targeted).
	// +kubebuilder:validation:Enum=open;targeted
	// +optional
	InstanceMatchCriteria string `json:"instanceMatchCriteria,omitempty"`
}

// SecurityGroupSelectorTerm selects security groups by id, by name, or by tags (ANDed).
// +kubebuilder:validation:XValidation:message="securityGroupSelectorTerms[]: set id, name or tags",rule="has(self.id) || has(self.name) || has(self.tags)"
// +kubebuilder:validation:XValidation:message="securityGroupSelectorTerms[]: id cannot be combined with other fields",rule="!has(self.id) || (!has(self.name) && !has(self.tags))"
type SecurityGroupSelectorTerm struct {
	// ID is a security group id.
	// +kubebuilder:validation:Pattern=`^sg-[0-9a-z]+$`
	// +optional
	ID string `json:"id,omitempty"`
	// Name is a security group name.
	// +optional
	Name string `json:"name,omitempty"`
	// Tags the group must carry; a value of * matches any value.
	// +kubebuilder:validation:MaxProperties=20
	// +kubebuilder:validation:XValidation:message="securityGroupSelectorTerms[].tags: empty keys or values are not allowed",rule="self.all(k, k != '' && self[k] != '')"
	// +optional
	Tags map[string]string `json:"tags,omitempty"`
}

// BlockDeviceMapping is one EBS volume of the instance.
type BlockDeviceMapping struct {
	// DeviceName such as /dev/xvda.
	// +optional
	DeviceName *string `json:"deviceName,omitempty"`
	// RootVolume marks the volume the OS boots from; its size counts as the node's ephemeral storage.
	// +optional
	RootVolume bool `json:"rootVolume,omitempty"`
	// EBS settings of the volume.
	// +optional
	EBS *BlockDevice `json:"ebs,omitempty"`
}

// BlockDevice holds the EBS settings of a volume.
// +kubebuilder:validation:XValidation:message="blockDeviceMappings[].ebs: set volumeSize or snapshotID",rule="has(self.volumeSize) || has(self.snapshotID)"
// +kubebuilder:validation:XValidation:message="blockDeviceMappings[].ebs.volumeInitializationRate: needs a snapshotID to initialize from",rule="!has(self.volumeInitializationRate) || (has(self.snapshotID) && size(self.snapshotID) > 0)"
type BlockDevice struct {
	// VolumeSize such as 20Gi (1Gi to 64Ti).
	// +optional
	VolumeSize *resource.Quantity `json:"volumeSize,omitempty"`
	// VolumeType: gp3 (default), gp2, io1, io2, st1, sc1, standard.
	// +kubebuilder:validation:Enum=standard;io1;io2;gp2;sc1;st1;gp3
	// +optional
	VolumeType *string `json:"volumeType,omitempty"`
	// IOPS for io1, io2 and gp3.
	// +kubebuilder:validation:Minimum=100
	// +optional
	IOPS *int64 `json:"iops,omitempty"`
	// Throughput in MiB/s for gp3.
	// +kubebuilder:validation:Minimum=125
	// +optional
	Throughput *int64 `json:"throughput,omitempty"`
	// Encrypted; default true.
	// +kubebuilder:default=true
	// +optional
	Encrypted *bool `json:"encrypted,omitempty"`
	// KMSKeyID of the encryption key; default the account's EBS key.
	// +optional
	KMSKeyID *string `json:"kmsKeyID,omitempty"`
	// DeleteOnTermination; default true.
	// +kubebuilder:default=true
	// +optional
	DeleteOnTermination *bool `json:"deleteOnTermination,omitempty"`
	// SnapshotID to create the volume from.
	// +optional
	SnapshotID *string `json:"snapshotID,omitempty"`
	// VolumeInitializationRate is how fast, in MiB/s (100 to 300), the volume is filled from its snapshot: a
	// provisioned rate makes its initialization time predictable.
	// +kubebuilder:validation:Minimum=100
	// +kubebuilder:validation:Maximum=300
	// +optional
	VolumeInitializationRate *int32 `json:"volumeInitializationRate,omitempty"`
}

// MetadataOptions configure the instance metadata service (IMDS).
type MetadataOptions struct {
	// HTTPEndpoint enables or disables IMDS.
	// +kubebuilder:default=enabled
	// +kubebuilder:validation:Enum=enabled;disabled
	// +optional
	HTTPEndpoint *string `json:"httpEndpoint,omitempty"`
	// HTTPProtocolIPv6 enables the IPv6 IMDS endpoint.
	// +kubebuilder:default=disabled
	// +kubebuilder:validation:Enum=enabled;disabled
	// +optional
	HTTPProtocolIPv6 *string `json:"httpProtocolIPv6,omitempty"`
	// HTTPPutResponseHopLimit is the IMDS response hop limit; 1 keeps pods from reaching the node's credentials.
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=64
	// +optional
	HTTPPutResponseHopLimit *int64 `json:"httpPutResponseHopLimit,omitempty"`
	// HTTPTokens: required (IMDSv2 only, default) or optional.
	// +kubebuilder:default=required
	// +kubebuilder:validation:Enum=required;optional
	// +optional
	HTTPTokens *string `json:"httpTokens,omitempty"`
}

// KubeletConfiguration is the part of the kubelet's configuration Stevedore sets and plans with.
// +kubebuilder:validation:XValidation:message="spec.kubelet.evictionHard: keys must be memory.available, nodefs.available, nodefs.inodesFree, imagefs.available, imagefs.inodesFree or pid.available",rule="!has(self.evictionHard) || self.evictionHard.all(k, k in ['memory.available','nodefs.available','nodefs.inodesFree','imagefs.available','imagefs.inodesFree','pid.available'])"
// +kubebuilder:validation:XValidation:message="spec.kubelet.kubeReserved: keys must be cpu, memory, ephemeral-storage or pid",rule="!has(self.kubeReserved) || self.kubeReserved.all(k, k in ['cpu','memory','ephemeral-storage','pid'])"
// +kubebuilder:validation:XValidation:message="spec.kubelet.systemReserved: keys must be cpu, memory, ephemeral-storage or pid",rule="!has(self.systemReserved) || self.systemReserved.all(k, k in ['cpu','memory','ephemeral-storage','pid'])"
// +kubebuilder:validation:XValidation:message="spec.kubelet.evictionSoft: keys must be memory.available, nodefs.available, nodefs.inodesFree, imagefs.available, imagefs.inodesFree or pid.available",rule="!has(self.evictionSoft) || self.evictionSoft.all(k, k in ['memory.available','nodefs.available','nodefs.inodesFree','imagefs.available','imagefs.inodesFree','pid.available'])"
// +kubebuilder:validation:XValidation:message="spec.kubelet.evictionSoftGracePeriod: keys must be memory.available, nodefs.available, nodefs.inodesFree, imagefs.available, imagefs.inodesFree or pid.available",rule="!has(self.evictionSoftGracePeriod) || self.evictionSoftGracePeriod.all(k, k in ['memory.available','nodefs.available','nodefs.inodesFree','imagefs.available','imagefs.inodesFree','pid.available'])"
// +kubebuilder:validation:XValidation:message="spec.kubelet.evictionSoft: every threshold needs its evictionSoftGracePeriod (the kubelet refuses one without)",rule="!has(self.evictionSoft) || (has(self.evictionSoftGracePeriod) && self.evictionSoft.all(k, k in self.evictionSoftGracePeriod))"
// +kubebuilder:validation:XValidation:message="spec.kubelet.evictionSoftGracePeriod: every grace period needs its evictionSoft threshold",rule="!has(self.evictionSoftGracePeriod) || (has(self.evictionSoft) && self.evictionSoftGracePeriod.all(k, k in self.evictionSoft))"
// +kubebuilder:validation:XValidation:message="spec.kubelet.imageGCHighThresholdPercent must be greater than imageGCLowThresholdPercent",rule="!has(self.imageGCHighThresholdPercent) || !has(self.imageGCLowThresholdPercent) || self.imageGCHighThresholdPercent > self.imageGCLowThresholdPercent"
type KubeletConfiguration struct {
	// MaxPods overrides the ENI-based pod limit of each instance type.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000
	// +optional
	MaxPods *int32 `json:"maxPods,omitempty"`
	// PodsPerCore caps pods per vCPU (the lower of this and MaxPods wins).
	// +kubebuilder:validation:Minimum=0
	// +optional
	PodsPerCore *int32 `json:"podsPerCore,omitempty"`
	// KubeReserved overrides the computed kube-reserved resources.
	// +optional
	KubeReserved map[string]string `json:"kubeReserved,omitempty"`
	// SystemReserved resources.
	// +optional
	SystemReserved map[string]string `json:"systemReserved,omitempty"`
	// EvictionHard thresholds; memory.available defaults to 100Mi.
	// +optional
	EvictionHard map[string]string `json:"evictionHard,omitempty"`
	// ClusterDNS addresses given to the kubelet.
	// +optional
	ClusterDNS []string `json:"clusterDNS,omitempty"`
	// EvictionSoft thresholds: the kubelet evicts pods when one holds for its evictionSoftGracePeriod. As in the
	// kubelet, only evictionHard is kept out of a node's allocatable (Karpenter plans with the larger of the two).
	// +optional
	EvictionSoft map[string]string `json:"evictionSoft,omitempty"`
	// EvictionSoftGracePeriod is how long each evictionSoft threshold must hold before pods are evicted.
	// +optional
	EvictionSoftGracePeriod map[string]metav1.Duration `json:"evictionSoftGracePeriod,omitempty"`
	// EvictionMaxPodGracePeriod caps, in seconds, the termination grace period of pods evicted for a soft
	// threshold.
	// +optional
	EvictionMaxPodGracePeriod *int32 `json:"evictionMaxPodGracePeriod,omitempty"`
	// ImageGCHighThresholdPercent is the disk usage after which image garbage collection always runs.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	// +optional
	ImageGCHighThresholdPercent *int32 `json:"imageGCHighThresholdPercent,omitempty"`
	// ImageGCLowThresholdPercent is the disk usage image garbage collection frees down to.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	// +optional
	ImageGCLowThresholdPercent *int32 `json:"imageGCLowThresholdPercent,omitempty"`
	// CPUCFSQuota enforces CPU limits with CFS quota (the kubelet's default, true).
	// +optional
	CPUCFSQuota *bool `json:"cpuCFSQuota,omitempty"`
}

// EC2NodeClassStatus reports what an EC2NodeClass resolved to.
type EC2NodeClassStatus struct {
	// Subnets resolved from subnetSelectorTerms, most free IPs first.
	// +optional
	Subnets []SubnetStatus `json:"subnets,omitempty"`
	// SecurityGroups resolved from securityGroupSelectorTerms.
	// +optional
	SecurityGroups []SecurityGroupStatus `json:"securityGroups,omitempty"`
	// AMIs resolved from amiSelectorTerms.
	// +optional
	AMIs []AMIStatus `json:"amis,omitempty"`
	// InstanceProfile used by the nodes: spec.instanceProfile, or the one Stevedore manages for spec.role.
	// +optional
	InstanceProfile string `json:"instanceProfile,omitempty"`
	// CapacityReservations resolved from capacityReservationSelectorTerms: active ones in the node class's zones.
	// +optional
	CapacityReservations []CapacityReservationStatus `json:"capacityReservations,omitempty"`
	// PlacementGroup resolved from placementGroupSelector.
	// +optional
	PlacementGroup *PlacementGroupStatus `json:"placementGroup,omitempty"`
	// Conditions: SubnetsReady, SecurityGroupsReady, AMIsReady, InstanceProfileReady, PlacementGroupReady (with a
	// placementGroupSelector), Ready.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// PlacementGroupStatus is a resolved placement group.
type PlacementGroupStatus struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	// Strategy is cluster, partition or spread.
	Strategy string `json:"strategy"`
	// PartitionCount of a partition group.
	// +optional
	PartitionCount int32 `json:"partitionCount,omitempty"`
}

// SubnetStatus is a resolved subnet.
type SubnetStatus struct {
	ID     string `json:"id"`
	Zone   string `json:"zone"`
	ZoneID string `json:"zoneID,omitempty"`
}

// SecurityGroupStatus is a resolved security group.
type SecurityGroupStatus struct {
	ID   string `json:"id"`
	Name string `json:"name,omitempty"`
}

// CapacityReservationStatus is a resolved capacity reservation.
type CapacityReservationStatus struct {
	// ID of the reservation.
	// +kubebuilder:validation:Pattern=`^cr-[0-9a-z]+$`
	ID string `json:"id"`
	// OwnerID is the account that owns it.
	// +optional
	OwnerID string `json:"ownerID,omitempty"`
	// InstanceType and AvailabilityZone it reserves.
	InstanceType     string `json:"instanceType"`
	AvailabilityZone string `json:"availabilityZone"`
	// ReservationType is default (an On-Demand Capacity Reservation) or capacity-block.
	// +kubebuilder:validation:Enum=default;capacity-block
	ReservationType string `json:"reservationType"`
	// InstanceMatchCriteria is open or targeted.
	// +optional
	InstanceMatchCriteria string `json:"instanceMatchCriteria,omitempty"`
	// TotalInstances and AvailableInstances: its size and how many more instances it takes now.
	TotalInstances     int32 `json:"totalInstances"`
	AvailableInstances int32 `json:"availableInstances"`
	// EndTime, when the reservation ends (always set for a Capacity Block).
	// +optional
	EndTime *metav1.Time `json:"endTime,omitempty"`
	// State is active, or expiring for a Capacity Block whose instances must leave before it ends.
	// +kubebuilder:validation:Enum=active;expiring
	State string `json:"state"`
	// Interruptible: the owner of the reservation may take its capacity back.
	// +optional
	Interruptible bool `json:"interruptible,omitempty"`
}

// ConnectionTracking are idle timeouts, in seconds, of the connections an instance's security groups track.
// +kubebuilder:validation:XValidation:message="spec.connectionTracking: set at least one timeout",rule="has(self.tcpEstablishedTimeout) || has(self.udpStreamTimeout) || has(self.udpTimeout)"
type ConnectionTracking struct {
	// TCPEstablishedTimeout for established TCP connections: 60 to 432000 (EC2's default 432000).
	// +kubebuilder:validation:Minimum=60
	// +kubebuilder:validation:Maximum=432000
	// +optional
	TCPEstablishedTimeout *int32 `json:"tcpEstablishedTimeout,omitempty"`
	// UDPStreamTimeout for UDP flows seen in both directions more than once: 60 to 180 (default 180).
	// +kubebuilder:validation:Minimum=60
	// +kubebuilder:validation:Maximum=180
	// +optional
	UDPStreamTimeout *int32 `json:"udpStreamTimeout,omitempty"`
	// UDPTimeout for other UDP flows: 30 to 60 (default 30).
	// +kubebuilder:validation:Minimum=30
	// +kubebuilder:validation:Maximum=60
	// +optional
	UDPTimeout *int32 `json:"udpTimeout,omitempty"`
}

// AMIStatus is a resolved AMI and the node requirements it serves (its architecture).
type AMIStatus struct {
	ID   string `json:"id"`
	Name string `json:"name,omitempty"`
	// Deprecated is true when AWS has deprecated the image (it is still launched while the terms select it).
	// +optional
	Deprecated bool `json:"deprecated,omitempty"`
	// +optional
	Requirements []corev1.NodeSelectorRequirement `json:"requirements,omitempty"`
}

// EC2NodeClassList is a list of EC2NodeClasses.
//
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
type EC2NodeClassList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []EC2NodeClass `json:"items"`
}
