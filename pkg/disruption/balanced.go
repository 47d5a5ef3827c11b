/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package disruption

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"k8s.io/klog/v2"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/metrics"
)

// balancedThreshold is the lowest score a Balanced NodePool takes a move at.
const balancedThreshold = 1.0 / stevedorev1.BalancedK

// poolScore is how a move weighs for one Balanced NodePool whose nodes it removes: the share of the NodePool's
// hourly cost it saves over the share of the NodePool's disruption cost it causes.
type poolScore struct {
	pool                    string
	savingsShare, costShare float64
}

// score is the move's score for the NodePool (0 when it saves nothing).
func (s poolScore) score() float64 {
	if s.savingsShare <= 0 || s.costShare <= 0 {
		return 0
	}
	return s.savingsShare / s.costShare
}

func (s poolScore) approved() bool { return s.score() >= balancedThreshold-savingsEpsilon }

func (s poolScore) String() string {
	cmp := ">="
	if !s.approved() {
		cmp = "<"
	}
	return fmt.Sprintf("Balanced score %.2f %s %.2f for NodePool %s: the move saves %.1f%% of its hourly cost and causes %.1f%% of its disruption cost",
		s.score(), cmp, balancedThreshold, s.pool, 100*s.savingsShare, 100*s.costShare)
}

// balancedScores scores a move for each Balanced NodePool among its candidates' (by name). A move across
// NodePools credits each with the net saving in proportion to the price of its nodes in the move. Moves whose
// candidates are all of other policies get no score.
func balancedScores(v *clusterView, cmd *Command) []poolScore {
	price, disruption := map[string]float64{}, map[string]float64{}
	total := 0.0
	for _, cand := range cmd.Candidates {
		if cand.NodePool.Spec.Disruption.ConsolidationPolicy != stevedorev1.ConsolidationPolicyBalanced {
			continue
		}
		price[cand.NodePool.Name] += cand.Price
		disruption[cand.NodePool.Name] += cand.DisruptionCost
	}
	for _, cand := range cmd.Candidates {
		total += cand.Price
	}
	savings := cmd.Savings()
	var out []poolScore
	for _, name := range slices.Sorted(maps.Keys(price)) {
		ps := v.pools[name]
		s := poolScore{pool: name}
		if ps != nil && ps.cost > 0 && ps.disruptionCost > 0 && total > 0 {
			s.savingsShare = savings * price[name] / total / ps.cost
			s.costShare = disruption[name] / ps.disruptionCost
		}
		out = append(out, s)
	}
	return out
}

// weigh scores a consolidation move under the Balanced policy, records the scores in the metrics, and returns the
// verdict of the first NodePool that rejects it (nil when every Balanced NodePool takes it, or none is involved).
// The command's Scores carry the scores for its events.
func (m *consolidation) weigh(ctx context.Context, v *clusterView, cmd *Command) *verdict {
	scores := balancedScores(v, cmd)
	cmd.Scores = scores
	var rejected *verdict
	for _, s := range scores {
		decision := "approved"
		if !s.approved() {
			decision = "rejected"
			if rejected == nil {
				rejected = &verdict{reason: RetainBalancedScore, message: s.String(), volatile: true, subject: s.pool}
			}
		}
		metrics.ConsolidationScore.WithLabelValues(s.pool, decision).Observe(s.score())
		metrics.ConsolidationMoves.WithLabelValues(s.pool, decision).Inc()
		klog.FromContext(ctx).V(4).Info("Consolidation move scored", "nodepool", s.pool, "score", s.score(), "decision", decision,
			"savingsShare", s.savingsShare, "disruptionShare", s.costShare, "nodes", cmd.String())
	}
	return rejected
}

// bestCaseScore is the score of deleting the candidate with nothing launched in its place: no move of the node
// scores higher, so a node whose best case falls short is not simulated at all (and counts as a move rejected).
func bestCaseScore(v *clusterView, cand *Candidate) *verdict {
	if cand.NodePool.Spec.Disruption.ConsolidationPolicy != stevedorev1.ConsolidationPolicyBalanced {
		return nil
	}
	s := balancedScores(v, &Command{Candidates: []*Candidate{cand}})
	if len(s) == 1 && !s[0].approved() {
		metrics.ConsolidationScore.WithLabelValues(s[0].pool, "rejected").Observe(s[0].score())
		metrics.ConsolidationMoves.WithLabelValues(s[0].pool, "rejected").Inc()
		return &verdict{reason: RetainBalancedScore, volatile: true, subject: s[0].pool,
			message: "even deleting it outright scores too low: " + s[0].String()}
	}
	return nil
}

// DescribeScores is the command's Balanced scores in words ("" when none).
func (cmd *Command) DescribeScores() string { return describeScores(cmd.Scores) }

// describeScores is the scores for an event ("" when none).
func describeScores(scores []poolScore) string {
	parts := make([]string, 0, len(scores))
	for _, s := range scores {
		parts = append(parts, s.String())
	}
	sort.Strings(parts)
	return strings.Join(parts, "; ")
}
