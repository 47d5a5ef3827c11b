/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package solver

import (
	"maps"
	"math"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/poolcap"
	"github.com/stevedore-dev/stevedore/pkg/resources"
	"github.com/stevedore-dev/stevedore/pkg/scheduling"
	"github.com/stevedore-dev/stevedore/pkg/solver/simulation"
)

// placing is one attempt to place a pod: the pod itself (what goes into the snapshot) and check, what the Filter
// plugins judge: the pod, or a copy with some of its preferences made requirements.
type placing struct {
	pod, check *corev1.Pod
	state      fwk.CycleState
	pre        *fwk.PreFilterResult
	need       vec
	reqs       []scheduling.Requirements
	cared      map[string]bool
	// caredSig names cared, for the nodes' memo of offering choices.
	caredSig string
	// avoidPreferNoSchedule keeps the pod off NodePools whose PreferNoSchedule taints it does not tolerate.
	avoidPreferNoSchedule bool
	// hostAnti are the pod's required anti-affinity terms on the node's hostname that a selector states exactly
	// (hostAntiSet: computed), for refusedByHostAntiAffinity.
	hostAnti    []podSelector
	hostAntiSet bool
	// hostGroups are the spread groups on the hostname the pod matches whose domains do not depend on node
	// labels (hostGroupsSet: computed), for refusedByHostSpread.
	hostGroups    []*spreadGroup
	hostGroupsSet bool
	// capGroups are the caps per Spot pool the pod counts in (capGroupsSet: computed), for poolsWithRoom.
	capGroups    []*spreadGroup
	capGroupsSet bool
	// pools names the NodePools the placement may use (usable), for its shape; computed for avoidPreferNoSchedule
	// poolsAvoid when poolsSet.
	pools                string
	poolsSet, poolsAvoid bool
	// ct is the one capacity type the pod's every requirement term allows ("" when it allows several, or says
	// nothing): joining a node that has not chosen its capacity type chooses it.
	ct string
	// follower is the stranded pod placed right after this one, beside it (see Solve's repair): the node keeps
	// reserve free for it and must take its taints too.
	reserve  vec
	follower *corev1.Pod
}

// refusedWhateverNarrowing reports whether the pod is refused on the node whatever type or zone the node is
// narrowed to (its hostname anti-affinity or a hostname spread): a try that need not narrow the node and run the
// Filter plugins to find out.
func (st *solve) refusedWhateverNarrowing(pl *placing, n *openNode) bool {
	return pl.refusedByHostAntiAffinity(st.snap, n.name) || st.refusedByHostSpread(pl, n)
}

// refusedByHostAntiAffinity reports whether a pod on the node matches one of the pod's required anti-affinity
// terms on the hostname: InterPodAffinity refuses the node then, whatever type or zone it is narrowed to, so a
// try need not narrow it and run the Filter plugins to find out. Terms whose selector depends on more than their
// label selector (a namespace selector, matchLabelKeys) are left to the plugin.
func (pl *placing) refusedByHostAntiAffinity(snap *simulation.Snapshot, node string) bool {
	if !pl.hostAntiSet {
		pl.hostAnti, pl.hostAntiSet = hostAntiSelectors(pl.check), true
	}
	if len(pl.hostAnti) == 0 {
		return false
	}
	ni := snap.NodeInfo(node)
	if ni == nil {
		return false
	}
	for _, pi := range ni.GetPods() {
		p := pi.GetPod()
		if p.DeletionTimestamp != nil {
			continue
		}
		for _, sel := range pl.hostAnti {
			if sel.matches(p) {
				return true
			}
		}
	}
	return false
}

// poolsWithRoom returns, for a pod its workload caps per Spot pool, what keeps a node's offering choices to those
// the caps allow: on-demand, or one instance type in a zone whose pool has room (nil for other pods). Without it,
// once the cheapest pools were at the cap, every choice a placement tries (maxChoices) could be one of them.
func (pl *placing) poolsWithRoom(groups []*spreadGroup) func(*offeringChoice) bool {
	if !pl.capGroupsSet {
		pl.capGroupsSet = true
		for _, g := range groups {
			if g.poolCap > 0 && g.matches(pl.pod) {
				pl.capGroups = append(pl.capGroups, g)
			}
		}
	}
	if len(pl.capGroups) == 0 {
		return nil
	}
	return func(c *offeringChoice) bool {
		if c.ct != stevedorev1.CapacityTypeSpot || len(c.candidates) != 1 || c.zone == "" {
			return true // not Spot, or its pool not decided: the groups' check on the node decides
		}
		pool := c.candidates[0].Name + "/" + c.zone
		for _, g := range pl.capGroups {
			if !g.allows(pool) {
				return false
			}
		}
		return true
	}
}

// refusedByHostSpread reports whether the pod would break a hard hostname spread it matches on the node: the
// spread groups' check in tryChoice would refuse every narrowing of the node, since its hostname and taints stay
// as they are (groups whose domains depend on the owner's node affinity are left to that check).
func (st *solve) refusedByHostSpread(pl *placing, n *openNode) bool {
	if !pl.hostGroupsSet {
		pl.hostGroupsSet = true
		for _, g := range st.groups {
			if g.key == corev1.LabelHostname && g.affinity == nil && g.matches(pl.pod) {
				pl.hostGroups = append(pl.hostGroups, g)
			}
		}
	}
	if len(pl.hostGroups) == 0 {
		return false
	}
	node := st.snap.NodeInfo(n.name).Node()
	for _, g := range pl.hostGroups {
		if g.eligible(node) && !g.allows(n.name) {
			return true
		}
	}
	return false
}

// hostAntiSelectors are a pod's required anti-affinity terms on the hostname whose label selector says all they
// match (no namespace selector, no matchLabelKeys or mismatchLabelKeys).
func hostAntiSelectors(pod *corev1.Pod) []podSelector {
	a := pod.Spec.Affinity
	if a == nil || a.PodAntiAffinity == nil {
		return nil
	}
	var out []podSelector
	for _, t := range a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
		if t.TopologyKey != corev1.LabelHostname || t.NamespaceSelector != nil || len(t.MatchLabelKeys) > 0 || len(t.MismatchLabelKeys) > 0 {
			continue
		}
		if sel, ok := newPodSelector(pod, t.LabelSelector, t.Namespaces, nil); ok {
			out = append(out, sel)
		}
	}
	return out
}

// room is what the node must have free for the attempt: the pod and its companion's reserve.
func (pl *placing) room() vec { return pl.need.Add(pl.reserve) }

func (pl *placing) allowed(name string) bool { return pl.pre.AllNodes() || pl.pre.NodeNames.Has(name) }

// usable reports whether the attempt may use a NodePool.
func (pl *placing) usable(pool *NodePoolOption) bool {
	return pl.unusable(pool.NodePool.Spec.Template.Spec.Taints) == ""
}

// unusable says why the attempt may not use a node (or a NodePool's nodes) with these taints, "" when it may: a
// PreferNoSchedule taint the pod avoids, or a taint the follower does not tolerate (the scheduler's
// TaintToleration Filter refuses the pod itself).
func (pl *placing) unusable(taints []corev1.Taint) string {
	switch {
	case pl.avoidPreferNoSchedule && !toleratesPreferNoSchedule(pl.check, taints):
		return "has a PreferNoSchedule taint the pod does not tolerate"
	case pl.follower != nil && !ToleratesAll(pl.follower, taints, schedulingEffect):
		return "has a taint that pod " + pl.follower.Name + ", to be placed beside this one, does not tolerate"
	}
	return ""
}

// schedulingEffect reports whether a taint of this effect keeps pods that do not tolerate it off the node.
func schedulingEffect(e corev1.TaintEffect) bool {
	return e == corev1.TaintEffectNoSchedule || e == corev1.TaintEffectNoExecute
}

// zoneIDsAsZones reads a pod's requirements on the zone ID as requirements on the zone.
func (st *solve) zoneIDsAsZones(terms []scheduling.Requirements) []scheduling.Requirements {
	for i, reqs := range terms {
		terms[i] = st.zoneIDs.Translate(reqs)
	}
	return terms
}

// newPlacing runs PreFilter for check and gathers what placing it needs; nil when PreFilter rejects it.
func (st *solve) newPlacing(pod, check *corev1.Pod) *placing {
	state, pre, status := st.sim.PreFilter(st.ctx, check)
	if !status.IsSuccess() && !status.IsSkip() {
		st.reasons[pod.UID] = "PreFilter: " + status.Message()
		return nil
	}
	pl := &placing{pod: pod, check: check, state: state, pre: pre, need: resources.Pod(pod), reqs: st.zoneIDsAsZones(podRequirements(check)),
		cared: caredKeys(check)}
	pl.ct = soleCapacityType(pl.reqs)
	if pl.cared[stevedorev1.LabelZoneID] && len(st.zoneIDs) > 0 {
		pl.cared[corev1.LabelTopologyZone] = true // the zone decides its ID
	}
	for _, k := range st.daemonKeys {
		pl.cared[k] = true // DaemonSets select on it: the node's value must be known to count them
	}
	if poolcap.Has(pod) {
		// a cap per Spot pool counts the pod in its node's pool: a Spot node for it is one instance type in one zone
		pl.cared[corev1.LabelInstanceTypeStable] = true
		pl.cared[corev1.LabelTopologyZone] = true
		pl.cared[stevedorev1.LabelCapacityType] = true
	}
	for _, k := range st.offers.watchedKeys(pod) {
		pl.cared[k] = true // another pod's affinity, anti-affinity or spread counts this one in its domain
	}
	pl.caredSig = strings.Join(slices.Sorted(maps.Keys(pl.cared)), ",")
	return pl
}

// soleCapacityType is the one capacity type every term allows ("" when a term allows several or says nothing).
func soleCapacityType(terms []scheduling.Requirements) string {
	ct := ""
	for i, term := range terms {
		r := term.Get(stevedorev1.LabelCapacityType)
		if r == nil || !r.IsFinite() || r.Len() != 1 {
			return ""
		}
		if v := r.Any(); i == 0 {
			ct = v
		} else if v != ct {
			return ""
		}
	}
	return ct
}

// place puts one pod on an in-flight node, an open virtual node, or a new virtual node. Preferences (preferred
// node and pod (anti-)affinity) are honoured where they can be without buying anything for them: first on
// capacity already planned, then, when the pod needs a node anyway, on a new node where they hold, relaxed one at
// a time; the pod's required constraints alone come last. A NodePool whose PreferNoSchedule taints the pod does
// not tolerate is used only when nothing else takes the pod.
func (st *solve) place(pod *corev1.Pod) bool {
	if companion := st.companions[pod.UID]; companion != nil {
		// land where the companion can follow (its node requirements too, and room for it), else as usual
		levels := preferenceLevels(pod)
		for i := range levels {
			if merged := withNodeRequirementsOf(levels[i], companion); merged != nil {
				levels[i] = merged
			}
		}
		if st.placeLevels(pod, levels, companion) {
			return true
		}
	}
	return st.placeLevels(pod, preferenceLevels(pod), nil)
}

// placeLevels places pod trying its preference levels (the strictest first), on a node that can take the
// follower (when not nil) too: its taints, and room kept free for it.
//
//nolint:gocyclo // the preference levels, strictest first, with the reserve kept at each; the fall-back order reads in one place
func (st *solve) placeLevels(pod *corev1.Pod, levels []*corev1.Pod, follower *corev1.Pod) bool {
	avoid := st.hasPreferNoSchedule && !toleratesPreferNoSchedule(pod, st.preferNoScheduleTaints)
	var reserve vec
	if follower != nil {
		reserve = resources.Pod(follower)
	}
	if len(levels) > 1 {
		var attempts []*placing
		for _, check := range levels[:len(levels)-1] {
			if pl := st.newPlacing(pod, check); pl != nil {
				pl.avoidPreferNoSchedule, pl.reserve, pl.follower = avoid, reserve, follower
				attempts = append(attempts, pl)
			}
		}
		for _, pl := range attempts {
			if st.placeOnInFlight(pl) || st.placeOnOpenWith(pl, placeOptions{maxMarginal: math.Inf(1)}) {
				return true
			}
		}
		// the pod without its preferences, on planned capacity that costs no more than a new node
		if pl := st.newPlacing(pod, levels[len(levels)-1]); pl != nil {
			pl.avoidPreferNoSchedule, pl.reserve, pl.follower = avoid, reserve, follower
			if st.placeOnInFlight(pl) || st.placeOnOpenWith(pl, placeOptions{maxMarginal: st.newNodeCost(pl)}) {
				return true
			}
		}
		for _, pl := range attempts {
			if st.openFor(pl) {
				return true
			}
		}
	}
	pl := st.newPlacing(pod, levels[len(levels)-1])
	if pl == nil {
		return false
	}
	pl.avoidPreferNoSchedule, pl.reserve, pl.follower = avoid, reserve, follower
	if st.placeOnInFlight(pl) || st.placeOnOpenWith(pl, placeOptions{allowNew: true, maxMarginal: math.Inf(1)}) {
		return true
	}
	if avoid {
		pl.avoidPreferNoSchedule = false
		return st.placeOnOpenWith(pl, placeOptions{allowNew: true, maxMarginal: math.Inf(1)})
	}
	return false
}

// placeOnInFlight puts the pod on a node being launched, the fullest first.
func (st *solve) placeOnInFlight(pl *placing) bool {
	room := pl.room()
	for i, f := range st.inflight {
		if !room.Fits(f.free) || !pl.allowed(f.Name) {
			continue
		}
		node := st.snap.NodeInfo(f.Name).Node()
		if pl.unusable(node.Spec.Taints) != "" {
			continue
		}
		if !groupsAllow(st.groups, pl.pod, node) || !st.affinities.affinityAllows(pl.pod, node) {
			continue
		}
		if st.sim.Filter(st.ctx, pl.state, pl.check, f.Name).IsSuccess() {
			if err := st.snap.AddPod(f.Name, pl.pod); err != nil {
				continue
			}
			groupsCount(st.groups, pl.pod, node)
			st.affinities.trackAffinity(pl.pod, node)
			f.free = f.free.Sub(pl.need)
			st.resortInFlight(i)
			st.plan.InFlight[f.Name] = append(st.plan.InFlight[f.Name], pl.pod)
			return true
		}
	}
	return false
}

// sortInFlight orders the nodes being launched by the room left on them, least first (a stable sort: ties keep
// the input's order), so that a pod goes to the fullest node that takes it.
func (st *solve) sortInFlight() {
	sort.SliceStable(st.inflight, func(i, j int) bool { return st.inflight[i].free.Weight() < st.inflight[j].free.Weight() })
}

// resortInFlight keeps st.inflight in sortInFlight's order once the node at i has taken a pod: it moves the node
// ahead of those now left with more room, which is where a stable sort of the whole list would put it, without
// sorting thousands of nodes again for each pod of a large burst.
func (st *solve) resortInFlight(i int) {
	for ; i > 0 && st.inflight[i-1].free.Weight() > st.inflight[i].free.Weight(); i-- {
		st.inflight[i-1], st.inflight[i] = st.inflight[i], st.inflight[i-1]
	}
}

type openCand struct {
	n        *openNode
	marginal float64
	leftover float64
}

// betterCand orders candidates by marginal cost, then leftover room, then age (deterministic ties).
func betterCand(a, b openCand) bool {
	if a.marginal != b.marginal {
		return a.marginal < b.marginal
	}
	if a.leftover != b.leftover {
		return a.leftover < b.leftover
	}
	return a.n.seq < b.n.seq
}

// mergeCands appends to out the candidates of buckets, each best first, in one list best first. betterCand is a
// total order, so this is the order sorting them all would give, at the cost of a pass over them per bucket.
func mergeCands(out []openCand, buckets [][]openCand) []openCand {
	var few [8]int
	heads := few[:0]
	for range buckets {
		heads = append(heads, 0)
	}
	for {
		best := -1
		for i, b := range buckets {
			if heads[i] < len(b) && (best < 0 || betterCand(b[heads[i]], buckets[best][heads[best]])) {
				best = i
			}
		}
		if best < 0 {
			return out
		}
		out = append(out, buckets[best][heads[best]])
		heads[best]++
	}
}

// insertTop inserts c into list, kept sorted and at most keep long.
func insertTop(list []openCand, c openCand, keep int) []openCand {
	if len(list) == keep && !betterCand(c, list[keep-1]) {
		return list
	}
	i := len(list)
	if i < keep {
		list = append(list, c)
	} else {
		i = keep - 1
	}
	for i > 0 && betterCand(c, list[i-1]) {
		list[i] = list[i-1]
		i--
	}
	list[i] = c
	return list
}

// maxOpenTries is how many open nodes a placement tries (per zone and capacity type, for a pod that cares) before
// it opens a new node. With few tries a large batch bought nodes its open ones could have taken: at 20,000 pods of
// Karpenter's benchmark, 12 tries gave a plan 1.21x the lower bound, 64 give 1.11x in about the same time; at
// 50,000 pods 1.32x against 1.17x, for a solve of 34 s against 61 s (the refused tries' Filter runs).
const maxOpenTries = 64

// placeOptions restrict a placement: whether a new node may be opened, a node to leave alone (the one being
// emptied during improvement), and the most the receiving node's price may grow.
type placeOptions struct {
	allowNew    bool
	exclude     *openNode
	maxMarginal float64
	// maxLeftover, when positive, keeps only the nodes the pod leaves with less room than that (leftover weight).
	maxLeftover float64
	// domains, with exclude, keeps only the nodes in exclude's domain of each of these topology keys.
	domains []string
}

// mayJoin reports whether the pod may go on an open node: its NodePool and name allowed, and not a GPU or Neuron
// node when the pod asks for no accelerator and the NodePool has other types.
func (pl *placing) mayJoin(n *openNode) bool {
	if !pl.allowed(n.name) || !pl.usable(n.pool) {
		return false
	}
	return !n.accelerated || !n.pool.hasPlainTypes || pl.need.Accelerators.Any()
}

// placeOnOpenWith tries the open virtual nodes that can take the pod, those whose price grows least first (a pod
// that fills slack the node's instance type already pays for costs nothing), then the fullest. Nodes whose growth
// costs more than a new node are tried only after a new node was refused.
//
//nolint:gocyclo // the open-node rules for one pod in the order they apply (price growth, fullness, the new-node bound), on the placement hot path
func (st *solve) placeOnOpenWith(pl *placing, opts placeOptions) bool {
	// Keep the best candidates by (marginal cost, leftover) without sorting them all. A pod whose placement
	// depends on the zone or capacity type gets the best of each (zone, capacity type) the nodes have, so that a
	// run of well-fitting nodes in the wrong zone does not hide the right ones.
	const keep = 2 * maxOpenTries
	byZone := pl.cared[corev1.LabelTopologyZone] || pl.cared[stevedorev1.LabelCapacityType]
	buckets := st.lists.candidatesFor(pl, opts, byZone, keep, st.bucketBuf[:0])
	used := 0
	for _, b := range buckets {
		if len(b) > 0 {
			used++
		}
	}
	cands := mergeCands(st.candBuf[:0], buckets)
	for i, b := range buckets {
		buckets[i] = b[:0]
	}
	st.bucketBuf = buckets
	if st.rng != nil {
		st.rng.Shuffle(len(cands), func(a, b int) { cands[a], cands[b] = cands[b], cands[a] })
	}
	st.candBuf = cands
	newCost := math.Inf(1)
	if opts.allowNew && !st.in.FirstFitDecreasing {
		newCost = st.newNodeCost(pl)
	}
	tries, limit := 0, maxOpenTries
	if byZone {
		limit = maxOpenTries * used
	}
	try := func(n *openNode) bool {
		tries++
		return !st.refusedWhateverNarrowing(pl, n) && st.tryOpen(n, pl)
	}
	for _, c := range cands {
		if tries == limit || c.marginal > newCost {
			break
		}
		if try(c.n) {
			return true
		}
	}
	if !opts.allowNew {
		return false
	}
	if st.openFor(pl) {
		return true
	}
	for _, c := range cands {
		if c.marginal <= newCost {
			continue
		}
		if tries == 2*limit {
			break
		}
		if try(c.n) {
			return true
		}
	}
	return false
}

// bucketOf numbers a node's zone and capacity type, for placeOnOpenWith's per-offering candidates.
func (st *solve) bucketOf(n *openNode) int {
	if n.bucketSet && n.bucketZone == n.zone && n.bucketCT == n.ct {
		return n.bucket
	}
	key := [2]string{n.zone, n.ct}
	id, ok := st.bucketIDs[key]
	if !ok {
		if st.bucketIDs == nil {
			st.bucketIDs = map[[2]string]int{}
		}
		id = len(st.bucketIDs) + 1 // 0 is the one bucket of pods that do not care
		st.bucketIDs[key] = id
	}
	n.bucket, n.bucketZone, n.bucketCT, n.bucketSet = id, n.zone, n.ct, true
	return id
}

// newNodeCost estimates what a new node for the pod would cost: the cheapest type of the first NodePool that
// has one fitting it.
func (st *solve) newNodeCost(pl *placing) float64 {
	for i := range st.in.NodePools {
		pool := &st.in.NodePools[i]
		if !pl.usable(pool) {
			continue
		}
		best := math.Inf(1)
		for _, pr := range pl.reqs {
			if pool.compatible(pool.Requirements, pr) != nil {
				continue
			}
			for _, p := range pool.cheapest() {
				if pl.room().Fits(p.alloc) {
					if p.price < best {
						best = p.price
					}
					break
				}
			}
		}
		if !math.IsInf(best, 1) {
			return best
		}
	}
	return math.Inf(1)
}

// withNodeRequirementsOf returns a copy of pod that also requires what other's node selector and required node
// affinity require (each pair of terms ANDed), or nil when their node selectors conflict.
func withNodeRequirementsOf(pod, other *corev1.Pod) *corev1.Pod {
	out := pod.DeepCopy()
	for k, v := range other.Spec.NodeSelector {
		if cur, ok := out.Spec.NodeSelector[k]; ok && cur != v {
			return nil
		}
		if out.Spec.NodeSelector == nil {
			out.Spec.NodeSelector = map[string]string{}
		}
		out.Spec.NodeSelector[k] = v
	}
	a := other.Spec.Affinity
	if a == nil || a.NodeAffinity == nil || a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil ||
		len(a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms) == 0 {
		return out
	}
	theirs := a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	if out.Spec.Affinity == nil {
		out.Spec.Affinity = &corev1.Affinity{}
	}
	if out.Spec.Affinity.NodeAffinity == nil {
		out.Spec.Affinity.NodeAffinity = &corev1.NodeAffinity{}
	}
	na := out.Spec.Affinity.NodeAffinity
	ours := []corev1.NodeSelectorTerm{{}}
	if na.RequiredDuringSchedulingIgnoredDuringExecution != nil && len(na.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms) > 0 {
		ours = na.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	}
	var terms []corev1.NodeSelectorTerm
	for _, o := range ours {
		for _, t := range theirs {
			terms = append(terms, corev1.NodeSelectorTerm{
				MatchExpressions: append(append([]corev1.NodeSelectorRequirement(nil), o.MatchExpressions...), t.MatchExpressions...),
				MatchFields:      append(append([]corev1.NodeSelectorRequirement(nil), o.MatchFields...), t.MatchFields...),
			})
		}
	}
	na.RequiredDuringSchedulingIgnoredDuringExecution = &corev1.NodeSelector{NodeSelectorTerms: terms}
	return out
}
