/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package disruption

import (
	"context"
	"slices"
)

// multiNodeConsolidation removes the largest set of underutilized nodes whose pods fit elsewhere (plus at most
// one cheaper new node).
type multiNodeConsolidation struct {
	*consolidation
	// window is how many candidates one pass considers (one simulation each; maxMultiNodeCandidates if 0).
	window int
	// start is where the next pass's window begins in the candidates, cheapest to disrupt first: at 0 after a pass
	// that found a move, one window further after a pass that found none, so that every candidate of a large
	// cluster takes part in turn. Passes run one at a time.
	start int
}

func (*multiNodeConsolidation) Name() string { return MethodMultiNode }

// Find removes as many nodes as it can at once, replacing them by at most one cheaper node, as
// long as each node added to the set makes it save more. It considers one window of the candidates (the
// cheapest to disrupt, or the next window after a pass that found nothing: every candidate takes part in turn).
// It grows the set one candidate at a time, cheapest to disrupt first, keeping a candidate only if the set still
// consolidates with it: a node whose pods fit nowhere is skipped instead of sinking every set that includes it
// (a binary search on prefixes of the candidate list stops at the first such node). Budgets bound the set, not
// the candidates tried: a node that does not join the set takes no room in its NodePool's budget, so nodes that
// cannot consolidate at the head of the list do not hide those further down that can. The set found is then
// pruned: a node whose leaving the set saves as much is left out (a smaller move dominates the larger).
func (m *multiNodeConsolidation) Find(ctx context.Context, v *clusterView) (*Command, error) {
	all, b := m.consolidationCandidates(ctx, v, -1, false)
	cands := m.windowOf(all)
	cmd, err := m.find(ctx, v, cands, b)
	if err == nil {
		m.advance(cmd != nil, len(all))
	}
	return cmd, err
}

// windowOf is the candidates this pass considers: the window at start (the cheapest to disrupt when start is past
// the end).
func (m *multiNodeConsolidation) windowOf(all []*Candidate) []*Candidate {
	size := m.window
	if size <= 0 {
		size = maxMultiNodeCandidates
	}
	if m.start >= len(all) {
		m.start = 0
	}
	return all[m.start:min(m.start+size, len(all))]
}

// advance moves the window on after a pass that found nothing, and back to the cheapest after one that found a
// move (the cluster changed).
func (m *multiNodeConsolidation) advance(found bool, candidates int) {
	size := m.window
	if size <= 0 {
		size = maxMultiNodeCandidates
	}
	if found || m.start+size >= candidates {
		m.start = 0
		return
	}
	m.start += size
}

// find is Find over one window of candidates.
func (m *multiNodeConsolidation) find(ctx context.Context, v *clusterView, cands []*Candidate, b *budgets) (*Command, error) {
	if len(cands) < 2 {
		return nil, nil
	}
	var set []*Candidate
	var best *Command
	for _, cand := range cands {
		if b.left[cand.NodePool.Name] <= 0 {
			continue // the set already holds as many of this NodePool's nodes as its budget allows
		}
		trial := append(set[:len(set):len(set)], cand)
		cmd, _, err := m.consolidate(ctx, v, trial)
		if err != nil {
			return nil, err
		}
		// a larger set only if it saves more: one that saves as much moves more pods (a smaller move dominates it)
		if cmd != nil && (best == nil || cmd.Savings() > best.Savings()+savingsEpsilon) {
			set, best = trial, cmd
			b.take(cand)
		}
	}
	if len(set) < 2 {
		return nil, nil // one node is single-node consolidation's
	}
	return m.prune(ctx, v, best)
}

// prune drops from a multi-node move each node without which the move saves at least as much, trying the nodes
// costliest to disrupt first. The nodes joined the set in growing order of disruption cost, each making it save
// more than the set before it; a node that joined early may still add nothing once later nodes are in (its pods
// now force a larger replacement, costing what its own price saved). Only a move with a replacement can be
// pruned.
func (m *multiNodeConsolidation) prune(ctx context.Context, v *clusterView, cmd *Command) (*Command, error) {
	if len(cmd.Replacements) == 0 && !slices.ContainsFunc(cmd.Candidates, func(c *Candidate) bool { return c.Price <= savingsEpsilon }) {
		// a deletion saves its nodes' prices: without one of them it saves less (its pods fit on what is left
		// as before, and on that node too), so no node is dropped; at 100 nodes that is a hundred simulations
		return cmd, nil
	}
	for i := len(cmd.Candidates) - 1; i >= 0 && len(cmd.Candidates) > 1; i-- {
		rest := slices.Delete(slices.Clone(cmd.Candidates), i, i+1)
		smaller, _, err := m.consolidate(ctx, v, rest)
		if err != nil {
			return nil, err
		}
		if smaller != nil && smaller.Savings() >= cmd.Savings()-savingsEpsilon {
			cmd = smaller
		}
	}
	return cmd, nil
}
