/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package solver

import (
	"context"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stevedore-dev/stevedore/pkg/solver/simulation"
	"github.com/stevedore-dev/stevedore/pkg/test"
)

// On Karpenter's benchmark mix the greedy packing leaves 11% above the fractional bound, most of it room spread
// thin over nodes that an anti-affinity forces one per pod. Improvement must gather that room until nodes can
// use smaller types: within 8% of the bound, the same plan every time, every rule kept (Verify).
func TestImprovementGathersRoomUntilNodesShrink(t *testing.T) {
	ctx := context.Background()
	p, lp := loadProblem(t, 1000)
	var first string
	for i := 0; i < 2; i++ {
		sim, err := simulation.New(ctx, simulation.NewSnapshot(), simulation.Options{})
		if err != nil {
			t.Fatal(err)
		}
		// a budget the bounded count of moves ends well before: the plan does not depend on the machine's speed
		plan, err := NewSolver(sim).Solve(ctx, p.Input(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		if len(plan.Unschedulable) > 0 {
			t.Fatalf("%d pods unschedulable", len(plan.Unschedulable))
		}
		if v := Verify(ctx, sim, nil, p.Region, plan, p.DaemonSets); len(v) > 0 {
			t.Fatalf("%d placements break a scheduling rule, first: %s", len(v), v[0])
		}
		if imp := plan.Improvement; imp.TimedOut || imp.Moves == 0 {
			t.Errorf("improvement: %d moves, timed out %v; want its bound of moves to end it", imp.Moves, imp.TimedOut)
		}
		if plan.Cost/lp > 1.08 {
			t.Errorf("cost %.4f of the bound after improvement (greedy %.4f), want at most 1.08", plan.Cost/lp, plan.GreedyCost/lp)
		}
		if text := planText(plan); i == 0 {
			first = text
			t.Logf("cost/bound: greedy %.4f, improved %.4f", plan.GreedyCost/lp, plan.Cost/lp)
		} else if text != first {
			t.Error("a second solve of the same input gave another plan")
		}
	}
}

// The time budget is a safety stop: when it ends the improvement before the bound of moves, the plan says so.
func TestAnImprovementTheTimeBudgetStopsIsReported(t *testing.T) {
	ctx := context.Background()
	p, _ := loadProblem(t, 1000)
	sim, err := simulation.New(ctx, simulation.NewSnapshot(), simulation.Options{})
	if err != nil {
		t.Fatal(err)
	}
	plan, err := NewSolver(sim).Solve(ctx, p.Input(time.Nanosecond))
	if err != nil {
		t.Fatal(err)
	}
	if !plan.Improvement.TimedOut {
		t.Errorf("improvement with a budget of 1ns: %+v, want it reported as timed out", plan.Improvement)
	}
	if plan.Cost > plan.GreedyCost+1e-9 {
		t.Errorf("cost %.4f above the greedy packing's %.4f", plan.Cost, plan.GreedyCost)
	}
}

// The bound of moves is 20 per pod and 1000 more, shared out over the open nodes a move looks at, so the phase's
// work does not grow with the square of the plan's size.
func TestTheMoveBudgetBoundsTheImprovementsWork(t *testing.T) {
	for _, tc := range []struct{ pods, open, want int }{
		{pods: 10, open: 3, want: 1200},
		{pods: 1000, open: 434, want: 21000},
		{pods: 5000, open: 1000, want: improveWork / 1000},
		{pods: 50000, open: 20000, want: improveWork / 20000},
		{pods: 0, open: 0, want: 1000},
	} {
		st := &solve{in: Input{Pods: make([]*corev1.Pod, tc.pods)}}
		for i := 0; i < tc.open; i++ {
			st.open = append(st.open, &openNode{pods: []*corev1.Pod{{}}})
		}
		st.open = append(st.open, &openNode{}, &openNode{pods: []*corev1.Pod{{}}, removed: true}) // not counted
		if got := (improver{st}).moveBudget(); got != tc.want {
			t.Errorf("%d pods on %d open nodes: budget %d, want %d", tc.pods, tc.open, got, tc.want)
		}
	}
}

func TestMoveKeysAreTheDomainsAnAffinityReliesOn(t *testing.T) {
	affinity := func(app, key string) func(*corev1.Pod) {
		return func(p *corev1.Pod) {
			term := corev1.PodAffinityTerm{LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}, TopologyKey: key}
			if p.Spec.Affinity == nil {
				p.Spec.Affinity = &corev1.Affinity{PodAffinity: &corev1.PodAffinity{}}
			}
			p.Spec.Affinity.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution = append(
				p.Spec.Affinity.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution, term)
		}
	}
	anti := func(app, key string) func(*corev1.Pod) {
		return func(p *corev1.Pod) {
			p.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
				LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}, TopologyKey: key}}}}
		}
	}
	pod := func(name, app string, mutate ...func(*corev1.Pod)) *corev1.Pod {
		p := test.Pod(name).Pending().Labels("app", app).Req("cpu", "100m").Obj()
		for _, m := range mutate {
			m(p)
		}
		return p
	}
	for _, tc := range []struct {
		name    string
		pod     *corev1.Pod
		others  []*corev1.Pod
		fragile bool
		keys    []string
		movable bool
	}{
		{name: "no affinity anywhere", pod: pod("a", "web"), movable: true},
		{name: "selected only by an anti-affinity", pod: pod("a", "web"), others: []*corev1.Pod{pod("b", "db", anti("web", corev1.LabelHostname))}, movable: true},
		{name: "its own zone affinity", pod: pod("a", "web", affinity("db", corev1.LabelTopologyZone)), keys: []string{corev1.LabelTopologyZone}},
		{name: "another pod's zone affinity selects it", pod: pod("a", "db"), others: []*corev1.Pod{pod("b", "web", affinity("db", corev1.LabelTopologyZone))}, keys: []string{corev1.LabelTopologyZone}},
		{name: "a zone group selecting itself", pod: pod("a", "web", affinity("web", corev1.LabelTopologyZone)), others: []*corev1.Pod{pod("b", "web", affinity("web", corev1.LabelTopologyZone))}, keys: []string{corev1.LabelTopologyZone}},
		{name: "keys of both, sorted and once", pod: pod("a", "db", affinity("cache", corev1.LabelTopologyZone)), others: []*corev1.Pod{
			pod("b", "web", affinity("db", corev1.LabelTopologyZone)), pod("c", "api", affinity("db", corev1.LabelHostname))},
			keys: []string{corev1.LabelHostname, corev1.LabelTopologyZone}},
		{name: "its term holds only because it matches itself", pod: pod("a", "web", affinity("web", corev1.LabelTopologyZone)), fragile: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := &solve{in: Input{Pods: append([]*corev1.Pod{tc.pod}, tc.others...)}, snap: simulation.NewSnapshot()}
			if tc.fragile {
				st.fragile = []fragileAffinity{{pod: tc.pod, key: corev1.LabelTopologyZone, domain: "z1"}}
			}
			keys, ok := (podAffinities{st}).moveKeys(tc.pod)
			if ok == tc.fragile {
				t.Fatalf("moveKeys says the pod may move: %v, want %v", ok, !tc.fragile)
			}
			if !slices.Equal(keys, tc.keys) {
				t.Errorf("keys %v, want %v", keys, tc.keys)
			}
			if got := (podAffinities{st}).movable(tc.pod); got != tc.movable {
				t.Errorf("movable %v, want %v", got, tc.movable)
			}
		})
	}
}

func TestSameDomainsNeedsEveryKeyOnBothNodesWithOneValue(t *testing.T) {
	snap := simulation.NewSnapshot()
	node := func(name string, labels map[string]string) *openNode {
		labels[corev1.LabelHostname] = name
		snap.AddNode(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}})
		return &openNode{name: name}
	}
	a := node("a", map[string]string{corev1.LabelTopologyZone: "z1", "rack": "r1"})
	b := node("b", map[string]string{corev1.LabelTopologyZone: "z1", "rack": "r2"})
	c := node("c", map[string]string{corev1.LabelTopologyZone: "z2"})
	d := node("d", map[string]string{})
	st := &solve{snap: snap}
	zone, rack, host := corev1.LabelTopologyZone, "rack", corev1.LabelHostname
	for _, tc := range []struct {
		from, to *openNode
		keys     []string
		want     bool
	}{
		{a, b, nil, true},
		{a, b, []string{zone}, true},
		{a, b, []string{zone, rack}, false},
		{a, c, []string{zone}, false},
		{a, d, []string{zone}, false}, // a node without the label is in no domain
		{d, d, []string{zone}, false},
		{a, b, []string{host}, false},
		{a, &openNode{name: "gone"}, []string{zone}, false},
	} {
		if got := (podAffinities{st}).sameDomains(tc.from, tc.to, tc.keys); got != tc.want {
			t.Errorf("sameDomains(%s, %s, %v) = %v, want %v", tc.from.name, tc.to.name, tc.keys, got, tc.want)
		}
	}
}
