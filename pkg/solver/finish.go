/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package solver

import (
	"cmp"
	"maps"
	"math"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/cloud"
	"github.com/stevedore-dev/stevedore/pkg/scheduling"
)

// finish picks each node's cheapest fitting type, builds the plan and takes the virtual nodes out of the
// snapshot.
func (st *solve) finish() {
	names := make([]string, 0, len(st.open))
	for _, n := range st.open {
		names = append(names, n.name)
	}
	st.snap.RemoveNodes(names...)
	for _, n := range st.open {
		if n.removed || len(n.pods) == 0 {
			continue
		}
		pn := st.planNode(n)
		if pn == nil {
			for _, p := range n.pods {
				st.plan.Unschedulable[p.UID] = "no instance type fits the pods planned together"
			}
			continue
		}
		st.plan.NewNodes = append(st.plan.NewNodes, pn)
		st.plan.Cost += pn.Offering.Price
	}
}

// planNode chooses the types that fit a node's pods and DaemonSet pods, cheapest first.
//
//nolint:gocyclo // the checks that narrow a node's types (resources, DaemonSets, minValues, offerings) in the order they apply
func (st *solve) planNode(n *openNode) *PlannedNode {
	all := append(append([]*corev1.Pod(nil), n.pods...), n.ds...)
	requests := podRequests(all)
	type priced struct {
		it *cloud.InstanceType
		o  cloud.Offering
	}
	fits := make([]priced, 0, len(n.candidates))
	reqsKey := n.reqs.Key()
	for _, it := range n.candidates {
		if !fitsList(requests, it.Allocatable()) {
			continue
		}
		o, ok := st.cheapestFor(it, n, reqsKey)
		if !ok {
			continue
		}
		fits = append(fits, priced{it, o})
	}
	if len(fits) == 0 {
		return nil
	}
	slices.SortStableFunc(fits, func(a, b priced) int {
		if a.o.Price != b.o.Price {
			return cmp.Compare(a.o.Price, b.o.Price)
		}
		return strings.Compare(a.it.Name, b.it.Name)
	})
	// a label the NodePool requires on every node (In several values, Exists, Gt, Lt) gets one value now; the node's
	// own requirements are copied only when one does (the open node is not used after the plan is built)
	reqs, copied := n.reqs, false
	for _, key := range slices.Sorted(maps.Keys(n.pool.Requirements)) {
		r, ok := reqs[key]
		if !ok || !n.pool.labelsNode(key) || r.AllowsAbsence() || (r.IsFinite() && r.Len() == 1) || scheduling.IsRestricted(key) {
			continue
		}
		if v := r.Pick(); v != "" {
			if !copied {
				reqs, copied = reqs.Clone(), true
			}
			reqs.Add(scheduling.MustRequirement(key, corev1.NodeSelectorOpIn, v))
		}
	}
	if id := fits[0].o.ReservationID; id != "" {
		if st.reservedUsed == nil {
			st.reservedUsed = map[string]int{}
		}
		st.reservedUsed[id]++
	}
	if c := fits[0].o.Covered; c != nil {
		if st.committedUsed == nil {
			st.committedUsed = map[string]float64{}
		}
		st.committedUsed[c.Commitment] += c.Use
		// a covered node is launched on-demand, the types in the plan's order (the covered ones first)
		if !copied {
			reqs = reqs.Clone()
		}
		reqs.Add(scheduling.MustRequirement(stevedorev1.LabelCapacityType, corev1.NodeSelectorOpIn, stevedorev1.CapacityTypeOnDemand))
		if c.Zonal {
			reqs.Add(scheduling.MustRequirement(corev1.LabelTopologyZone, corev1.NodeSelectorOpIn, fits[0].o.Zone))
		}
	}
	pn := &PlannedNode{NodePool: n.pool.NodePool, PoolRequirements: n.pool.Requirements, Requirements: reqs,
		InstanceType: fits[0].it, Offering: fits[0].o, Pods: n.pods, DaemonSets: n.ds, Requests: requests}
	// alike nodes fit the same types in the same order: one list each would be most of a plan's memory at tens
	// of thousands of nodes (hundreds of types per node), so they share one (never written to)
	list := make([]*cloud.InstanceType, len(fits))
	for i, f := range fits {
		list[i] = f.it
	}
	pn.InstanceTypes = st.prices.intern(list)
	return pn
}

// cheapestFor is the cheapest offering of it a node may use: compatible with its requirements (whose key is
// reqsKey), in its zone and capacity type where it pinned them, and, for reserved offerings, in a reservation with
// room left. Nodes alike ask the same of the same types, so types without reserved offerings are memoised.
func (st *solve) cheapestFor(it *cloud.InstanceType, n *openNode, reqsKey string) (cloud.Offering, bool) {
	cheapest := func() (cloud.Offering, bool) {
		offers := st.withReservedRoom(it.Offerings.Compatible(n.reqs))
		if n.pinned[corev1.LabelTopologyZone] || n.pinned[stevedorev1.LabelCapacityType] {
			offers = Offerings(offers).only(n)
		}
		return cloud.Offerings(offers).Cheapest()
	}
	if slices.ContainsFunc(it.Offerings, func(o cloud.Offering) bool { return o.ReservationID != "" || o.Covered != nil }) {
		return cheapest() // a reservation's or a commitment's room changes as nodes are planned
	}
	zone, ct := n.pinnedOffering()
	key := offerKey{it: it, reqs: reqsKey, zone: zone, ct: ct}
	if m, ok := st.offerMemo[key]; ok {
		return m.o, m.ok
	}
	o, ok := cheapest()
	if st.offerMemo == nil {
		st.offerMemo = map[offerKey]offerMemo{}
	}
	st.offerMemo[key] = offerMemo{o, ok}
	return o, ok
}

// offerKey names a type's cheapest offering for requirements (their Key) and a pinned zone and capacity type.
type offerKey struct {
	it             *cloud.InstanceType
	reqs, zone, ct string
}

type offerMemo struct {
	o  cloud.Offering
	ok bool
}

// withReservedRoom drops the reserved offerings whose reservation the nodes planned so far have filled, and the
// covered offerings whose commitment they have used up: a reservation with room for two instances prices two
// planned nodes as reserved, the next at their other offerings.
func (st *solve) withReservedRoom(offers cloud.Offerings) cloud.Offerings {
	full := func(o cloud.Offering) bool {
		if c := o.Covered; c != nil {
			return st.committedUsed[c.Commitment]+c.Use > c.Room+1e-9
		}
		return o.ReservationID != "" && st.reservedUsed[o.ReservationID] >= o.ReservationCapacity
	}
	if !slices.ContainsFunc(offers, full) {
		return offers
	}
	out := make(cloud.Offerings, 0, len(offers))
	for _, o := range offers {
		if !full(o) {
			out = append(out, o)
		}
	}
	return out
}

// Restrict keeps the planned node's instance types that keep accepts, given each type's cheapest compatible
// offering price, and re-picks the cheapest; nil when none is left. Disruption uses it to keep only types cheaper
// than the nodes a replacement stands for.
func (pn *PlannedNode) Restrict(keep func(it *cloud.InstanceType, price float64) bool) *PlannedNode {
	out := *pn
	out.InstanceTypes = nil
	best := math.Inf(1)
	for _, it := range pn.InstanceTypes {
		o, ok := it.Offerings.Compatible(pn.Requirements).Cheapest()
		if !ok || !keep(it, o.Price) {
			continue
		}
		out.InstanceTypes = append(out.InstanceTypes, it)
		if o.Price < best {
			best, out.InstanceType, out.Offering = o.Price, it, o
		}
	}
	if len(out.InstanceTypes) == 0 {
		return nil
	}
	return &out
}
