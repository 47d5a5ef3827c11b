/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package solver

import (
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/cloud"
	"github.com/stevedore-dev/stevedore/pkg/scheduling"
)

// priceLists shares, within a solve, the price-ordered candidate lists of the open nodes: nodes with the same
// candidates, the same pinned zone and capacity type and the same zone and capacity-type requirements have the
// same list, and most open nodes of a big batch are alike (at 20,000 pods one list per node was half the solver's
// live heap). A list is never changed once made; a node whose candidates or pins change takes another.
type priceLists struct {
	byHash map[uint64][]*sharedPrices
	// types interns candidate lists (intern).
	types map[uint64][][]*cloud.InstanceType
}

// intern returns a list equal to cands that alike nodes share (the open nodes' candidates, the offering choices
// memoised for them and the planned nodes' types are mostly the same few lists). The list returned must not be
// written to.
func (pl *priceLists) intern(cands []*cloud.InstanceType) []*cloud.InstanceType {
	key := uint64(typesHash(cands))
	for _, known := range pl.types[key] {
		if sameTypes(known, cands) {
			return known
		}
	}
	if pl.types == nil {
		pl.types = map[uint64][][]*cloud.InstanceType{}
	}
	cands = cands[:len(cands):len(cands)]
	pl.types[key] = append(pl.types[key], cands)
	return cands
}

// fnv64 is FNV-1a over strings, each followed by a separator, without allocating.
type fnv64 uint64

func newFNV64() fnv64 { return 14695981039346656037 }

func (h fnv64) add(s string, sep byte) fnv64 {
	for i := 0; i < len(s); i++ {
		h = (h ^ fnv64(s[i])) * 1099511628211
	}
	return (h ^ fnv64(sep)) * 1099511628211
}

func typesHash(cands []*cloud.InstanceType) fnv64 {
	h := newFNV64()
	for _, it := range cands {
		h = h.add(it.Name, 0)
	}
	return h
}

type sharedPrices struct {
	candidates     []*cloud.InstanceType
	zone, ct       string
	zoneReq, ctReq string
	list           []pricedType
}

// get returns the list of candidates with a price (their cheapest offering reqs allow in zone and capacity type
// ct, "" for any), cheapest first, ties in candidate order.
func (pl *priceLists) get(cands []*cloud.InstanceType, reqs scheduling.Requirements, zone, ct string) []pricedType {
	zoneReq, ctReq := requirementKey(reqs, corev1.LabelTopologyZone), requirementKey(reqs, stevedorev1.LabelCapacityType)
	h := typesHash(cands)
	for _, s := range []string{zone, ct, zoneReq, ctReq} {
		h = h.add(s, 1)
	}
	key := uint64(h)
	for _, sp := range pl.byHash[key] {
		if sp.zone == zone && sp.ct == ct && sp.zoneReq == zoneReq && sp.ctReq == ctReq && sameTypes(sp.candidates, cands) {
			return sp.list
		}
	}
	list := make([]pricedType, 0, len(cands))
	for _, it := range cands {
		if p, ok := cheapestOffering(it, reqs, zone, ct); ok {
			list = append(list, pricedType{it: it, price: p, alloc: allocVec(it)})
		}
	}
	sort.SliceStable(list, func(i, j int) bool { return list[i].price < list[j].price })
	list = list[:len(list):len(list)] // an append by a holder must copy, never write into the shared array
	if pl.byHash == nil {
		pl.byHash = map[uint64][]*sharedPrices{}
	}
	pl.byHash[key] = append(pl.byHash[key], &sharedPrices{candidates: cands, zone: zone, ct: ct, zoneReq: zoneReq, ctReq: ctReq, list: list})
	return list
}

// requirementKey renders the requirement on key in full ("" when there is none).
func requirementKey(reqs scheduling.Requirements, key string) string {
	r, ok := reqs[key]
	if !ok {
		return ""
	}
	nsr := r.NodeSelectorRequirement()
	return string(nsr.Operator) + " " + strings.Join(nsr.Values, ",")
}

func sameTypes(a, b []*cloud.InstanceType) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
