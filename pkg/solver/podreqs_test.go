/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package solver

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/scheduling"
	"github.com/stevedore-dev/stevedore/pkg/test"
)

func TestPreferenceLevelsGoFromEveryPreferenceToNone(t *testing.T) {
	term := func(app string) corev1.PodAffinityTerm {
		return corev1.PodAffinityTerm{LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}, TopologyKey: corev1.LabelTopologyZone}
	}
	zone := func(z string) corev1.NodeSelectorTerm {
		return corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: corev1.LabelTopologyZone, Operator: corev1.NodeSelectorOpIn, Values: []string{z}}}}
	}
	pod := test.Pod("p").Pending().Obj()
	pod.Spec.Affinity = &corev1.Affinity{
		PodAffinity: &corev1.PodAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{
			{Weight: 10, PodAffinityTerm: term("light")}, {Weight: 90, PodAffinityTerm: term("heavy")}}},
		NodeAffinity: &corev1.NodeAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{
			{Weight: 1, Preference: zone("b")}, {Weight: 50, Preference: zone("a")}}},
	}
	levels := preferenceLevels(pod)
	describe := func(p *corev1.Pod) (aff []string, zones []string) {
		if a := p.Spec.Affinity.PodAffinity; a != nil {
			for _, t := range a.RequiredDuringSchedulingIgnoredDuringExecution {
				aff = append(aff, t.LabelSelector.MatchLabels["app"])
			}
		}
		if na := p.Spec.Affinity.NodeAffinity; na != nil && na.RequiredDuringSchedulingIgnoredDuringExecution != nil {
			for _, t := range na.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
				for _, e := range t.MatchExpressions {
					zones = append(zones, e.Values...)
				}
			}
		}
		return aff, zones
	}
	want := []struct{ aff, zones []string }{
		{[]string{"heavy", "light"}, []string{"a"}}, // everything required, the heaviest node term
		{[]string{"heavy"}, []string{"a"}},          // the lightest pod term relaxed first
		{nil, []string{"a"}},
		{nil, []string{"b"}}, // then the next node term
		{nil, nil},           // the pod itself
	}
	if len(levels) != len(want) {
		t.Fatalf("%d levels, want %d", len(levels), len(want))
	}
	for i, w := range want {
		aff, zones := describe(levels[i])
		if len(aff) != len(w.aff) || len(zones) != len(w.zones) || (len(aff) > 0 && aff[0] != w.aff[0]) || (len(zones) > 0 && zones[0] != w.zones[0]) {
			t.Errorf("level %d requires affinity %v and zones %v, want %v and %v", i, aff, zones, w.aff, w.zones)
		}
	}
	if levels[len(levels)-1] != pod {
		t.Error("the last level is not the pod itself")
	}
	if len(pod.Spec.Affinity.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution) != 0 {
		t.Error("building the levels changed the pod")
	}
}

func TestNodeLabelsComeOnlyFromTheNodePoolTheTypeAndTheOffering(t *testing.T) {
	np := test.NodePool("np").TemplateLabels("tier", "web").
		Require("team", corev1.NodeSelectorOpIn, "a", "b").
		Require("node-restriction.kubernetes.io/pci", corev1.NodeSelectorOpIn, "yes", "no").
		Require("node-restriction.kubernetes.io/owner", corev1.NodeSelectorOpIn, "platform").Obj()
	pool, err := NodePoolRequirements(np)
	if err != nil {
		t.Fatal(err)
	}
	narrowed := pool.Clone()
	// pods narrowed team and the restricted pci key; a pod's own key (color) must not appear either way
	narrowed.Add(scheduling.MustRequirement("team", corev1.NodeSelectorOpIn, "b"))
	narrowed.Add(scheduling.MustRequirement("node-restriction.kubernetes.io/pci", corev1.NodeSelectorOpIn, "yes"))
	narrowed.Add(scheduling.MustRequirement("color", corev1.NodeSelectorOpIn, "red"))
	got := NodeLabels(np, pool, narrowed, map[string]string{corev1.LabelArchStable: "arm64", corev1.LabelTopologyZone: "ignored"},
		"us-east-1b", "use1-az2", "spot", "us-east-1")
	want := map[string]string{
		"tier": "web", "team": "b", "node-restriction.kubernetes.io/owner": "platform",
		corev1.LabelArchStable: "arm64", "beta.kubernetes.io/arch": "arm64",
		corev1.LabelTopologyZone: "us-east-1b", corev1.LabelFailureDomainBetaZone: "us-east-1b", stevedorev1.LabelZoneID: "use1-az2",
		stevedorev1.LabelNodeClass: np.Spec.Template.Spec.NodeClassRef.Name,
		corev1.LabelTopologyRegion: "us-east-1", corev1.LabelFailureDomainBetaRegion: "us-east-1",
		stevedorev1.LabelCapacityType: "spot", stevedorev1.LabelNodePool: "np",
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("label %s = %q, want %q", k, got[k], v)
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("unexpected label %s=%s", k, got[k])
		}
	}
}
