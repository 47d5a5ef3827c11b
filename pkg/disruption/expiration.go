/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package disruption

import (
	"context"
	"time"
)

// expiration replaces every node past its NodeClaim's expireAfter (forceful: not budgeted, not validated).
type expiration struct {
	removals *removals
	static   *staticReplacement
}

func (*expiration) Name() string                          { return MethodExpiration }
func (*expiration) Validated() bool                       { return false }
func (*expiration) StillHolds(*Candidate, time.Time) bool { return true }
func (*expiration) Resimulate() bool                      { return false }

// Find replaces every node past its NodeClaim's expireAfter, budgets and do-not-disrupt notwithstanding.
// A static NodePool's expired nodes are replaced one at a time within its budgets instead (staticReplacement).
func (m *expiration) Find(ctx context.Context, v *clusterView) (*Command, error) {
	var expired, static []*Candidate
	for _, cand := range v.candidates {
		after := cand.NodeClaim.Spec.ExpireAfter
		if after == nil || after.IsNever() {
			continue
		}
		if v.now.Before(cand.NodeClaim.CreationTimestamp.Add(*after.Duration)) {
			continue
		}
		if isStatic(cand) {
			static = append(static, cand)
		} else {
			expired = append(expired, cand)
		}
	}
	if len(expired) == 0 {
		return m.static.replace(ctx, v, static, ReasonExpired)
	}
	cmd := &Command{Reason: ReasonExpired, Forceful: true, Candidates: expired}
	// Replacements are best effort: pods that fit nowhere are provisioned again when they are evicted.
	if r, err := m.removals.simulate(ctx, expired); err == nil && len(r.Plan.Unschedulable) == 0 {
		cmd.Replacements, cmd.Pods, cmd.Placements = r.Plan.NewNodes, len(r.Pods), placements(r)
	}
	return cmd, nil
}
