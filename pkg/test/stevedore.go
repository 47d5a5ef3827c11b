/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package test

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
)

// NodePoolWrapper builds a NodePool.
type NodePoolWrapper struct{ stevedorev1.NodePool }

// NodePool starts a NodePool using EC2NodeClass default, consolidating when empty or underutilized after 0s,
// with the default budget (10% of nodes), in its normalised form.
func NodePool(name string) *NodePoolWrapper {
	w := &NodePoolWrapper{stevedorev1.NodePool{
		ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("nodepool-" + name), Generation: 1},
		Spec: stevedorev1.NodePoolSpec{
			Template: stevedorev1.NodeClaimTemplate{Spec: stevedorev1.NodeClaimTemplateSpec{
				NodeClassRef: &stevedorev1.NodeClassReference{Name: "default"}}},
			Disruption: stevedorev1.Disruption{ConsolidationPolicy: stevedorev1.ConsolidationPolicyWhenEmptyOrUnderutilized,
				ConsolidateAfter: stevedorev1.NewDuration(0)},
		},
	}}
	w.Normalize()
	return w
}

// Obj returns the NodePool.
func (w *NodePoolWrapper) Obj() *stevedorev1.NodePool { return &w.NodePool }

// Require adds a template requirement.
func (w *NodePoolWrapper) Require(key string, op corev1.NodeSelectorOperator, values ...string) *NodePoolWrapper {
	w.Spec.Template.Spec.Requirements = append(w.Spec.Template.Spec.Requirements, stevedorev1.NodeSelectorRequirementWithMinValues{
		Key: key, Operator: stevedorev1.NodeSelectorOperator(op), Values: values})
	return w
}

// TemplateLabels adds template labels.
func (w *NodePoolWrapper) TemplateLabels(kv ...string) *NodePoolWrapper {
	w.Spec.Template.ObjectMeta.Labels = addPairs(w.Spec.Template.ObjectMeta.Labels, kv)
	return w
}

// Weight sets the weight.
func (w *NodePoolWrapper) Weight(weight int32) *NodePoolWrapper { w.Spec.Weight = &weight; return w }

// Limits sets the limits, e.g. Limits("cpu", "100").
func (w *NodePoolWrapper) Limits(nameValue ...string) *NodePoolWrapper {
	w.Spec.Limits = stevedorev1.Limits(Resources(nameValue...))
	return w
}

// Consolidation sets the consolidation policy and consolidateAfter (nil: Never).
func (w *NodePoolWrapper) Consolidation(policy stevedorev1.ConsolidationPolicy, after *time.Duration) *NodePoolWrapper {
	w.Spec.Disruption.ConsolidationPolicy = policy
	if after == nil {
		w.Spec.Disruption.ConsolidateAfter = stevedorev1.NeverDuration()
	} else {
		w.Spec.Disruption.ConsolidateAfter = stevedorev1.NewDuration(*after)
	}
	return w
}

// ExpireAfter sets the template's expireAfter.
func (w *NodePoolWrapper) ExpireAfter(d time.Duration) *NodePoolWrapper {
	w.Spec.Template.Spec.ExpireAfter = stevedorev1.NewDuration(d)
	return w
}

// NodeClass sets the template's node class reference to the EC2NodeClass name (normalised: group and kind filled).
func (w *NodePoolWrapper) NodeClass(name string) *NodePoolWrapper {
	ref := &stevedorev1.NodeClassReference{Name: name}
	ref.Normalize()
	w.Spec.Template.Spec.NodeClassRef = ref
	return w
}

// Budgets replaces the disruption budgets.
func (w *NodePoolWrapper) Budgets(budgets ...stevedorev1.Budget) *NodePoolWrapper {
	w.Spec.Disruption.Budgets = budgets
	return w
}

// NodeClaimWrapper builds a NodeClaim.
type NodeClaimWrapper struct{ stevedorev1.NodeClaim }

// NodeClaimFrom wraps a copy of a NodeClaim, to change it.
func NodeClaimFrom(c *stevedorev1.NodeClaim) *NodeClaimWrapper {
	return &NodeClaimWrapper{*c.DeepCopy()}
}

// NodeClaim starts a NodeClaim of a NodePool, with the termination finalizer and no status.
func NodeClaim(name, nodePool string) *NodeClaimWrapper {
	return &NodeClaimWrapper{stevedorev1.NodeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("nodeclaim-" + name),
			Labels:     map[string]string{stevedorev1.LabelNodePool: nodePool},
			Finalizers: []string{stevedorev1.TerminationFinalizer}},
		Spec: stevedorev1.NodeClaimSpec{NodeClassRef: &stevedorev1.NodeClassReference{
			Group: stevedorev1.GroupName, Kind: stevedorev1.DefaultNodeClassKind, Name: "default"}},
	}}
}

// Obj returns the NodeClaim.
func (w *NodeClaimWrapper) Obj() *stevedorev1.NodeClaim { return &w.NodeClaim }

// Require adds a requirement.
func (w *NodeClaimWrapper) Require(key string, op corev1.NodeSelectorOperator, values ...string) *NodeClaimWrapper {
	w.Spec.Requirements = append(w.Spec.Requirements, stevedorev1.NodeSelectorRequirementWithMinValues{
		Key: key, Operator: stevedorev1.NodeSelectorOperator(op), Values: values})
	return w
}

// Annotations adds annotations.
func (w *NodeClaimWrapper) Annotations(kv ...string) *NodeClaimWrapper {
	w.NodeClaim.Annotations = addPairs(w.NodeClaim.Annotations, kv)
	return w
}

// Labels adds labels (the NodePool label is set by NodeClaim).
func (w *NodeClaimWrapper) Labels(kv ...string) *NodeClaimWrapper {
	w.NodeClaim.Labels = addPairs(w.NodeClaim.Labels, kv)
	return w
}

// Taint adds a taint the node is registered with.
func (w *NodeClaimWrapper) Taint(key, value string, effect corev1.TaintEffect) *NodeClaimWrapper {
	w.Spec.Taints = append(w.Spec.Taints, corev1.Taint{Key: key, Value: value, Effect: effect})
	return w
}

// StartupTaint adds a startup taint (one another agent removes before the node is initialized).
func (w *NodeClaimWrapper) StartupTaint(key, value string, effect corev1.TaintEffect) *NodeClaimWrapper {
	w.Spec.StartupTaints = append(w.Spec.StartupTaints, corev1.Taint{Key: key, Value: value, Effect: effect})
	return w
}

// TerminationGracePeriod sets terminationGracePeriod.
func (w *NodeClaimWrapper) TerminationGracePeriod(d time.Duration) *NodeClaimWrapper {
	w.Spec.TerminationGracePeriod = &metav1.Duration{Duration: d}
	return w
}

// Created sets the creation time, and the transition time of the conditions already set (conditions set later
// take it too), so that times counted from a condition never depend on the wall clock.
func (w *NodeClaimWrapper) Created(at time.Time) *NodeClaimWrapper {
	w.CreationTimestamp = metav1.NewTime(at)
	for i := range w.Status.Conditions {
		w.Status.Conditions[i].LastTransitionTime = w.CreationTimestamp
	}
	return w
}

// ExpireAfter sets expireAfter.
func (w *NodeClaimWrapper) ExpireAfter(d time.Duration) *NodeClaimWrapper {
	w.Spec.ExpireAfter = stevedorev1.NewDuration(d)
	return w
}

// Launched fills the status a launch writes (instance, type, zone, capacity type, price, node name) and sets
// Launched true.
func (w *NodeClaimWrapper) Launched(node, instanceType, zone, capacityType, price string) *NodeClaimWrapper {
	id := "i-" + node
	w.Status.InstanceID = id
	w.Status.ProviderID = "aws:///" + zone + "/" + id
	w.Status.NodeName = node
	w.Status.InstanceType = instanceType
	w.Status.Zone = zone
	w.Status.CapacityType = capacityType
	w.Status.Price = price
	return w.Condition(stevedorev1.ConditionLaunched, metav1.ConditionTrue, "Launched")
}

// InstanceID replaces the instance id Launched derives from the node name, and the provider id with it, for a test
// that matches on a real EC2 instance id.
func (w *NodeClaimWrapper) InstanceID(id string) *NodeClaimWrapper {
	w.Status.InstanceID = id
	w.Status.ProviderID = "aws:///" + w.Status.Zone + "/" + id
	return w
}

// Capacity sets status.capacity (the launched instance type's), e.g. Capacity("cpu", "4", "memory", "16Gi").
func (w *NodeClaimWrapper) Capacity(nameValue ...string) *NodeClaimWrapper {
	w.Status.Capacity = Resources(nameValue...)
	return w
}

// Requests sets spec.resources.requests (what the pods it was launched for request).
func (w *NodeClaimWrapper) Requests(nameValue ...string) *NodeClaimWrapper {
	w.Spec.Resources.Requests = Resources(nameValue...)
	return w
}

// Registered sets Registered true.
func (w *NodeClaimWrapper) Registered() *NodeClaimWrapper {
	return w.Condition(stevedorev1.ConditionRegistered, metav1.ConditionTrue, "Registered")
}

// Initialized sets Registered and Initialized true.
func (w *NodeClaimWrapper) Initialized() *NodeClaimWrapper {
	return w.Registered().Condition(stevedorev1.ConditionInitialized, metav1.ConditionTrue, "Initialized")
}

// Condition sets a status condition.
func (w *NodeClaimWrapper) Condition(condType string, status metav1.ConditionStatus, reason string) *NodeClaimWrapper {
	meta.SetStatusCondition(&w.Status.Conditions, metav1.Condition{Type: condType, Status: status, Reason: reason,
		LastTransitionTime: w.CreationTimestamp})
	return w
}

// Deleting marks the NodeClaim terminating.
func (w *NodeClaimWrapper) Deleting(at time.Time) *NodeClaimWrapper {
	t := metav1.NewTime(at)
	w.DeletionTimestamp = &t
	return w
}

// NodeFor returns a node as the NodeClaim's launched instance registers it: named and labelled after the status,
// owned by the NodeClaim's NodePool.
func (w *NodeClaimWrapper) NodeFor() *NodeWrapper {
	s := w.Status
	return Node(s.NodeName).ProviderID(s.ProviderID).Labels(
		stevedorev1.LabelNodePool, w.NodeClaim.Labels[stevedorev1.LabelNodePool],
		stevedorev1.LabelNodeClaim, w.Name,
		corev1.LabelInstanceTypeStable, s.InstanceType,
		corev1.LabelTopologyZone, s.Zone,
		stevedorev1.LabelCapacityType, s.CapacityType)
}
