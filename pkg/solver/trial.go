/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package solver

import (
	"maps"

	corev1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/stevedore-dev/stevedore/pkg/cloud"
	"github.com/stevedore-dev/stevedore/pkg/resources"
	"github.com/stevedore-dev/stevedore/pkg/scheduling"
	"github.com/stevedore-dev/stevedore/pkg/solver/simulation"
)

// tryOpen narrows an open node to what the pod needs and runs the Filter plugins; on success the pod is placed
// and the narrowing kept, on failure the node is restored.
func (st *solve) tryOpen(n *openNode, pl *placing) bool {
	for _, pr := range pl.reqs {
		if n.pool.compatible(n.reqs, pr) != nil {
			continue
		}
		total := n.used.Add(pl.need)
		// Candidates narrow only by compatibility: which of them is big enough is decided when the node is
		// priced, so a node can shrink again when pods leave it.
		reqs, cands := n.reqs, n.candidates
		var largest *cloud.InstanceType
		if len(pr) > 0 {
			reqs = n.reqs.Clone()
			reqs.AddAll(pr)
			cands = st.narrowed(n, reqs)
			largest = st.largestOf(cands)
		} else if len(cands) > 0 {
			n.setLargest() // the node's own candidates: their largest is the node's
			largest = n.largest
		}
		if len(cands) == 0 || !total.Add(pl.reserve).Fits(allocVec(largest)) {
			continue
		}
		for _, choice := range st.offers.offeringChoices(cands, reqs, pl.cared, pl.caredSig+"|"+pr.String(), n, total.Add(pl.reserve), pl.poolsWithRoom(st.groups)) {
			if st.tryChoice(n, pl, choice, total) {
				return true
			}
		}
	}
	return false
}

// narrowed is filterTypes of an open node's candidates under reqs, memoised per candidate list (shared by alike
// nodes, see priceLists), requirements and pinned offering: the pods of a workload ask the same of many nodes.
func (st *solve) narrowed(n *openNode, reqs scheduling.Requirements) []*cloud.InstanceType {
	if len(n.candidates) == 0 {
		return nil
	}
	zone, ct := n.pinnedOffering()
	key := narrowKey{listKey: listKey{list: &n.candidates[0], n: len(n.candidates)}, pool: n.pool, reqs: reqs.Key(), zone: zone, ct: ct}
	if out, ok := st.narrowMemo[key]; ok {
		return out
	}
	out := n.pool.filterTypes(n.candidates, reqs, vec{}, n.pinned, n.zone, n.ct)
	if st.narrowMemo == nil {
		st.narrowMemo = map[narrowKey][]*cloud.InstanceType{}
	}
	st.narrowMemo[key] = out
	return out
}

// largestOf is largestType of a candidate list placements ask about again and again (an offering choice's, which
// is interned, or a narrowed one, which narrowed keeps), memoised by the list's backing array and length; the
// key's pointer into the array keeps it from being reused.
func (st *solve) largestOf(cands []*cloud.InstanceType) *cloud.InstanceType {
	if len(cands) == 0 {
		return nil
	}
	key := listKey{list: &cands[0], n: len(cands)}
	if largest, ok := st.largestMemo[key]; ok {
		return largest
	}
	largest := largestType(cands)
	if st.largestMemo == nil {
		st.largestMemo = map[listKey]*cloud.InstanceType{}
	}
	st.largestMemo[key] = largest
	return largest
}

// listKey names a candidate list by its backing array and length.
type listKey struct {
	list **cloud.InstanceType
	n    int
}

// narrowKey names a candidate list by its backing array and length (lists are interned, so alike nodes share
// them; the memo's reference keeps the array from being reused), a NodePool, requirements and the pinned zone and
// capacity type.
type narrowKey struct {
	listKey
	pool           *NodePoolOption
	reqs, zone, ct string
}

// tryChoice tries the pod on the node narrowed to one choice (its candidates, zone, capacity type, pins and, for
// a node with no DaemonSets decided yet, the choice's DaemonSet pods): total is what the node would use with the
// pod. On success the pod is placed and the choice kept; on failure the node is as it was.
func (st *solve) tryChoice(n *openNode, pl *placing, choice offeringChoice, total vec) bool {
	tc := trialChange{node: n.name}
	daemons := n.ds
	if !n.hasDaemons {
		daemons, tc.daemons = choice.daemons, choice.daemons
	}
	withDaemons := total.Add(resources.Pods(daemons)).Sub(resources.Pods(n.ds))
	withReserve := withDaemons.Add(pl.reserve)
	if !withReserve.Fits(allocVec(st.largestOf(choice.candidates))) || !st.budgets.growthWithinLimits(n, choice.candidates, choice.reqs, withReserve, len(st.open)) ||
		!n.pool.minValuesHold(choice.candidates, choice.reqs, withReserve) {
		return false
	}
	trial := n.narrowedTo(choice)
	tc.current = st.snap.NodeInfo(n.name).Node()
	// a choice that narrows nothing the node shows (most pods joining a node already narrowed) leaves the snapshot's
	// node as it is: setting it again would only make everything that watches the snapshot look at it again. A
	// choice with the node's own candidates, zone and capacity type, whose requirements give the labels the node's
	// give, is known unchanged without rendering the node (narrowsNothing).
	tc.next, tc.unchanged = tc.current, choice.narrowsNothing(n)
	if !tc.unchanged {
		tc.next = trial.node()
		tc.unchanged = trial.largest == n.largest && maps.Equal(tc.current.Labels, tc.next.Labels)
	}
	// the trial changes the snapshot only to ask the Filter plugins, and the snapshot's log of tried changes undoes
	// it (Rollback); it is applied again, for everything that keeps state over the snapshot to see, once it passes
	st.snap.Suspend()
	tc.apply(st.snap)
	passes := st.trialPasses(n, pl, &tc)
	st.snap.Rollback()
	if !passes {
		return false
	}
	trial.pricesDirty = trial.pricesDirty || len(trial.candidates) != len(n.candidates) || trial.zone != n.zone ||
		trial.ct != n.ct || len(trial.pinned) != len(n.pinned)
	if st.beforeCommit != nil {
		st.beforeCommit(n)
	}
	tc.apply(st.snap)
	if !n.hasDaemons {
		trial.ds, trial.hasDaemons = daemons, true
	}
	*n = trial
	n.pods = append(n.pods, pl.pod)
	n.used = withDaemons
	st.touch(n)
	_ = st.snap.AddPod(n.name, pl.pod)
	groupsCount(st.groups, pl.pod, tc.next)
	st.affinities.trackAffinity(pl.pod, tc.next)
	return true
}

// trialChange is what trying a choice changes in the snapshot: the node object (current to next, unless
// unchanged) and the DaemonSet pods the choice adds (none once the node's are decided).
type trialChange struct {
	node          string
	current, next *corev1.Node
	unchanged     bool
	daemons       []*corev1.Pod
}

// apply makes the change in the snapshot.
func (tc *trialChange) apply(snap *simulation.Snapshot) {
	if !tc.unchanged {
		_ = snap.SetNode(tc.next)
	}
	for _, d := range tc.daemons {
		_ = snap.AddPod(tc.node, d)
	}
}

// trialPasses runs the checks of a pod on an open node with the trial applied: the spread groups and affinity
// among new nodes, and the scheduler's Filter plugins, with its PreFilter state computed again when the trial can
// change it.
func (st *solve) trialPasses(n *openNode, pl *placing, tc *trialChange) bool {
	state := pl.state
	// an empty node adds no pod to any domain, so relabelling it leaves the PreFilter state as it was
	if state == nil || (len(tc.daemons) > 0 && daemonsMatter(pl.check, tc.daemons)) ||
		(!tc.unchanged && len(n.pods) > 0 && st.labelsMatter(pl.check, tc.current.Labels, tc.next.Labels)) {
		// PreFilter state was computed with the node's previous labels and pods; spread and affinity must see the
		// node as it would be
		var status *fwk.Status
		if state, _, status = st.sim.PreFilter(st.ctx, pl.check); !status.IsSuccess() && !status.IsSkip() {
			return false
		}
	}
	return groupsAllow(st.groups, pl.pod, tc.next) && st.affinities.affinityAllows(pl.pod, tc.next) && st.sim.Filter(st.ctx, state, pl.check, n.name).IsSuccess()
}

// narrowedTo returns a copy of the node narrowed to a choice (its requirements, candidates, zone, capacity type
// and pins), with its memoised offering choices dropped.
func (n *openNode) narrowedTo(choice offeringChoice) openNode {
	trial := *n
	trial.reqs = choice.reqs
	trial.candidates = choice.candidates
	trial.zone, trial.ct = choice.zone, choice.ct
	trial.pinned = choice.pinned
	trial.choices, trial.choicesFor = nil, ""
	trial.setLargest()
	return trial
}

// daemonsMatter reports whether DaemonSet pods joining a node can change a pod's PreFilter state: they count in
// its spread constraints and affinity terms only from its own namespace (or those its terms name), and in
// existing anti-affinity only if they have some.
func daemonsMatter(pod *corev1.Pod, daemons []*corev1.Pod) bool {
	if a := pod.Spec.Affinity; a != nil {
		var terms []corev1.PodAffinityTerm
		if a.PodAffinity != nil {
			terms = append(terms, a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution...)
		}
		if a.PodAntiAffinity != nil {
			terms = append(terms, a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution...)
		}
		for _, t := range terms {
			if len(t.Namespaces) > 0 || t.NamespaceSelector != nil {
				return true
			}
		}
	}
	for _, d := range daemons {
		if d.Namespace == pod.Namespace {
			return true
		}
		if a := d.Spec.Affinity; a != nil && a.PodAntiAffinity != nil && len(a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution) > 0 {
			return true
		}
	}
	return false
}

// labelsMatter reports whether a node's labels changed in a key the pod's PreFilter state depends on: the topology
// keys of its own constraints, and those of the required anti-affinity terms of the pods around.
func (st *solve) labelsMatter(pod *corev1.Pod, before, after map[string]string) bool {
	if st.antiKeys == nil {
		st.antiKeys = antiAffinityKeys(st.in.Pods, st.snap)
	}
	// a node's labels are many and the keys that matter few: look up those keys rather than walk the labels
	changed := func(k string) bool {
		a, inAfter := after[k]
		if !inAfter {
			_, inBefore := before[k]
			return inBefore
		}
		return before[k] != a
	}
	for k := range caredKeys(pod) {
		if changed(k) {
			return true
		}
	}
	for k := range st.antiKeys {
		if changed(k) {
			return true
		}
	}
	return false
}

// antiAffinityKeys are the topology keys of every required anti-affinity term of the batch (preferred ones too:
// the solver may make them requirements) and of the pods in the snapshot.
func antiAffinityKeys(pods []*corev1.Pod, snap *simulation.Snapshot) map[string]bool {
	keys := map[string]bool{}
	add := func(p *corev1.Pod) {
		if a := p.Spec.Affinity; a != nil && a.PodAntiAffinity != nil {
			for _, t := range a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
				keys[t.TopologyKey] = true
			}
			for _, t := range a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution {
				keys[t.PodAffinityTerm.TopologyKey] = true
			}
		}
	}
	for _, p := range pods {
		add(p)
	}
	withAnti, _ := snap.HavePodsWithRequiredAntiAffinityList()
	for _, ni := range withAnti {
		for _, pi := range ni.GetPodsWithRequiredAntiAffinity() {
			add(pi.GetPod())
		}
	}
	return keys
}
