/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package solver

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
)

// fragileAffinity is a placed pod whose required pod affinity term holds only because no other pod matches it
// yet: kube-scheduler lets the first pod of a group that selects itself go anywhere. Once a pod the term matches
// is placed outside the pod's domain, the term no longer holds (the scheduler would refuse the pod were it
// scheduled again with the others in place), so until one lands inside the domain, every pod the term matches
// must go there.
type fragileAffinity struct {
	pod    *corev1.Pod
	pods   podSelector
	key    string
	domain string
}

// requiredAffinitySelectors returns a pod's required pod affinity terms as selectors, with their keys.
func requiredAffinitySelectors(p *corev1.Pod) ([]podSelector, []string) {
	a := p.Spec.Affinity
	if a == nil || a.PodAffinity == nil {
		return nil, nil
	}
	var sels []podSelector
	var keys []string
	for _, t := range a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
		ps, ok := newPodSelector(p, t.LabelSelector, t.Namespaces, t.NamespaceSelector)
		if !ok {
			continue
		}
		sels = append(sels, ps)
		keys = append(keys, t.TopologyKey)
	}
	return sels, keys
}

// podAffinities keeps the required pod affinities of an attempt true: the fragile ones (a group that selects itself),
// and the domains a pod with affinity may move within (affinityAllows, trackAffinity, movable, sameDomains).
type podAffinities struct{ *solve }

// affinityAllows reports whether pod may go on node without breaking a fragile affinity.
func (st podAffinities) affinityAllows(pod *corev1.Pod, node *corev1.Node) bool {
	for _, f := range st.fragile {
		if f.pod.UID != pod.UID && f.pods.matches(pod) && node.Labels[f.key] != f.domain {
			return false
		}
	}
	return true
}

// trackAffinity records a pod just placed on node: the fragile affinities it now satisfies are no longer
// fragile, and its own terms that hold only by matching itself become fragile.
func (st podAffinities) trackAffinity(pod *corev1.Pod, node *corev1.Node) {
	kept := st.fragile[:0]
	for _, f := range st.fragile {
		if f.pod.UID != pod.UID && f.pods.matches(pod) && node.Labels[f.key] == f.domain {
			continue
		}
		kept = append(kept, f)
	}
	st.fragile = kept
	sels, keys := requiredAffinitySelectors(pod)
	for i, sel := range sels {
		domain, ok := node.Labels[keys[i]]
		if !ok || !sel.matches(pod) || st.othersInDomain(pod, sel, keys[i], domain) {
			continue
		}
		st.fragile = append(st.fragile, fragileAffinity{pod: pod, pods: sel, key: keys[i], domain: domain})
	}
}

// othersInDomain reports whether a pod other than pod that sel matches is on a node whose key is domain. The pod
// found is remembered as the domain's witness: while it stays on a node of the domain the answer is yes without
// a walk over the snapshot (the pods of a group that selects itself ask this of the same domain one after the
// other).
func (st podAffinities) othersInDomain(pod *corev1.Pod, sel podSelector, key, domain string) bool {
	wk := witnessKey{selector: sel.String(), key: key, domain: domain}
	if w, ok := st.witnesses[wk]; ok && w.pod.UID != pod.UID {
		if ni := st.snap.NodeInfo(w.node); ni != nil && ni.Node().Labels[key] == domain {
			for _, pi := range ni.GetPods() {
				if pi.GetPod() == w.pod {
					return true
				}
			}
		}
	}
	nodes, _ := st.snap.List()
	for _, ni := range nodes {
		if ni.Node().Labels[key] != domain {
			continue
		}
		for _, pi := range ni.GetPods() {
			if p := pi.GetPod(); p.UID != pod.UID && sel.matches(p) {
				if st.witnesses == nil {
					st.witnesses = map[witnessKey]witness{}
				}
				st.witnesses[wk] = witness{pod: p, node: ni.Node().Name}
				return true
			}
		}
	}
	return false
}

// witnessKey names a selector's domain; witness is a pod found matching it there (othersInDomain).
type witnessKey struct{ selector, key, domain string }

type witness struct {
	pod  *corev1.Pod
	node string
}

// affinityTarget is a required pod affinity term: the pods it selects and its topology key.
type affinityTarget struct {
	pods podSelector
	key  string
}

// movable reports whether improvement may move a pod anywhere: not one with required pod affinity, nor one
// another pod's required affinity may rely on (moveKeys says where those may go).
func (st podAffinities) movable(pod *corev1.Pod) bool {
	keys, ok := st.moveKeys(pod)
	return ok && len(keys) == 0
}

// moveKeys returns the topology keys of the required pod affinity terms a pod has or another pod's may rely on
// (sorted): improvement may move the pod only to a node in the same domain of each, so that every term holds as
// it did. ok is false when the pod may not move at all: its own term holds only because it matches itself
// (fragileAffinity).
func (st podAffinities) moveKeys(pod *corev1.Pod) (keys []string, ok bool) {
	for _, f := range st.fragile {
		if f.pod.UID == pod.UID {
			return nil, false
		}
	}
	_, keys = requiredAffinitySelectors(pod)
	keys = slices.Clone(keys)
	for _, t := range st.targets() {
		if t.pods.matches(pod) {
			keys = append(keys, t.key)
		}
	}
	slices.Sort(keys)
	return slices.Compact(keys), true
}

// targets returns the required pod affinity terms of the pods being placed and of the pods placed before,
// gathered on first use.
func (st podAffinities) targets() map[string]affinityTarget {
	if st.affinityTargets != nil {
		return st.affinityTargets
	}
	st.affinityTargets = map[string]affinityTarget{}
	add := func(p *corev1.Pod) {
		sels, keys := requiredAffinitySelectors(p)
		for i, s := range sels {
			st.affinityTargets[s.String()+"|"+keys[i]+"|"+p.Namespace] = affinityTarget{pods: s, key: keys[i]}
		}
	}
	for _, p := range st.in.Pods {
		add(p)
	}
	withAffinity, _ := st.snap.HavePodsWithAffinityList()
	for _, ni := range withAffinity {
		for _, pi := range ni.GetPodsWithAffinity() {
			add(pi.GetPod())
		}
	}
	return st.affinityTargets
}

// sameDomains reports whether nodes a and b are in the same domain of every key: both labelled, with one value.
func (st podAffinities) sameDomains(a, b *openNode, keys []string) bool {
	if len(keys) == 0 {
		return true
	}
	na, nb := st.snap.NodeInfo(a.name), st.snap.NodeInfo(b.name)
	if na == nil || nb == nil {
		return false
	}
	la, lb := na.Node().Labels, nb.Node().Labels
	for _, k := range keys {
		va, ok := la[k]
		if vb, okb := lb[k]; !ok || !okb || va != vb {
			return false
		}
	}
	return true
}
