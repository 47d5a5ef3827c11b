/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package solver

import (
	"fmt"
	"strings"
)

// The open nodes a placement tries are the best few by (price growth, leftover room, age), per zone and capacity
// type when the pod cares. Finding them by scanning every open node for every pod made a solve quadratic: at
// 50,000 pods there are thousands of open nodes. A node's rank for a pod depends only on the node and on the
// pod's shape (its requests, the room kept for a companion, the NodePools it may use, whether it cares about the
// zone), and a placement changes one node. So the best nodes are kept per shape, and brought up to date from the
// nodes changed since (the solve's change log, fed by touch), instead of scanned again: replicas of a workload
// share a shape, and a run of them costs what their own placements changed.

// placeShape is what decides which open nodes a placement may try and how they rank.
type placeShape struct {
	need, reserve vec
	// pools has one byte per NodePool: 1 when the placement may use it.
	pools  string
	byZone bool
	// ct is the capacity type the placement chooses for a node that has not chosen one (placing.ct).
	ct string
}

// shapeCands are the best open nodes for one shape, per bucket (bucketOf; 0 for every node when the shape does
// not care about the zone), as of the change log's first at entries.
type shapeCands struct {
	at      int
	buckets map[int]*candList
}

// candList holds a bucket's best open nodes, best first (betterCand). When bounded, every node of the bucket that
// is not in the list ranks no better than bound; else the list holds them all.
type candList struct {
	list    []openCand
	bounded bool
	bound   openCand
}

// keptCands is how many nodes a candList keeps: twice what a placement reads, so that the nodes its own
// placements take out of the lead are replaced from the list, not by a new scan.
const keptCands = 4 * maxOpenTries

// candidateLists finds, for a pod, the open nodes worth trying, by shape and zone, kept up to date with the nodes the
// attempt changed (candidatesFor).
type candidateLists struct{ *solve }

// shape is the placement's shape, or false when its candidates are not kept (PreFilter names its nodes, first-fit
// decreasing, or a node is excluded as improvement does).
func (st candidateLists) shape(pl *placing, opts placeOptions, byZone bool) (placeShape, bool) {
	if opts.exclude != nil || opts.maxLeftover > 0 || st.in.FirstFitDecreasing || !pl.pre.AllNodes() {
		return placeShape{}, false
	}
	if !pl.poolsSet || pl.poolsAvoid != pl.avoidPreferNoSchedule {
		pools := make([]byte, len(st.in.NodePools))
		for i := range st.in.NodePools {
			if pl.usable(&st.in.NodePools[i]) {
				pools[i] = 1
			}
		}
		pl.pools, pl.poolsSet, pl.poolsAvoid = string(pools), true, pl.avoidPreferNoSchedule
	}
	return placeShape{need: pl.need, reserve: pl.reserve, pools: pl.pools, byZone: byZone, ct: pl.ct}, true
}

// rank is how a node ranks for a placement (the candidate placeOnOpenWith would consider), or false when the
// placement may not use it or not even its largest candidate type holds the pod.
func rank(n *openNode, pl *placing, exclude *openNode) (openCand, bool) {
	if n.removed || n == exclude || !pl.mayJoin(n) {
		return openCand{}, false
	}
	if !pl.room().Fits(n.cap.Sub(n.used)) {
		return openCand{}, false
	}
	before, _, _ := n.current()
	if pl.ct != "" {
		if _, ct := n.pinnedOffering(); ct == "" {
			// joining chooses the node's capacity type: what it costs in that one (an on-demand pod on a node
			// of spot-sized pods makes the whole node on-demand)
			after, left := n.growIn(pl.need, pl.ct)
			return openCand{n, after - before, left.Weight()}, true
		}
	}
	after, left := n.grow(pl.need)
	return openCand{n, after - before, left.Weight()}, true
}

// candidatesFor fills buckets with, per bucket, the best keep nodes whose price grows by less than maxMarginal:
// from the shape's kept lists when they can tell, else by a scan of every open node. It returns the buckets.
func (st candidateLists) candidatesFor(pl *placing, opts placeOptions, byZone bool, keep int, buckets [][]openCand) [][]openCand {
	shape, ok := st.shape(pl, opts, byZone)
	if !ok {
		return st.scanCandidates(pl, opts, byZone, keep, buckets)
	}
	sc := st.shapes[shape]
	switch {
	case sc == nil:
		if st.shapes == nil {
			st.shapes = map[placeShape]*shapeCands{}
		}
		sc = &shapeCands{}
		st.shapes[shape] = sc
		st.rebuild(sc, pl, byZone)
	case len(st.changes)-sc.at > len(st.open):
		st.rebuild(sc, pl, byZone)
	default:
		st.catchUp(sc, pl, byZone)
	}
	for _, cl := range sc.buckets {
		if cl.bounded && cl.bound.marginal < opts.maxMarginal && cl.under(opts.maxMarginal) < keep {
			// nodes left out of the list could be among the best under maxMarginal: the list cannot tell until
			// every node is ranked again (then the list's keptCands best say, as keep <= keptCands)
			st.rebuild(sc, pl, byZone)
			break
		}
	}
	for b, cl := range sc.buckets {
		for len(buckets) <= b {
			buckets = append(buckets, nil)
		}
		buckets[b] = append(buckets[b], cl.list[:min(cl.under(opts.maxMarginal), keep)]...)
	}
	if st.in.CheckCandidates {
		st.checkCandidates(pl, opts, byZone, keep, buckets)
	}
	return buckets
}

// checkCandidates compares the candidates the kept lists gave with a scan's (Input.CheckCandidates).
func (st candidateLists) checkCandidates(pl *placing, opts placeOptions, byZone bool, keep int, kept [][]openCand) {
	scanned := st.scanCandidates(pl, opts, byZone, keep, nil)
	render := func(buckets [][]openCand) string {
		var sb strings.Builder
		for b, list := range buckets {
			for _, c := range list {
				fmt.Fprintf(&sb, "%d:%s(%g,%g) ", b, c.n.name, c.marginal, c.leftover)
			}
		}
		return sb.String()
	}
	if a, b := render(kept), render(scanned); a != b {
		*st.mismatches = append(*st.mismatches,
			fmt.Sprintf("pod %s/%s: kept lists give %s, a scan %s", pl.pod.Namespace, pl.pod.Name, a, b))
	}
}

// under counts the list's nodes whose price grows by less than maxMarginal (they lead the list).
func (cl *candList) under(maxMarginal float64) int {
	n := 0
	for n < len(cl.list) && cl.list[n].marginal < maxMarginal {
		n++
	}
	return n
}

// scanCandidates is candidatesFor by a scan of every open node.
func (st candidateLists) scanCandidates(pl *placing, opts placeOptions, byZone bool, keep int, buckets [][]openCand) [][]openCand {
	for _, n := range st.open {
		if opts.maxMarginal <= 1e-9 && !n.removed {
			// only nodes whose type already holds the pod: what the room left says, without pricing a growth
			if _, slack, _ := n.current(); !pl.need.Fits(slack) {
				continue
			}
		}
		c, ok := rank(n, pl, opts.exclude)
		if !ok || c.marginal >= opts.maxMarginal || (opts.maxLeftover > 0 && c.leftover >= opts.maxLeftover) ||
			!st.affinities.sameDomains(opts.exclude, n, opts.domains) {
			continue
		}
		if st.in.FirstFitDecreasing {
			c = openCand{n, 0, float64(n.seq)}
		}
		b := 0
		if byZone {
			b = st.bucketOf(n)
		}
		for len(buckets) <= b {
			buckets = append(buckets, nil)
		}
		buckets[b] = insertTop(buckets[b], c, keep)
	}
	return buckets
}

// rebuild ranks every open node for the shape.
func (st candidateLists) rebuild(sc *shapeCands, pl *placing, byZone bool) {
	sc.at = len(st.changes)
	sc.buckets = map[int]*candList{}
	for _, n := range st.open {
		st.offer(sc, pl, byZone, n)
	}
}

// catchUp re-ranks the nodes changed since the shape's lists were last brought up to date.
func (st candidateLists) catchUp(sc *shapeCands, pl *placing, byZone bool) {
	for _, n := range st.changes[sc.at:] {
		for _, cl := range sc.buckets {
			cl.remove(n)
		}
		st.offer(sc, pl, byZone, n)
	}
	sc.at = len(st.changes)
}

// offer ranks n for the shape and keeps it in its bucket's list when it is among the best.
func (st candidateLists) offer(sc *shapeCands, pl *placing, byZone bool, n *openNode) {
	c, ok := rank(n, pl, nil)
	if !ok {
		return
	}
	b := 0
	if byZone {
		b = st.bucketOf(n)
	}
	cl := sc.buckets[b]
	if cl == nil {
		cl = &candList{}
		sc.buckets[b] = cl
	}
	cl.add(c)
}

// add keeps c when it ranks better than every node left out of the list, dropping the list's last beyond
// keptCands (which then bounds the nodes left out).
func (cl *candList) add(c openCand) {
	if cl.bounded && !betterCand(c, cl.bound) {
		return
	}
	cl.list = insertTop(cl.list, c, keptCands+1)
	if len(cl.list) > keptCands {
		dropped := cl.list[keptCands]
		cl.list = cl.list[:keptCands]
		if !cl.bounded || betterCand(dropped, cl.bound) {
			cl.bound, cl.bounded = dropped, true
		}
	}
}

// remove takes n out of the list (it changed: it is ranked again).
func (cl *candList) remove(n *openNode) {
	for i, c := range cl.list {
		if c.n == n {
			cl.list = append(cl.list[:i], cl.list[i+1:]...)
			return
		}
	}
}
