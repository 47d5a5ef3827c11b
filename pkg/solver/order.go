/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package solver

import (
	"sort"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
)

// orderPods sorts the hardest pods first: those that need a node of their own (required anti-affinity) or a
// spread, then those with required pod affinity, then the rest, each rank largest first. A pod another pod's
// affinity term (required or preferred) matches is placed before it, so the term finds it in the snapshot.
func orderPods(pods []*corev1.Pod) []*corev1.Pod {
	out := append([]*corev1.Pod(nil), pods...)
	rank := func(p *corev1.Pod) int {
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
	ranks := make(map[types.UID]int, len(out))
	sizes := make(map[types.UID]float64, len(out))
	for _, p := range out {
		ranks[p.UID] = rank(p)
		sizes[p.UID] = podVec(p).weight()
	}
	// Pods with the same namespace and labels match the same terms: the terms are matched against each distinct
	// set once. A set's level is how long a chain of affinity terms leads to it (a set no other set's term
	// matches has level 0; the target of a level-n set's term has level n+1 at least); higher levels go first.
	type labelled struct {
		sample *corev1.Pod
		pods   []*corev1.Pod
		level  int
		rank   int
	}
	var sets []*labelled
	setOf := map[types.UID]*labelled{}
	byLabels := map[string]*labelled{}
	for _, p := range out {
		id := p.Namespace + "|" + labels.Set(p.Labels).String()
		l, ok := byLabels[id]
		if !ok {
			l = &labelled{sample: p, rank: ranks[p.UID]}
			byLabels[id] = l
			sets = append(sets, l)
		}
		l.pods = append(l.pods, p)
		setOf[p.UID] = l
	}
	type edge struct {
		from, to *labelled
		rank     int
	}
	seenEdge := map[[2]*labelled]bool{}
	var edges []edge
	for _, p := range out {
		from := setOf[p.UID]
		for _, sel := range affinitySelectors(p) {
			for _, to := range sets {
				if to == from || seenEdge[[2]*labelled{from, to}] || !sel.matches(to.sample) {
					continue
				}
				seenEdge[[2]*labelled{from, to}] = true
				edges = append(edges, edge{from, to, ranks[p.UID]})
			}
		}
	}
	for pass := 0; pass <= len(sets) && pass < 16; pass++ {
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

// podSelector matches pods by namespace and labels, as a pod affinity term does.
type podSelector struct {
	namespaces map[string]bool // nil: every namespace
	selector   labels.Selector
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
