/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package solver

import (
	"sort"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/stevedore-dev/stevedore/pkg/scheduling"
)

// podRequirements returns the node requirements a pod states: its node selector and each term of its required
// node affinity (terms are ORed, so one Requirements per term; a pod without terms has one). Deprecated beta keys
// are read as the stable keys they stand for.
func podRequirements(pod *corev1.Pod) []scheduling.Requirements {
	selector := map[string]string{}
	for k, v := range pod.Spec.NodeSelector {
		selector[scheduling.StableKey(k)] = v
	}
	base := scheduling.FromLabels(selector)
	var terms []corev1.NodeSelectorTerm
	if a := pod.Spec.Affinity; a != nil && a.NodeAffinity != nil && a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil {
		terms = a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	}
	if len(terms) == 0 {
		return []scheduling.Requirements{base}
	}
	var out []scheduling.Requirements
	for _, term := range terms {
		exprs := make([]corev1.NodeSelectorRequirement, len(term.MatchExpressions))
		for i, e := range term.MatchExpressions {
			exprs[i] = e
			exprs[i].Key = scheduling.StableKey(e.Key)
		}
		reqs, err := scheduling.FromNodeSelectorRequirements(exprs...)
		if err != nil {
			continue // the API server validates operators; an unparsable term cannot match anyway
		}
		reqs.AddAll(base)
		out = append(out, reqs)
	}
	if len(out) == 0 {
		return []scheduling.Requirements{base}
	}
	return out
}

// caredKeys returns the node label keys whose value decides whether the scheduler accepts the pod on a node: the
// keys of its node selector and required node affinity, and the topology keys of its hard spread constraints and
// required pod (anti-)affinity terms. A node hosting the pod must have these labels pinned to one value.
func caredKeys(pod *corev1.Pod) map[string]bool {
	keys := map[string]bool{}
	for k := range scheduling.NodeSelectionKeys(pod) {
		keys[scheduling.StableKey(k)] = true
	}
	if a := pod.Spec.Affinity; a != nil {
		if pa := a.PodAffinity; pa != nil {
			for _, t := range pa.RequiredDuringSchedulingIgnoredDuringExecution {
				keys[scheduling.StableKey(t.TopologyKey)] = true
			}
		}
		if pa := a.PodAntiAffinity; pa != nil {
			for _, t := range pa.RequiredDuringSchedulingIgnoredDuringExecution {
				keys[scheduling.StableKey(t.TopologyKey)] = true
			}
		}
	}
	for _, c := range pod.Spec.TopologySpreadConstraints {
		if c.WhenUnsatisfiable == corev1.DoNotSchedule {
			keys[scheduling.StableKey(c.TopologyKey)] = true
		}
	}
	delete(keys, corev1.LabelHostname) // every virtual node has its own hostname
	return keys
}

// isOfferingKey reports whether a label's value is chosen per offering rather than per instance type.
func isOfferingKey(key string) bool { return scheduling.IsOfferingKey(key) }

// preferenceLevels returns the pod as the solver tries to place it, most demanding first: with its preferred
// pod affinity and anti-affinity terms and its heaviest preferred node affinity term made requirements, then
// relaxed one preference at a time (the lightest pod (anti-)affinity term first, then the preferred node affinity
// terms from the heaviest to the lightest), down to the pod itself, which is always last. A pod without
// preferences has one level, itself.
func preferenceLevels(pod *corev1.Pod) []*corev1.Pod {
	a := pod.Spec.Affinity
	if a == nil {
		return []*corev1.Pod{pod}
	}
	var podAff, podAnti []corev1.WeightedPodAffinityTerm
	var nodePref []corev1.PreferredSchedulingTerm
	if a.PodAffinity != nil {
		podAff = byWeight(a.PodAffinity.PreferredDuringSchedulingIgnoredDuringExecution)
	}
	if a.PodAntiAffinity != nil {
		podAnti = byWeight(a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution)
	}
	if a.NodeAffinity != nil {
		nodePref = append(nodePref, a.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution...)
		sort.SliceStable(nodePref, func(i, j int) bool { return nodePref[i].Weight > nodePref[j].Weight })
	}
	if len(podAff)+len(podAnti)+len(nodePref) == 0 {
		return []*corev1.Pod{pod}
	}
	var out []*corev1.Pod
	// pod (anti-)affinity terms kept: the heaviest len(...) - dropped ones
	for na := len(podAff); na >= 0; na-- {
		out = append(out, withPreferences(pod, podAff[:na], podAnti, firstTerm(nodePref)))
	}
	for nb := len(podAnti) - 1; nb >= 0; nb-- {
		out = append(out, withPreferences(pod, nil, podAnti[:nb], firstTerm(nodePref)))
	}
	for i := 1; i < len(nodePref); i++ {
		out = append(out, withPreferences(pod, nil, nil, nodePref[i:i+1]))
	}
	out = append(out, pod)
	// drop levels identical to the one before (no preference of that kind)
	kept := out[:1]
	for _, p := range out[1:] {
		if p != pod && samePreferenceLevel(p, kept[len(kept)-1]) {
			continue
		}
		kept = append(kept, p)
	}
	return kept
}

// byWeight returns terms ordered by weight, heaviest first.
func byWeight(terms []corev1.WeightedPodAffinityTerm) []corev1.WeightedPodAffinityTerm {
	out := append([]corev1.WeightedPodAffinityTerm(nil), terms...)
	sort.SliceStable(out, func(i, j int) bool { return out[i].Weight > out[j].Weight })
	return out
}

func firstTerm(terms []corev1.PreferredSchedulingTerm) []corev1.PreferredSchedulingTerm {
	if len(terms) == 0 {
		return nil
	}
	return terms[:1]
}

// withPreferences returns a copy of pod whose required pod affinity and anti-affinity include the given preferred
// terms and whose required node affinity terms each also require the given preferred node term.
func withPreferences(pod *corev1.Pod, aff, anti []corev1.WeightedPodAffinityTerm, node []corev1.PreferredSchedulingTerm) *corev1.Pod {
	out := pod.DeepCopy()
	a := out.Spec.Affinity
	if len(aff) > 0 {
		if a.PodAffinity == nil {
			a.PodAffinity = &corev1.PodAffinity{}
		}
		for _, t := range aff {
			a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution = append(a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution, t.PodAffinityTerm)
		}
	}
	if len(anti) > 0 {
		if a.PodAntiAffinity == nil {
			a.PodAntiAffinity = &corev1.PodAntiAffinity{}
		}
		for _, t := range anti {
			a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution = append(a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution, t.PodAffinityTerm)
		}
	}
	if len(node) > 0 {
		if a.NodeAffinity == nil {
			a.NodeAffinity = &corev1.NodeAffinity{}
		}
		pref := node[0].Preference
		req := a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution
		if req == nil || len(req.NodeSelectorTerms) == 0 {
			a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution = &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{*pref.DeepCopy()}}
		} else {
			for i := range req.NodeSelectorTerms {
				t := &req.NodeSelectorTerms[i]
				t.MatchExpressions = append(t.MatchExpressions, pref.MatchExpressions...)
				t.MatchFields = append(t.MatchFields, pref.MatchFields...)
			}
		}
	}
	return out
}

// samePreferenceLevel reports whether two levels ask the same (both are copies built by withPreferences).
func samePreferenceLevel(a, b *corev1.Pod) bool {
	return a.Spec.Affinity.String() == b.Spec.Affinity.String()
}

// toleratesPreferNoSchedule reports whether a pod tolerates every PreferNoSchedule taint of taints.
func toleratesPreferNoSchedule(pod *corev1.Pod, taints []corev1.Taint) bool {
	return ToleratesAll(pod, taints, func(e corev1.TaintEffect) bool { return e == corev1.TaintEffectPreferNoSchedule })
}

// ToleratesAll reports whether a pod tolerates every taint whose effect counts.
func ToleratesAll(pod *corev1.Pod, taints []corev1.Taint, counts func(corev1.TaintEffect) bool) bool {
	for i := range taints {
		t := &taints[i]
		if !counts(t.Effect) {
			continue
		}
		ok := false
		for j := range pod.Spec.Tolerations {
			if pod.Spec.Tolerations[j].ToleratesTaint(klog.Background(), t, false) {
				ok = true
				break
			}
		}
		if !ok {
			return false
		}
	}
	return true
}
