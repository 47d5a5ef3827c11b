/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package disruption

import (
	"math"
	"strings"
	"testing"
	"time"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/cloud"
	"github.com/stevedore-dev/stevedore/pkg/solver"
	"github.com/stevedore-dev/stevedore/pkg/test"
)

// TestBalancedScores works the Balanced policy's arithmetic on the NodePools of Karpenter's design note
// (designs/balanced-consolidation.md), priced per day. A node's disruption cost counts one for the node besides its
// pods, so the pool of 10 nodes and 80 pods weighs 90 (the note's examples leave the node's own cost out).
func TestBalancedScores(t *testing.T) {
	type node struct {
		pool        string
		price, cost float64 // cost: the node's disruption cost
	}
	type pool struct {
		cost, disruption float64
		policy           stevedorev1.ConsolidationPolicy
	}
	balanced := stevedorev1.ConsolidationPolicyBalanced
	mixed := pool{cost: 58.08, disruption: 90, policy: balanced} // 8 m7i.xlarge at 4.84, 2 m7i.2xlarge at 9.68
	tests := []struct {
		name        string
		pools       map[string]pool
		move        []node
		replacement float64 // price of the new node, 0 for none
		want        map[string]float64
		approved    bool
	}{
		{name: "an oversized node replaced by a quarter of its price", pools: map[string]pool{"p": mixed},
			move: []node{{"p", 9.68, 4}}, replacement: 2.42, want: map[string]float64{"p": (7.26 / 58.08) / (4.0 / 90)}, approved: true},
		{name: "deleting a node whose pods fit elsewhere", pools: map[string]pool{"p": mixed},
			move: []node{{"p", 4.84, 5}}, want: map[string]float64{"p": (4.84 / 58.08) / (5.0 / 90)}, approved: true},
		{name: "a marginal replacement of a busy node", pools: map[string]pool{"p": mixed},
			move: []node{{"p", 4.84, 9}}, replacement: 2.42, want: map[string]float64{"p": (2.42 / 58.08) / (9.0 / 90)}, approved: false},
		{name: "a replacement at half the price in a uniform pool is the boundary", pools: map[string]pool{"p": {cost: 48.40, disruption: 90, policy: balanced}},
			move: []node{{"p", 4.84, 9}}, replacement: 2.42, want: map[string]float64{"p": 0.5}, approved: true},
		{name: "the same type at the same price saves nothing", pools: map[string]pool{"p": mixed},
			move: []node{{"p", 4.84, 2}}, replacement: 4.84, want: map[string]float64{"p": 0}, approved: false},
		{name: "pods costly to evict weigh against the move", pools: map[string]pool{"p": {cost: 58.08, disruption: 117, policy: balanced}},
			move: []node{{"p", 4.84, 32}}, want: map[string]float64{"p": (4.84 / 58.08) / (32.0 / 117)}, approved: false},
		{name: "the same node with stateless pods", pools: map[string]pool{"p": {cost: 58.08, disruption: 117, policy: balanced}},
			move: []node{{"p", 4.84, 5}}, want: map[string]float64{"p": (4.84 / 58.08) / (5.0 / 117)}, approved: true},
		{name: "an empty node of a large pool", pools: map[string]pool{"p": {cost: 100, disruption: 400, policy: balanced}},
			move: []node{{"p", 0.5, 1}}, want: map[string]float64{"p": (0.5 / 100) / (1.0 / 400)}, approved: true},
		{
			// the net saving is credited to each NodePool by the price of its nodes in the move
			name:  "a move across two Balanced NodePools must pass in each",
			pools: map[string]pool{"od": {cost: 48.40, disruption: 90, policy: balanced}, "spot": {cost: 14.50, disruption: 90, policy: balanced}},
			move:  []node{{"od", 4.84, 9}, {"spot", 1.45, 20}}, replacement: 2.0,
			want: map[string]float64{
				"od":   (4.29 * 4.84 / 6.29 / 48.40) / (9.0 / 90),  // 0.68
				"spot": (4.29 * 1.45 / 6.29 / 14.50) / (20.0 / 90), // 0.31
			},
			approved: false,
		},
		{name: "a NodePool of another policy is not scored", pools: map[string]pool{"p": {cost: 58.08, disruption: 90,
			policy: stevedorev1.ConsolidationPolicyWhenEmptyOrUnderutilized}},
			move: []node{{"p", 4.84, 9}}, replacement: 4.0, want: map[string]float64{}, approved: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v := &clusterView{pools: map[string]*poolState{}}
			nodePools := map[string]*stevedorev1.NodePool{}
			for name, p := range tc.pools {
				np := test.NodePool(name).Consolidation(p.policy, dur(0)).Obj()
				nodePools[name] = np
				v.pools[name] = &poolState{pool: np, cost: p.cost, disruptionCost: p.disruption}
			}
			cmd := &Command{}
			for _, n := range tc.move {
				cmd.Candidates = append(cmd.Candidates, &Candidate{NodePool: nodePools[n.pool], Price: n.price, DisruptionCost: n.cost})
			}
			if tc.replacement > 0 {
				cmd.Replacements = []*solver.PlannedNode{{Offering: cloud.Offering{Price: tc.replacement}}}
			}
			scores := balancedScores(v, cmd)
			if len(scores) != len(tc.want) {
				t.Fatalf("scores %v, want %d", scores, len(tc.want))
			}
			approved := true
			for _, s := range scores {
				if want := tc.want[s.pool]; math.Abs(s.score()-want) > 1e-6 {
					t.Errorf("NodePool %s: score %.4f, want %.4f", s.pool, s.score(), want)
				}
				approved = approved && s.approved()
			}
			if approved != tc.approved {
				t.Errorf("approved = %v, want %v (%v)", approved, tc.approved, describeScores(scores))
			}
		})
	}
}

// TestBalancedConsolidation: node a's pods fit on b..e (five m5.xlarge, each of the others running one pod that
// fits nowhere else). Deleting a saves a fifth of the NodePool's cost; whether that is worth it depends on how much
// of the NodePool's disruption cost a's pods carry.
func TestBalancedConsolidation(t *testing.T) {
	highCost := func(w *test.PodWrapper) { w.Annotations("controller.kubernetes.io/pod-deletion-cost", "1073741824") } // 2^30: +8
	cluster := func(policy stevedorev1.ConsolidationPolicy, pods int, mutate ...func(*test.PodWrapper)) []any {
		items := []any{onDemandPool().Consolidation(policy, dur(0))}
		for _, n := range []string{"a", "b", "c", "d", "e"} {
			items = append(items, node(n, "m5.xlarge"))
			if n != "a" {
				items = append(items, pinned("local-"+n, n))
			}
		}
		for i := range pods {
			w := pod("web"+string(rune('0'+i)), "a", "100m", "128Mi")
			for _, m := range mutate {
				m(w)
			}
			items = append(items, w)
		}
		return items
	}
	balanced, underutilized := stevedorev1.ConsolidationPolicyBalanced, stevedorev1.ConsolidationPolicyWhenEmptyOrUnderutilized
	runMethodCases(t, MethodSingleNode, []methodCase{
		{name: "WhenEmptyOrUnderutilized deletes a node with six pods", objs: objects(cluster(underutilized, 6)...), want: []string{"a"}},
		{
			// saves 20% of the cost, disrupts 7/15 of the disruption cost: score 0.43
			name: "Balanced keeps a node with six pods", objs: objects(cluster(balanced, 6)...),
			why: map[string]RetainReason{"a": RetainBalancedScore},
			check: func(t *testing.T, h *harness, _ *Command) {
				v := h.view()
				if _, err := h.c.single.Find(h.Ctx, v); err != nil {
					t.Fatal(err)
				}
				if msg := v.verdicts["a"].message; !strings.Contains(msg, "Balanced score 0.43 < 0.50 for NodePool default") {
					t.Errorf("verdict %q", msg)
				}
			},
		},
		{
			// 2/10 of the disruption cost for 20% of the cost: score 1.0
			name: "Balanced deletes a node with one pod", objs: objects(cluster(balanced, 1)...), want: []string{"a"},
			check: func(t *testing.T, _ *harness, cmd *Command) {
				if len(cmd.Scores) != 1 || math.Abs(cmd.Scores[0].score()-1) > 1e-9 {
					t.Errorf("scores %v, want one of 1.0", cmd.Scores)
				}
			},
		},
		{
			// the pod's deletion cost makes a weigh 10 of 18: score 0.36
			name: "Balanced keeps a node whose one pod is costly to evict", objs: objects(cluster(balanced, 1, highCost)...),
			why: map[string]RetainReason{"a": RetainBalancedScore},
		},
		{
			name: "Balanced replaces an oversized node",
			objs: objects(onDemandPool().Consolidation(balanced, dur(0)), node("big", "m5.2xlarge"), pod("web", "big", "500m", "512Mi")),
			want: []string{"big"},
			check: func(t *testing.T, h *harness, cmd *Command) {
				if len(cmd.Replacements) != 1 || len(cmd.Scores) != 1 || !cmd.Scores[0].approved() {
					t.Errorf("replacements %s, scores %v", describeReplacements(cmd.Replacements), cmd.Scores)
				}
			},
		},
	})
	runMethodCases(t, MethodEmptiness, []methodCase{
		{name: "Balanced deletes empty nodes unscored", objs: objects(onDemandPool().Consolidation(balanced, dur(time.Minute)),
			node("a", "m5.xlarge"), node("b", "m5.xlarge"), pinned("local", "b")), want: []string{"a"}},
	})
}
