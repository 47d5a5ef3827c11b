/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package solver

import (
	"math"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/stevedore-dev/stevedore/pkg/resources"
)

// improver is the improvement phase of an attempt, over its state: once the greedy placement is done, it moves pods
// off the open nodes that waste the most, and empties the nodes it can (improve).
type improver struct{ *solve }

// improve spends the time budget on moves that lower the plan's price: emptying a node into the slack of others,
// moving single pods off a node when that lets it use a cheaper type and costs the receiving node less, and moving
// pods at no cost towards the fullest nodes (tryMove). Every move is checked like a first placement (Filter
// plugins, spread groups); a move that does not pay is undone. The work is bounded by a count of attempted moves
// and of passes, and ends with the first pass that lowers no price, so that the same input gives the same plan
// whatever the machine's speed, unless the deadline stops the search first (a batch of thousands of pods can use
// more than the default budget).
//
//nolint:gocyclo // the bounded move loop: each kind of move, its check and its undo read together
func (st improver) improve(deadline time.Time) (out Improvement) {
	start := time.Now()
	budget := st.moveBudget()
	moves := budget
	defer func() {
		out.Moves, out.Duration = budget-moves, time.Since(start)
	}()
	price := st.openPrice()
	// a pass that lowers no price ends the search: moves at no cost alone could go on shuffling pods
	for pass := 0; pass < maxImprovePasses && moves > 0; pass++ {
		out.Passes++
		for _, a := range st.byWaste() {
			if moves <= 0 {
				return out
			}
			if time.Now().After(deadline) {
				out.TimedOut = true
				return out
			}
			if a.removed || len(a.pods) == 0 {
				continue
			}
			moves--
			movable := true
			for _, p := range a.pods {
				movable = movable && st.affinities.movable(p)
			}
			if movable && len(a.pods) <= 8 && st.tryEmpty(a) {
				continue
			}
			pods := append([]*corev1.Pod(nil), a.pods...)
			sort.SliceStable(pods, func(i, j int) bool { return resources.Pod(pods[i]).Weight() > resources.Pod(pods[j]).Weight() })
			for _, p := range pods {
				keys, ok := st.affinities.moveKeys(p)
				if !ok {
					continue
				}
				moves--
				st.tryMove(a, p, keys)
			}
		}
		after := st.openPrice()
		if after >= price-1e-9 {
			return out
		}
		price = after
	}
	return out
}

// maxImprovePasses bounds improve's passes over the open nodes. improveWork bounds the moves: a move looks at
// every open node (for a receiver), so moves times open nodes is what the phase costs; a large plan gets fewer
// moves than 20 per pod, and the phase stays within seconds at 50,000 pods.
const (
	maxImprovePasses = 8
	improveWork      = 1 << 24
)

// moveBudget is how many moves improve tries: 20 per pod and 1000 more, at most improveWork over the open nodes.
// It depends only on the plan, never on the machine.
func (st improver) moveBudget() int {
	open := 0
	for _, n := range st.open {
		if !n.removed && len(n.pods) > 0 {
			open++
		}
	}
	return min(20*len(st.in.Pods)+1000, improveWork/max(open, 1))
}

// openPrice is the price of the open nodes, each at the cheapest type holding what it uses.
func (st improver) openPrice() float64 {
	total := 0.0
	for _, n := range st.open {
		if n.removed || len(n.pods) == 0 {
			continue
		}
		price, _, _ := n.current()
		total += price
	}
	return total
}

// byWaste orders the open nodes by the share of their type they leave unused, most wasteful first.
func (st improver) byWaste() []*openNode {
	type w struct {
		n     *openNode
		waste float64
	}
	var list []w
	for _, n := range st.open {
		if n.removed || len(n.pods) == 0 {
			continue
		}
		price, slack, idx := n.current()
		if math.IsInf(price, 1) || idx >= len(n.byPrice) {
			continue
		}
		list = append(list, w{n, slack.Weight() / math.Max(n.byPrice[idx].alloc.Weight(), 1e-9)})
	}
	sort.SliceStable(list, func(i, j int) bool { return list[i].waste > list[j].waste })
	out := make([]*openNode, len(list))
	for i := range list {
		out[i] = list[i].n
	}
	return out
}

// saved is an open node's state before a move, to undo it.
type savedNode struct {
	n     *openNode
	state openNode
}

func (st improver) save(saved map[*openNode]savedNode, n *openNode) {
	if _, ok := saved[n]; ok {
		return
	}
	cp := *n
	cp.pods = append([]*corev1.Pod(nil), n.pods...)
	saved[n] = savedNode{n: n, state: cp}
}

// unplace takes a pod off an open node (snapshot, groups, accounting).
func (st improver) unplace(n *openNode, p *corev1.Pod) {
	_ = st.snap.RemovePod(n.name, p)
	groupsUncount(st.groups, p)
	for i, q := range n.pods {
		if q.UID == p.UID {
			n.pods = append(n.pods[:i], n.pods[i+1:]...)
			break
		}
	}
	n.used = n.used.Sub(resources.Pod(p))
	n.cacheValid = false
	st.touch(n)
}

// tryEmpty moves every pod of a to other open nodes when that lowers the total price.
func (st improver) tryEmpty(a *openNode) bool {
	saved := map[*openNode]savedNode{}
	st.save(saved, a)
	before, _, _ := a.current()
	pods := orderPods(a.pods)
	for _, p := range pods {
		st.unplace(a, p)
	}
	moved := map[types.UID]*openNode{}
	budget := before
	ok := true
	for _, p := range pods {
		dst := st.relocate(p, placeOptions{exclude: a, maxMarginal: budget}, saved)
		if dst == nil {
			ok = false
			break
		}
		moved[p.UID] = dst
	}
	if ok {
		after := 0.0
		for n, sv := range saved {
			if n == a {
				continue
			}
			pb, _, _ := (&sv.state).current()
			pa, _, _ := n.current()
			after += pa - pb
		}
		if after < before-1e-9 {
			a.removed = true
			st.touch(a)
			st.snap.RemoveNode(a.name)
			return true
		}
	}
	// put everything back
	for uid, dst := range moved {
		for _, p := range dst.pods {
			if p.UID == uid {
				st.unplace(dst, p)
				break
			}
		}
	}
	for n, sv := range saved {
		*n = sv.state
		n.pricesDirty, n.cacheValid = true, false
		st.touch(n)
		_ = st.snap.SetNode(n.node())
	}
	for _, p := range saved[a].state.pods {
		_ = st.snap.AddPod(a.name, p)
		groupsCount(st.groups, p, st.snap.NodeInfo(a.name).Node())
	}
	return false
}

// tryMove moves one pod off a when a can then use a cheaper type and the receiving node grows by less. When a's
// type stays the same, the pod still moves, at no cost, to the node it leaves with the least room, as long as that
// is less room than a is left with: free room gathers on fewer nodes, until one of them can use a cheaper type or
// be emptied (a plan that pays for the same room spread thin over many nodes cannot shrink any of them). A pod
// with required pod affinity, or one another pod's may rely on, moves only inside its domains (moveKeys).
func (st improver) tryMove(a *openNode, p *corev1.Pod, domains []string) bool {
	before, _, _ := a.current()
	need := resources.Pod(p)
	after, left := a.priceWithout(need)
	gain := before - after
	if len(a.pods) == 1 {
		gain = before
	}
	opts := placeOptions{exclude: a, maxMarginal: gain, domains: domains}
	if gain <= 1e-9 {
		opts.maxMarginal, opts.maxLeftover = 1e-9, left.Weight()
		if opts.maxLeftover <= 0 {
			return false
		}
	}
	// most tries find no node with the room: asked before the pod leaves a, they cost no snapshot update
	if !st.anyReceiver(need, opts) {
		return false
	}
	saved := map[*openNode]savedNode{}
	st.save(saved, a)
	st.unplace(a, p)
	if dst := st.relocate(p, opts, saved); dst != nil {
		if len(a.pods) == 0 {
			a.removed = true
			st.touch(a)
			st.snap.RemoveNode(a.name)
		}
		return true
	}
	*a = saved[a].state
	a.pricesDirty, a.cacheValid = true, false
	st.touch(a)
	_ = st.snap.AddPod(a.name, p)
	groupsCount(st.groups, p, st.snap.NodeInfo(a.name).Node())
	return false
}

// anyReceiver reports whether an open node other than opts.exclude has the room for need that opts asks for: a
// necessary condition of relocate (which also runs the Filter plugins), counting resources only.
func (st improver) anyReceiver(need vec, opts placeOptions) bool {
	for _, n := range st.open {
		if n.removed || n == opts.exclude || !need.Fits(n.cap.Sub(n.used)) {
			continue
		}
		before, slack, _ := n.current()
		if opts.maxLeftover > 0 {
			if !need.Fits(slack) || slack.Sub(need).Weight() >= opts.maxLeftover {
				continue
			}
		} else if after, _ := n.grow(need); after-before >= opts.maxMarginal {
			continue
		}
		if st.affinities.sameDomains(opts.exclude, n, opts.domains) {
			return true
		}
	}
	return false
}

// relocate places p on an open node opts allows (never opts.exclude, the node it comes from), returning it.
func (st improver) relocate(p *corev1.Pod, opts placeOptions, saved map[*openNode]savedNode) *openNode {
	pl := st.newPlacing(p, p)
	if pl == nil {
		return nil
	}
	// remember the receiving node's state before it changes, so an unprofitable move can be undone
	var dst *openNode
	st.beforeCommit = func(n *openNode) {
		st.save(saved, n)
		dst = n
	}
	defer func() { st.beforeCommit = nil }()
	if !st.placeOnOpenWith(pl, opts) || dst == nil || len(dst.pods) == 0 || dst.pods[len(dst.pods)-1].UID != p.UID {
		return nil
	}
	return dst
}
