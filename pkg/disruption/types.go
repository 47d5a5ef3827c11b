/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package disruption

import (
	"context"
	"time"
)

// Method is one way of finding nodes to disrupt; a pass tries the methods in order and carries out the first
// command one finds.
type Method interface {
	// Name is the method's name in logs, events and metrics.
	Name() string
	// Find returns one command for the cluster as v shows it, or nil.
	Find(ctx context.Context, v *clusterView) (*Command, error)
	// Validated reports whether the command waits ValidationDelay and is checked again before it is carried out
	// (pods move in the meantime).
	Validated() bool
	// StillHolds reports, at validation, whether a candidate of the command still qualifies.
	StillHolds(cand *Candidate, now time.Time) bool
	// Resimulate reports whether validation must also find the command's pods a place again.
	Resimulate() bool
}

// methods returns the methods of a pass, in order: repair when enabled, expiration always, the voluntary ones
// when enabled.
func (c *Controller) methods() []Method {
	var out []Method
	if c.opts.Repair != nil {
		out = append(out, repair{c})
	}
	out = append(out, expiration{c})
	if c.opts.Voluntary {
		out = append(out, emptiness{c}, drift{c}, multiNodeConsolidation{c}, singleNodeConsolidation{c})
	}
	return out
}

// repair replaces (or first reboots) nodes unhealthy past their toleration (forceful: not budgeted, not
// validated; bounded by RepairOptions.MaxUnhealthyPercent).
type repair struct{ c *Controller }

func (m repair) Name() string { return MethodRepair }
func (m repair) Find(ctx context.Context, v *clusterView) (*Command, error) {
	return m.c.repair(ctx, v)
}
func (repair) Validated() bool                       { return false }
func (repair) StillHolds(*Candidate, time.Time) bool { return true }
func (repair) Resimulate() bool                      { return false }

// expiration replaces every node past its NodeClaim's expireAfter (forceful: not budgeted, not validated).
type expiration struct{ c *Controller }

func (m expiration) Name() string { return MethodExpiration }
func (m expiration) Find(ctx context.Context, v *clusterView) (*Command, error) {
	return m.c.expiration(ctx, v)
}
func (expiration) Validated() bool                       { return false }
func (expiration) StillHolds(*Candidate, time.Time) bool { return true }
func (expiration) Resimulate() bool                      { return false }

// emptiness deletes nodes running nothing but DaemonSet pods past consolidateAfter.
type emptiness struct{ c *Controller }

func (m emptiness) Name() string { return MethodEmptiness }
func (m emptiness) Find(ctx context.Context, v *clusterView) (*Command, error) {
	return m.c.emptiness(ctx, v)
}
func (emptiness) Validated() bool { return true }

// StillHolds: no pod arrived on the node, and it has been quiet for consolidateAfter.
func (m emptiness) StillHolds(cand *Candidate, now time.Time) bool {
	return cand.Empty() && m.c.consolidatable(cand, now)
}
func (emptiness) Resimulate() bool { return false }

// drift replaces nodes whose NodePool or node class changed under them.
type drift struct{ c *Controller }

func (m drift) Name() string { return MethodDrift }
func (m drift) Find(ctx context.Context, v *clusterView) (*Command, error) {
	return m.c.drift(ctx, v)
}
func (drift) Validated() bool                       { return false }
func (drift) StillHolds(*Candidate, time.Time) bool { return true }
func (drift) Resimulate() bool                      { return false }

// multiNodeConsolidation removes the largest set of underutilized nodes whose pods fit elsewhere (plus at most
// one cheaper new node).
type multiNodeConsolidation struct{ c *Controller }

func (m multiNodeConsolidation) Name() string { return MethodMultiNode }
func (m multiNodeConsolidation) Find(ctx context.Context, v *clusterView) (*Command, error) {
	return m.c.multiNodeConsolidation(ctx, v)
}
func (multiNodeConsolidation) Validated() bool { return true }
func (m multiNodeConsolidation) StillHolds(cand *Candidate, now time.Time) bool {
	return m.c.consolidatable(cand, now)
}
func (multiNodeConsolidation) Resimulate() bool { return true }

// singleNodeConsolidation deletes one node whose pods fit elsewhere, or replaces it by a cheaper type.
type singleNodeConsolidation struct{ c *Controller }

func (m singleNodeConsolidation) Name() string { return MethodSingleNode }
func (m singleNodeConsolidation) Find(ctx context.Context, v *clusterView) (*Command, error) {
	return m.c.singleNodeConsolidation(ctx, v)
}
func (singleNodeConsolidation) Validated() bool { return true }
func (m singleNodeConsolidation) StillHolds(cand *Candidate, now time.Time) bool {
	return m.c.consolidatable(cand, now)
}
func (singleNodeConsolidation) Resimulate() bool { return true }
