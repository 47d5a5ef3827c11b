/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package provision

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/cloud"
	"github.com/stevedore-dev/stevedore/pkg/metrics"
	"github.com/stevedore-dev/stevedore/pkg/solver"
	"github.com/stevedore-dev/stevedore/pkg/spotrisk"
)

// Events on a NodePool about its fallback to on-demand (package spotrisk).
const (
	ReasonSpotFallback        = "SpotFallback"
	ReasonSpotRestored        = "SpotRestored"
	ReasonInvalidSpotFallback = "InvalidSpotFallback"
)

// withSpotRisk returns a NodePool and its instance types as a solve sees them after recent Spot interruptions: the
// Spot offerings of the pools interrupted lately priced higher, and, while the NodePool falls back to on-demand
// (its stevedore.dev/spot-fallback policy), the NodePool without Spot. A NodePool that allows no other capacity
// type stays on Spot.
func (p *planner) withSpotRisk(ctx context.Context, np *stevedorev1.NodePool, its []*cloud.InstanceType) (*stevedorev1.NodePool, []*cloud.InstanceType) {
	history := p.opts.SpotRisk
	if history == nil {
		return np, its
	}
	its = history.Apply(its)
	policy, ok, err := spotrisk.PolicyOf(np)
	if p.invalidFallbackChanged(np.Name, err) {
		klog.FromContext(ctx).Info("Spot fallback policy ignored", "nodepool", np.Name, "err", err)
		p.nodePoolEvent(np, corev1.EventTypeWarning, ReasonInvalidSpotFallback, "%v", err)
	}
	if !ok {
		if history.Forget(np.Name) {
			metrics.NodePoolSpotFallback.WithLabelValues(np.Name).Set(0)
		}
		return np, its
	}
	f := history.FallbackOf(np.Name, policy)
	onDemand := allowsBesidesSpot(np)
	if f.Changed {
		switch {
		case f.Active && onDemand:
			klog.FromContext(ctx).Info("NodePool falls back to on-demand", "nodepool", np.Name, "interruptions", f.Interruptions, "until", f.Until)
			metrics.NodePoolSpotFallback.WithLabelValues(np.Name).Set(1)
			metrics.NodePoolSpotFallbacks.WithLabelValues(np.Name).Inc()
			p.nodePoolEvent(np, corev1.EventTypeWarning, ReasonSpotFallback,
				"%d Spot interruptions within %s: new nodes are on-demand until %s passes without another (%s %q)",
				f.Interruptions, policy.Window, policy.Window, spotrisk.Annotation, np.Annotations[spotrisk.Annotation])
		case f.Active:
			p.nodePoolEvent(np, corev1.EventTypeWarning, ReasonSpotFallback,
				"%d Spot interruptions within %s, but the NodePool allows no capacity type other than spot: it stays on Spot",
				f.Interruptions, policy.Window)
		default:
			klog.FromContext(ctx).Info("NodePool goes back to Spot", "nodepool", np.Name)
			metrics.NodePoolSpotFallback.WithLabelValues(np.Name).Set(0)
			p.nodePoolEvent(np, corev1.EventTypeNormal, ReasonSpotRestored, "no Spot interruption within %s: new nodes may be Spot again", policy.Window)
		}
	}
	if !f.Active || !onDemand {
		return np, its
	}
	narrowed := np.DeepCopy()
	narrowed.Spec.Template.Spec.Requirements = append(narrowed.Spec.Template.Spec.Requirements, stevedorev1.NodeSelectorRequirementWithMinValues{
		Key: stevedorev1.LabelCapacityType, Operator: stevedorev1.NodeSelectorOperator(corev1.NodeSelectorOpNotIn), Values: []string{stevedorev1.CapacityTypeSpot}})
	return narrowed, its
}

// invalidFallbackChanged records whether a NodePool's spot fallback value is invalid (err), and reports whether
// it is invalid and was not so, or not with this value, the last time it was read.
func (p *planner) invalidFallbackChanged(nodePool string, err error) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err == nil {
		delete(p.invalidFallbacks, nodePool)
		return false
	}
	if p.invalidFallbacks[nodePool] == err.Error() {
		return false
	}
	if p.invalidFallbacks == nil {
		p.invalidFallbacks = map[string]string{}
	}
	p.invalidFallbacks[nodePool] = err.Error()
	return true
}

// allowsBesidesSpot reports whether a NodePool allows a capacity type other than spot.
func allowsBesidesSpot(np *stevedorev1.NodePool) bool {
	reqs, err := solver.NodePoolRequirements(np)
	if err != nil {
		return false
	}
	r := reqs.Get(stevedorev1.LabelCapacityType)
	return r == nil || r.Has(stevedorev1.CapacityTypeOnDemand) || r.Has(stevedorev1.CapacityTypeReserved)
}

// nodePoolEvent records an event on a NodePool.
func (p *planner) nodePoolEvent(np *stevedorev1.NodePool, eventType, reason, note string, args ...any) {
	if p.opts.Recorder == nil {
		return
	}
	p.opts.Recorder.Eventf(np, nil, eventType, reason, "Provision", note, args...)
}
