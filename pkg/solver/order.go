/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package solver

import (
	"maps"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	"github.com/stevedore-dev/stevedore/pkg/resources"
)

// orderPods sorts the hardest pods first: those that need a node of their own (required anti-affinity) or a
// spread, then those with required pod affinity, then the rest, each rank largest first. A pod another pod's
// affinity term (required or preferred) matches is placed before it, so the term finds it in the snapshot.
func orderPods(pods []*corev1.Pod) []*corev1.Pod {
	out := append([]*corev1.Pod(nil), pods...)
	ranks := make(map[types.UID]int, len(out))
	sizes := make(map[types.UID]float64, len(out))
	for _, p := range out {
		ranks[p.UID] = podRank(p)
		sizes[p.UID] = resources.Pod(p).Weight()
	}
	sets, setOf := labelSets(out, ranks)
	propagate(affinityEdges(out, sets, setOf, ranks), len(sets))
	level := make(map[types.UID]int, len(out))
	for _, l := range sets {
		for _, p := range l.pods {
			level[p.UID] = l.level
			ranks[p.UID] = min(ranks[p.UID], l.rank)
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i].UID, out[j].UID
		if ranks[a] != ranks[b] {
			return ranks[a] < ranks[b]
		}
		if level[a] != level[b] {
			return level[a] > level[b]
		}
		return sizes[a] > sizes[b]
	})
	return out
}

// podRank is how hard a pod is to place: 0 with required anti-affinity, 1 with a DoNotSchedule spread, 2 with
// required affinity, 3 otherwise.
func podRank(p *corev1.Pod) int {
	if a := p.Spec.Affinity; a != nil && a.PodAntiAffinity != nil && len(a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution) > 0 {
		return 0
	}
	for _, c := range p.Spec.TopologySpreadConstraints {
		if c.WhenUnsatisfiable == corev1.DoNotSchedule {
			return 1
		}
	}
	if a := p.Spec.Affinity; a != nil && a.PodAffinity != nil && len(a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution) > 0 {
		return 2
	}
	return 3
}

// labelSet is the pods that share a namespace and labels: they match the same affinity terms, so the terms are
// matched against each set once. Its level is how long a chain of affinity terms leads to it (a set no other set's
// term matches has level 0; the target of a level-n set's term has level n+1 at least); higher levels go first.
type labelSet struct {
	sample *corev1.Pod
	pods   []*corev1.Pod
	level  int
	rank   int
}

// labelSets groups pods by namespace and labels, in the order the pods come.
func labelSets(pods []*corev1.Pod, ranks map[types.UID]int) ([]*labelSet, map[types.UID]*labelSet) {
	var sets []*labelSet
	setOf := map[types.UID]*labelSet{}
	byLabels := map[string]*labelSet{}
	for _, p := range pods {
		id := p.Namespace + "|" + labels.Set(p.Labels).String()
		l, ok := byLabels[id]
		if !ok {
			l = &labelSet{sample: p, rank: ranks[p.UID]}
			byLabels[id] = l
			sets = append(sets, l)
		}
		l.pods = append(l.pods, p)
		setOf[p.UID] = l
	}
	return sets, setOf
}

// affinityEdge says a pod of set from (of rank rank) has an affinity term matching set to.
type affinityEdge struct {
	from, to *labelSet
	rank     int
}

// affinityEdges lists, once each, the sets a pod's affinity terms match, from the pod's set.
func affinityEdges(pods []*corev1.Pod, sets []*labelSet, setOf map[types.UID]*labelSet, ranks map[types.UID]int) []affinityEdge {
	seen := map[[2]*labelSet]bool{}
	var edges []affinityEdge
	for _, p := range pods {
		from := setOf[p.UID]
		for _, sel := range affinitySelectors(p) {
			for _, to := range sets {
				if to == from || seen[[2]*labelSet{from, to}] || !sel.matches(to.sample) {
					continue
				}
				seen[[2]*labelSet{from, to}] = true
				edges = append(edges, affinityEdge{from, to, ranks[p.UID]})
			}
		}
	}
	return edges
}

// propagate raises the level of each edge's target above its source's and lowers its rank to the source's, until
// nothing changes (at most one pass per set, and 16: a cycle of terms stops there).
func propagate(edges []affinityEdge, sets int) {
	for pass := 0; pass <= sets && pass < 16; pass++ {
		changed := false
		for _, e := range edges {
			if e.from.level+1 > e.to.level {
				e.to.level = e.from.level + 1
				changed = true
			}
			if r := min(e.rank, e.from.rank); r < e.to.rank {
				e.to.rank = r
				changed = true
			}
		}
		if !changed {
			break
		}
	}
}

// podSelector matches pods by namespace and labels, as a pod affinity term does.
type podSelector struct {
	namespaces map[string]bool // nil: every namespace
	selector   labels.Selector
}

// String names the selector: its label selector and namespaces (sorted; none for every namespace).
func (s podSelector) String() string {
	if s.namespaces == nil {
		return s.selector.String() + "|*"
	}
	return s.selector.String() + "|" + strings.Join(slices.Sorted(maps.Keys(s.namespaces)), ",")
}

func (s podSelector) matches(p *corev1.Pod) bool {
	return (s.namespaces == nil || s.namespaces[p.Namespace]) && s.selector.Matches(labels.Set(p.Labels))
}

// affinitySelectors returns the selectors of a pod's required and preferred pod affinity terms.
func affinitySelectors(p *corev1.Pod) []podSelector {
	a := p.Spec.Affinity
	if a == nil || a.PodAffinity == nil {
		return nil
	}
	terms := append([]corev1.PodAffinityTerm(nil), a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution...)
	for _, w := range a.PodAffinity.PreferredDuringSchedulingIgnoredDuringExecution {
		terms = append(terms, w.PodAffinityTerm)
	}
	var out []podSelector
	for _, t := range terms {
		if ps, ok := newPodSelector(p, t.LabelSelector, t.Namespaces, t.NamespaceSelector); ok {
			out = append(out, ps)
		}
	}
	return out
}

// newPodSelector is the selector of a term of owner (pod affinity, anti-affinity or spread) over other pods:
// its label selector in its namespaces (the owner's when none is named; any, with a namespace selector).
func newPodSelector(owner *corev1.Pod, sel *metav1.LabelSelector, namespaces []string, nsSelector *metav1.LabelSelector) (podSelector, bool) {
	if sel == nil {
		return podSelector{}, false
	}
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		return podSelector{}, false
	}
	ps := podSelector{selector: s}
	if nsSelector == nil {
		ps.namespaces = map[string]bool{}
		if len(namespaces) == 0 {
			ps.namespaces[owner.Namespace] = true
		}
		for _, ns := range namespaces {
			ps.namespaces[ns] = true
		}
	}
	return ps, true
}
