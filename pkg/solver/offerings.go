/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package solver

import (
	"fmt"
	"maps"
	"math"
	"reflect"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/cloud"
	"github.com/stevedore-dev/stevedore/pkg/resources"
	"github.com/stevedore-dev/stevedore/pkg/scheduling"
	"github.com/stevedore-dev/stevedore/pkg/solver/simulation"
)

type offeringChoice struct {
	reqs       scheduling.Requirements
	candidates []*cloud.InstanceType
	zone, ct   string
	pinned     map[string]bool
	// daemons are the DaemonSet pods that run on a node of any of the candidates (all have the same).
	daemons []*corev1.Pod
	price   float64
}

// narrowsNothing reports whether the choice leaves the node's labels and largest type as they are: the same
// candidate list, zone and capacity type, and requirements that give the same labels (the same map, most often:
// a node takes them from the choice it was last narrowed by, and the memoised choices are offered again).
func (c *offeringChoice) narrowsNothing(n *openNode) bool {
	if c.zone != n.zone || c.ct != n.ct || len(c.candidates) != len(n.candidates) ||
		(len(c.candidates) > 0 && &c.candidates[0] != &n.candidates[0]) {
		return false
	}
	return reflect.ValueOf(c.reqs).UnsafePointer() == reflect.ValueOf(n.reqs).UnsafePointer() ||
		sameReqLabels(n.pool.Requirements, n.reqs, c.reqs)
}

// maxChoices bounds the ways one placement is tried on a node.
const maxChoices = 24

// offeringChooser lists the ways a node may be chosen for a pod: its instance types grouped by what the pod and the
// batch's watchers care about, by zone and capacity type, cheapest first (offeringChoices).
type offeringChooser struct{ *solve }

// offeringChoices lists the ways a node may be made to hold total for a pod, cheapest first:
//   - zone and capacity type: when the pod cares about them and the node has not pinned them, each available
//     value is a choice;
//   - instance-type keys the pod cares about (arch, family...): the candidates are grouped by their values, each
//     group a choice, the group pinned;
//   - DaemonSets: candidates on which different DaemonSets would run are never mixed on one node, so that the
//     node's DaemonSet pods are known whichever type EC2 picks;
//   - keys only the NodePool defines (a requirement allowing several values) that the pod cares about are pinned
//     to one allowed value.
//
// The choices depend on the node's state, the pod's cared keys and requirements (memo) and, for their order, on
// total: each node keeps them per memo until it changes (openNode.choices), and only their prices are computed
// again.
func (st offeringChooser) offeringChoices(cands []*cloud.InstanceType, reqs scheduling.Requirements, cared map[string]bool, memo string, n *openNode, total vec, keep func(*offeringChoice) bool) []offeringChoice {
	segments := n.choices
	if segments == nil || n.choicesFor != memo {
		segments = st.sharedSegments(cands, reqs, cared, memo, n)
		st.remember(n, memo, segments)
	}
	var out, heads []offeringChoice
	for _, seg := range segments {
		start := len(out)
		out = append(out, seg...)
		if priced := out[start:]; len(priced) > 1 {
			// a node's choices of one zone and capacity type, cheapest first
			for i := range priced {
				priced[i].price = choicePrice(priced[i], n, total, priced[i].zone, priced[i].ct)
			}
			sort.SliceStable(priced, func(i, j int) bool { return priced[i].price < priced[j].price })
		}
		if keep != nil {
			// the choices the placement rules out (Spot pools at a cap) go before the bound, leaving room for others
			kept := out[start:start]
			for i := start; i < len(out); i++ {
				if keep(&out[i]) {
					kept = append(kept, out[i])
				}
			}
			out = out[:start+len(kept)]
			if len(kept) > 0 {
				heads = append(heads, kept[0])
			}
		}
	}
	if st.rng != nil {
		st.rng.Shuffle(len(out), func(a, b int) { out[a], out[b] = out[b], out[a] })
	}
	if len(out) > maxChoices {
		out = out[:maxChoices]
		// a placement that rules choices out (one instance type per choice, as a cap per Spot pool asks) tries the
		// cheapest of every zone and capacity type too: the bound could otherwise hold one zone's types only, and
		// a pod whose affinity needs another zone would find no node
		for _, h := range heads {
			if !slices.ContainsFunc(out[:maxChoices], func(c offeringChoice) bool { return c.sameOffering(&h) }) {
				out = append(out, h)
			}
		}
	}
	return out
}

// sameOffering reports whether two choices are of one zone, capacity type and candidate list.
func (c *offeringChoice) sameOffering(o *offeringChoice) bool {
	return c.zone == o.zone && c.ct == o.ct && len(c.candidates) == len(o.candidates) &&
		(len(c.candidates) == 0 || &c.candidates[0] == &o.candidates[0])
}

// memoNodes bounds how many open nodes keep their offering choices (the most recently asked), so that a batch of
// many nodes does not hold a list of instance types per node.
const memoNodes = 512

// remember keeps a node's offering choices for memo, forgetting those of the node asked longest ago.
func (st offeringChooser) remember(n *openNode, memo string, segments [][]offeringChoice) {
	if n.choices == nil {
		if len(st.memoRing) < memoNodes {
			st.memoRing = append(st.memoRing, n)
		} else {
			old := st.memoRing[st.memoNext]
			old.choices, old.choicesFor = nil, ""
			st.memoRing[st.memoNext] = n
			st.memoNext = (st.memoNext + 1) % memoNodes
		}
	}
	n.choices, n.choicesFor = segments, memo
}

// segmentKey names everything choiceSegments reads: the candidates (by their backing array and length; the key's
// pointer keeps the array from being reused), the requirements, the pod's cared keys (memo), and the node's pins,
// zone, capacity type, NodePool and whether its DaemonSets are decided.
type segmentKey struct {
	listKey
	reqs, memo, pinned, zone, ct string
	pool                         *NodePoolOption
	hasDaemons                   bool
}

// sharedSegments is choiceSegments memoised across the open nodes: a node's own memo (openNode.choices) is
// dropped whenever a pod joins it, and the nodes alike in what choiceSegments reads ask the same of it. The memo
// holds at most memoNodes entries and starts again when full.
func (st offeringChooser) sharedSegments(cands []*cloud.InstanceType, reqs scheduling.Requirements, cared map[string]bool, memo string, n *openNode) [][]offeringChoice {
	if len(cands) == 0 {
		return st.choiceSegments(cands, reqs, cared, n)
	}
	pins := make([]string, 0, len(n.pinned))
	for k, on := range n.pinned {
		if on {
			pins = append(pins, k)
		}
	}
	slices.Sort(pins)
	key := segmentKey{listKey: listKey{list: &cands[0], n: len(cands)}, reqs: reqs.Key(), memo: memo,
		pinned: strings.Join(pins, ","), zone: n.zone, ct: n.ct, pool: n.pool, hasDaemons: n.hasDaemons}
	if segments, ok := st.segments[key]; ok {
		return segments
	}
	segments := st.choiceSegments(cands, reqs, cared, n)
	if st.segments == nil || len(st.segments) >= memoNodes {
		st.segments = map[segmentKey][][]offeringChoice{}
	}
	st.segments[key] = segments
	return segments
}

// choiceSegments are the choices of offeringChoices before they are priced: one segment per zone and capacity
// type (and value of a key only the NodePool defines), the candidates grouped in each.
//
//nolint:gocyclo // groups the candidates by each offering dimension in one pass over them, on the placement hot path
func (st offeringChooser) choiceSegments(cands []*cloud.InstanceType, reqs scheduling.Requirements, cared map[string]bool, n *openNode) [][]offeringChoice {
	pinned := map[string]bool{}
	for k := range n.pinned {
		pinned[k] = true
	}
	reqs = reqs.Clone()
	var typeKeys, poolKeys []string
	for _, key := range slices.Sorted(maps.Keys(cared)) {
		if isOfferingKey(key) || pinned[key] {
			continue
		}
		if scheduling.IsInstanceTypeKey(key) || n.pool.typeKeys[key] {
			typeKeys = append(typeKeys, key)
			continue
		}
		if r, ok := reqs[key]; ok && n.pool.labelsNode(key) && !r.AllowsAbsence() && !(r.IsFinite() && r.Len() == 1) {
			poolKeys = append(poolKeys, key)
		}
		pinned[key] = true
	}
	zones := []string{n.zone}
	cts := []string{n.ct}
	careZone := cared[corev1.LabelTopologyZone] && !n.pinned[corev1.LabelTopologyZone]
	careCT := cared[stevedorev1.LabelCapacityType] && !n.pinned[stevedorev1.LabelCapacityType]
	if careZone || careCT || !offeringAvailable(cands, reqs, n.zone, n.ct) {
		allZones, allCTs := offeringValues(cands, reqs)
		// vary only what the pod cares about (or what is no longer offered), keeping the node's current value first
		if careZone || !offeringAvailable(cands, reqs, n.zone, "") {
			zones = preferFirst(allZones, n.zone)
		}
		if careCT || !offeringAvailable(cands, reqs, "", n.ct) {
			cts = preferFirst(allCTs, n.ct)
		}
	}
	// a key only the NodePool defines: each value it allows is a choice (a spread over it needs them all)
	variants := []scheduling.Requirements{reqs}
	for _, key := range poolKeys {
		r := reqs[key]
		values := r.Values()
		if !r.IsFinite() {
			values = []string{r.Pick()}
		}
		var next []scheduling.Requirements
		for _, base := range variants {
			for _, v := range values {
				if v == "" || len(next) == maxChoices {
					continue
				}
				c := base.Clone()
				c.Add(scheduling.MustRequirement(key, corev1.NodeSelectorOpIn, v))
				next = append(next, c)
			}
		}
		variants = next
	}
	var out [][]offeringChoice
	for _, variant := range variants {
		out = append(out, st.zoneChoices(cands, variant, pinned, typeKeys, careZone, careCT, zones, cts, n)...)
	}
	return out
}

// zoneChoices are the choices of offeringChoices for one set of requirements: per zone and capacity type, per
// group of candidates (typeGroups).
func (st offeringChooser) zoneChoices(cands []*cloud.InstanceType, reqs scheduling.Requirements, pinned map[string]bool, typeKeys []string, careZone, careCT bool, zones, cts []string, n *openNode) [][]offeringChoice {
	var out [][]offeringChoice
	for _, z := range zones {
		for _, ct := range cts {
			r := reqs.Clone()
			p := map[string]bool{}
			for k := range pinned {
				p[k] = true
			}
			if careZone || n.pinned[corev1.LabelTopologyZone] {
				r.Add(scheduling.MustRequirement(corev1.LabelTopologyZone, corev1.NodeSelectorOpIn, z))
				p[corev1.LabelTopologyZone] = true
			}
			if careCT || n.pinned[stevedorev1.LabelCapacityType] {
				r.Add(scheduling.MustRequirement(stevedorev1.LabelCapacityType, corev1.NodeSelectorOpIn, ct))
				p[stevedorev1.LabelCapacityType] = true
			}
			c := filterTypesOffering(cands, r, z, ct)
			if len(c) == 0 {
				continue
			}
			out = append(out, st.typeGroups(c, r, p, typeKeys, n, z, ct))
		}
	}
	return out
}

// typeGroups splits candidates into the choices that differ in the values of keys or, for a node whose DaemonSets
// are not decided yet, in the DaemonSets that would run on them; each choice pins keys (offeringChoices prices
// it by its cheapest candidate holding what the node would use, with its DaemonSets).
func (st offeringChooser) typeGroups(cands []*cloud.InstanceType, reqs scheduling.Requirements, pinned map[string]bool, keys []string, n *openNode, zone, ct string) []offeringChoice {
	type group struct {
		choice offeringChoice
		values map[string]string
	}
	var groups []*group
	index := map[string]*group{}
	for _, it := range cands {
		labels := it.Labels()
		id := ""
		for _, k := range keys {
			id += k + "=" + labels[k] + ";"
		}
		var daemons []*corev1.Pod
		if !n.hasDaemons {
			var sig string
			daemons, sig = st.daemonsFor(n.pool, reqs, it, zone, ct)
			id += "|" + sig
		}
		g, ok := index[id]
		if !ok {
			g = &group{choice: offeringChoice{zone: zone, ct: ct, daemons: daemons}, values: map[string]string{}}
			for _, k := range keys {
				g.values[k] = labels[k]
			}
			index[id] = g
			groups = append(groups, g)
		}
		g.choice.candidates = append(g.choice.candidates, it)
	}
	out := make([]offeringChoice, 0, len(groups))
	for _, g := range groups {
		c := g.choice
		c.reqs = reqs
		c.pinned = pinned
		if len(keys) > 0 {
			c.reqs = reqs.Clone()
			c.pinned = make(map[string]bool, len(pinned)+len(keys))
			for k := range pinned {
				c.pinned[k] = true
			}
			for _, k := range keys {
				if v := g.values[k]; v != "" {
					c.reqs.Add(scheduling.MustRequirement(k, corev1.NodeSelectorOpIn, v))
				} else {
					c.reqs.Add(scheduling.MustRequirement(k, corev1.NodeSelectorOpDoesNotExist))
				}
				c.pinned[k] = true
			}
		}
		c.candidates = st.prices.intern(c.candidates)
		out = append(out, c)
	}
	return out
}

// choicePrice is the price of the cheapest candidate of a choice that holds total and the choice's DaemonSets.
func choicePrice(c offeringChoice, n *openNode, total vec, zone, ct string) float64 {
	need := total
	if !n.hasDaemons {
		need = need.Add(resources.Pods(c.daemons))
	}
	z, t := "", ""
	if c.pinned[corev1.LabelTopologyZone] {
		z = zone
	}
	if c.pinned[stevedorev1.LabelCapacityType] {
		t = ct
	}
	best := math.Inf(1)
	for _, it := range c.candidates {
		if !need.Fits(allocVec(it)) {
			continue
		}
		if p, ok := cheapestOffering(it, c.reqs, z, t); ok && p < best {
			best = p
		}
	}
	return best
}

// preferFirst moves v to the front of values if it is there.
func preferFirst(values []string, v string) []string {
	out := make([]string, 0, len(values))
	for _, x := range values {
		if x == v {
			out = append([]string{x}, out...)
		} else {
			out = append(out, x)
		}
	}
	return out
}

// offeringValues returns the zones and capacity types the candidates offer under reqs, cheapest first.
func offeringValues(cands []*cloud.InstanceType, reqs scheduling.Requirements) ([]string, []string) {
	zonePrice, ctPrice := map[string]float64{}, map[string]float64{}
	zr, zok := reqs[corev1.LabelTopologyZone]
	cr, cok := reqs[stevedorev1.LabelCapacityType]
	for _, it := range cands {
		for _, o := range it.Offerings {
			if !o.Available || (zok && !zr.Has(o.Zone)) || (cok && !cr.Has(o.CapacityType)) {
				continue // what Offerings.Compatible keeps, without building the list
			}
			if p, ok := zonePrice[o.Zone]; !ok || o.Price < p {
				zonePrice[o.Zone] = o.Price
			}
			if p, ok := ctPrice[o.CapacityType]; !ok || o.Price < p {
				ctPrice[o.CapacityType] = o.Price
			}
		}
	}
	return byPrice(zonePrice), byPrice(ctPrice)
}

func byPrice(m map[string]float64) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool {
		if m[out[i]] != m[out[j]] {
			return m[out[i]] < m[out[j]]
		}
		return out[i] < out[j]
	})
	return out
}

func offeringAvailable(cands []*cloud.InstanceType, reqs scheduling.Requirements, zone, ct string) bool {
	for _, it := range cands {
		if hasOffering(it, reqs, zone, ct) {
			return true
		}
	}
	return false
}

// filterTypes keeps the types compatible with reqs that can hold total (and, when zone and capacity type are
// given and pinned, offer them). A key reqs name that a type does not define is fine only where the NodePool
// defines it (it labels the node itself) or where the requirement is met by the label's absence.
func (o *NodePoolOption) filterTypes(types []*cloud.InstanceType, reqs scheduling.Requirements, total vec, pinned map[string]bool, zone, ct string) []*cloud.InstanceType {
	out := make([]*cloud.InstanceType, 0, len(types))
	for _, it := range types {
		if reqs.Compatible(it.Requirements, o.labelsNode) != nil {
			continue
		}
		if !total.Fits(allocVec(it)) {
			continue
		}
		if !it.Offerings.HasCompatible(reqs) {
			continue
		}
		out = append(out, it)
	}
	if pinned != nil && (pinned[corev1.LabelTopologyZone] || pinned[stevedorev1.LabelCapacityType]) {
		return filterTypesOffering(out, reqs, zone, ct)
	}
	return out
}

// filterTypesOffering keeps the types with an available offering reqs allow in zone with capacity type ct (either
// may be "" for any).
func filterTypesOffering(types []*cloud.InstanceType, reqs scheduling.Requirements, zone, ct string) []*cloud.InstanceType {
	out := make([]*cloud.InstanceType, 0, len(types))
	for _, it := range types {
		if hasOffering(it, reqs, zone, ct) {
			out = append(out, it)
		}
	}
	return out
}

// hasOffering reports whether an instance type has an available offering reqs allow in zone with capacity type
// ct (either may be "" for any).
func hasOffering(it *cloud.InstanceType, reqs scheduling.Requirements, zone, ct string) bool {
	zr, zok := reqs[corev1.LabelTopologyZone]
	cr, cok := reqs[stevedorev1.LabelCapacityType]
	for _, o := range it.Offerings {
		if !o.Available || (zone != "" && o.Zone != zone) || (ct != "" && o.CapacityType != ct) {
			continue
		}
		if (!zok || zr.Has(o.Zone)) && (!cok || cr.Has(o.CapacityType)) {
			return true
		}
	}
	return false
}

// watcher is a constraint of a pod that counts other pods by label in a topology domain: a required pod affinity
// or anti-affinity term, or a hard spread constraint. A pod it matches must land on a node whose value of key is
// known when it is placed, or the constraint could be broken by the instance type or offering picked later.
type watcher struct {
	pods podSelector
	key  string
}

// watchers collects the constraints of the batch's pods and of the pods already in the snapshot that count other
// pods, on any key but the hostname (every virtual node has its own).
//
//nolint:gocyclo // collects the counting constraints of the batch's and the snapshot's pods in one pass, one case per kind of constraint
func watchers(pods []*corev1.Pod, snap *simulation.Snapshot) []watcher {
	seen := map[string]bool{}
	var out []watcher
	add := func(p *corev1.Pod, key string, sel *metav1.LabelSelector, namespaces []string, nsSelector *metav1.LabelSelector) {
		ps, ok := newPodSelector(p, sel, namespaces, nsSelector)
		if key == corev1.LabelHostname || !ok {
			return
		}
		id := fmt.Sprintf("%v|%s|%s", slices.Sorted(maps.Keys(ps.namespaces)), ps.selector.String(), key)
		if seen[id] {
			return
		}
		seen[id] = true
		out = append(out, watcher{pods: ps, key: scheduling.StableKey(key)})
	}
	visit := func(p *corev1.Pod) {
		if a := p.Spec.Affinity; a != nil {
			if a.PodAffinity != nil {
				for _, t := range a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
					add(p, t.TopologyKey, t.LabelSelector, t.Namespaces, t.NamespaceSelector)
				}
			}
			if a.PodAntiAffinity != nil {
				for _, t := range a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
					add(p, t.TopologyKey, t.LabelSelector, t.Namespaces, t.NamespaceSelector)
				}
			}
		}
		for _, c := range p.Spec.TopologySpreadConstraints {
			if c.WhenUnsatisfiable != corev1.DoNotSchedule {
				continue
			}
			add(p, c.TopologyKey, c.LabelSelector, nil, nil)
			if c.NodeAffinityPolicy == nil || *c.NodeAffinityPolicy == corev1.NodeInclusionPolicyHonor {
				// whether the node of a counted pod is a domain at all depends on the owner's node affinity
				for k := range scheduling.NodeSelectionKeys(p) {
					add(p, k, c.LabelSelector, nil, nil)
				}
			}
		}
	}
	for _, p := range pods {
		visit(p)
	}
	withAffinity, _ := snap.HavePodsWithAffinityList()
	for _, ni := range withAffinity {
		for _, pi := range ni.GetPodsWithAffinity() {
			visit(pi.GetPod())
		}
	}
	return out
}

// watchedKeys returns the keys of the watchers that match pod.
func (st offeringChooser) watchedKeys(pod *corev1.Pod) []string {
	if st.watchers == nil {
		st.watchers = watchers(st.in.Pods, st.snap)
	}
	var out []string
	for _, w := range st.watchers {
		if w.pods.matches(pod) {
			out = append(out, w.key)
		}
	}
	return out
}
