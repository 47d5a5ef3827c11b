/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package provision

import (
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/cloud"
	typedv1 "github.com/stevedore-dev/stevedore/pkg/generated/clientset/versioned/typed/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/scheduling"
	"github.com/stevedore-dev/stevedore/pkg/solver"
)

// maxClaimInstanceTypes caps the instance types a NodeClaim lists (CreateFleet caps them again).
const maxClaimInstanceTypes = 60

// NewNodeClaim turns a planned node into the NodeClaim to create: its NodePool's labels, taints and node class,
// requirements narrowed to what its pods pinned, and the instance types that fit them, cheapest first.
func NewNodeClaim(pn *solver.PlannedNode, nodeClassHash string) *stevedorev1.NodeClaim {
	np := pn.NodePool
	// the labels the NodePool defines (template labels, its requirements' values for this node); the instance
	// type's and the offering's are added when the node registers
	labels := solver.NodeLabels(np, pn.PoolRequirements, pn.Requirements, nil, "", "", "")
	annotations := map[string]string{stevedorev1.AnnotationNodePoolHash: np.TemplateHash(),
		stevedorev1.AnnotationNodePoolHashVersion: stevedorev1.NodePoolHashVersion}
	if nodeClassHash != "" {
		annotations[stevedorev1.AnnotationNodeClassHash] = nodeClassHash
	}
	if planned := plannedPodsAnnotation(pn.Pods); planned != "" {
		annotations[stevedorev1.AnnotationPlannedPods] = planned
	}
	for k, v := range np.Spec.Template.ObjectMeta.Annotations {
		annotations[k] = v
	}
	var types []string
	for _, it := range pn.InstanceTypes {
		types = append(types, it.Name)
		if it.PriceOverlaid {
			// EC2 orders by its own prices: the launch must follow the plan's
			annotations[stevedorev1.AnnotationLaunchOrder] = stevedorev1.LaunchOrderListed
		}
		if len(types) == maxClaimInstanceTypes {
			break
		}
	}
	var reqs []stevedorev1.NodeSelectorRequirementWithMinValues
	for _, r := range pn.Requirements.NodeSelectorRequirements() {
		if r.Key == corev1.LabelInstanceTypeStable || r.Key == stevedorev1.LabelNodePool {
			continue
		}
		out := stevedorev1.NodeSelectorRequirementWithMinValues{Key: r.Key, Operator: stevedorev1.NodeSelectorOperator(r.Operator), Values: r.Values}
		if req, ok := pn.Requirements[r.Key]; ok && req.MinValues != nil {
			out.MinValues = req.MinValues
		}
		reqs = append(reqs, out)
	}
	// the instance types, in price order (not sorted by name): CreateFleet tries them cheapest first
	reqs = append(reqs, stevedorev1.NodeSelectorRequirementWithMinValues{Key: corev1.LabelInstanceTypeStable, Operator: "In", Values: types})
	sort.SliceStable(reqs, func(i, j int) bool { return reqs[i].Key < reqs[j].Key })
	ref := *np.Spec.Template.Spec.NodeClassRef // normalised with the NodePool
	return &stevedorev1.NodeClaim{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName: np.Name + "-",
			Labels:       labels,
			Annotations:  annotations,
			Finalizers:   []string{stevedorev1.TerminationFinalizer},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: stevedorev1.SchemeGroupVersion.String(), Kind: "NodePool",
				Name: np.Name, UID: np.UID, BlockOwnerDeletion: ptr.To(true)}},
		},
		Spec: stevedorev1.NodeClaimSpec{
			Taints:                 np.Spec.Template.Spec.Taints,
			StartupTaints:          np.Spec.Template.Spec.StartupTaints,
			Requirements:           reqs,
			Resources:              stevedorev1.ResourceRequirements{Requests: pn.Requests},
			NodeClassRef:           &ref,
			ExpireAfter:            np.Spec.Template.Spec.ExpireAfter,
			TerminationGracePeriod: np.Spec.Template.Spec.TerminationGracePeriod,
		},
	}
}

// ClaimNode renders an in-flight NodeClaim as the node it will become, for the simulation: the launched type when
// EC2 has answered, else the first (cheapest) type it lists; the NodeClaim's labels and taints.
func ClaimNode(claim *stevedorev1.NodeClaim, its map[string]*cloud.InstanceType, region string) *corev1.Node {
	typeName := claim.Status.InstanceType
	if typeName == "" {
		for _, r := range claim.Spec.Requirements {
			if r.Key == corev1.LabelInstanceTypeStable && len(r.Values) > 0 {
				typeName = r.Values[0]
			}
		}
	}
	it := its[typeName]
	name := claim.Status.NodeName
	if name == "" {
		name = "nodeclaim-" + claim.Name
	}
	labels := ClaimNodeLabels(claim, it, region)
	labels[corev1.LabelHostname] = name
	allocatable := claim.Status.Allocatable
	if len(allocatable) == 0 && it != nil {
		allocatable = it.Allocatable()
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec:       corev1.NodeSpec{Taints: claim.Spec.Taints},
		Status:     corev1.NodeStatus{Allocatable: allocatable},
	}
}

// ClaimNodeLabels returns the labels the node of a NodeClaim carries: its instance type's (it, nil when not known),
// the NodeClaim's own (what its NodePool defines), the zone and capacity type it launched in (or, before that,
// the ones its requirements pin) and the region, with the deprecated aliases of the well-known keys.
func ClaimNodeLabels(claim *stevedorev1.NodeClaim, it *cloud.InstanceType, region string) map[string]string {
	labels := map[string]string{}
	if it != nil {
		for k, v := range it.Labels() {
			if !scheduling.IsOfferingKey(k) {
				labels[k] = v
			}
		}
	}
	for _, r := range claim.Spec.Requirements {
		if scheduling.IsOfferingKey(r.Key) && (r.Operator == "In" || r.Operator == "") && len(r.Values) == 1 {
			labels[r.Key] = r.Values[0]
		}
	}
	for k, v := range claim.Labels {
		labels[k] = v
	}
	if claim.Status.Zone != "" {
		labels[corev1.LabelTopologyZone] = claim.Status.Zone
	}
	if claim.Status.CapacityType != "" {
		labels[stevedorev1.LabelCapacityType] = claim.Status.CapacityType
	}
	if claim.Status.InstanceType != "" {
		labels[corev1.LabelInstanceTypeStable] = claim.Status.InstanceType
	}
	if region != "" {
		labels[corev1.LabelTopologyRegion] = region
	}
	return scheduling.WithDeprecatedAliases(labels)
}

func claimString(c *stevedorev1.NodeClaim) string {
	return fmt.Sprintf("%s (%s %s %s)", c.Name, c.Status.InstanceType, c.Status.Zone, c.Status.CapacityType)
}

// plannedPodsAnnotation lists pods as AnnotationPlannedPods does: "namespace/name", sorted, comma-separated.
func plannedPodsAnnotation(pods []*corev1.Pod) string {
	keys := make([]string, 0, len(pods))
	for _, p := range pods {
		keys = append(keys, p.Namespace+"/"+p.Name)
	}
	sort.Strings(keys)
	return strings.Join(keys, ",")
}

// claims is the NodeClaims API.
func (p *Provisioner) claims() typedv1.NodeClaimInterface {
	return p.opts.Stevedore.StevedoreV1().NodeClaims()
}
