/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package disruption

import (
	"context"
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
)

// Errors of Interrupt for a voluntary request that cannot go ahead now.
var (
	ErrBlocked = errors.New("voluntary disruption is blocked on the node")
	ErrBudget  = errors.New("the NodePool's disruption budget allows no more disruption now")
)

// InterruptRequest asks for one NodeClaim to be replaced and drained because its instance is going away.
type InterruptRequest struct {
	// NodeClaim to remove.
	NodeClaim string
	// Reason recorded on the NodeClaim and in events and metrics (e.g. SpotInterrupted).
	Reason string
	// Forceful requests are not bounded by budgets or do-not-disrupt (the instance goes anyway); the others are.
	Forceful bool
	// ReplacementWait is how long to wait for the replacements to be ready before draining (zero: drain at once).
	ReplacementWait time.Duration
}

// Interrupt launches replacements for a NodeClaim's pods, waits for them at most ReplacementWait, and deletes the
// NodeClaim (termination drains the node). It returns once the drain has started. A NodeClaim already being
// removed is left to that removal.
func (c *Controller) Interrupt(ctx context.Context, req InterruptRequest) error {
	started := c.opts.Clock.Now()
	c.waitInitialized(ctx, req.NodeClaim, min(time.Minute, max(req.ReplacementWait, 10*time.Second)))
	if req.ReplacementWait > 0 {
		req.ReplacementWait = max(0, req.ReplacementWait-c.opts.Clock.Since(started))
	}
	v, err := c.view(ctx)
	if err != nil {
		return err
	}
	var cand *Candidate
	for _, cd := range v.candidates {
		if cd.NodeClaim.Name == req.NodeClaim {
			cand = cd
			break
		}
	}
	if cand == nil {
		return c.interruptNonCandidate(ctx, req)
	}
	if !req.Forceful {
		if cand.BlockedBecause != "" {
			return fmt.Errorf("%w: %s", ErrBlocked, cand.BlockedBecause)
		}
		if cand.evictionBlocked != "" {
			return fmt.Errorf("%w: %s", ErrBlocked, cand.evictionBlocked)
		}
		if !newBudgets(ctx, v, "").take(cand) {
			return ErrBudget
		}
	}
	cmd := &Command{Method: MethodInterruption, Reason: stevedorev1.DisruptionReason(req.Reason), Forceful: req.Forceful,
		Candidates: []*Candidate{cand}, ReplacementWait: &req.ReplacementWait, Evict: true}
	if err := c.planReplacements(ctx, cmd); err != nil {
		// The drain goes on without replacements: evicted pods are provisioned for as they go Pending.
		klog.FromContext(ctx).Error(err, "Planning replacements for an interrupted node failed", "nodeclaim", req.NodeClaim)
	}
	return c.execute(ctx, cmd)
}

// interruptNonCandidate removes a NodeClaim that is not a disruption candidate: not yet initialized (nothing to
// move; a forceful request deletes it) or already being removed (nothing to do).
func (c *Controller) interruptNonCandidate(ctx context.Context, req InterruptRequest) error {
	claim, err := c.opts.NodeClaims.Get(req.NodeClaim)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if claim.DeletionTimestamp != nil {
		return nil
	}
	if !req.Forceful {
		return fmt.Errorf("%w: the node is not initialized", ErrBlocked)
	}
	klog.FromContext(ctx).Info("Deleting an interrupted NodeClaim that has no pods to move", "nodeclaim", req.NodeClaim, "reason", req.Reason)
	err = c.opts.Stevedore.StevedoreV1().NodeClaims().Delete(ctx, req.NodeClaim, metav1.DeleteOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// planReplacements plans new nodes for the pods of the command's candidates that fit on no other node, on a model
// of its own (the pass's model belongs to the disruption loop).
func (c *Controller) planReplacements(ctx context.Context, cmd *Command) error {
	r, err := c.removals.simulateFresh(ctx, cmd.Candidates)
	if err != nil {
		return err
	}
	cmd.Replacements, cmd.Pods = r.Plan.NewNodes, len(r.Pods)
	return nil
}

// waitInitialized gives a NodeClaim whose node is coming up (launched, not yet initialized) up to limit to
// initialize, so that a notice arriving just after a launch moves its pods like any other's.
func (c *Controller) waitInitialized(ctx context.Context, name string, limit time.Duration) {
	_ = wait.PollUntilContextTimeout(ctx, time.Second, limit, true, func(context.Context) (bool, error) {
		claim, err := c.opts.NodeClaims.Get(name)
		if err != nil || claim.DeletionTimestamp != nil || claim.Status.InstanceID == "" || claim.IsInitialized() {
			return true, nil
		}
		return false, nil
	})
}
