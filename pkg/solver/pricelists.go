package solver

import (
	"hash/fnv"
	"io"
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
	h := fnv.New64a()
	for _, it := range cands {
		_, _ = io.WriteString(h, it.Name)
		_, _ = h.Write([]byte{0})
	}
	for _, s := range []string{zone, ct, zoneReq, ctReq} {
		_, _ = io.WriteString(h, s)
		_, _ = h.Write([]byte{1})
	}
	key := h.Sum64()
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
