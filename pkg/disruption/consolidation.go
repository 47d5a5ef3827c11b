/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package disruption

import (
	"context"
	"fmt"
	"time"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/cloud"
	"github.com/stevedore-dev/stevedore/pkg/solver"
)

// consolidation is what multi- and single-node consolidation share: which nodes they may consider, and whether
// removing some saves money.
type consolidation struct {
	removals *removals
	activity *activity
	retries  *retries
	// spotToSpot allows replacing spot nodes by a cheaper spot node.
	spotToSpot bool
}

// StillHolds, at validation: the node has stayed quiet for consolidateAfter.
func (m *consolidation) StillHolds(cand *Candidate, now time.Time) bool {
	return m.activity.quiet(cand, now)
}

func (*consolidation) Validated() bool  { return true }
func (*consolidation) Resimulate() bool { return true }

// consolidationCandidates lists, cheapest to disrupt first, at most limit (all when negative) non-empty nodes whose NodePool
// consolidates underutilized nodes, whose consolidateAfter has passed and whose NodePool's budget has room for one
// more node; it returns the budgets too, for a caller disrupting several nodes to take room from. With judge, the
// nodes left out get a verdict.
func (m *consolidation) consolidationCandidates(ctx context.Context, v *clusterView, limit int, judge bool) ([]*Candidate, *budgets) {
	b := newBudgets(ctx, v, stevedorev1.DisruptionReasonUnderutilized)
	leave := func(cand *Candidate, why *verdict) {
		if judge {
			v.leave(cand, why)
		}
	}
	var out []*Candidate
	for _, cand := range v.candidates {
		if len(out) == limit {
			break
		}
		if cand.Empty() || cand.BlockedBecause != "" {
			continue
		}
		if why := m.activity.unconsolidatable(cand, v.now); why != nil {
			leave(cand, why)
			continue
		}
		if why := m.retryLater(cand, v.now); why != nil {
			leave(cand, why)
			continue
		}
		if !cand.NodePool.Spec.Disruption.ConsolidationPolicy.ConsolidatesUnderutilized() {
			leave(cand, &verdict{reason: RetainWhenEmpty, message: fmt.Sprintf("NodePool %s consolidates only empty nodes (consolidationPolicy %s)",
				cand.NodePool.Name, cand.NodePool.Spec.Disruption.ConsolidationPolicy)})
			continue
		}
		if b.left[cand.NodePool.Name] <= 0 {
			leave(cand, budgetVerdict(cand, stevedorev1.DisruptionReasonUnderutilized))
			continue
		}
		out = append(out, cand)
	}
	return out, b
}

// retryLater is the verdict of a node whose last consolidation did not go through and whose wait has not passed.
func (m *consolidation) retryLater(cand *Candidate, now time.Time) *verdict {
	if m.retries == nil {
		return nil
	}
	after, why, ok := m.retries.waiting(cand.Node.Name, now)
	if !ok {
		return nil
	}
	return &verdict{reason: RetainRecentlyFailed, volatile: true, subject: why,
		message: fmt.Sprintf("its last consolidation did not go through (%s); it is tried again from %s", why, after.UTC().Format(time.RFC3339))}
}

// budgetVerdict is the verdict of a node its NodePool's budget leaves no room for.
func budgetVerdict(cand *Candidate, reason stevedorev1.DisruptionReason) *verdict {
	return &verdict{reason: RetainBudget, message: fmt.Sprintf("NodePool %s's disruption budget allows no more %s disruptions now",
		cand.NodePool.Name, reason)}
}

// consolidate answers whether removing the candidates saves money: their pods fit on the other nodes, or on
// them plus one new node cheaper than the candidates together, and the move scores high enough for the Balanced
// NodePools among theirs. It returns the command, or why not.
func (m *consolidation) consolidate(ctx context.Context, v *clusterView, cands []*Candidate) (*Command, *verdict, error) {
	r, err := m.removals.simulate(ctx, cands)
	if err != nil {
		return nil, nil, err
	}
	if len(r.Plan.Unschedulable) > 0 {
		return nil, podsFitNowhere(r), nil
	}
	if len(r.Plan.NewNodes) > 1 {
		return nil, &verdict{reason: RetainNeedsSeveralNodes, message: fmt.Sprintf("its pods need %d new nodes; consolidation launches at most one", len(r.Plan.NewNodes))}, nil
	}
	cmd := &Command{Reason: stevedorev1.DisruptionReasonUnderutilized, Candidates: cands, Pods: len(r.Pods), Placements: placements(r)}
	if len(r.Plan.NewNodes) == 1 {
		replacement, why := m.cheaperReplacement(cands, r.Plan.NewNodes[0])
		if replacement == nil {
			return nil, why, nil
		}
		cmd.Replacements = []*solver.PlannedNode{replacement}
	}
	if why := m.weigh(ctx, v, cmd); why != nil {
		return nil, why, nil
	}
	return cmd, nil, nil
}

// cheaperReplacement narrows the planned new node to the instance types that make the move save money, or says
// why none does.
func (m *consolidation) cheaperReplacement(cands []*Candidate, planned *solver.PlannedNode) (*solver.PlannedNode, *verdict) {
	total := 0.0
	allSpot := true
	// the cheapest candidate of each instance type
	byType := map[string]float64{}
	for _, cand := range cands {
		total += cand.Price
		allSpot = allSpot && cand.NodeClaim.Status.CapacityType == stevedorev1.CapacityTypeSpot
		if p, ok := byType[cand.NodeClaim.Status.InstanceType]; !ok || cand.Price < p {
			byType[cand.NodeClaim.Status.InstanceType] = cand.Price
		}
	}
	replacement := planned.Restrict(func(it *cloud.InstanceType, price float64) bool {
		cheapest, same := byType[it.Name]
		switch {
		case price >= total:
			return false
		case same && len(cands) == 1:
			return false // the same type for a single node saves nothing and churns
		case same:
			// N nodes for a node of a type one of them has, at no lower price: keeping that node and deleting
			// the others saves as much and moves fewer pods (their pods fit in a node of that type)
			return price < cheapest
		}
		return true
	})
	if replacement == nil {
		what := "the node's"
		if len(cands) > 1 {
			what = "the nodes'"
		}
		return nil, &verdict{reason: RetainNotCheaper, message: fmt.Sprintf("its pods fit elsewhere only with a new node, and none they fit on is cheaper than %s $%.4f/h (the cheapest: %s at $%.4f/h)",
			what, total, planned.InstanceType.Name, planned.Offering.Price)}
	}
	if allSpot && replacement.Offering.CapacityType == stevedorev1.CapacityTypeSpot {
		if !m.spotToSpot {
			return nil, &verdict{reason: RetainSpotToSpot, message: "the only cheaper replacement is a spot node, and spot-to-spot consolidation is off"}
		}
		if len(replacement.InstanceTypes) < minSpotToSpotTypes {
			return nil, &verdict{reason: RetainSpotToSpot, message: fmt.Sprintf("a spot-to-spot replacement needs %d cheaper spot types to choose from; %d fit",
				minSpotToSpotTypes, len(replacement.InstanceTypes))}
		}
	}
	return replacement, nil
}

// pods is "1 pod" or "n pods".
func pods(n int) string {
	if n == 1 {
		return "1 pod"
	}
	return fmt.Sprintf("%d pods", n)
}

// unconsolidatable says why consolidation may not consider a node whatever its pods: its NodePool is static, has
// consolidation off, or the node saw pods arrive or leave within consolidateAfter. Nil if it may.
func (a *activity) unconsolidatable(cand *Candidate, now time.Time) *verdict {
	if isStatic(cand) {
		return &verdict{reason: RetainStatic, message: fmt.Sprintf("NodePool %s is static: its nodes are replaced, never consolidated", cand.NodePool.Name)}
	}
	if cand.NodePool.Spec.Disruption.ConsolidationOff() {
		return &verdict{reason: RetainConsolidationOff, message: fmt.Sprintf("NodePool %s has consolidation off (consolidateAfter: Never)", cand.NodePool.Name)}
	}
	if !a.quiet(cand, now) {
		return &verdict{reason: RetainConsolidateAfter, message: fmt.Sprintf("pods arrived on or left the node within NodePool %s's consolidateAfter (%s)",
			cand.NodePool.Name, cand.NodePool.Spec.Disruption.ConsolidateAfter.Duration)}
	}
	return nil
}
