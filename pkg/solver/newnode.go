/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package solver

import (
	"fmt"
	"math"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stevedore-dev/stevedore/pkg/cloud"
	"github.com/stevedore-dev/stevedore/pkg/resources"
	"github.com/stevedore-dev/stevedore/pkg/scheduling"
)

// PhantomTaint keeps every pod off the phantom nodes that stand for topology domains with no node yet.
const PhantomTaint = "stevedore.dev/phantom"

// addPhantoms adds, for every zone (and capacity type and architecture) a NodePool can launch into, an empty
// node no pod fits, so that topology spread sees the domains new nodes may open and does not pack a spread
// workload into the zones that happen to have nodes. Phantoms have no hostname label: they are not hostname
// domains.
func (st *solve) addPhantoms() []*corev1.Node {
	seen := map[string]bool{}
	var names []*corev1.Node
	for i := range st.in.NodePools {
		for _, kl := range st.in.NodePools[i].labelSets(st.in.Region).phantom {
			if seen[kl.key] {
				continue
			}
			seen[kl.key] = true
			node := &corev1.Node{
				ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("stevedore-phantom-%d", len(names)), Labels: kl.labels},
				Spec:       corev1.NodeSpec{Taints: []corev1.Taint{{Key: PhantomTaint, Effect: corev1.TaintEffectNoSchedule}}},
				Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("0"),
					corev1.ResourceCPU: resource.MustParse("0"), corev1.ResourceMemory: resource.MustParse("0")}},
			}
			st.snap.AddNode(node)
			names = append(names, node)
		}
	}
	return names
}

// openFor opens a new virtual node for a pod: the first NodePool (by weight) whose types fit it and whose
// virtual node the Filter plugins accept.
func (st *solve) openFor(pl *placing) bool {
	var why []string
	pools := make([]int, len(st.in.NodePools))
	for i := range pools {
		pools[i] = i
	}
	if st.rng != nil {
		st.rng.Shuffle(len(pools), func(a, b int) { pools[a], pools[b] = pools[b], pools[a] })
	}
	for _, i := range pools {
		pool := &st.in.NodePools[i]
		if reason := pl.unusable(pool.NodePool.Spec.Template.Spec.Taints); reason != "" {
			why = append(why, fmt.Sprintf("NodePool %s: %s", pool.NodePool.Name, reason))
			continue
		}
		ok, reason := st.openOn(pool, pl)
		if ok {
			return true
		}
		why = append(why, fmt.Sprintf("NodePool %s: %s", pool.NodePool.Name, reason))
	}
	why = append(why, st.in.Unavailable...)
	if len(why) == 0 {
		st.reasons[pl.pod.UID] = "no NodePool may launch nodes for pods (none exists, or every one is static: spec.replicas)"
	} else {
		st.reasons[pl.pod.UID] = strings.Join(why, "; ")
	}
	return false
}

func (st *solve) openOn(pool *NodePoolOption, pl *placing) (bool, string) {
	reason := "no instance type of the NodePool fits the pod"
	for _, pr := range pl.reqs {
		if err := pool.compatible(pool.Requirements, pr); err != nil {
			reason = "the pod's node requirements conflict with the NodePool's: " + err.Error()
			continue
		}
		reqs := pool.Requirements.Clone()
		reqs.AddAll(pr)
		fresh := st.freshTypes(st.compatibleTypes(pool, reqs), reqs, pl)
		if len(fresh.fitting) == 0 {
			reason = tooLarge(pool, reqs, pl.room())
			continue
		}
		cands, why := st.budgets.withinLimits(pool, fresh.cands, len(st.open))
		if len(cands) == 0 {
			reason = why
			continue
		}
		if !pool.minValuesHold(cands, reqs, pl.room()) {
			reason = "no node can meet the NodePool's minValues: " + minValuesShortfall(cands, reqs, pl.room())
			continue
		}
		st.nextID++
		n := st.newOpenNode()
		*n = openNode{name: fmt.Sprintf("stevedore-virtual-%d", st.nextID), pool: pool, candidates: cands, reqs: reqs,
			pinned: map[string]bool{}, region: st.in.Region, seq: st.nextID, prices: &st.prices}
		zones, cts := fresh.zones, fresh.cts
		if len(cands) == len(fresh.cands) {
			// the limits left every type: what the types alone decide is known
			n.largest, n.cap, n.accelerated = fresh.largest, allocVec(fresh.largest), fresh.accelerated
			n.common, n.commonFor = fresh.common, len(cands)
		} else {
			zones, cts = offeringValues(cands, reqs)
		}
		if len(zones) == 0 || len(cts) == 0 {
			continue
		}
		n.zone, n.ct = st.cheapestZoneWithDaemons(pool, cands, reqs, pl.room(), zones), cts[0]
		n.setLargest()
		node := n.node()
		// The node is tried with the snapshot suspended and, once the pod is on it, added again as it ended up,
		// for everything that keeps state over the snapshot to see.
		st.snap.Suspend()
		st.snap.AddNode(node)
		groupsAddNode(st.groups, node)
		// The pod's PreFilter state predates the new node. Filter plugins read an empty node's domains as
		// holding no matching pod, which is what a fresh PreFilter would count, so the state stays valid (the
		// DaemonSet pods the first placement adds make tryOpen compute it again).
		if st.tryOpen(n, pl) {
			ni := st.snap.NodeInfo(n.name)
			node, pods := ni.Node(), make([]*corev1.Pod, 0, len(ni.GetPods()))
			for _, pi := range ni.GetPods() {
				pods = append(pods, pi.GetPod())
			}
			st.snap.RemoveNode(n.name)
			st.snap.Resume()
			st.snap.AddNode(node, pods...)
			st.open = append(st.open, n)
			return true, ""
		}
		st.snap.RemoveNode(n.name)
		st.snap.Resume()
		groupsRemoveNode(st.groups, node)
		st.freeOpenNode(n)
		reason = "the scheduler's Filter plugins reject the pod on a new node of this NodePool (taints, affinity or spread)"
		if !n.hasDaemons && len(pool.DaemonSetPods) > 0 && pl.need.Fits(allocVec(largestType(cands))) {
			reason += ", or its DaemonSets leave no room for it"
		}
	}
	return false, reason
}

// compatibleTypes are the NodePool's types that reqs allow with an available offering (filterTypes without the
// size check), computed once per NodePool and requirements in a solve: pods of one workload share their
// requirements, and every new node for them would filter the whole catalog again.
func (st *solve) compatibleTypes(pool *NodePoolOption, reqs scheduling.Requirements) []*cloud.InstanceType {
	key := reqs.Key()
	if st.compatible == nil {
		st.compatible = map[*NodePoolOption]map[string][]*cloud.InstanceType{}
	}
	byReqs := st.compatible[pool]
	if byReqs == nil {
		byReqs = map[string][]*cloud.InstanceType{}
		st.compatible[pool] = byReqs
	}
	if types, ok := byReqs[key]; ok {
		return types
	}
	types := pool.filterTypes(pool.InstanceTypes, reqs, vec{}, nil, "", "")
	byReqs[key] = types
	return types
}

// freshKey names what a new node's starting types depend on: the NodePool's types compatible with the pod's
// requirements (compatibleTypes, by list), the room the pod needs, and whether it asks for accelerators.
type freshKey struct {
	listKey
	room vec
	acc  bool
}

// freshTypes are a new node's starting types before the NodePool's limits, and what they alone decide: alike
// pods (a workload's replicas) open alike nodes, and each would compute them again. The lists are shared by the
// nodes and must not be written to.
type freshTypes struct {
	// fitting are the compatible types that hold the room; cands those of them a node may start with (without
	// accelerators unless the pod asks for them).
	fitting, cands []*cloud.InstanceType
	largest        *cloud.InstanceType
	common         map[string]string
	accelerated    bool
	// zones and capacity types cands offer under the requirements, cheapest first (offeringValues)
	zones, cts []string
}

// freshTypes returns the starting types of a new node for pl from compatible, the NodePool's types compatible with
// reqs, memoised per solve.
func (st *solve) freshTypes(compatible []*cloud.InstanceType, reqs scheduling.Requirements, pl *placing) *freshTypes {
	if len(compatible) == 0 {
		return &freshTypes{}
	}
	key := freshKey{listKey: listKey{list: &compatible[0], n: len(compatible)}, room: pl.room(), acc: pl.need.Accelerators.Any()}
	if f, ok := st.fresh[key]; ok {
		return f
	}
	f := &freshTypes{fitting: fitting(compatible, key.room)}
	f.cands = f.fitting
	if !key.acc {
		f.cands = withoutAccelerators(f.cands)
	}
	if len(f.cands) > 0 {
		f.cands = st.prices.intern(f.cands)
		probe := openNode{candidates: f.cands}
		probe.setLargest()
		f.largest, f.common, f.accelerated = probe.largest, probe.common, probe.accelerated
		f.zones, f.cts = offeringValues(f.cands, reqs)
	}
	if st.fresh == nil {
		st.fresh = map[freshKey]*freshTypes{}
	}
	st.fresh[key] = f
	return f
}

// fitting keeps the types whose allocatable holds need (a new slice).
func fitting(types []*cloud.InstanceType, need vec) []*cloud.InstanceType {
	out := make([]*cloud.InstanceType, 0, len(types))
	for _, it := range types {
		if need.Fits(allocVec(it)) {
			out = append(out, it)
		}
	}
	return out
}

// cheapestZoneWithDaemons is the zone a new node for a pod needing need starts in: the first of zones (cheapest
// first) unless the NodePool's DaemonSets depend on the zone, in which case the zone whose cheapest type holds the
// pod and that zone's DaemonSet pods (a DaemonSet pinned to one zone makes that zone's nodes bigger).
func (st *solve) cheapestZoneWithDaemons(pool *NodePoolOption, cands []*cloud.InstanceType, reqs scheduling.Requirements, need vec, zones []string) string {
	if len(zones) < 2 || !slices.Contains(pool.daemonKeys, corev1.LabelTopologyZone) {
		return zones[0]
	}
	best, bestPrice := zones[0], math.Inf(1)
	for _, z := range zones {
		for _, it := range cands {
			price, ok := cheapestOffering(it, reqs, z, "")
			if !ok || price >= bestPrice {
				continue
			}
			daemons, _ := st.daemonsFor(pool, reqs, it, z, "")
			if need.Add(resources.Pods(daemons)).Fits(allocVec(it)) {
				best, bestPrice = z, price
			}
		}
	}
	return best
}

// newOpenNode allocates an open node next to the previous ones (see openNode).
func (st *solve) newOpenNode() *openNode {
	if len(st.nodeSlab) == cap(st.nodeSlab) {
		st.nodeSlab = make([]openNode, 0, 256)
	}
	st.nodeSlab = st.nodeSlab[:len(st.nodeSlab)+1]
	return &st.nodeSlab[len(st.nodeSlab)-1]
}

// freeOpenNode gives back the node newOpenNode returned last, when it was not kept.
func (st *solve) freeOpenNode(n *openNode) {
	if last := len(st.nodeSlab) - 1; last >= 0 && n == &st.nodeSlab[last] {
		*n = openNode{}
		st.nodeSlab = st.nodeSlab[:last]
	}
}

// tooLarge says why no instance type fits a pod that requests need: none the requirements allow has an available
// offering, or the largest allowed ones are smaller than the pod.
func tooLarge(pool *NodePoolOption, reqs scheduling.Requirements, need vec) string {
	allowed := pool.filterTypes(pool.InstanceTypes, reqs, vec{}, nil, "", "")
	if len(allowed) == 0 {
		return "no instance type the NodePool and the pod's node requirements allow has an available offering"
	}
	var most vec
	var cpuType, memType, podsType string
	for _, it := range allowed {
		a := allocVec(it)
		if a.MilliCPU > most.MilliCPU {
			most.MilliCPU, cpuType = a.MilliCPU, it.Name
		}
		if a.Memory > most.Memory {
			most.Memory, memType = a.Memory, it.Name
		}
		if a.Pods > most.Pods {
			most.Pods, podsType = a.Pods, it.Name
		}
	}
	var short []string
	if need.MilliCPU > most.MilliCPU {
		short = append(short, fmt.Sprintf("cpu %s (the most any allowed type has is %s, %s)",
			resource.NewMilliQuantity(need.MilliCPU, resource.DecimalSI), resource.NewMilliQuantity(most.MilliCPU, resource.DecimalSI), cpuType))
	}
	if need.Memory > most.Memory {
		short = append(short, fmt.Sprintf("memory %s (the most any allowed type has is %s, %s)",
			resource.NewQuantity(need.Memory, resource.BinarySI), resource.NewQuantity(most.Memory, resource.BinarySI), memType))
	}
	if need.Pods > most.Pods {
		short = append(short, fmt.Sprintf("%d pods (the most any allowed type takes is %d, %s)", need.Pods, most.Pods, podsType))
	}
	if len(short) == 0 {
		return fmt.Sprintf("no single instance type of the %d the NodePool allows has room for the pod's %s", len(allowed), need)
	}
	return "the pod requests " + strings.Join(short, " and ") + ", counted on allocatable"
}
