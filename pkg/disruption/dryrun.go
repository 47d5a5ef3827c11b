/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package disruption

import (
	"context"
)

// DryRunResult is what one disruption pass would do over the cluster as the listers show it, and why it leaves
// every other node.
type DryRunResult struct {
	// Command is the pass's command (nil: nothing to do).
	Command *Command
	// Nodes are the nodes Stevedore launched that the pass saw, in the pass's order (cheapest to disrupt first).
	Nodes []DryRunNode
	// CostBefore and CostAfter are the hourly price of those nodes now and after the command.
	CostBefore, CostAfter float64
}

// DryRunNode is one node of a dry run: taken by the command, or left with the reason.
type DryRunNode struct {
	Candidate *Candidate
	// Taken: the command deletes or replaces the node.
	Taken bool
	// Reason and Message say why the pass leaves the node (empty when taken).
	Reason  RetainReason
	Message string
}

// DryRun runs one pass without acting: the methods in the live loop's order over the same view, the first
// command found, and then every node consolidation could consider weighed on its own, so that each node left
// has its reason. It neither waits for the validation delay nor writes anything (Options.DryRun should be set so
// that drift is not recorded either).
func (c *Controller) DryRun(ctx context.Context) (*DryRunResult, error) {
	c.removals.reset()
	v, err := c.view(ctx)
	if err != nil {
		return nil, err
	}
	cmd, _, err := c.find(ctx, v)
	if err != nil {
		return nil, err
	}
	taken := cmd.nodes()
	// single-node consolidation weighs every node once more, past the command, for the verdicts; the command's
	// own verdicts are kept
	if _, err := c.single.find(ctx, v, true); err != nil {
		return nil, err
	}
	out := &DryRunResult{Command: cmd}
	for _, cand := range v.candidates {
		out.CostBefore += cand.Price
		n := DryRunNode{Candidate: cand, Taken: taken[cand.Node.Name]}
		if !n.Taken {
			if why := v.verdicts[cand.Node.Name]; why != nil {
				n.Reason, n.Message = why.reason, why.message
			} else {
				n.Reason, n.Message = RetainOtherMove, "the pass carries out another command first"
			}
		}
		out.Nodes = append(out.Nodes, n)
	}
	out.CostAfter = out.CostBefore
	if cmd != nil {
		out.CostAfter -= cmd.Savings()
	}
	return out, nil
}
