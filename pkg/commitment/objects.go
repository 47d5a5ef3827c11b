/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package commitment

import (
	"sort"

	corev1 "k8s.io/api/core/v1"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/state"
)

// CompileAll compiles the Commitments not being deleted, by name, and says why each of the others cannot apply.
func CompileAll(objs []*stevedorev1.Commitment) ([]*Commitment, map[string]error) {
	var out []*Commitment
	problems := map[string]error{}
	for _, obj := range objs {
		if obj.DeletionTimestamp != nil {
			continue
		}
		c, err := Compile(obj)
		if err != nil {
			problems[obj.Name] = err
			continue
		}
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, problems
}

// Instances are the cluster's instances as commitments see them: each NodeClaim's (by its node's name once it has
// one) that was launched, or that was planned under a commitment and is being launched (its first listed type and
// its planned price), and each node Stevedore did not launch, priced by listed from its labels (nil: those are
// left out).
func Instances(claims []*stevedorev1.NodeClaim, nodes []*corev1.Node, listed func(instanceType, zone, capacityType string) float64) []Instance {
	var out []Instance
	for _, c := range claims {
		if c.DeletionTimestamp != nil {
			continue
		}
		name := c.Status.NodeName
		if name == "" {
			name = c.Name
		}
		switch {
		case c.Status.InstanceType != "":
			out = append(out, Instance{Name: name, InstanceType: c.Status.InstanceType, Zone: c.Status.Zone,
				CapacityType: c.Status.CapacityType, ListPrice: state.ClaimPrice(c)})
		case c.Annotations[stevedorev1.AnnotationCommitment] != "":
			out = append(out, Instance{Name: name, InstanceType: first(c, corev1.LabelInstanceTypeStable), Zone: first(c, corev1.LabelTopologyZone),
				CapacityType: stevedorev1.CapacityTypeOnDemand, ListPrice: state.ClaimPrice(c)})
		}
	}
	if listed == nil {
		return out
	}
	var others []*corev1.Node
	for _, n := range nodes {
		if n.Labels[stevedorev1.LabelNodeClaim] == "" {
			others = append(others, n)
		}
	}
	return append(out, NodeInstances(others, listed)...)
}

// NodeInstances are nodes as commitments see them, from their labels (instance type, zone, capacity type), priced
// by listed; nodes being deleted or without an instance type label are left out.
func NodeInstances(nodes []*corev1.Node, listed func(instanceType, zone, capacityType string) float64) []Instance {
	var out []Instance
	for _, n := range nodes {
		it, zone, ct := n.Labels[corev1.LabelInstanceTypeStable], n.Labels[corev1.LabelTopologyZone], capacityTypeOf(n)
		if it == "" || n.DeletionTimestamp != nil {
			continue
		}
		out = append(out, Instance{Name: n.Name, InstanceType: it, Zone: zone, CapacityType: ct, ListPrice: listed(it, zone, ct)})
	}
	return out
}

// first is the first value of a NodeClaim's In requirement on key ("" when it has none).
func first(c *stevedorev1.NodeClaim, key string) string {
	for _, r := range c.Spec.Requirements {
		if r.Key == key && r.Operator == stevedorev1.NodeSelectorOperator(corev1.NodeSelectorOpIn) && len(r.Values) > 0 {
			return r.Values[0]
		}
	}
	return ""
}

// capacityTypeOf reads a node's capacity type: Karpenter's (and Stevedore's) label, else an EKS managed node
// group's, else on-demand.
func capacityTypeOf(n *corev1.Node) string {
	if ct := n.Labels[stevedorev1.LabelCapacityType]; ct != "" {
		return ct
	}
	switch n.Labels["eks.amazonaws.com/capacityType"] {
	case "SPOT":
		return stevedorev1.CapacityTypeSpot
	case "CAPACITY_BLOCK":
		return stevedorev1.CapacityTypeReserved
	}
	return stevedorev1.CapacityTypeOnDemand
}
