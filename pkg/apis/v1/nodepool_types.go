/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package v1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// NodePool says which nodes Stevedore may launch for pending pods, how many, and when it may take them away.
//
// +genclient
// +genclient:nonNamespaced
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:resource:path=nodepools,scope=Cluster,categories=stevedore,shortName=sdnp
// +kubebuilder:subresource:status
// +kubebuilder:subresource:scale:specpath=.spec.replicas,statuspath=.status.nodes
// +kubebuilder:printcolumn:name="NodeClass",type=string,JSONPath=".spec.template.spec.nodeClassRef.name"
// +kubebuilder:printcolumn:name="Weight",type=integer,JSONPath=".spec.weight"
// +kubebuilder:printcolumn:name="Desired",type=integer,JSONPath=".spec.replicas"
// +kubebuilder:printcolumn:name="Nodes",type=integer,JSONPath=".status.nodes"
// +kubebuilder:printcolumn:name="ReadyNodes",type=integer,JSONPath=".status.readyNodes"
// +kubebuilder:printcolumn:name="CPU",type=string,JSONPath=".status.resources.cpu"
// +kubebuilder:printcolumn:name="Memory",type=string,JSONPath=".status.resources.memory"
// +kubebuilder:printcolumn:name="Cost/h",type=string,JSONPath=".status.hourlyCost"
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=".status.conditions[?(@.type==\"Ready\")].status"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=".metadata.creationTimestamp"
type NodePool struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec NodePoolSpec `json:"spec"`
	// +optional
	Status NodePoolStatus `json:"status,omitempty"`
}

// NodePoolSpec is what the user asks of a NodePool.
// +kubebuilder:validation:XValidation:message="spec.replicas: a NodePool cannot change between static (replicas set) and dynamic (replicas unset); create a new NodePool",rule="has(self.replicas) == has(oldSelf.replicas)"
// +kubebuilder:validation:XValidation:message="spec.limits: a static NodePool (spec.replicas set) takes only limits.nodes",rule="!has(self.replicas) || !has(self.limits) || self.limits.all(k, k == 'nodes')"
// +kubebuilder:validation:XValidation:message="spec.weight: a static NodePool (spec.replicas set) takes no weight: it does not provision for pods",rule="!has(self.replicas) || !has(self.weight)"
type NodePoolSpec struct {
	// Template describes every NodeClaim (and so every node) launched for this NodePool.
	// +required
	Template NodeClaimTemplate `json:"template"`

	// Disruption says when Stevedore may remove or replace this NodePool's nodes.
	// +kubebuilder:default={consolidationPolicy: WhenEmptyOrUnderutilized, consolidateAfter: "0s"}
	// +optional
	Disruption Disruption `json:"disruption,omitempty"`

	// Limits caps the total capacity of this NodePool's nodes: cpu, memory, nodes, or any resource name.
	// +kubebuilder:validation:MaxProperties=50
	// +optional
	Limits Limits `json:"limits,omitempty"`

	// Weight orders NodePools: a higher weight is tried first (1-100). NodePools without a weight come last.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	// +optional
	Weight *int32 `json:"weight,omitempty"`

	// Replicas makes the NodePool static: it keeps exactly this many nodes whatever the pods (capacity held for
	// latency-critical or licensed workloads). Its nodes are never consolidated; drift and expiry replace them
	// one at a time within the disruption budgets, with limits.nodes as the ceiling during a replacement.
	// Pending pods never make a static NodePool launch a node. Unset: the NodePool provisions for pods.
	// Scale with `kubectl scale nodepools.stevedore.dev NAME --replicas=N`.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=10000
	// +optional
	Replicas *int64 `json:"replicas,omitempty"`
}

// Limits caps resources summed over a NodePool's nodes. The key "nodes" counts nodes.
type Limits corev1.ResourceList

// NodeClaimTemplate is the template of the NodeClaims a NodePool creates.
type NodeClaimTemplate struct {
	// Metadata's labels and annotations are applied to every node of this NodePool.
	// +optional
	ObjectMeta TemplateObjectMeta `json:"metadata,omitempty"`
	// +required
	Spec NodeClaimTemplateSpec `json:"spec"`
}

// TemplateObjectMeta holds the labels and annotations put on every node.
type TemplateObjectMeta struct {
	// +kubebuilder:validation:XValidation:message="spec.template.metadata.labels: keys in the stevedore.dev domain and kubernetes.io/hostname are reserved",rule="self.all(k, !k.startsWith('stevedore.dev/') && k != 'kubernetes.io/hostname')"
	// +kubebuilder:validation:XValidation:message="spec.template.metadata.labels: a key under karpenter.sh/, karpenter.k8s.aws/ or topology.k8s.aws/ that is not a label Stevedore launches nodes with (karpenter.sh/capacity-type, the instance-type labels under karpenter.k8s.aws/ and topology.k8s.aws/zone-id are; docs/configuration.md lists them)",rule="!self.exists(k, (k.startsWith('karpenter.sh/') && k != 'karpenter.sh/capacity-type') || (k.startsWith('karpenter.k8s.aws/') && !(k in ['karpenter.k8s.aws/instance-category', 'karpenter.k8s.aws/instance-family', 'karpenter.k8s.aws/instance-generation', 'karpenter.k8s.aws/instance-size', 'karpenter.k8s.aws/instance-cpu', 'karpenter.k8s.aws/instance-memory', 'karpenter.k8s.aws/instance-hypervisor', 'karpenter.k8s.aws/instance-gpu-name', 'karpenter.k8s.aws/instance-gpu-manufacturer', 'karpenter.k8s.aws/instance-gpu-count', 'karpenter.k8s.aws/instance-gpu-memory', 'karpenter.k8s.aws/instance-accelerator-name', 'karpenter.k8s.aws/instance-accelerator-manufacturer', 'karpenter.k8s.aws/instance-accelerator-count', 'karpenter.k8s.aws/instance-local-nvme', 'karpenter.k8s.aws/instance-network-bandwidth', 'karpenter.k8s.aws/instance-cpu-manufacturer', 'karpenter.k8s.aws/instance-cpu-sustained-clock-speed-mhz', 'karpenter.k8s.aws/instance-ebs-bandwidth', 'karpenter.k8s.aws/instance-encryption-in-transit-supported', 'karpenter.k8s.aws/instance-capability-flex', 'karpenter.k8s.aws/instance-tenancy'])) || (k.startsWith('topology.k8s.aws/') && k != 'topology.k8s.aws/zone-id'))"
	// +kubebuilder:validation:XValidation:message="spec.template.metadata.labels: karpenter.k8s.aws/instance-tenancy can only be default: Stevedore launches on shared hardware",rule="!('karpenter.k8s.aws/instance-tenancy' in self) || self['karpenter.k8s.aws/instance-tenancy'] == 'default'"
	// +kubebuilder:validation:MaxProperties=100
	// +optional
	Labels map[string]string `json:"labels,omitempty"`
	// +optional
	Annotations map[string]string `json:"annotations,omitempty"`
}

// NodeClaimTemplateSpec is the part of a NodeClaim's spec that comes from its NodePool.
type NodeClaimTemplateSpec struct {
	// NodeClassRef names the EC2NodeClass that configures the instances.
	// +required
	NodeClassRef *NodeClassReference `json:"nodeClassRef"`

	// Requirements constrain the instance types, zones, capacity types and labels of the nodes.
	// +kubebuilder:validation:MaxItems=100
	// +optional
	Requirements []NodeSelectorRequirementWithMinValues `json:"requirements,omitempty"`

	// Taints are put on every node of this NodePool; pods must tolerate them.
	// +kubebuilder:validation:MaxItems=50
	// +kubebuilder:validation:XValidation:message="spec.template.spec.taints: effect must be NoSchedule, PreferNoSchedule or NoExecute",rule="self.all(t, t.effect in ['NoSchedule', 'PreferNoSchedule', 'NoExecute'])"
	// +optional
	Taints []corev1.Taint `json:"taints,omitempty"`

	// StartupTaints are put on new nodes and expected to be removed by another agent (a CNI, a device plugin).
	// Pods need not tolerate them.
	// +kubebuilder:validation:MaxItems=50
	// +kubebuilder:validation:XValidation:message="spec.template.spec.startupTaints: effect must be NoSchedule, PreferNoSchedule or NoExecute",rule="self.all(t, t.effect in ['NoSchedule', 'PreferNoSchedule', 'NoExecute'])"
	// +optional
	StartupTaints []corev1.Taint `json:"startupTaints,omitempty"`

	// ExpireAfter is how long a node may live before it is replaced: a duration such as 720h, or Never.
	// Default 720h (30 days). Expiry is forceful: budgets do not hold it back.
	// +kubebuilder:validation:Pattern=`^(([0-9]+(s|m|h))+|Never)$`
	// +kubebuilder:validation:Type=string
	// +optional
	ExpireAfter *NillableDuration `json:"expireAfter,omitempty"`

	// TerminationGracePeriod bounds how long a node is drained before its remaining pods are deleted and the
	// instance is terminated. Unset: the drain waits as long as PodDisruptionBudgets make it.
	// +kubebuilder:validation:Pattern=`^([0-9]+(s|m|h))+$`
	// +kubebuilder:validation:Type=string
	// +optional
	TerminationGracePeriod *metav1.Duration `json:"terminationGracePeriod,omitempty"`
}

// NodeClassReference names a node class.
type NodeClassReference struct {
	// Group of the node class: stevedore.dev (karpenter.k8s.aws is accepted and means the same).
	// +kubebuilder:default=stevedore.dev
	// +kubebuilder:validation:Enum=stevedore.dev;karpenter.k8s.aws
	// +optional
	Group string `json:"group,omitempty"`
	// Kind of the node class: EC2NodeClass.
	// +kubebuilder:default=EC2NodeClass
	// +kubebuilder:validation:Enum=EC2NodeClass
	// +optional
	Kind string `json:"kind,omitempty"`
	// Name of the EC2NodeClass.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +required
	Name string `json:"name"`
}

// NodeSelectorOperator is the operator of a requirement: the node selector's, and Karpenter's inclusive integer
// bounds Gte and Lte.
// +kubebuilder:validation:Enum=In;NotIn;Exists;DoesNotExist;Gt;Lt;Gte;Lte
type NodeSelectorOperator string

// NodeSelectorRequirementWithMinValues is a node selector requirement, optionally asking that at least MinValues
// distinct values stay possible (instance-type diversity for spot).
// +kubebuilder:validation:XValidation:message="requirements[]: operator In needs at least one value",rule="self.operator != 'In' || (has(self.values) && self.values.size() > 0)"
// +kubebuilder:validation:XValidation:message="requirements[]: operators Gt, Lt, Gte and Lte need exactly one non-negative integer value",rule="!(self.operator in ['Gt', 'Lt', 'Gte', 'Lte']) || (has(self.values) && self.values.size() == 1 && self.values[0].matches('^[0-9]+$'))"
// +kubebuilder:validation:XValidation:message="requirements[]: karpenter.k8s.aws/instance-tenancy must allow default: Stevedore launches on shared hardware (dedicated tenancy is not carried over)",rule="self.key != 'karpenter.k8s.aws/instance-tenancy' || self.operator == 'Exists' || (self.operator == 'In' && has(self.values) && 'default' in self.values) || (self.operator == 'NotIn' && (!has(self.values) || !('default' in self.values)))"
// +kubebuilder:validation:XValidation:message="requirements[]: operators Exists and DoesNotExist take no values",rule="(self.operator != 'Exists' && self.operator != 'DoesNotExist') || !has(self.values) || self.values.size() == 0"
// +kubebuilder:validation:XValidation:message="requirements[]: minValues needs at least that many values",rule="!has(self.minValues) || self.operator != 'In' || (has(self.values) && self.values.size() >= self.minValues)"
// +kubebuilder:validation:XValidation:messageExpression="'requirements[].key: ' + self.key + ' is not a label Stevedore launches nodes with: the only karpenter.sh key it reads is karpenter.sh/capacity-type (karpenter.sh/nodepool marks Karpenter nodes; the nodes of Stevedore carry stevedore.dev/nodepool)'",rule="self.operator in ['DoesNotExist', 'NotIn'] || (!self.key.startsWith('karpenter.sh/') || self.key == 'karpenter.sh/capacity-type')"
// +kubebuilder:validation:XValidation:messageExpression="'requirements[].key: ' + self.key + ': Stevedore selects capacity reservations with capacityReservationSelectorTerms of the EC2NodeClass, and a NodePool takes reserved capacity when karpenter.sh/capacity-type allows reserved'",rule="self.operator in ['DoesNotExist', 'NotIn'] || (!(self.key in ['karpenter.k8s.aws/capacity-reservation-id', 'karpenter.k8s.aws/capacity-reservation-type', 'karpenter.k8s.aws/capacity-reservation-interruptible']))"
// +kubebuilder:validation:XValidation:messageExpression="'requirements[].key: ' + self.key + ': Stevedore does not launch into placement groups'",rule="self.operator in ['DoesNotExist', 'NotIn'] || (!self.key.startsWith('karpenter.k8s.aws/placement-group-'))"
// +kubebuilder:validation:XValidation:messageExpression="'requirements[].key: ' + self.key + ' is not a label Stevedore knows under karpenter.k8s.aws/ (docs/configuration.md lists them)'",rule="self.operator in ['DoesNotExist', 'NotIn'] || (!self.key.startsWith('karpenter.k8s.aws/') || self.key in ['karpenter.k8s.aws/instance-category', 'karpenter.k8s.aws/instance-family', 'karpenter.k8s.aws/instance-generation', 'karpenter.k8s.aws/instance-size', 'karpenter.k8s.aws/instance-cpu', 'karpenter.k8s.aws/instance-memory', 'karpenter.k8s.aws/instance-hypervisor', 'karpenter.k8s.aws/instance-gpu-name', 'karpenter.k8s.aws/instance-gpu-manufacturer', 'karpenter.k8s.aws/instance-gpu-count', 'karpenter.k8s.aws/instance-gpu-memory', 'karpenter.k8s.aws/instance-accelerator-name', 'karpenter.k8s.aws/instance-accelerator-manufacturer', 'karpenter.k8s.aws/instance-accelerator-count', 'karpenter.k8s.aws/instance-local-nvme', 'karpenter.k8s.aws/instance-network-bandwidth', 'karpenter.k8s.aws/instance-cpu-manufacturer', 'karpenter.k8s.aws/instance-cpu-sustained-clock-speed-mhz', 'karpenter.k8s.aws/instance-ebs-bandwidth', 'karpenter.k8s.aws/instance-encryption-in-transit-supported', 'karpenter.k8s.aws/instance-capability-flex', 'karpenter.k8s.aws/instance-tenancy', 'karpenter.k8s.aws/ec2nodeclass'] || self.key.startsWith('karpenter.k8s.aws/capacity-reservation-') || self.key.startsWith('karpenter.k8s.aws/placement-group-'))"
// +kubebuilder:validation:XValidation:messageExpression="'requirements[].key: ' + self.key + ' is not a label Stevedore knows: the only topology.k8s.aws key it reads is topology.k8s.aws/zone-id'",rule="self.operator in ['DoesNotExist', 'NotIn'] || (!self.key.startsWith('topology.k8s.aws/') || self.key == 'topology.k8s.aws/zone-id')"
type NodeSelectorRequirementWithMinValues struct {
	// Key is a node label key.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=316
	// +kubebuilder:validation:Pattern=`^([a-zA-Z0-9]([-a-zA-Z0-9]*[a-zA-Z0-9])?(\.[a-zA-Z0-9]([-a-zA-Z0-9]*[a-zA-Z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$`
	// +kubebuilder:validation:XValidation:message="requirements[].key: kubernetes.io/hostname, stevedore.dev/nodepool and stevedore.dev/nodeclaim are set by Stevedore and cannot be required",rule="!(self in ['kubernetes.io/hostname', 'stevedore.dev/nodepool', 'stevedore.dev/nodeclaim'])"
	// +required
	Key string `json:"key"`
	// Operator is one of In, NotIn, Exists, DoesNotExist, Gt, Lt, Gte, Lte (Gte and Lte include their value).
	// Default In (some Karpenter examples omit it).
	// +kubebuilder:default=In
	// +optional
	Operator NodeSelectorOperator `json:"operator,omitempty"`
	// Values for In and NotIn (one or more), Gt, Lt, Gte and Lte (one integer); none for Exists and DoesNotExist.
	// +kubebuilder:validation:MaxItems=500
	// +kubebuilder:validation:items:MaxLength=63
	// +optional
	Values []string `json:"values,omitempty"`
	// MinValues is the least number of distinct values of Key the launched node must be able to choose from.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=50
	// +optional
	MinValues *int `json:"minValues,omitempty"`
}

// ConsolidationPolicy says which nodes consolidation may act on.
// WhenUnderutilized is Karpenter's v1beta1 spelling of WhenEmptyOrUnderutilized and is accepted as such.
// +kubebuilder:validation:Enum=WhenEmpty;WhenEmptyOrUnderutilized;WhenUnderutilized;Balanced
type ConsolidationPolicy string

// Consolidation policies.
const (
	ConsolidationPolicyWhenEmpty                ConsolidationPolicy = "WhenEmpty"
	ConsolidationPolicyWhenEmptyOrUnderutilized ConsolidationPolicy = "WhenEmptyOrUnderutilized"
	ConsolidationPolicyWhenUnderutilized        ConsolidationPolicy = "WhenUnderutilized"
	// ConsolidationPolicyBalanced consolidates underutilized nodes only when a move's share of its NodePool's
	// cost saved is at least 1/BalancedK of its share of the NodePool's disruption cost.
	ConsolidationPolicyBalanced ConsolidationPolicy = "Balanced"
)

// BalancedK is the factor of the Balanced policy: a move is taken when the share of the NodePool's hourly cost it
// saves is at least 1/BalancedK times the share of the NodePool's disruption cost it causes.
const BalancedK = 2

// ConsolidatesUnderutilized reports whether the policy lets consolidation delete or replace nodes that still run
// pods (WhenEmptyOrUnderutilized and Balanced).
func (p ConsolidationPolicy) ConsolidatesUnderutilized() bool {
	return p == ConsolidationPolicyWhenEmptyOrUnderutilized || p == ConsolidationPolicyBalanced
}

// ConsolidationOff reports whether consolidation removes none of the NodePool's nodes: consolidateAfter is Never
// (or unset, before normalization).
func (d *Disruption) ConsolidationOff() bool {
	return d.ConsolidateAfter == nil || d.ConsolidateAfter.IsNever()
}

// Disruption configures voluntary disruption of a NodePool's nodes.
// +kubebuilder:validation:XValidation:message="spec.disruption.budgets: schedule and duration must be set together",rule="!has(self.budgets) || self.budgets.all(b, has(b.schedule) == has(b.duration))"
type Disruption struct {
	// ConsolidationPolicy: WhenEmpty removes nodes with no pods but DaemonSet pods; WhenEmptyOrUnderutilized
	// also deletes or replaces nodes whose pods fit elsewhere more cheaply; Balanced does so only for moves whose
	// saving outweighs the disruption they cause (each as a share of the NodePool's total) by the factor BalancedK.
	// +kubebuilder:default=WhenEmptyOrUnderutilized
	// +optional
	ConsolidationPolicy ConsolidationPolicy `json:"consolidationPolicy,omitempty"`

	// ConsolidateAfter is how long a node must have seen no pod arrive or leave before consolidation considers
	// it: a duration, or Never to turn consolidation off.
	// +kubebuilder:default="0s"
	// +kubebuilder:validation:Pattern=`^(([0-9]+(s|m|h))+|Never)$`
	// +kubebuilder:validation:Type=string
	// +optional
	ConsolidateAfter *NillableDuration `json:"consolidateAfter,omitempty"`

	// ExpireAfter is the older place of spec.template.spec.expireAfter (Karpenter v1beta1); it is accepted and
	// used when the template does not set one.
	// +kubebuilder:validation:Pattern=`^(([0-9]+(s|m|h))+|Never)$`
	// +kubebuilder:validation:Type=string
	// +optional
	ExpireAfter *NillableDuration `json:"expireAfter,omitempty"`

	// Budgets limit how many nodes may be disrupted at once. The most restrictive active budget wins.
	// Default: one budget of 10%.
	// +kubebuilder:default={{nodes: "10%"}}
	// +kubebuilder:validation:MaxItems=50
	// +optional
	Budgets []Budget `json:"budgets,omitempty"`

	// Replacement is how the pods of a node being disrupted move. Surge starts each pod's successor first, when
	// its owner can scale (a Deployment or a ReplicaSet), and removes the old pod only once the successor is Ready;
	// Evict evicts the pods through the Eviction API. Pods that cannot surge are evicted either way. A pod's
	// stevedore.dev/replacement annotation (Surge or Evict) overrides it.
	// +kubebuilder:default=Surge
	// +kubebuilder:validation:Enum=Surge;Evict
	// +optional
	Replacement Replacement `json:"replacement,omitempty"`
}

// Replacement is how a disrupted node's pods move.
type Replacement string

// Replacements.
const (
	// ReplacementSurge starts a pod's successor and waits for it to be Ready before the pod goes.
	ReplacementSurge Replacement = "Surge"
	// ReplacementEvict evicts the pod; its owner creates the successor afterwards.
	ReplacementEvict Replacement = "Evict"
)

// DisruptionReason names why a node is voluntarily disrupted.
// +kubebuilder:validation:Enum=Empty;Underutilized;Drifted
type DisruptionReason string

// Voluntary disruption reasons.
const (
	DisruptionReasonEmpty         DisruptionReason = "Empty"
	DisruptionReasonUnderutilized DisruptionReason = "Underutilized"
	DisruptionReasonDrifted       DisruptionReason = "Drifted"
)

// Budget caps the nodes of a NodePool that may be disrupted at once.
type Budget struct {
	// Reasons this budget applies to; empty means all.
	// +kubebuilder:validation:MaxItems=3
	// +optional
	Reasons []DisruptionReason `json:"reasons,omitempty"`

	// Nodes is a count ("3") or a percentage of the NodePool's nodes ("10%", rounded up).
	// +kubebuilder:default="10%"
	// +kubebuilder:validation:Pattern=`^((100|[0-9]{1,2})%|[0-9]+)$`
	// +optional
	Nodes string `json:"nodes"`

	// Schedule is a cron expression (UTC; @daily, @hourly... accepted) when the budget becomes active.
	// +kubebuilder:validation:Pattern=`^(@(annually|yearly|monthly|weekly|daily|midnight|hourly))|((.+)\s(.+)\s(.+)\s(.+)\s(.+))$`
	// +optional
	Schedule *string `json:"schedule,omitempty"`

	// Duration is how long the budget stays active after each Schedule time.
	// +kubebuilder:validation:Pattern=`^([0-9]+(s|m|h))+$`
	// +kubebuilder:validation:Type=string
	// +optional
	Duration *metav1.Duration `json:"duration,omitempty"`
}

// NodePoolStatus reports what a NodePool currently runs.
type NodePoolStatus struct {
	// Resources is the sum of the capacity of this NodePool's nodes (cpu, memory, pods, nodes).
	// +optional
	Resources corev1.ResourceList `json:"resources,omitempty"`
	// Nodes is the number of NodeClaims of this NodePool (not being deleted).
	// +optional
	Nodes int64 `json:"nodes,omitempty"`
	// ReadyNodes is the number of those whose node is initialized and ready for pods.
	// +optional
	ReadyNodes int64 `json:"readyNodes,omitempty"`
	// HourlyCost is the summed hourly price of this NodePool's nodes in USD.
	// +optional
	HourlyCost string `json:"hourlyCost,omitempty"`
	// Conditions: Ready (its EC2NodeClass is ready and the spec is usable).
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// NodePoolList is a list of NodePools.
//
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
type NodePoolList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []NodePool `json:"items"`
}
