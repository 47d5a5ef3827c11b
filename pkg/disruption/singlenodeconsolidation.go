/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package disruption

import (
	"context"
	"fmt"
)

// singleNodeConsolidation deletes one node whose pods fit elsewhere, or replaces it by a cheaper type.
type singleNodeConsolidation struct{ *consolidation }

func (*singleNodeConsolidation) Name() string { return MethodSingleNode }

// Find removes or replaces one node: of the nodes cheapest to disrupt that consolidate, the one
// that saves the most (among equal disruption costs, a larger saving; a costlier disruption is never taken for a
// larger saving). Every node whose NodePool's budget has room for one more is tried, not only as many as the
// budget has room for (with a budget of one, a first node that cannot consolidate would otherwise hold every
// other node back). Each node tried and left gets the verdict of why.
func (m *singleNodeConsolidation) Find(ctx context.Context, v *clusterView) (*Command, error) {
	return m.find(ctx, v, false)
}

// find is Find; exhaustive goes on past the command found to give every other node a
// verdict (the dry run).
func (m *singleNodeConsolidation) find(ctx context.Context, v *clusterView, exhaustive bool) (*Command, error) {
	cands, _ := m.consolidationCandidates(ctx, v, len(v.candidates), true)
	var best *Command
	for _, cand := range cands {
		if best != nil && !exhaustive && cand.EvictionCost > best.Candidates[0].EvictionCost+savingsEpsilon {
			break
		}
		if why := bestCaseScore(v, cand); why != nil {
			v.leave(cand, why)
			continue
		}
		cmd, why, err := m.consolidate(ctx, v, []*Candidate{cand})
		if err != nil {
			return nil, err
		}
		if cmd == nil {
			v.leave(cand, why)
			continue
		}
		switch {
		case best == nil:
			best = cmd
		case cand.EvictionCost <= best.Candidates[0].EvictionCost+savingsEpsilon && cmd.Savings() > best.Savings()+savingsEpsilon:
			v.leave(best.Candidates[0], dominated(best, cmd))
			best = cmd
		default:
			v.leave(cand, dominated(cmd, best))
		}
	}
	return best, nil
}

// dominated is the verdict of a node whose move another move beats: it saves as much or more for no costlier a
// disruption, or is cheaper to disrupt.
func dominated(lost, won *Command) *verdict {
	return &verdict{reason: RetainOtherMove, message: fmt.Sprintf("this pass takes %s instead: it saves $%.4f/h moving %s, this node $%.4f/h moving %s",
		won.String(), won.Savings(), pods(won.Pods), lost.Savings(), pods(lost.Pods))}
}
