/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package disruption

import (
	"context"
	"math"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	schedv1alpha1 "github.com/stevedore-dev/stevedore/pkg/apis/scheduling/v1alpha1"
	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/commitment"
	"github.com/stevedore-dev/stevedore/pkg/test"
)

// checks runs several checks of a command.
func checks(cs ...func(*testing.T, *harness, *Command)) func(*testing.T, *harness, *Command) {
	return func(t *testing.T, h *harness, cmd *Command) {
		for _, c := range cs {
			c(t, h, cmd)
		}
	}
}

func checkPods(t *testing.T, cmd *Command, n int) {
	t.Helper()
	if cmd.Pods != n {
		t.Errorf("pods = %d, want %d", cmd.Pods, n)
	}
}

// placedOn checks where the command planned a pod (test.Pod's UID): on node, or ("" node) on replacement index.
func placedOn(t *testing.T, cmd *Command, pod, node string, replacement int) {
	t.Helper()
	got, ok := cmd.Placements[types.UID("pod-"+pod)]
	if want := (Placement{Node: node, Replacement: replacement}); !ok || got != want {
		t.Errorf("pod %s placed %+v (found %v), want %+v", pod, got, ok, want)
	}
}

func TestSingleNodeConsolidation(t *testing.T) {
	spotToSpot := func(o *Options) { o.Args.SpotToSpotConsolidation = true }
	spotPool := func() *test.NodePoolWrapper {
		return pool().Require(stevedorev1.LabelCapacityType, corev1.NodeSelectorOpIn, spot)
	}
	bigSpot := machine{name: "big", pool: "default", typ: "m5.2xlarge", capacity: spot}
	small := func() *test.PodWrapper { return pod("web", "big", "500m", "512Mi") }
	isUnderutilized := func(t *testing.T, cmd *Command) {
		if cmd.Reason != stevedorev1.DisruptionReasonUnderutilized || cmd.Forceful {
			t.Errorf("reason %s, forceful %v", cmd.Reason, cmd.Forceful)
		}
	}
	runMethodCases(t, MethodSingleNode, []methodCase{
		{
			name: "a small pod moves to a node with room: delete",
			objs: objects(onDemandPool(), node("a", "m5.xlarge"), node("b", "m5.xlarge"),
				pod("web1", "a", "500m", "512Mi"), pod("web2", "b", "500m", "512Mi")),
			want: []string{"a"},
			check: func(t *testing.T, h *harness, cmd *Command) {
				isUnderutilized(t, cmd)
				wantReplacement("", "")(t, h, cmd)
				checkPods(t, cmd, 1)
				placedOn(t, cmd, "web1", "b", 0)
				if cmd.Savings() != priceOf("m5.xlarge", onDemand) {
					t.Errorf("savings = %v", cmd.Savings())
				}
			},
		},
		{
			// the scheduler counts a nominated pod on its node: b's room is the successor's, so web1 goes to c
			name: "a pending pod nominated to a node keeps its room there",
			objs: objects(onDemandPool(), node("a", "m5.large"), node("b", "m5.large"), node("c", "m5.large"),
				pod("web1", "a", "1", "512Mi"), pod("web2", "c", "200m", "256Mi"),
				test.Pod("successor").Pending().Req("cpu", "1500m", "memory", "512Mi").OwnedBy("ReplicaSet", "rs-successor").Nominated("b")),
			want:  []string{"a"},
			check: func(t *testing.T, _ *harness, cmd *Command) { placedOn(t, cmd, "web1", "c", 0) },
		},
		{
			name: "the node cheapest to disrupt goes first",
			objs: objects(onDemandPool(), node("a", "m5.xlarge"), node("b", "m5.xlarge"),
				pod("web1", "a", "500m", "512Mi"), pod("web2", "a", "500m", "512Mi"), pod("web3", "b", "500m", "512Mi")),
			want: []string{"b"},
		},
		{
			name: "a big node with a small pod is replaced by the cheapest type that fits",
			objs: objects(onDemandPool(), node("big", "m5.2xlarge"), small()),
			want: []string{"big"},
			check: func(t *testing.T, h *harness, cmd *Command) {
				wantReplacement("t3.small", onDemand)(t, h, cmd)
				placedOn(t, cmd, "web", "", 0)
			},
		},
		{
			name: "a node a commitment covers is not replaced by a cheaper type: its hours are paid for",
			cfg:  harnessConfig{opts: coveredNodes(map[string]float64{"big": 1})},
			objs: objects(onDemandPool(), node("big", "m5.2xlarge"), small()),
		},
		{
			name:  "a node a commitment covers in part is replaced when the rest costs more than the replacement",
			cfg:   harnessConfig{opts: coveredNodes(map[string]float64{"big": 0.5})},
			objs:  objects(onDemandPool(), node("big", "m5.2xlarge"), small()),
			want:  []string{"big"},
			check: wantReplacement("t3.small", onDemand),
		},
		{
			name:  "DaemonSets count in the replacement's size",
			objs:  objects(onDemandPool(), node("big", "m5.2xlarge"), small(), test.DaemonSet("agent").Req("cpu", "200m", "memory", "1Gi")),
			want:  []string{"big"},
			check: wantReplacement("t3.medium", onDemand),
		},
		{
			name: "no cheaper type fits: the node stays",
			objs: objects(onDemandPool(), node("a", "t3.medium"), pod("web", "a", "1", "2500Mi")),
		},
		{
			name: "the cheapest type already: the node stays",
			objs: objects(onDemandPool(), node("a", "t3.small"), pod("web", "a", "500m", "512Mi")),
		},
		{
			name:  "on-demand may be replaced by spot",
			objs:  objects(pool(), node("big", "m5.2xlarge"), small()),
			want:  []string{"big"},
			check: wantReplacement("t3.small", spot),
		},
		{
			name:  "but not a pod its workload's on-demand floor keeps on on-demand",
			objs:  objects(pool(), node("big", "m5.2xlarge"), small().Annotations(stevedorev1.AnnotationOnDemandFloor, "50%")),
			want:  []string{"big"},
			check: wantReplacement("t3.small", onDemand),
		},
		{
			name: "spot is not replaced by spot when spot-to-spot is off",
			objs: objects(spotPool(), bigSpot, small()),
		},
		{
			name: "nor when the NodePool also allows on-demand (the cheapest replacement is spot)",
			objs: objects(pool(), bigSpot, small()),
		},
		{
			name: "spot-to-spot needs 15 cheaper spot types to choose from",
			cfg:  harnessConfig{opts: spotToSpot},
			objs: objects(spotPool(), bigSpot, small()),
		},
		{
			name: "spot-to-spot with enough cheaper types",
			cfg:  harnessConfig{opts: spotToSpot, allTypes: true},
			objs: objects(spotPool(), bigSpot, small()),
			want: []string{"big"},
			check: func(t *testing.T, _ *harness, cmd *Command) {
				if len(cmd.Replacements) != 1 {
					t.Fatalf("replacements = %s", describeReplacements(cmd.Replacements))
				}
				r := cmd.Replacements[0]
				if r.Offering.CapacityType != spot || r.Offering.Price >= priceOf("m5.2xlarge", spot) || len(r.InstanceTypes) < minSpotToSpotTypes {
					t.Errorf("replacement %s with %d types, want a cheaper spot one with at least %d", describeReplacements(cmd.Replacements),
						len(r.InstanceTypes), minSpotToSpotTypes)
				}
			},
		},
		{
			name: "a pod fitting nowhere keeps its node",
			objs: objects(onDemandPool(), node("a", "m5.xlarge"), node("b", "m5.xlarge"), pinned("local", "a"), pinned("local2", "b")),
			why:  map[string]RetainReason{"a": RetainPodsFitNowhere, "b": RetainPodsFitNowhere},
		},
		{
			name: "a PDB allowing no disruption blocks the node",
			objs: objects(onDemandPool(), node("a", "m5.xlarge"), node("b", "m5.xlarge"),
				pod("web", "a", "500m", "512Mi"), pinned("local", "b"), pdb("web", "web", 0)),
			why: map[string]RetainReason{"a": RetainPodDisruptionBudget, "b": RetainPodsFitNowhere},
		},
		{
			name: "a node running a pod of a gang is left alone",
			objs: objects(onDemandPool(), node("a", "m5.xlarge"), node("b", "m5.xlarge"),
				pod("worker", "a", "500m", "512Mi").Labels(schedv1alpha1.PodGroupLabel, "train"), pinned("local", "b")),
			why: map[string]RetainReason{"a": RetainGang, "b": RetainPodsFitNowhere},
		},
		{
			name: "WhenEmpty does not consolidate",
			objs: objects(onDemandPool().Consolidation(stevedorev1.ConsolidationPolicyWhenEmpty, dur(0)), node("big", "m5.2xlarge"), small()),
			why:  map[string]RetainReason{"big": RetainWhenEmpty},
		},
		{
			name: "consolidateAfter not passed",
			objs: objects(onDemandPool().Consolidation(stevedorev1.ConsolidationPolicyWhenEmptyOrUnderutilized, dur(2*time.Hour)),
				node("big", "m5.2xlarge"), small()),
			why: map[string]RetainReason{"big": RetainConsolidateAfter},
		},
		{
			name: "a budget of 0 for Underutilized",
			objs: objects(onDemandPool().Budgets(budget("100%", "", 0), budget("0", "", 0, stevedorev1.DisruptionReasonUnderutilized)),
				node("big", "m5.2xlarge"), small()),
			why: map[string]RetainReason{"big": RetainBudget},
		},
		{
			// single-node consolidation disrupts one node: a budget of 1 must not stop at the first candidate
			name: "a budget of 1: a node that cannot consolidate does not hold the next one back",
			objs: objects(test.NodePool("default").Require(stevedorev1.LabelCapacityType, corev1.NodeSelectorOpIn, onDemand).Budgets(budget("1", "", 0)),
				node("a", "m5.xlarge"), node("b", "m5.xlarge"), node("c", "m5.xlarge"), pinned("local-a", "a"), pinned("local-b", "b"),
				pod("web1", "c", "500m", "512Mi"), pod("web2", "c", "500m", "512Mi")),
			want: []string{"c"},
			why:  map[string]RetainReason{"a": RetainPodsFitNowhere, "b": RetainPodsFitNowhere},
		},
		{
			name: "empty nodes are emptiness's",
			objs: objects(onDemandPool(), node("a", "m5.xlarge"), node("b", "m5.xlarge")),
		},
		{
			// already paid for: any replacement costs more
			name: "a reserved node with a small pod is not replaced",
			objs: objects(pool().Require(stevedorev1.LabelCapacityType, corev1.NodeSelectorOpIn, stevedorev1.CapacityTypeReserved, onDemand, spot),
				machine{name: "big", pool: "default", typ: "m5.2xlarge", capacity: stevedorev1.CapacityTypeReserved}, small()),
			why: map[string]RetainReason{"big": RetainNotCheaper},
		},
		{
			// both move one pod; deleting b saves an m5.xlarge, deleting a an m5.large (the first by name)
			name: "among nodes equally cheap to disrupt, the one that saves most",
			objs: objects(onDemandPool(), node("a", "m5.large"), node("b", "m5.xlarge"),
				pod("web1", "a", "250m", "256Mi"), pod("web2", "b", "250m", "256Mi")),
			want:  []string{"b"},
			check: wantReplacement("", ""),
			why:   map[string]RetainReason{"a": RetainOtherMove},
		},
		{
			// deleting b saves more but moves two pods: a costlier disruption is not taken for a larger saving
			name: "a node cheaper to disrupt goes first even when another saves more",
			objs: objects(onDemandPool(), node("a", "m5.large"), node("b", "m5.xlarge"),
				pod("web1", "a", "250m", "256Mi"), pod("web2", "b", "250m", "256Mi"), pod("web3", "b", "250m", "256Mi")),
			want: []string{"a"},
		},
		{
			name: "a spot node whose only cheaper replacement is spot stays without spot-to-spot",
			objs: objects(spotPool(), bigSpot, small()),
			why:  map[string]RetainReason{"big": RetainSpotToSpot},
		},
		{
			name: "consolidateAfter Never",
			objs: objects(onDemandPool().Consolidation(stevedorev1.ConsolidationPolicyWhenEmptyOrUnderutilized, nil),
				node("big", "m5.2xlarge"), small()),
			why: map[string]RetainReason{"big": RetainConsolidationOff},
		},
		{
			name: "do-not-disrupt",
			objs: objects(onDemandPool(), machine{name: "big", pool: "default", typ: "m5.2xlarge",
				node: func(w *test.NodeWrapper) { w.Annotations(stevedorev1.DoNotDisruptKey, "true") }}, small()),
			why: map[string]RetainReason{"big": RetainDoNotDisrupt},
		},
	})
}

func TestMultiNodeConsolidation(t *testing.T) {
	runMethodCases(t, MethodMultiNode, []methodCase{
		{
			// replacing both by a new m5.xlarge saves one m5.xlarge, as deleting one of them does, and moves both
			// pods instead of one: single-node consolidation's to do (Karpenter refuses such a merge too)
			name: "two half-empty nodes are not merged into a node of their own type",
			objs: objects(onDemandPool().Require(corev1.LabelInstanceTypeStable, corev1.NodeSelectorOpIn, "m5.xlarge", "m5.2xlarge"),
				node("a", "m5.xlarge"), node("b", "m5.xlarge"), pod("web1", "a", "1500m", "1Gi"), pod("web2", "b", "1500m", "1Gi")),
		},
		{
			name: "three nodes are not merged into one of their type: two of them are deleted instead",
			objs: objects(onDemandPool().Require(corev1.LabelInstanceTypeStable, corev1.NodeSelectorOpIn, "m5.xlarge", "m5.2xlarge"),
				node("a", "m5.xlarge"), node("b", "m5.xlarge"), node("c", "m5.xlarge"),
				pod("web1", "a", "1200m", "1Gi"), pod("web2", "b", "1200m", "1Gi"), pod("web3", "c", "1200m", "1Gi")),
			want: []string{"a", "b"},
			check: func(t *testing.T, h *harness, cmd *Command) {
				wantReplacement("", "")(t, h, cmd)
				checkPods(t, cmd, 2)
			},
		},
		{
			// the same type as spot costs less than the on-demand nodes: that merge saves more than any deletion
			name: "two on-demand nodes merge into a cheaper spot node of their type",
			objs: objects(pool().Require(corev1.LabelInstanceTypeStable, corev1.NodeSelectorOpIn, "m5.xlarge", "m5.2xlarge").
				Require(stevedorev1.LabelCapacityType, corev1.NodeSelectorOpIn, spot, onDemand),
				machine{name: "a", pool: "default", typ: "m5.xlarge", capacity: onDemand}, machine{name: "b", pool: "default", typ: "m5.xlarge", capacity: onDemand},
				pod("web1", "a", "1500m", "1Gi"), pod("web2", "b", "1500m", "1Gi")),
			want: []string{"a", "b"},
			check: func(t *testing.T, h *harness, cmd *Command) {
				wantReplacement("m5.xlarge", spot)(t, h, cmd)
				checkPods(t, cmd, 2)
				if want := 2*priceOf("m5.xlarge", onDemand) - priceOf("m5.xlarge", spot); math.Abs(cmd.Savings()-want) > 1e-9 {
					t.Errorf("savings = %v, want %v", cmd.Savings(), want)
				}
			},
		},
		{
			// a and b join in name order, {a, b} saving more than {a}; but b alone (its pod moves onto a) saves
			// more than both with a new node for the two pods, and moves one pod instead of two
			name: "a node that adds nothing to the set is pruned from it",
			objs: objects(onDemandPool(), node("a", "t3.medium"), node("b", "m5.xlarge"),
				pod("web1", "a", "500m", "1Gi"), pod("web2", "b", "1300m", "1536Mi")),
			want: []string{"b"},
			check: func(t *testing.T, h *harness, cmd *Command) {
				wantReplacement("", "")(t, h, cmd)
				checkPods(t, cmd, 1)
			},
		},
		{
			name: "pods move onto a node with room: two nodes deleted",
			objs: objects(onDemandPool(), node("a", "m5.large"), node("b", "m5.large"), node("c", "m5.2xlarge"),
				pod("web1", "a", "500m", "512Mi"), pod("web2", "b", "500m", "512Mi"), pinned("local", "c")),
			want:  []string{"a", "b"},
			check: wantReplacement("", ""),
		},
		{
			name: "a node whose pods fit nowhere is skipped, not the end of the set",
			objs: objects(onDemandPool(), node("a", "m5.large"), node("b", "m5.large"), node("c", "m5.large"),
				node("d", "m5.2xlarge"), pinned("local-a", "a"), pod("web1", "b", "500m", "512Mi"), pod("web2", "c", "500m", "512Mi"),
				pinned("local-d", "d")),
			want:  []string{"b", "c"},
			check: wantReplacement("", ""),
		},
		{
			name: "the budget bounds the set",
			objs: objects(test.NodePool("default").Require(stevedorev1.LabelCapacityType, corev1.NodeSelectorOpIn, onDemand).Budgets(budget("2", "", 0)),
				node("a", "m5.large"), node("b", "m5.large"), node("c", "m5.large"), node("d", "m5.2xlarge"),
				pod("web1", "a", "500m", "512Mi"), pod("web2", "b", "500m", "512Mi"), pod("web3", "c", "500m", "512Mi"), pinned("local", "d")),
			want: []string{"a", "b"},
		},
		{
			// the nodes that cannot go (their pods are pinned) come first, cheapest to disrupt: they must not take
			// the budget's two places before the nodes that can go are tried
			name: "a budget of 2: nodes that cannot consolidate take no room in it",
			objs: objects(test.NodePool("default").Require(stevedorev1.LabelCapacityType, corev1.NodeSelectorOpIn, onDemand).Budgets(budget("2", "", 0)),
				node("a", "m5.large"), node("b", "m5.large"), node("c", "m5.large"), node("d", "m5.large"), node("e", "m5.2xlarge"),
				pinned("local-a", "a"), pinned("local-b", "b"), pod("web1", "c", "500m", "512Mi"), pod("web2", "c", "500m", "512Mi"),
				pod("web3", "d", "500m", "512Mi"), pod("web4", "d", "500m", "512Mi"), pinned("local-e", "e")),
			want:  []string{"c", "d"},
			check: wantReplacement("", ""),
		},
		{
			name: "one consolidatable node is single-node consolidation's",
			objs: objects(onDemandPool(), node("a", "m5.xlarge"), node("b", "m5.xlarge"),
				pod("web", "a", "500m", "512Mi"), pod("db", "b", "500m", "512Mi"), pdb("db", "db", 0)),
		},
		{
			name: "merging is not cheaper than the nodes: nothing",
			objs: objects(onDemandPool(), node("a", "t3.small"), node("b", "t3.small"),
				pod("web1", "a", "1200m", "512Mi"), pod("web2", "b", "1200m", "512Mi")),
		},
		{
			name: "two new nodes are no merge",
			objs: objects(onDemandPool(), node("a", "m5.xlarge"), node("b", "m5.xlarge"),
				pod("web1", "a", "1500m", "1Gi"), pod("web2", "b", "1500m", "1Gi")),
		},
		{
			name: "nodes of WhenEmpty NodePools are not merged",
			objs: objects(onDemandPool().Consolidation(stevedorev1.ConsolidationPolicyWhenEmpty, dur(0)),
				node("a", "m5.xlarge"), node("b", "m5.xlarge"), pod("web1", "a", "1500m", "1Gi"), pod("web2", "b", "1500m", "1Gi")),
		},
	})
}

// TestMultiNodeConsolidationTakesEveryCandidateInTurn: with a window of two candidates, a pass whose window holds
// no move moves the window on for the next pass, which finds the move further down the list; a pass that found a
// move starts again from the cheapest to disrupt, and a window past the end wraps to the start.
func TestMultiNodeConsolidationTakesEveryCandidateInTurn(t *testing.T) {
	h := newHarness(t, harnessConfig{}, objects(onDemandPool(), node("a", "m5.large"), node("b", "m5.large"), node("c", "m5.large"),
		node("d", "m5.large"), node("e", "m5.2xlarge"), pinned("local-a", "a"), pinned("local-b", "b"),
		pod("web1", "c", "500m", "512Mi"), pod("web2", "d", "500m", "512Mi"), pinned("local-e", "e"))...)
	m, ok := h.method(MethodMultiNode).(*multiNodeConsolidation)
	if !ok {
		t.Fatal("the multi-node method is not a *multiNodeConsolidation")
	}
	m.window = 2
	for i, want := range [][]string{nil, {"c", "d"}, nil, {"c", "d"}} {
		if got := commandNames(h.find(m)); !slices.Equal(got, want) {
			t.Errorf("pass %d: candidates %v, want %v", i+1, got, want)
		}
	}
	m.start = 4 // the last window holds one candidate, e: nothing, and the next pass starts over
	if got := commandNames(h.find(m)); got != nil || m.start != 0 {
		t.Errorf("window of e: candidates %v, next start %d; want none and 0", got, m.start)
	}
}

// coveredNodes has the commitments cover the named nodes for the given fractions of their hours.
func coveredNodes(covered map[string]float64) func(*Options) {
	return func(o *Options) {
		o.Coverage = func(context.Context) commitment.Coverage { return commitment.Coverage{Covered: covered} }
	}
}
