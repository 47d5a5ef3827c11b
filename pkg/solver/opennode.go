/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package solver

import (
	"math"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/cloud"
	"github.com/stevedore-dev/stevedore/pkg/scheduling"
)

// openNode is a virtual node the solver is filling. The fields every placement reads of every open node come
// first, so that the scan over the open nodes touches few cache lines of each (placeOnOpenWith).
type openNode struct {
	removed bool
	// pricesDirty is set whenever candidates, zone, capacity type or pins change.
	pricesDirty bool
	cacheValid  bool
	growValid   bool
	used        vec
	cap         vec // allocatable of largest
	// slack and price cache the cheapest type holding used: what it costs and what it leaves free.
	cachedFor   vec
	cachedPrice float64
	cachedSlack vec
	cachedIdx   int
	// growNeed, growUsed: the last grow beyond the current type's slack, and its result (growPrice, growLeft);
	// consecutive pods often ask the same of the same node.
	growNeed, growUsed, growLeft vec
	growPrice                    float64
	seq                          int
	byPrice                      []pricedType // shared with alike nodes: never written to
	prices                       *priceLists
	pool                         *NodePoolOption
	zone, ct                     string
	// bucket numbers zone and ct (bucketOf) while they are bucketZone and bucketCT.
	bucket               int
	bucketSet            bool
	bucketZone, bucketCT string

	name       string
	candidates []*cloud.InstanceType // still compatible and large enough, largest last is not assumed
	reqs       scheduling.Requirements
	pinned     map[string]bool
	pods       []*corev1.Pod
	// ds are the DaemonSet pods on the node, decided with its first pod (hasDaemons): every candidate runs the same.
	ds         []*corev1.Pod
	hasDaemons bool
	largest    *cloud.InstanceType
	// accelerated is true while every candidate has GPUs or Neuron devices.
	accelerated bool
	region      string
	common      map[string]string
	commonFor   int
	// choices memoises offeringChoices' segments for one pod shape (choicesFor: cared keys and requirements)
	// while the node's candidates, requirements, offering and DaemonSets stay as they are (tryChoice clears it).
	choices    [][]offeringChoice
	choicesFor string
}

// pricedType is an instance type with the price of its cheapest offering a node may use and its allocatable.
type pricedType struct {
	it    *cloud.InstanceType
	price float64
	alloc vec
}

// current returns the price of the cheapest type holding what the node uses now, what that type leaves free, and
// its index in byPrice.
func (n *openNode) current() (float64, vec, int) {
	n.refreshPrices()
	if n.cacheValid && n.cachedFor == n.used {
		return n.cachedPrice, n.cachedSlack, n.cachedIdx
	}
	n.cachedFor, n.cacheValid = n.used, true
	n.cachedPrice, n.cachedSlack, n.cachedIdx = math.Inf(1), vec{}, len(n.byPrice)
	for i, p := range n.byPrice {
		if n.used.Fits(p.alloc) {
			n.cachedPrice, n.cachedSlack, n.cachedIdx = p.price, p.alloc.Sub(n.used), i
			break
		}
	}
	return n.cachedPrice, n.cachedSlack, n.cachedIdx
}

// priceWithout returns the price of the cheapest type holding what the node uses less need, and what it leaves
// free (what current would say once need leaves the node).
func (n *openNode) priceWithout(need vec) (float64, vec) {
	n.refreshPrices()
	used := n.used.Sub(need)
	for _, p := range n.byPrice {
		if used.Fits(p.alloc) {
			return p.price, p.alloc.Sub(used)
		}
	}
	return math.Inf(1), vec{}
}

// grow returns the price of the cheapest type holding what the node uses plus need, and what it leaves free.
func (n *openNode) grow(need vec) (float64, vec) {
	price, slack, idx := n.current()
	if need.Fits(slack) {
		return price, slack.Sub(need)
	}
	if n.growValid && n.growNeed == need && n.growUsed == n.used {
		return n.growPrice, n.growLeft
	}
	total := n.used.Add(need)
	price, left := math.Inf(1), vec{}
	// byPrice is ordered by price, so the first type after the current one that holds the total is the cheapest
	// (types before it cannot hold even the current use)
	for _, p := range n.byPrice[min(idx, len(n.byPrice)):] {
		if total.Fits(p.alloc) {
			price, left = p.price, p.alloc.Sub(total)
			break
		}
	}
	n.growNeed, n.growUsed, n.growPrice, n.growLeft, n.growValid = need, n.used, price, left, true
	return price, left
}

// growIn is grow on the node narrowed to capacity type ct: the price of its cheapest type holding what it uses
// plus need in that capacity type, and what that leaves free.
func (n *openNode) growIn(need vec, ct string) (float64, vec) {
	zone, _ := n.pinnedOffering()
	lists := n.prices
	if lists == nil {
		lists = &priceLists{}
	}
	total := n.used.Add(need)
	for _, p := range lists.get(n.candidates, n.reqs, zone, ct) {
		if total.Fits(p.alloc) {
			return p.price, p.alloc.Sub(total)
		}
	}
	return math.Inf(1), vec{}
}

// refreshPrices takes the price-ordered candidates for the node's candidates and pinned offering when they
// changed: shared with the alike nodes through the solve's priceLists (a node made outside a solve keeps its own).
func (n *openNode) refreshPrices() {
	if !n.pricesDirty && n.byPrice != nil {
		return
	}
	n.pricesDirty = false
	n.cacheValid, n.growValid = false, false
	zone, ct := n.pinnedOffering()
	lists := n.prices
	if lists == nil {
		lists = &priceLists{}
	}
	n.byPrice = lists.get(n.candidates, n.reqs, zone, ct)
}

// pinnedOffering is the zone and capacity type the node has pinned ("" for one it has not).
func (n *openNode) pinnedOffering() (zone, ct string) {
	if n.pinned[corev1.LabelTopologyZone] {
		zone = n.zone
	}
	if n.pinned[stevedorev1.LabelCapacityType] {
		ct = n.ct
	}
	return zone, ct
}

// cheapestOffering is the lowest price of an available offering reqs allow in zone and capacity type ct ("" for
// any).
func cheapestOffering(it *cloud.InstanceType, reqs scheduling.Requirements, zone, ct string) (float64, bool) {
	zr, zok := reqs[corev1.LabelTopologyZone]
	cr, cok := reqs[stevedorev1.LabelCapacityType]
	best, found := math.Inf(1), false
	for _, o := range it.Offerings {
		if !o.Available || (zone != "" && o.Zone != zone) || (ct != "" && o.CapacityType != ct) {
			continue
		}
		if (!zok || zr.Has(o.Zone)) && (!cok || cr.Has(o.CapacityType)) && o.Price < best {
			best, found = o.Price, true
		}
	}
	return best, found
}

// allocVec is an instance type's allocatable as a vec.
func allocVec(it *cloud.InstanceType) vec {
	c, m, p := it.AllocatableCPUMemoryPods()
	return vec{MilliCPU: c, Memory: m, Pods: p, Accelerators: it.AllocatableAccelerators()}
}

// largestType is the type that represents a set of candidates: the one with the most accelerators, then the
// largest by weight (the first of equals).
func largestType(types []*cloud.InstanceType) *cloud.InstanceType {
	var best *cloud.InstanceType
	var bestW float64
	var bestAcc int64
	for _, it := range types {
		c, m, _ := it.AllocatableCPUMemoryPods()
		w, acc := vec{MilliCPU: c, Memory: m}.Weight(), it.AcceleratorTotal()
		if best == nil || acc > bestAcc || (acc == bestAcc && w > bestW) {
			best, bestW, bestAcc = it, w, acc
		}
	}
	return best
}

// withoutAccelerators keeps the types without GPUs or Neuron devices, unless there are none: a pod that asks for
// no accelerator gets an accelerated node only when nothing else fits it.
func withoutAccelerators(types []*cloud.InstanceType) []*cloud.InstanceType {
	var out []*cloud.InstanceType
	for _, it := range types {
		if !it.Accelerated() {
			out = append(out, it)
		}
	}
	if len(out) == 0 {
		return types
	}
	return out
}

// setLargest updates the representative (largest) candidate, the capacity it gives and the labels all candidates
// share. Candidates only ever shrink, so an unchanged count means an unchanged set.
func (n *openNode) setLargest() {
	if n.largest != nil && len(n.candidates) == n.commonFor {
		return
	}
	n.largest = largestType(n.candidates)
	n.cap = allocVec(n.largest)
	n.accelerated = true
	for _, it := range n.candidates {
		n.accelerated = n.accelerated && it.Accelerated()
	}
	n.common = commonLabels(n.candidates)
	n.commonFor = len(n.candidates)
}

// node renders the virtual node: labels common to all candidates (so a Filter never relies on a label the
// launched type might not have), the representative zone and capacity type, the NodePool's labels and taints,
// and the largest candidate's allocatable.
func (n *openNode) node() *corev1.Node {
	labels := NodeLabels(n.pool.NodePool, n.pool.Requirements, n.reqs, n.common, n.zone, n.pool.zoneIDs.ID(n.zone), n.ct, n.region)
	labels[corev1.LabelHostname] = n.name
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: n.name, Labels: labels},
		Spec:       corev1.NodeSpec{Taints: n.pool.NodePool.Spec.Template.Spec.Taints},
		Status:     corev1.NodeStatus{Allocatable: n.largest.Allocatable(), Capacity: n.largest.Capacity},
	}
}

// NodeLabels is the one definition of the labels a node Stevedore launches carries (pkg/scheduling states the
// rules): its instance type's labels (typeLabels), the labels its NodePool defines — template labels, and the
// values its requirements allow once narrowed to one by the pods planned on it (reqs; keys in restricted domains
// only when the NodePool itself pins them) —, its offering's zone (and the zone's ID) and capacity type, the region,
// the NodePool's name, and the deprecated aliases of the well-known keys. Nothing a pod asked for that the NodePool
// does not offer.
//
//nolint:gocyclo // the one definition of a new node's labels: one rule per source of labels, in precedence order
func NodeLabels(np *stevedorev1.NodePool, poolReqs, reqs scheduling.Requirements, typeLabels map[string]string, zone, zoneID, ct, region string) map[string]string {
	labels := make(map[string]string, len(typeLabels)+16)
	for k, v := range typeLabels {
		if !scheduling.IsOfferingKey(k) {
			labels[k] = v
		}
	}
	for k, r := range reqs {
		if v, ok := reqLabel(poolReqs, k, r); ok {
			labels[k] = v
		}
	}
	for k, v := range np.Spec.Template.ObjectMeta.Labels {
		labels[k] = v
	}
	if zone != "" {
		labels[corev1.LabelTopologyZone] = zone
	}
	if zoneID != "" {
		labels[stevedorev1.LabelZoneID] = zoneID
	}
	if ct != "" {
		labels[stevedorev1.LabelCapacityType] = ct
	}
	if region != "" {
		labels[corev1.LabelTopologyRegion] = region
	}
	labels[stevedorev1.LabelNodePool] = np.Name
	return scheduling.WithDeprecatedAliases(labels)
}

// reqLabel is the label a node requirement gives a node of a NodePool with requirements poolReqs (NodeLabels):
// a key the NodePool has, narrowed to one value, and not one the instance type or offering defines.
func reqLabel(poolReqs scheduling.Requirements, k string, r *scheduling.Requirement) (string, bool) {
	pool, ok := poolReqs[k]
	if !ok || scheduling.IsInstanceTypeKey(k) || scheduling.IsOfferingKey(k) || k == corev1.LabelTopologyRegion {
		return "", false
	}
	if !r.IsFinite() || r.Len() != 1 {
		return "", false
	}
	if scheduling.IsRestricted(k) && (!pool.IsFinite() || pool.Len() != 1) {
		return "", false
	}
	return r.Any(), true
}

// sameReqLabels reports whether requirements a and b give a node of a NodePool with requirements poolReqs the
// same labels (reqLabel), without rendering them.
func sameReqLabels(poolReqs, a, b scheduling.Requirements) bool {
	for k, ra := range a {
		va, oka := reqLabel(poolReqs, k, ra)
		rb, inB := b[k]
		if !inB {
			if oka {
				return false
			}
			continue
		}
		if vb, okb := reqLabel(poolReqs, k, rb); oka != okb || va != vb {
			return false
		}
	}
	for k, rb := range b {
		if _, inA := a[k]; inA {
			continue
		}
		if _, ok := reqLabel(poolReqs, k, rb); ok {
			return false
		}
	}
	return true
}

// commonLabels returns the labels every type has with the same value.
func commonLabels(types []*cloud.InstanceType) map[string]string {
	if len(types) == 0 {
		return nil
	}
	out := map[string]string{}
	for k, v := range types[0].Labels() {
		out[k] = v
	}
	for _, it := range types[1:] {
		l := it.Labels()
		for k, v := range out {
			if l[k] != v {
				delete(out, k)
			}
		}
	}
	return out
}

// Offerings adds solver helpers to cloud offerings.
type Offerings cloud.Offerings

func (offs Offerings) only(n *openNode) cloud.Offerings {
	var out cloud.Offerings
	for _, o := range offs {
		if n.pinned[corev1.LabelTopologyZone] && o.Zone != n.zone {
			continue
		}
		if n.pinned[stevedorev1.LabelCapacityType] && o.CapacityType != n.ct {
			continue
		}
		out = append(out, o)
	}
	return out
}
