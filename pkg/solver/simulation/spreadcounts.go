/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package simulation

import (
	"fmt"
	"math"
	"reflect"
	"slices"

	"github.com/google/btree"
	fwk "k8s.io/kube-scheduler/framework"
)

// spreadCounts is a view of a PodTopologySpread state: the counts per constraint and domain, and the critical
// paths to refresh.
type spreadCounts struct {
	state      fwk.StateData
	matchNum   []map[string]int
	keys       []string      // topology key per constraint
	paths      reflect.Value // []*criticalPaths
	pathsStale bool
	// order holds each constraint's domains by count, then name, as matchNum had them when the paths were last
	// refreshed, and pending the domains changed since (with their count then): the critical paths are order's
	// first two once the changes are in, found without a walk over every domain (a hostname spread has one per
	// node). A constraint's order is nil until needed, and dropped when more domains changed than it holds.
	order   []*btree.BTreeG[domainCount]
	pending [][]domainCount
}

// domainCount is a domain and its count of matching pods.
type domainCount struct {
	n int
	v string
}

func lessDomainCount(a, b domainCount) bool { return a.n < b.n || (a.n == b.n && a.v < b.v) }

// countOf is a domain's count in constraint i, math.MinInt when matchNum does not have the domain.
func (sc *spreadCounts) countOf(i int, v string) domainCount {
	n, ok := sc.matchNum[i][v]
	if !ok {
		return domainCount{n: math.MinInt, v: v}
	}
	return domainCount{n: n, v: v}
}

// moved records that a domain's count in constraint i may have changed from was (countOf before the change).
func (sc *spreadCounts) moved(i int, was domainCount) {
	if sc.countOf(i, was.v) == was {
		return
	}
	sc.pathsStale = true
	if sc.order == nil || sc.order[i] == nil {
		return
	}
	if len(sc.pending[i]) > sc.order[i].Len()+64 {
		sc.order[i], sc.pending[i] = nil, nil // cheaper built again from the counts
		return
	}
	sc.pending[i] = append(sc.pending[i], was)
}

// ordered returns constraint i's order with the pending changes in.
func (sc *spreadCounts) ordered(i int) *btree.BTreeG[domainCount] {
	if sc.order == nil {
		sc.order, sc.pending = make([]*btree.BTreeG[domainCount], len(sc.matchNum)), make([][]domainCount, len(sc.matchNum))
	}
	t := sc.order[i]
	if t == nil {
		t = btree.NewG(16, lessDomainCount)
		for v, n := range sc.matchNum[i] {
			t.ReplaceOrInsert(domainCount{n, v})
		}
		sc.order[i] = t
		return t
	}
	// the first change of a domain holds the count order has for it; later ones hold counts it never had
	for _, was := range sc.pending[i] {
		t.Delete(was)
	}
	for _, was := range sc.pending[i] {
		if now := sc.countOf(i, was.v); now.n != math.MinInt {
			t.ReplaceOrInsert(now)
		}
	}
	sc.pending[i] = sc.pending[i][:0]
	return t
}

// cloneOrder gives cp, a copy of the state, a copy of the order.
func (sc *spreadCounts) cloneOrder(cp *spreadCounts) {
	if sc.order == nil {
		return
	}
	cp.order, cp.pending = make([]*btree.BTreeG[domainCount], len(sc.order)), make([][]domainCount, len(sc.order))
	for i, t := range sc.order {
		if t != nil {
			cp.order[i] = t.Clone()
			cp.pending[i] = slices.Clone(sc.pending[i])
		}
	}
}

// viewSpread reaches into a PodTopologySpread state through the fields the plugin exports.
//
//nolint:gocyclo // reads each exported field of the PodTopologySpread state, one check per field
func viewSpread(data fwk.StateData) (*spreadCounts, error) {
	v := reflect.ValueOf(data)
	if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
		return nil, fmt.Errorf("PodTopologySpread state is a %T, not a pointer to a struct", data)
	}
	s := v.Elem()
	counts := s.FieldByName("TpValueToMatchNum")
	paths := s.FieldByName("CriticalPaths")
	if !counts.IsValid() || !paths.IsValid() || !counts.CanInterface() || paths.Kind() != reflect.Slice {
		return nil, fmt.Errorf("PodTopologySpread state %T has no TpValueToMatchNum or CriticalPaths", data)
	}
	matchNum, ok := counts.Interface().([]map[string]int)
	if !ok || len(matchNum) != paths.Len() {
		return nil, fmt.Errorf("PodTopologySpread state %T: unexpected TpValueToMatchNum", data)
	}
	constraints := s.FieldByName("Constraints")
	if constraints.Kind() != reflect.Slice || constraints.Len() != len(matchNum) {
		return nil, fmt.Errorf("PodTopologySpread state %T: unexpected Constraints", data)
	}
	sc := &spreadCounts{state: data, matchNum: matchNum, paths: paths}
	for i := 0; i < constraints.Len(); i++ {
		k := constraints.Index(i).FieldByName("TopologyKey")
		if k.Kind() != reflect.String {
			return nil, fmt.Errorf("PodTopologySpread state %T: no TopologyKey in Constraints", data)
		}
		sc.keys = append(sc.keys, k.String())
	}
	for i := 0; i < paths.Len(); i++ {
		p := paths.Index(i)
		if p.Kind() != reflect.Pointer || p.Type().Elem().Kind() != reflect.Array || p.Type().Elem().Len() != 2 {
			return nil, fmt.Errorf("PodTopologySpread state %T: unexpected CriticalPaths", data)
		}
		e := p.Type().Elem().Elem()
		if f, ok := e.FieldByName("TopologyValue"); !ok || f.Type.Kind() != reflect.String {
			return nil, fmt.Errorf("PodTopologySpread state %T: no TopologyValue in CriticalPaths", data)
		}
		if f, ok := e.FieldByName("MatchNum"); !ok || f.Type.Kind() != reflect.Int {
			return nil, fmt.Errorf("PodTopologySpread state %T: no MatchNum in CriticalPaths", data)
		}
	}
	return sc, nil
}

// refreshPaths sets each constraint's critical paths to the domains with the fewest matching pods (ties to the
// smallest domain name), as the plugin's PreFilter would find them: Filter reads the minimum of the first.
func (sc *spreadCounts) refreshPaths() {
	for i := range sc.matchNum {
		best := sc.leastLoaded(i)
		arr := sc.paths.Index(i).Elem()
		for j := range best {
			arr.Index(j).FieldByName("TopologyValue").SetString(best[j].v)
			arr.Index(j).FieldByName("MatchNum").SetInt(int64(best[j].n))
		}
	}
	sc.pathsStale = false
}

// leastLoaded returns constraint i's two domains with the fewest matching pods (ties to the smaller name), padded
// as the plugin pads the critical paths (no name, math.MaxInt32 pods).
func (sc *spreadCounts) leastLoaded(i int) [2]domainCount {
	best := [2]domainCount{{math.MaxInt32, ""}, {math.MaxInt32, ""}}
	j := 0
	sc.ordered(i).Ascend(func(d domainCount) bool {
		best[j] = d
		j++
		return j < len(best)
	})
	return best
}
