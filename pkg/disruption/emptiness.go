/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package disruption

import (
	"context"
	"time"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/podutil"
)

// emptiness deletes nodes running nothing but DaemonSet pods past consolidateAfter.
type emptiness struct {
	activity    *activity
	removals    *removals
	provisioner Provisioner
}

func (*emptiness) Name() string     { return MethodEmptiness }
func (*emptiness) Validated() bool  { return true }
func (*emptiness) Resimulate() bool { return false }

// StillHolds: no pod arrived on the node, and it has been quiet for consolidateAfter.
func (m *emptiness) StillHolds(cand *Candidate, now time.Time) bool {
	return cand.Empty() && m.activity.quiet(cand, now)
}

// Find deletes nodes that run no reschedulable pod, within budgets.
func (m *emptiness) Find(ctx context.Context, v *clusterView) (*Command, error) {
	b := newBudgets(ctx, v, stevedorev1.DisruptionReasonEmpty)
	cmd := &Command{Reason: stevedorev1.DisruptionReasonEmpty}
	for _, cand := range v.candidates {
		if !cand.Empty() || cand.BlockedBecause != "" {
			continue
		}
		if why := m.activity.unconsolidatable(cand, v.now); why != nil {
			v.leave(cand, why)
			continue
		}
		if keeps, err := m.keepsRoom(ctx, cand); err != nil || keeps {
			if keeps {
				v.leave(cand, &verdict{reason: RetainWarmCapacity, message: "the node keeps room for warm capacity or for pods waiting for a place"})
			}
			continue
		}
		if !b.take(cand) {
			v.leave(cand, budgetVerdict(cand, stevedorev1.DisruptionReasonEmpty))
			continue
		}
		cmd.Candidates = append(cmd.Candidates, cand)
	}
	if len(cmd.Candidates) == 0 {
		return nil, nil
	}
	return cmd, nil
}

// keepsRoom reports whether an empty node keeps room in the cluster model: for warm capacity (capacity buffers),
// or for pods waiting for a place, that no other node has room for.
func (m *emptiness) keepsRoom(ctx context.Context, cand *Candidate) (bool, error) {
	if !m.provisioner.HasWarmPods() {
		return false, nil
	}
	model, err := m.removals.cluster(ctx)
	if err != nil {
		return false, err
	}
	ni := model.Snapshot.NodeInfo(cand.Node.Name)
	if ni == nil {
		return false, nil
	}
	for _, pi := range ni.GetPods() {
		if podutil.Reschedulable(pi.GetPod()) {
			return true, nil
		}
	}
	return false, nil
}
