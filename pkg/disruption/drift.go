/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package disruption

import (
	"context"
	"slices"
	"time"

	"k8s.io/klog/v2"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/cloud"
	"github.com/stevedore-dev/stevedore/pkg/scheduling"
	"github.com/stevedore-dev/stevedore/pkg/solver"
)

// drift replaces nodes whose NodePool or node class changed under them.
type drift struct {
	removals *removals
	cloud    cloud.Provider
	static   *staticReplacement
	w        *claimWriter
	// dryRun: the Drifted condition is not written.
	dryRun bool
}

func (*drift) Name() string                          { return MethodDrift }
func (*drift) Validated() bool                       { return false }
func (*drift) StillHolds(*Candidate, time.Time) bool { return true }
func (*drift) Resimulate() bool                      { return false }

// Find replaces nodes that no longer match their NodePool or node class, within budgets.
func (m *drift) Find(ctx context.Context, v *clusterView) (*Command, error) {
	b := newBudgets(ctx, v, stevedorev1.DisruptionReasonDrifted)
	var drifted []*Candidate
	for _, cand := range v.candidates {
		if cand.BlockedBecause != "" {
			continue
		}
		why, err := m.reason(ctx, cand)
		if err != nil {
			klog.FromContext(ctx).V(2).Info("Drift check failed", "node", cand.Node.Name, "err", err)
			continue
		}
		if why == "" {
			continue
		}
		m.mark(ctx, cand, why)
		if b.take(cand) {
			drifted = append(drifted, cand)
		}
	}
	var static []*Candidate
	drifted = slices.DeleteFunc(drifted, func(cand *Candidate) bool {
		if isStatic(cand) {
			static = append(static, cand)
			return true
		}
		return false
	})
	if len(drifted) == 0 {
		return m.static.replace(ctx, v, static, stevedorev1.DisruptionReasonDrifted)
	}
	// All at once if their pods fit; else one at a time, the first whose pods fit.
	if r, err := m.removals.simulate(ctx, drifted); err == nil && len(r.Plan.Unschedulable) == 0 {
		return &Command{Reason: stevedorev1.DisruptionReasonDrifted, Candidates: drifted, Replacements: r.Plan.NewNodes, Pods: len(r.Pods),
			Placements: placements(r)}, nil
	}
	for _, cand := range drifted {
		r, err := m.removals.simulate(ctx, []*Candidate{cand})
		if err != nil {
			return nil, err
		}
		if len(r.Plan.Unschedulable) == 0 {
			return &Command{Reason: stevedorev1.DisruptionReasonDrifted, Candidates: []*Candidate{cand}, Replacements: r.Plan.NewNodes, Pods: len(r.Pods),
				Placements: placements(r)}, nil
		}
		klog.FromContext(ctx).V(1).Info("Drifted node cannot be replaced yet: some of its pods fit no node", "node", cand.Node.Name,
			"pods", len(r.Plan.Unschedulable))
	}
	return nil, nil
}

// reason says why a node no longer matches what its NodePool would launch now ("" if it does).
func (m *drift) reason(ctx context.Context, cand *Candidate) (string, error) {
	if h := cand.NodeClaim.Annotations[stevedorev1.AnnotationNodePoolHash]; h != "" && h != cand.NodePool.TemplateHash() &&
		cand.NodeClaim.Annotations[stevedorev1.AnnotationNodePoolHashVersion] == stevedorev1.NodePoolHashVersion {
		return "NodePoolDrift", nil
	}
	reqs, err := solver.NodePoolRequirements(cand.NodePool)
	if err != nil {
		return "", err
	}
	if err := reqs.Compatible(scheduling.FromLabels(cand.Node.Labels), nodePoolDefined); err != nil {
		return "RequirementsDrift", nil
	}
	if m.cloud == nil {
		return "", nil
	}
	return m.cloud.IsDrifted(ctx, cand.NodeClaim)
}

// nodePoolDefined: only a label whose value conflicts with a requirement is drift; a label the node does not carry
// is not (a false drift would replace nodes forever; template labels are covered by the NodePool hash).
func nodePoolDefined(string) bool { return true }

// mark records drift on the NodeClaim (condition Drifted) the first time it is seen.
func (m *drift) mark(ctx context.Context, cand *Candidate, why string) {
	if m.dryRun {
		return
	}
	for _, cond := range cand.NodeClaim.Status.Conditions {
		if cond.Type == stevedorev1.ConditionDrifted && cond.Status == "True" {
			return
		}
	}
	if err := m.w.setCondition(ctx, cand.NodeClaim.Name, stevedorev1.ConditionDrifted, "True", why, "the node no longer matches its NodePool or node class: "+why); err != nil {
		klog.FromContext(ctx).V(2).Info("Recording drift failed", "nodeclaim", cand.NodeClaim.Name, "err", err)
	}
}
