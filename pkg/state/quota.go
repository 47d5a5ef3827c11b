/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package state

import (
	"fmt"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	autoscalingv1beta1 "github.com/stevedore-dev/stevedore/pkg/apis/autoscaling/v1beta1"
	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
)

// QuotaUsage sums, for each resource a CapacityQuota limits, what the nodes its selector (sel; nil selects every
// node) matches use: Stevedore's live NodeClaims by their labels and single-valued requirements (their capacity
// once launched, before that what planned says the planned instance type has, or their requests when it does not
// know; "nodes" counting them; the hourly cost from their price, the planned one before launch), and the
// cluster's other nodes by their labels and capacity, at no cost. Nodes of a NodeClaim are counted through the
// NodeClaim.
func QuotaUsage(cq *autoscalingv1beta1.CapacityQuota, sel labels.Selector, claims []*stevedorev1.NodeClaim, nodes []*corev1.Node,
	planned func(*stevedorev1.NodeClaim) corev1.ResourceList) corev1.ResourceList {
	if sel == nil {
		sel = labels.Everything()
	}
	sum := quotaSum{limits: cq.Spec.Limits.Resources, used: corev1.ResourceList{}}
	claimed := map[string]bool{}
	for _, c := range claims {
		if c.Status.NodeName != "" {
			claimed[c.Status.NodeName] = true
		}
		if c.DeletionTimestamp != nil || !sel.Matches(claimLabels(c)) {
			continue
		}
		src := c.Status.Capacity
		if len(src) == 0 && planned != nil {
			src = planned(c)
		}
		if len(src) == 0 {
			src = c.Spec.Resources.Requests
		}
		sum.add(src, ClaimPrice(c))
	}
	for _, n := range nodes {
		if !claimed[n.Name] && sel.Matches(labels.Set(n.Labels)) {
			sum.add(n.Status.Capacity, 0)
		}
	}
	return sum.list()
}

// quotaSum adds up nodes for the resources a quota limits.
type quotaSum struct {
	limits corev1.ResourceList
	used   corev1.ResourceList
	count  int64
	cost   float64
}

func (s *quotaSum) add(capacity corev1.ResourceList, price float64) {
	for name := range s.limits {
		if q, ok := capacity[name]; ok {
			v := s.used[name]
			v.Add(q)
			s.used[name] = v
		}
	}
	s.count++
	s.cost += price
}

// list is the usage of every limited resource: "nodes" the count, the hourly cost the prices, 0 where no node has
// the resource.
func (s *quotaSum) list() corev1.ResourceList {
	if _, ok := s.limits[stevedorev1.ResourceNodes]; ok {
		s.used[stevedorev1.ResourceNodes] = *resource.NewQuantity(s.count, resource.DecimalSI)
	}
	if _, ok := s.limits[autoscalingv1beta1.ResourceHourlyCost]; ok {
		s.used[autoscalingv1beta1.ResourceHourlyCost] = resource.MustParse(stevedorev1.FormatPrice(s.cost))
	}
	for name := range s.limits {
		if _, ok := s.used[name]; !ok {
			s.used[name] = resource.Quantity{Format: s.limits[name].Format}
		}
	}
	return s.used
}

// claimLabels are the labels a NodeClaim's node has or will have: the claim's labels and its requirements with one
// value.
func claimLabels(c *stevedorev1.NodeClaim) labels.Set {
	out := labels.Set{}
	for _, r := range c.Spec.Requirements {
		if string(r.Operator) == string(corev1.NodeSelectorOpIn) && len(r.Values) == 1 {
			out[r.Key] = r.Values[0]
		}
	}
	for k, v := range c.Labels {
		out[k] = v
	}
	return out
}

// ClaimPrice is a NodeClaim's hourly price: the launched instance's, or before launch the one planned.
func ClaimPrice(c *stevedorev1.NodeClaim) float64 {
	raw := c.Status.Price
	if raw == "" {
		raw = c.Annotations[stevedorev1.AnnotationNodeClaimPrice]
	}
	price, _ := strconv.ParseFloat(raw, 64)
	return price
}

// QuotaSelector is a CapacityQuota's node selector (nil when it has none: every node).
func QuotaSelector(cq *autoscalingv1beta1.CapacityQuota) (labels.Selector, error) {
	if cq.Spec.Selector == nil {
		return nil, nil
	}
	sel, err := metav1.LabelSelectorAsSelector(cq.Spec.Selector)
	if err != nil {
		return nil, fmt.Errorf("CapacityQuota %s: spec.selector: %w", cq.Name, err)
	}
	return sel, nil
}

// QuotaReached is when a CapacityQuota last kept a node from launching, and the resource that did.
type QuotaReached struct {
	At       time.Time
	Resource corev1.ResourceName
}
