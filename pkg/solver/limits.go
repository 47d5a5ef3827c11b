package solver

import (
	"math"

	corev1 "k8s.io/api/core/v1"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/cloud"
	"github.com/stevedore-dev/stevedore/pkg/scheduling"
)

// withinLimits keeps the types that fit what the NodePool's limits still allow after the nodes already planned.
func (st *solve) withinLimits(pool *NodePoolOption, types []*cloud.InstanceType) []*cloud.InstanceType {
	if pool.limitsFar(len(st.open)) {
		return types
	}
	used, count := st.poolUsage(pool, nil)
	if nodes, ok := pool.Remaining["nodes"]; ok && count+1 > nodes.Value() {
		return nil
	}
	var out []*cloud.InstanceType
	for _, it := range types {
		if fitsLimits(used, it, pool.Remaining) {
			out = append(out, it)
		}
	}
	return out
}

// poolUsage sums the capacity of the cheapest type each open node of the pool needs now (except one node).
func (st *solve) poolUsage(pool *NodePoolOption, except *openNode) (corev1.ResourceList, int64) {
	used := corev1.ResourceList{}
	count := int64(0)
	for _, n := range st.open {
		if n.removed || n.pool != pool || n == except {
			continue
		}
		count++
		_, _, idx := n.current()
		it := n.largest
		if idx < len(n.byPrice) {
			it = n.byPrice[idx].it
		}
		for name, q := range it.Capacity {
			sum := used[name]
			sum.Add(q)
			used[name] = sum
		}
	}
	return used, count
}

// fitsLimits reports whether one more node of type it keeps used within the remaining limits.
func fitsLimits(used corev1.ResourceList, it *cloud.InstanceType, remaining corev1.ResourceList) bool {
	for name, limit := range remaining {
		if name == "nodes" {
			continue
		}
		total := used[name].DeepCopy()
		total.Add(it.Capacity[name])
		if total.Cmp(limit) > 0 {
			return false
		}
	}
	return true
}

// growthWithinLimits reports whether a node of a limited NodePool may grow to hold total: the cheapest candidate
// holding it must keep the pool within its limits.
func (st *solve) growthWithinLimits(n *openNode, candidates []*cloud.InstanceType, reqs scheduling.Requirements, total vec) bool {
	if n.pool.limitsFar(len(st.open)) {
		return true
	}
	zone, ct := "", ""
	if n.pinned[corev1.LabelTopologyZone] {
		zone = n.zone
	}
	if n.pinned[stevedorev1.LabelCapacityType] {
		ct = n.ct
	}
	var best *cloud.InstanceType
	bestPrice := math.Inf(1)
	for _, it := range candidates {
		if !total.fits(allocVec(it)) {
			continue
		}
		if p, ok := cheapestOffering(it, reqs, zone, ct); ok && p < bestPrice {
			best, bestPrice = it, p
		}
	}
	if best == nil {
		return false
	}
	used, _ := st.poolUsage(n.pool, n)
	return fitsLimits(used, best, n.pool.Remaining)
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
