/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package solver

import (
	"fmt"
	"math"
	"slices"
	"sort"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"

	autoscalingv1beta1 "github.com/stevedore-dev/stevedore/pkg/apis/autoscaling/v1beta1"
	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/cloud"
)

// Quota is a ceiling several NodePools share (a CapacityQuota): what it still allows after the cluster's nodes.
// Every NodePoolOption it covers points at the same Quota, and the solve counts the open nodes of all of them.
type Quota struct {
	Name string
	// Remaining is what the quota still allows: "nodes" counts nodes, stevedore.dev/hourly-cost the nodes' hourly price;
	// other resources as the instance types' capacity counts them.
	Remaining corev1.ResourceList
	// Selector selects the nodes the quota counts (nil: every node of the NodePools it is given to). It is matched
	// against the labels the NodePool fixes for its nodes and those of each instance type; a term on the zone or
	// the capacity type that the NodePool leaves open is taken as matching (the node may get either).
	Selector labels.Selector
}

// offeringKey reports whether a new node gets the label from its offering, not from its NodePool or instance type.
func offeringKey(key string) bool {
	switch key {
	case corev1.LabelTopologyZone, corev1.LabelFailureDomainBetaZone, stevedorev1.LabelCapacityType, stevedorev1.LabelZoneID:
		return true
	}
	return false
}

// selects reports whether a node of the NodePool and instance type counts against the quota.
func (q *Quota) selects(pool, typ map[string]string) bool {
	if q.Selector == nil || q.Selector.Empty() {
		return true
	}
	reqs, _ := q.Selector.Requirements()
	for _, r := range reqs {
		v, ok := pool[r.Key()]
		if !ok {
			v, ok = typ[r.Key()]
		}
		if !ok && offeringKey(r.Key()) {
			continue // decided by the offering the node gets: counted
		}
		set := labels.Set{}
		if ok {
			set[r.Key()] = v
		}
		if !r.Matches(set) {
			return false
		}
	}
	return true
}

// covering returns the quotas among the NodePool's that count a node of type it (cached per solve).
func (b *budgets) covering(pool *NodePoolOption, it *cloud.InstanceType) []*Quota {
	if len(pool.Quotas) == 0 {
		return nil
	}
	u := &b.quotas
	key := poolType{pool: pool.NodePool.Name, it: it}
	if qs, ok := u.covering[key]; ok {
		return qs
	}
	if u.covering == nil {
		u.covering = map[poolType][]*Quota{}
	}
	var qs []*Quota
	for _, q := range pool.Quotas {
		if q.selects(pool.Requirements.Labels(), it.Labels()) {
			qs = append(qs, q)
		}
	}
	u.covering[key] = qs
	return qs
}

// poolType keys what depends on a NodePool and an instance type.
type poolType struct {
	pool string
	it   *cloud.InstanceType
}

// quotaSums keeps, per quota, what the open nodes of its NodePools add up to (quotaUnits) and how many they are.
type quotaSums struct {
	sums  map[*Quota]map[corev1.ResourceName]int64
	count map[*Quota]int64
	// most is, per quota and resource, the largest one node of any NodePool it covers can add (quotaUnits).
	most map[*Quota]map[corev1.ResourceName]int64
	// covering caches the quotas counting a node of a NodePool and type (covering).
	covering map[poolType][]*Quota
}

// typeUnits is what one node of type it, priced price, adds to a quota's resource.
func typeUnits(name corev1.ResourceName, it *cloud.InstanceType, price float64) int64 {
	if name == autoscalingv1beta1.ResourceHourlyCost {
		return int64(math.Round(price * 1e6))
	}
	if q, ok := it.Capacity[name]; ok {
		return limitUnits(name, q)
	}
	return 0
}

// remainingUnits is a quota's remaining resource in quotaUnits.
func remainingUnits(q *Quota, name corev1.ResourceName) int64 {
	v := q.Remaining[name]
	if name == autoscalingv1beta1.ResourceHourlyCost {
		return int64(math.Round(v.AsApproximateFloat64() * 1e6))
	}
	return limitUnits(name, v)
}

// quotaMost is the largest amount one node of any NodePool covered by q can add to resource name (computed once
// per solve).
func (b *budgets) quotaMost(q *Quota, name corev1.ResourceName) int64 {
	u := &b.quotas
	if u.most == nil {
		u.most = map[*Quota]map[corev1.ResourceName]int64{}
	}
	if v, ok := u.most[q][name]; ok {
		return v
	}
	if u.most[q] == nil {
		u.most[q] = map[corev1.ResourceName]int64{}
	}
	var most int64
	for i := range b.pools {
		pool := &b.pools[i]
		if !pool.covers(q) {
			continue
		}
		for _, it := range pool.InstanceTypes {
			if !slices.Contains(b.covering(pool, it), q) {
				continue
			}
			// a node can be of any offering: the dearest is the bound
			most = max(most, typeUnits(name, it, maxOffering(it)))
		}
	}
	u.most[q][name] = most
	return most
}

// maxOffering is the highest price of an instance type's available offerings.
func maxOffering(it *cloud.InstanceType) float64 {
	var most float64
	for _, o := range it.Offerings {
		if o.Available {
			most = max(most, o.Price)
		}
	}
	return most
}

// covers reports whether the NodePool's nodes count against the quota.
func (o *NodePoolOption) covers(q *Quota) bool {
	for _, c := range o.Quotas {
		if c == q {
			return true
		}
	}
	return false
}

// quotaFar reports whether no open node can reach the quota: room for every open node and one more at the most a
// node of its NodePools can add. Then no check against it is needed.
func (b *budgets) quotaFar(q *Quota) bool {
	b.settle()
	u := &b.quotas
	for name := range q.Remaining {
		if name == stevedorev1.ResourceNodes {
			if u.count[q]+1 > remainingUnits(q, name) {
				return false
			}
			continue
		}
		if u.sums[q][name]+b.quotaMost(q, name) > remainingUnits(q, name) {
			return false
		}
	}
	return true
}

// quotaUsage is what the open nodes add up to against a quota (except one node), and how many nodes that is.
func (b *budgets) quotaUsage(q *Quota, except *openNode) (map[corev1.ResourceName]int64, int64) {
	b.settle()
	used := make(map[corev1.ResourceName]int64, len(q.Remaining))
	for name, v := range b.quotas.sums[q] {
		used[name] = v
	}
	count := b.quotas.count[q]
	if c, ok := b.counted[except]; ok && except != nil {
		if add, ok := c.quotas[q]; ok {
			for name, v := range add {
				used[name] -= v
			}
			count--
		}
	}
	return used, count
}

// blockingResource returns the first resource (by name) that one more node of type it, priced price, would take
// past the quota given used; "" when it fits.
func blockingResource(q *Quota, used map[corev1.ResourceName]int64, count int64, it *cloud.InstanceType, price float64) corev1.ResourceName {
	names := make([]corev1.ResourceName, 0, len(q.Remaining))
	for name := range q.Remaining {
		names = append(names, name)
	}
	sort.Slice(names, func(i, j int) bool { return names[i] < names[j] })
	for _, name := range names {
		if name == stevedorev1.ResourceNodes {
			if count+1 > remainingUnits(q, name) {
				return name
			}
			continue
		}
		if used[name]+typeUnits(name, it, price) > remainingUnits(q, name) {
			return name
		}
	}
	return ""
}

// withinQuotas keeps the types that fit every quota counting them after the nodes already planned, with the reason
// when none does.
func (b *budgets) withinQuotas(pool *NodePoolOption, types []*cloud.InstanceType) ([]*cloud.InstanceType, string) {
	for _, q := range pool.Quotas {
		if b.quotaFar(q) {
			continue
		}
		used, count := b.quotaUsage(q, nil)
		var kept []*cloud.InstanceType
		var blocked corev1.ResourceName
		for _, it := range types {
			if !slices.Contains(b.covering(pool, it), q) {
				kept = append(kept, it)
				continue
			}
			price, _ := cheapestOffering(it, pool.Requirements, "", "")
			if r := blockingResource(q, used, count, it, price); r != "" {
				if blocked == "" {
					blocked = r
				}
				continue
			}
			kept = append(kept, it)
		}
		if len(kept) == 0 {
			b.quotaReached(q, blocked)
			return nil, fmt.Sprintf("the CapacityQuota %s is reached (%s)", q.Name, blocked)
		}
		types = kept
	}
	return types, ""
}

// growthWithinQuotas reports whether an open node may become type best, priced price, within every quota covering
// its NodePool.
func (b *budgets) growthWithinQuotas(n *openNode, best *cloud.InstanceType, price float64) bool {
	for _, q := range b.covering(n.pool, best) {
		if b.quotaFar(q) {
			continue
		}
		used, count := b.quotaUsage(q, n)
		if r := blockingResource(q, used, count, best, price); r != "" {
			b.quotaReached(q, r)
			return false
		}
	}
	return true
}

// NewQuota is the solver's view of a CapacityQuota, of selector sel (state.QuotaSelector), given what the nodes it selects
// use now.
func NewQuota(cq *autoscalingv1beta1.CapacityQuota, sel labels.Selector, used corev1.ResourceList) *Quota {
	q := &Quota{Name: cq.Name, Remaining: corev1.ResourceList{}, Selector: sel}
	for name, limit := range cq.Spec.Limits.Resources {
		v := limit.DeepCopy()
		if u, ok := used[name]; ok {
			v.Sub(u)
		}
		q.Remaining[name] = v
	}
	return q
}

// AttachQuotas gives each NodePool the quotas that may count its nodes: those selecting a node of one of its
// instance types.
func AttachQuotas(pools []NodePoolOption, quotas []*Quota) {
	for i := range pools {
		pool := &pools[i]
		pool.Quotas = nil
		poolLabels := pool.Requirements.Labels()
		for _, q := range quotas {
			for _, it := range pool.InstanceTypes {
				if q.selects(poolLabels, it.Labels()) {
					pool.Quotas = append(pool.Quotas, q)
					break
				}
			}
		}
	}
}

// quotaReached records in the plan that a quota kept a node from opening or growing.
func (b *budgets) quotaReached(q *Quota, name corev1.ResourceName) {
	if b.plan.QuotasReached == nil {
		b.plan.QuotasReached = map[string]corev1.ResourceName{}
	}
	if _, ok := b.plan.QuotasReached[q.Name]; !ok {
		b.plan.QuotasReached[q.Name] = name
	}
}
