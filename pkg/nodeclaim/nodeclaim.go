/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

// Package nodeclaim holds what the NodeClaim controllers share: the Node a NodeClaim becomes and finding it once
// it registered. Its subpackages are the controllers of a NodeClaim's life: lifecycle (launch, registration,
// initialization, liveness) and termination.
package nodeclaim

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	corelisters "k8s.io/client-go/listers/core/v1"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/cloud"
	"github.com/stevedore-dev/stevedore/pkg/scheduling"
)

// NodeOf returns the Node of a NodeClaim (by name when its provider ID agrees, else by provider ID), or nil.
func NodeOf(nodes corelisters.NodeLister, claim *stevedorev1.NodeClaim) *corev1.Node {
	if claim.Status.NodeName != "" {
		if n, err := nodes.Get(claim.Status.NodeName); err == nil && (claim.Status.ProviderID == "" || n.Spec.ProviderID == claim.Status.ProviderID) {
			return n
		}
	}
	if claim.Status.ProviderID == "" {
		return nil
	}
	list, _ := nodes.List(labels.Everything())
	for _, n := range list {
		if n.Spec.ProviderID == claim.Status.ProviderID {
			return n
		}
	}
	return nil
}

// Node renders an in-flight NodeClaim as the node it will become, for the simulation: the launched type when
// EC2 has answered, else the first (cheapest) type it lists; the NodeClaim's labels and taints.
func Node(claim *stevedorev1.NodeClaim, its map[string]*cloud.InstanceType, region string) *corev1.Node {
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
	labels := NodeLabels(claim, it, region)
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

// NodeLabels returns the labels the node of a NodeClaim carries: its instance type's (it, nil when not known),
// the NodeClaim's own (what its NodePool defines), the zone, its ID and the capacity type it launched in (or,
// before that, the ones its requirements pin) and the region, with the deprecated aliases of the well-known keys.
func NodeLabels(claim *stevedorev1.NodeClaim, it *cloud.InstanceType, region string) map[string]string {
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
	if claim.Status.ZoneID != "" {
		labels[stevedorev1.LabelZoneID] = claim.Status.ZoneID
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

// CapacityType is the capacity type a NodeClaim launched in, or before that the one its requirements pin ("" when
// they allow several).
func CapacityType(claim *stevedorev1.NodeClaim) string {
	if claim.Status.CapacityType != "" {
		return claim.Status.CapacityType
	}
	for _, r := range claim.Spec.Requirements {
		if r.Key == stevedorev1.LabelCapacityType && (r.Operator == "In" || r.Operator == "") && len(r.Values) == 1 {
			return r.Values[0]
		}
	}
	return ""
}
