package provision

import (
	corev1 "k8s.io/api/core/v1"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/scheduling"
)

// podRequirements returns the node requirements a pod states: its node selector and each term of its required
// node affinity (terms are ORed, so one Requirements per term; a pod without terms has one).
func podRequirements(pod *corev1.Pod) []scheduling.Requirements {
	base := scheduling.FromLabels(pod.Spec.NodeSelector)
	var terms []corev1.NodeSelectorTerm
	if a := pod.Spec.Affinity; a != nil && a.NodeAffinity != nil && a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil {
		terms = a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	}
	if len(terms) == 0 {
		return []scheduling.Requirements{base}
	}
	var out []scheduling.Requirements
	for _, term := range terms {
		reqs, err := scheduling.FromNodeSelectorRequirements(term.MatchExpressions...)
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
	for k := range pod.Spec.NodeSelector {
		keys[k] = true
	}
	if a := pod.Spec.Affinity; a != nil {
		if na := a.NodeAffinity; na != nil && na.RequiredDuringSchedulingIgnoredDuringExecution != nil {
			for _, t := range na.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
				for _, e := range t.MatchExpressions {
					keys[e.Key] = true
				}
			}
		}
		if pa := a.PodAffinity; pa != nil {
			for _, t := range pa.RequiredDuringSchedulingIgnoredDuringExecution {
				keys[t.TopologyKey] = true
			}
		}
		if pa := a.PodAntiAffinity; pa != nil {
			for _, t := range pa.RequiredDuringSchedulingIgnoredDuringExecution {
				keys[t.TopologyKey] = true
			}
		}
	}
	for _, c := range pod.Spec.TopologySpreadConstraints {
		if c.WhenUnsatisfiable == corev1.DoNotSchedule {
			keys[c.TopologyKey] = true
		}
	}
	delete(keys, corev1.LabelHostname) // every virtual node has its own hostname
	return keys
}

// isOfferingKey reports whether a label's value is chosen per offering rather than per instance type.
func isOfferingKey(key string) bool {
	return key == corev1.LabelTopologyZone || key == stevedorev1.LabelCapacityType || key == corev1.LabelTopologyZone+"-id"
}
