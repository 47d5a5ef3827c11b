/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package provision

import (
	"context"
	"maps"
	"sort"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/klog/v2"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/metrics"
	"github.com/stevedore-dev/stevedore/pkg/solver"
	"github.com/stevedore-dev/stevedore/pkg/state"
)

// quotas returns the CapacityQuotas with what they still allow given the nodes they select now (claims: the live
// NodeClaims), by name. A quota whose selector does not parse is left out (its status says why).
func (p *planner) quotas(ctx context.Context, claims []*stevedorev1.NodeClaim) ([]*solver.Quota, error) {
	if p.opts.Quotas == nil {
		return nil, nil
	}
	list, err := p.opts.Quotas.List(labels.Everything())
	if err != nil {
		return nil, err
	}
	sort.Slice(list, func(i, j int) bool { return list[i].Name < list[j].Name })
	var nodes []*corev1.Node
	if p.opts.Nodes != nil {
		if nodes, err = p.opts.Nodes.List(labels.Everything()); err != nil {
			return nil, err
		}
	}
	out := make([]*solver.Quota, 0, len(list))
	for _, cq := range list {
		sel, err := state.QuotaSelector(cq)
		if err != nil {
			klog.FromContext(ctx).Error(err, "CapacityQuota left out")
			continue
		}
		out = append(out, solver.NewQuota(cq, sel, state.QuotaUsage(cq, sel, claims, nodes, p.PlannedCapacity)))
	}
	return out, nil
}

// noteQuotas records the quotas a plan found reached (QuotasReached) and counts them.
func (p *planner) noteQuotas(plan *solver.Plan) {
	if len(plan.QuotasReached) == 0 {
		return
	}
	now := p.opts.Clock.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.quotasReached == nil {
		p.quotasReached = map[string]state.QuotaReached{}
	}
	for name, resource := range plan.QuotasReached {
		p.quotasReached[name] = state.QuotaReached{At: now, Resource: resource}
		metrics.QuotaLimitedLaunches.WithLabelValues(name, string(resource)).Inc()
	}
}

// QuotasReached returns, by quota name, when each CapacityQuota last kept a node from launching.
func (p *planner) QuotasReached() map[string]state.QuotaReached {
	p.mu.Lock()
	defer p.mu.Unlock()
	return maps.Clone(p.quotasReached)
}

// PlannedCapacity is the capacity of the instance type a NodeClaim not launched yet was planned on (the first it
// lists), nil when the type is not known here.
func (p *planner) PlannedCapacity(claim *stevedorev1.NodeClaim) corev1.ResourceList {
	for _, r := range claim.Spec.Requirements {
		if r.Key == corev1.LabelInstanceTypeStable && string(r.Operator) == string(corev1.NodeSelectorOpIn) && len(r.Values) > 0 {
			if it := p.known()[r.Values[0]]; it != nil {
				return it.Capacity
			}
			return nil
		}
	}
	return nil
}
