/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package state

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
)

// Usage is what a NodePool's live NodeClaims add up to: every resource of their capacity (their instance type's
// once launched, their requests before), "nodes" counting them, and their hourly price (planned before launch).
type Usage struct {
	Resources corev1.ResourceList
	Nodes     int64
	// ReadyNodes counts the NodeClaims whose node initialized (ready for pods).
	ReadyNodes int64
	Cost       float64
}

// NodePoolUsage sums, per NodePool, the usage of its NodeClaims that are not being deleted. It is the one count of
// what a NodePool uses: its limits are checked against it and its status shows it.
func NodePoolUsage(claims []*stevedorev1.NodeClaim) map[string]*Usage {
	out := map[string]*Usage{}
	for _, c := range claims {
		if c.DeletionTimestamp != nil {
			continue
		}
		pool := c.Labels[stevedorev1.LabelNodePool]
		u := out[pool]
		if u == nil {
			u = &Usage{Resources: corev1.ResourceList{}}
			out[pool] = u
		}
		src := c.Status.Capacity
		if len(src) == 0 {
			src = c.Spec.Resources.Requests
		}
		for name, q := range src {
			sum := u.Resources[name]
			sum.Add(q)
			u.Resources[name] = sum
		}
		u.Nodes++
		if meta.IsStatusConditionTrue(c.Status.Conditions, stevedorev1.ConditionInitialized) {
			u.ReadyNodes++
		}
		u.Resources["nodes"] = *resource.NewQuantity(u.Nodes, resource.DecimalSI)
		u.Cost += ClaimPrice(c)
	}
	return out
}

// List is the usage's resources, nil for no usage at all.
func (u *Usage) List() corev1.ResourceList {
	if u == nil {
		return nil
	}
	return u.Resources
}
