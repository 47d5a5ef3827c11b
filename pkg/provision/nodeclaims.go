/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package provision

import (
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
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
	labels := solver.NodeLabels(np, pn.PoolRequirements, pn.Requirements, nil, "", "", "", "")
	annotations := map[string]string{stevedorev1.AnnotationNodePoolHash: np.TemplateHash(),
		stevedorev1.AnnotationNodePoolHashVersion: stevedorev1.NodePoolHashVersion}
	if nodeClassHash != "" {
		annotations[stevedorev1.AnnotationNodeClassHash] = nodeClassHash
	}
	if price := pn.Offering.ListPrice(); price > 0 {
		// what the node is counted at against hourly-cost quotas until its launch sets status.price
		annotations[stevedorev1.AnnotationNodeClaimPrice] = stevedorev1.FormatPrice(price)
	}
	if c := pn.Offering.Covered; c != nil {
		// the commitment's room goes first: EC2's order by list price could pick a type it does not cover
		annotations[stevedorev1.AnnotationCommitment] = c.Commitment
		annotations[stevedorev1.AnnotationLaunchOrder] = stevedorev1.LaunchOrderListed
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

// plannedPodsAnnotation lists pods as AnnotationPlannedPods does: "namespace/name", sorted, comma-separated.
func plannedPodsAnnotation(pods []*corev1.Pod) string {
	keys := make([]string, 0, len(pods))
	for _, p := range pods {
		keys = append(keys, p.Namespace+"/"+p.Name)
	}
	sort.Strings(keys)
	return strings.Join(keys, ",")
}

// IsNodeInitializing reports whether a node belongs to a NodeClaim that is registered but not yet initialized.
func (p *Provisioner) IsNodeInitializing(nodeName string) bool {
	node, err := p.opts.Nodes.Get(nodeName)
	if err != nil {
		return false
	}
	name := node.Labels[stevedorev1.LabelNodeClaim]
	if name == "" {
		return false
	}
	claim, err := p.opts.NodeClaims.Get(name)
	if err != nil {
		return false
	}
	return meta.IsStatusConditionTrue(claim.Status.Conditions, stevedorev1.ConditionRegistered) && !claim.IsInitialized()
}
