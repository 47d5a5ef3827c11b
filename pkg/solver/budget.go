/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package solver

import (
	"math"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/cloud"
	"github.com/stevedore-dev/stevedore/pkg/scheduling"
)

// budgets are what the NodePools' limits and the CapacityQuotas still allow an attempt's new nodes: a NodePool's
// limits bound its own nodes, a quota the nodes it selects of the NodePools it covers. They answer whether a new
// node may open (withinLimits) and whether an open node may grow (growthWithinLimits), keep the sums of the open
// nodes that both count, and record in the plan the quotas that kept a node from opening or growing.
type budgets struct {
	// pools are the input's NodePools (the sums are kept by pointer into them).
	pools []NodePoolOption
	plan  *Plan
	poolSums
}

// withinLimits keeps the types that fit what the NodePool's limits and the quotas covering it still allow after the
// nodes already planned, with the reason when none does.
func (b *budgets) withinLimits(pool *NodePoolOption, types []*cloud.InstanceType, open int) ([]*cloud.InstanceType, string) {
	types = b.withinPoolLimits(pool, types, open)
	if len(types) == 0 {
		return nil, "the NodePool's limits are reached"
	}
	if len(pool.Quotas) == 0 {
		return types, ""
	}
	return b.withinQuotas(pool, types)
}

// withinPoolLimits keeps the types that fit what the NodePool's limits still allow after the nodes already planned.
func (b *budgets) withinPoolLimits(pool *NodePoolOption, types []*cloud.InstanceType, open int) []*cloud.InstanceType {
	if pool.limitsFar(open) {
		return types
	}
	used, count := b.poolUsage(pool, nil)
	if nodes, ok := pool.Remaining[stevedorev1.ResourceNodes]; ok && count+1 > nodes.Value() {
		return nil
	}
	if b.roomForAnyType(pool) {
		return types
	}
	var out []*cloud.InstanceType
	for _, it := range types {
		if fitsLimits(used, it, pool.Remaining) {
			out = append(out, it)
		}
	}
	return out
}

// poolSums keeps, per NodePool, the capacity (in limitUnits, per limited resource) of the type each of its open
// nodes needs now, and how many there are: counted is what each node added, dirty the nodes changed since
// (touch). Summing every open node for every placement tried made a solve with NodePool limits quadratic.
type poolSums struct {
	sums    map[*NodePoolOption]map[corev1.ResourceName]int64
	count   map[*NodePoolOption]int64
	counted map[*openNode]nodeUsage
	dirty   []*openNode
	// quotas are the same sums per quota.
	quotas quotaSums
}

// nodeUsage is what one open node adds to its NodePool's sums (pool nil when the NodePool has no limits) and to
// those of the quotas covering it.
type nodeUsage struct {
	pool     *NodePoolOption
	capacity map[corev1.ResourceName]int64
	quotas   map[*Quota]map[corev1.ResourceName]int64
}

// settle brings the sums up to date with the touched nodes.
func (b *budgets) settle() {
	u := &b.poolSums
	if u.sums == nil {
		u.sums, u.count, u.counted = map[*NodePoolOption]map[corev1.ResourceName]int64{}, map[*NodePoolOption]int64{}, map[*openNode]nodeUsage{}
		u.quotas.sums, u.quotas.count = map[*Quota]map[corev1.ResourceName]int64{}, map[*Quota]int64{}
	}
	for _, n := range u.dirty {
		if old, ok := u.counted[n]; ok {
			u.uncount(old)
			delete(u.counted, n)
		}
		if n.removed || n.pool == nil || (n.pool.Remaining == nil && len(n.pool.Quotas) == 0) {
			continue
		}
		_, _, idx := n.current()
		it, price := n.largest, math.Inf(1)
		if idx < len(n.byPrice) {
			it, price = n.byPrice[idx].it, n.byPrice[idx].price
		}
		var add nodeUsage
		if n.pool.Remaining != nil {
			add.pool, add.capacity = n.pool, u.countPool(n.pool, it)
		}
		if qs := b.covering(n.pool, it); len(qs) > 0 {
			if math.IsInf(price, 1) {
				price = maxOffering(it) // a node no type holds yet: the bound
			}
			add.quotas = u.countQuotas(qs, it, price)
		}
		u.counted[n] = add
	}
	u.dirty = u.dirty[:0]
}

// uncount takes what one node added off the sums.
func (u *poolSums) uncount(old nodeUsage) {
	if old.pool != nil {
		for name, v := range old.capacity {
			u.sums[old.pool][name] -= v
		}
		u.count[old.pool]--
	}
	for q, add := range old.quotas {
		for name, v := range add {
			u.quotas.sums[q][name] -= v
		}
		u.quotas.count[q]--
	}
}

// countPool adds one node of type it to its NodePool's sums and returns what it added.
func (u *poolSums) countPool(pool *NodePoolOption, it *cloud.InstanceType) map[corev1.ResourceName]int64 {
	add := map[corev1.ResourceName]int64{}
	if u.sums[pool] == nil {
		u.sums[pool] = map[corev1.ResourceName]int64{}
	}
	for name := range pool.Remaining {
		if q, ok := it.Capacity[name]; ok {
			add[name] = limitUnits(name, q)
			u.sums[pool][name] += add[name]
		}
	}
	u.count[pool]++
	return add
}

// countQuotas adds one node of type it, priced price, to the sums of the quotas counting it and returns what it
// added to each.
func (u *poolSums) countQuotas(qs []*Quota, it *cloud.InstanceType, price float64) map[*Quota]map[corev1.ResourceName]int64 {
	out := make(map[*Quota]map[corev1.ResourceName]int64, len(qs))
	for _, q := range qs {
		per := make(map[corev1.ResourceName]int64, len(q.Remaining))
		if u.quotas.sums[q] == nil {
			u.quotas.sums[q] = map[corev1.ResourceName]int64{}
		}
		for name := range q.Remaining {
			if name == stevedorev1.ResourceNodes {
				continue
			}
			per[name] = typeUnits(name, it, price)
			u.quotas.sums[q][name] += per[name]
		}
		u.quotas.count[q]++
		out[q] = per
	}
	return out
}

// poolUsage is the capacity, in limitUnits, of the cheapest type each open node of the pool needs now (except
// one node), and how many nodes that is.
func (b *budgets) poolUsage(pool *NodePoolOption, except *openNode) (map[corev1.ResourceName]int64, int64) {
	b.settle()
	used := make(map[corev1.ResourceName]int64, len(b.sums[pool]))
	for name, v := range b.sums[pool] {
		used[name] = v
	}
	count := b.count[pool]
	if c, ok := b.counted[except]; ok && except != nil && c.pool == pool && pool != nil {
		for name, v := range c.capacity {
			used[name] -= v
		}
		count--
	}
	return used, count
}

// roomForAnyType reports whether the NodePool's limits leave room for one more node of its largest type on top of
// every open node as it stands: then no node of the pool can grow or be opened past them, and the per-type
// checks (fitsLimits) would all pass. It keeps those checks off the hot path of a batch whose nodes are many but
// far from the limits.
func (b *budgets) roomForAnyType(pool *NodePoolOption) bool {
	b.settle()
	for name, limit := range pool.Remaining {
		if name == stevedorev1.ResourceNodes {
			continue
		}
		if b.sums[pool][name]+pool.maxUnits(name) > limitUnits(name, limit) {
			return false
		}
	}
	return true
}

// maxUnits is the largest capacity of any of the NodePool's types in a resource, in limitUnits (computed once per
// resource).
func (o *NodePoolOption) maxUnits(name corev1.ResourceName) int64 {
	if v, ok := o.maxLimitUnits[name]; ok {
		return v
	}
	if o.maxLimitUnits == nil {
		o.maxLimitUnits = map[corev1.ResourceName]int64{}
	}
	var most int64
	for _, it := range o.InstanceTypes {
		if q, ok := it.Capacity[name]; ok {
			most = max(most, limitUnits(name, q))
		}
	}
	o.maxLimitUnits[name] = most
	return most
}

// limitUnits is a quantity as the sums count it: cpu in millicores, everything else in units (memory in bytes:
// millibytes of a large limit overflow int64).
func limitUnits(name corev1.ResourceName, q resource.Quantity) int64 {
	if name == corev1.ResourceCPU {
		return q.MilliValue()
	}
	return q.Value()
}

// fitsLimits reports whether one more node of type it keeps used (limitUnits) within the remaining limits.
func fitsLimits(used map[corev1.ResourceName]int64, it *cloud.InstanceType, remaining corev1.ResourceList) bool {
	for name, limit := range remaining {
		if name == stevedorev1.ResourceNodes {
			continue
		}
		total := used[name]
		if q, ok := it.Capacity[name]; ok {
			total += limitUnits(name, q)
		}
		if total > limitUnits(name, limit) {
			return false
		}
	}
	return true
}

// growthWithinLimits reports whether a node of a limited NodePool, or of one a quota covers, may grow to hold
// total: the cheapest candidate holding it must keep the pool within its limits and every quota covering it.
func (b *budgets) growthWithinLimits(n *openNode, candidates []*cloud.InstanceType, reqs scheduling.Requirements, total vec, open int) bool {
	poolFree := n.pool.limitsFar(open) || b.roomForAnyType(n.pool)
	if poolFree && len(n.pool.Quotas) == 0 {
		return true
	}
	zone, ct := n.pinnedOffering()
	var best *cloud.InstanceType
	bestPrice := math.Inf(1)
	for _, it := range candidates {
		if !total.Fits(allocVec(it)) {
			continue
		}
		if p, ok := cheapestOffering(it, reqs, zone, ct); ok && p < bestPrice {
			best, bestPrice = it, p
		}
	}
	if best == nil {
		return false
	}
	if !poolFree {
		used, _ := b.poolUsage(n.pool, n)
		if !fitsLimits(used, best, n.pool.Remaining) {
			return false
		}
	}
	return b.growthWithinQuotas(n, best, bestPrice)
}

// RemainingLimits is what a NodePool's limits still allow given its usage (nil when it has no limits).
func RemainingLimits(np *stevedorev1.NodePool, used corev1.ResourceList) corev1.ResourceList {
	if len(np.Spec.Limits) == 0 {
		return nil
	}
	out := corev1.ResourceList{}
	for name, limit := range np.Spec.Limits {
		v := limit.DeepCopy()
		if u, ok := used[name]; ok {
			v.Sub(u)
		}
		out[name] = v
	}
	return out
}
