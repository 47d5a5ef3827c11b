/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package disruption

import (
	"context"

	"k8s.io/klog/v2"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
)

// staticReplacement replaces a static NodePool's expired or drifted nodes one at a time.
type staticReplacement struct {
	provisioner Provisioner
}

// replace replaces the first of a static NodePool's candidates (drifted or expired) whose NodePool has
// no node being disrupted and whose budget allows one: one node at a time, by a new node of the same NodePool
// when limits.nodes leaves room for it (else the node goes first and the NodePool is refilled after). Its pods
// reschedule wherever they fit.
func (s *staticReplacement) replace(ctx context.Context, v *clusterView, cands []*Candidate, reason stevedorev1.DisruptionReason) (*Command, error) {
	if len(cands) == 0 {
		return nil, nil
	}
	b := newBudgets(ctx, v, reason)
	for _, cand := range cands {
		if v.pools[cand.NodePool.Name].disrupting > 0 || !b.take(cand) {
			continue
		}
		replacements, err := s.provisioner.PlanStaticNodes(ctx, cand.NodePool, 1, cand.Node.Name)
		if err != nil {
			klog.FromContext(ctx).V(1).Info("Static NodePool node goes before its replacement", "node", cand.Node.Name, "why", err.Error())
		}
		return &Command{Reason: reason, Candidates: []*Candidate{cand}, Replacements: replacements, Pods: len(cand.Pods)}, nil
	}
	return nil, nil
}
