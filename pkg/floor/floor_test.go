/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package floor

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/test"
)

func TestParse(t *testing.T) {
	cases := []struct {
		value string
		want  Floor
		err   string
	}{
		{value: "20%", want: Floor{Percent: 20}},
		{value: "0%", want: Floor{}},
		{value: "100%", want: Floor{Percent: 100}},
		{value: " 3 ", want: Floor{Count: 3}},
		{value: "101%", err: "from 0% to 100%"},
		{value: "-1", err: "want a percentage"},
		{value: "1.5%", err: "from 0% to 100%"},
		{value: "half", err: "want a percentage"},
	}
	for _, tc := range cases {
		t.Run(tc.value, func(t *testing.T) {
			got, err := Parse(tc.value)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) || !strings.Contains(err.Error(), Annotation) {
					t.Fatalf("Parse(%q) = %v, %v; want an error naming the annotation and saying %q", tc.value, got, err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("Parse(%q) = %+v, %v; want %+v", tc.value, got, err, tc.want)
			}
		})
	}
}

func TestRequired(t *testing.T) {
	cases := []struct {
		floor Floor
		total int
		want  int
	}{
		{Floor{Percent: 20}, 0, 0},
		{Floor{Percent: 20}, 1, 1}, // rounded up: a single pod is on on-demand
		{Floor{Percent: 20}, 5, 1},
		{Floor{Percent: 20}, 6, 2},
		{Floor{Percent: 20}, 20, 4},
		{Floor{Percent: 0}, 20, 0},
		{Floor{Count: 2}, 1, 1},
		{Floor{Count: 2}, 20, 2},
	}
	for _, tc := range cases {
		if got := tc.floor.Required(tc.total); got != tc.want {
			t.Errorf("%s of %d = %d, want %d", tc.floor, tc.total, got, tc.want)
		}
	}
}

// replica is a pod of the Deployment name with the floor value (none if "").
func replica(name string, i int, value string) *corev1.Pod {
	w := test.Pod(fmt.Sprintf("%s-7d4b9c-%02d", name, i)).Labels("pod-template-hash", "7d4b9c").
		OwnedBy("ReplicaSet", name+"-7d4b9c")
	if value != "" {
		w.Annotations(Annotation, value)
	}
	return w.Obj()
}

func node(capacityType string) *corev1.Node {
	return test.Node("n-"+capacityType).Labels(stevedorev1.LabelCapacityType, capacityType).Obj()
}

func TestPin(t *testing.T) {
	replicas := func(name string, from, to int, value string) []*corev1.Pod {
		var out []*corev1.Pod
		for i := from; i < to; i++ {
			out = append(out, replica(name, i, value))
		}
		return out
	}
	type on struct {
		pods []*corev1.Pod
		node *corev1.Node
	}
	cases := []struct {
		name    string
		placed  []on
		placing []*corev1.Pod
		want    []string // the pods pinned, by name
		problem string
	}{
		{name: "a new Deployment of ten: two of them on on-demand", placing: replicas("web", 0, 10, "20%"),
			want: []string{"web-7d4b9c-00", "web-7d4b9c-01"}},
		{name: "a scale-up from ten to fifteen whose floor holds already on the nodes",
			placed:  []on{{replicas("web", 0, 3, "20%"), node("on-demand")}, {replicas("web", 3, 10, "20%"), node("spot")}},
			placing: replicas("web", 10, 15, "20%")},
		{name: "a scale-up from ten to twenty: one more on on-demand",
			placed:  []on{{replicas("web", 0, 2, "20%"), node("on-demand")}, {replicas("web", 2, 10, "20%"), node("spot")}},
			placing: replicas("web", 10, 20, "20%"), want: []string{"web-7d4b9c-10", "web-7d4b9c-11"}},
		{name: "reserved capacity counts as on-demand",
			placed:  []on{{replicas("web", 0, 2, "20%"), node("reserved")}, {replicas("web", 2, 8, "20%"), node("spot")}},
			placing: replicas("web", 8, 10, "20%")},
		{name: "the pods of a consolidated on-demand node go back to on-demand",
			placed:  []on{{replicas("web", 2, 10, "20%"), node("spot")}},
			placing: replicas("web", 0, 2, "20%"), want: []string{"web-7d4b9c-00", "web-7d4b9c-01"}},
		{name: "the pods of an interrupted spot node need no on-demand",
			placed:  []on{{replicas("web", 0, 2, "20%"), node("on-demand")}, {replicas("web", 2, 6, "20%"), node("spot")}},
			placing: replicas("web", 6, 10, "20%")},
		{name: "a count", placing: replicas("api", 0, 5, "3"), want: []string{"api-7d4b9c-00", "api-7d4b9c-01", "api-7d4b9c-02"}},
		{name: "each workload its own floor", placing: append(replicas("web", 0, 5, "20%"), replicas("api", 0, 2, "50%")...),
			want: []string{"api-7d4b9c-00", "web-7d4b9c-00"}},
		{name: "pods without a floor are never pinned", placing: replicas("web", 0, 5, "")},
		{name: "a value that is not a floor is named", placing: replicas("web", 0, 2, "lots"), problem: "pod default/web-7d4b9c-00: " + Annotation},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			placed := Tallies{}
			for _, o := range tc.placed {
				for _, pod := range o.pods {
					placed.Add(pod, o.node)
				}
			}
			pinned, problems := Pin(tc.placing, placed)
			var got []string
			for _, pod := range tc.placing {
				if pinned[pod.UID] {
					got = append(got, pod.Name)
				}
			}
			sort.Strings(got)
			if !slices.Equal(got, tc.want) {
				t.Errorf("pinned %v, want %v", got, tc.want)
			}
			if tc.problem == "" && len(problems) > 0 || tc.problem != "" && (len(problems) == 0 || !strings.Contains(problems[0].Error(), tc.problem)) {
				t.Errorf("problems %v, want one saying %q", problems, tc.problem)
			}
		})
	}
}

func TestApplyRequiresOnDemandOfThePinnedOnly(t *testing.T) {
	pods := []*corev1.Pod{replica("web", 0, "20%"), replica("web", 1, "20%")}
	pods[1].Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
		NodeSelectorTerms: []corev1.NodeSelectorTerm{
			{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "a", Operator: corev1.NodeSelectorOpExists}}},
			{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "b", Operator: corev1.NodeSelectorOpExists}}}}}}}
	out := Apply(pods, map[types.UID]bool{pods[1].UID: true})
	if out[0] != pods[0] {
		t.Error("a pod not pinned was copied")
	}
	terms := out[1].Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	for i, term := range terms {
		if last := term.MatchExpressions[len(term.MatchExpressions)-1]; last.Key != stevedorev1.LabelCapacityType || len(term.MatchExpressions) != 2 {
			t.Errorf("term %d: %v, want its own requirement and the capacity type's", i, term.MatchExpressions)
		}
	}
	if len(pods[1].Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms[0].MatchExpressions) != 1 {
		t.Error("the pod given was changed")
	}
}
