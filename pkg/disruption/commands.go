/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package disruption

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/podutil"
	"github.com/stevedore-dev/stevedore/pkg/surge"
)

// AnnotationReplaces on a replacement NodeClaim names the nodes it replaces.
const AnnotationReplaces = "stevedore.dev/replaces"

// validate waits disruptionValidationDelay, reads the cluster again and checks the command still holds: the same nodes are
// still candidates (no pod arrived, nothing now blocks them, budgets still allow) and, for consolidation, removing
// them still saves money; the replacements are re-planned from the fresh view. It reports whether to go ahead.
func (c *Controller) validate(ctx context.Context, cmd *Command, m Method) (bool, error) {
	logger := klog.FromContext(ctx)
	select {
	case <-ctx.Done():
		return false, ctx.Err()
	case <-c.opts.Clock.After(c.opts.Args.DisruptionValidationDelay.Duration):
	}
	c.removals.reset()
	v, err := c.view(ctx)
	if err != nil {
		return false, err
	}
	fresh := map[string]*Candidate{}
	for _, cand := range v.candidates {
		fresh[cand.Node.Name] = cand
	}
	b := newBudgets(ctx, v, cmd.Reason)
	var cands []*Candidate
	for _, old := range cmd.Candidates {
		cand := fresh[old.Node.Name]
		switch {
		case cand == nil:
			logger.V(1).Info("Disruption command abandoned: the node is no longer a candidate", "method", cmd.Method, "node", old.Node.Name)
			return false, nil
		case cand.BlockedBecause != "":
			logger.V(1).Info("Disruption command abandoned", "method", cmd.Method, "node", old.Node.Name, "blocked", cand.BlockedBecause)
			return false, nil
		case !m.StillHolds(cand, v.now):
			logger.V(1).Info("Disruption command abandoned: pods arrived on or left the node", "method", cmd.Method, "node", old.Node.Name)
			return false, nil
		case !b.take(cand):
			logger.V(1).Info("Disruption command abandoned: the NodePool's budget no longer allows it", "method", cmd.Method, "node", old.Node.Name)
			return false, nil
		}
		cands = append(cands, cand)
	}
	cmd.Candidates = cands
	if !m.Resimulate() {
		return true, nil
	}
	cons, ok := m.(consolidator)
	if !ok {
		return false, fmt.Errorf("method %s resimulates but does not consolidate", m.Name())
	}
	again, why, err := cons.consolidate(ctx, v, cands)
	if err != nil || again == nil {
		if err == nil {
			logger.V(1).Info("Disruption command abandoned: it no longer holds", "method", cmd.Method, "nodes", sortedNames(cands), "why", why.message)
		}
		return false, err
	}
	cmd.Replacements, cmd.Pods, cmd.Scores, cmd.Placements = again.Replacements, again.Pods, again.Scores, again.Placements
	return true, nil
}

// execute carries out a command at once: begin, then finish (the interruption controller's commands, each in its
// own goroutine, use it).
func (c *Controller) execute(ctx context.Context, cmd *Command) error {
	s, err := c.begin(ctx, cmd)
	if err != nil {
		return err
	}
	return c.finish(ctx, s)
}

// startedCommand is a command whose nodes are marked and whose replacements are created.
type startedCommand struct {
	cmd *Command
	// created names the replacement NodeClaims created.
	created []string
	// wait is how long to wait for the replacements to be ready (0: not at all).
	wait time.Duration
	// short says a forceful command got fewer replacements than it asked for (it goes ahead anyway).
	short error
	// surge says pods of the command's nodes move by surging their owners before the nodes go (the command then
	// finishes in the background, as it waits for them).
	surge bool
}

// begin starts a command: taint the nodes so nothing new lands, and create the replacements. The command's nodes
// are held (queue.holds) from here until finish returns. When not all replacements could be created a voluntary
// command is rolled back (taints removed, replacements deleted) and its error returned.
func (c *Controller) begin(ctx context.Context, cmd *Command) (*startedCommand, error) {
	klog.FromContext(ctx).Info("Disrupting nodes", "method", cmd.Method, "reason", cmd.Reason, "action", cmd.Action(), "nodes", cmd.String(),
		"pods", cmd.Pods, "replacements", describeReplacements(cmd.Replacements), "hourlySavings", fmt.Sprintf("%.4f", cmd.Savings()),
		"evaluation", cmd.evaluated.Round(time.Microsecond), "moves", describeMoves(cmd))
	c.queue.hold(cmd)
	note := disruptingNote(cmd)
	for _, cand := range cmd.Candidates {
		if err := c.markDisrupting(ctx, cand, string(cmd.Reason)); err != nil {
			c.rollback(ctx, cmd, nil)
			c.queue.release(cmd)
			return nil, fmt.Errorf("marking %s for disruption: %w", cand.Node.Name, err)
		}
		c.w.event(cand, corev1.EventTypeNormal, ReasonDisrupting, note)
	}
	if !cmd.Evict && c.opts.Surge != nil {
		c.gitOpsEvents(cmd)
	}
	s := &startedCommand{cmd: cmd, surge: c.opts.Surge != nil && !cmd.Evict && anySurging(cmd)}
	if len(cmd.Replacements) == 0 {
		return s, nil
	}
	names := sortedNames(cmd.Candidates)
	claims := c.opts.Provisioner.CreateNodeClaims(ctx, cmd.Replacements, map[string]string{AnnotationReplaces: strings.Join(names, ",")})
	for _, cl := range claims {
		s.created = append(s.created, cl.Name)
	}
	c.activity.protect(s.created, c.opts.Clock.Now().Add(c.opts.Args.RegistrationTimeout.Duration+time.Minute))
	if len(claims) < len(cmd.Replacements) {
		err := fmt.Errorf("creating %d replacement NodeClaims: only %d created", len(cmd.Replacements), len(claims))
		if !cmd.Forceful {
			c.rollback(ctx, cmd, s.created)
			c.failed(cmd, err)
			c.queue.release(cmd)
			return nil, err
		}
		s.short = err
		return s, nil
	}
	s.wait = c.opts.Args.RegistrationTimeout.Duration
	if cmd.ReplacementWait != nil {
		s.wait = max(0, *cmd.ReplacementWait)
	}
	if s.wait == 0 {
		klog.FromContext(ctx).Info("Replacements launched; not waiting for them", "method", cmd.Method, "nodeclaims", s.created, "replacing", names)
	}
	return s, nil
}

// finish ends a started command: once its replacements are ready (or at once, when it does not wait for them),
// its NodeClaims are deleted (termination drains each node and terminates its instance). Replacements that are
// not ready in time roll a voluntary command back; a forceful one goes ahead without them.
func (c *Controller) finish(ctx context.Context, s *startedCommand) error {
	cmd := s.cmd
	defer c.queue.release(cmd)
	failure := s.short
	if failure == nil && s.wait > 0 {
		failure = c.awaitReplacements(ctx, s.created, s.wait)
		switch {
		case failure != nil && !cmd.Forceful:
			c.rollback(ctx, cmd, s.created)
			c.failed(cmd, failure)
			return failure
		case failure == nil:
			klog.FromContext(ctx).Info("Replacements ready", "method", cmd.Method, "nodeclaims", s.created, "replacing", sortedNames(cmd.Candidates))
			// keep them from being taken for empty nodes until the evicted pods arrive
			c.activity.protect(s.created, c.opts.Clock.Now().Add(2*time.Minute+c.opts.Args.DisruptionValidationDelay.Duration))
		}
	}
	if failure != nil {
		// A forceful command goes ahead: its replacements stay, the pods will need them.
		c.opts.Metrics.decision(cmd, "failed")
		klog.FromContext(ctx).Info("Replacements are not ready; the nodes go anyway", "method", cmd.Method, "err", failure)
	}
	if s.surge {
		targets := c.targets(cmd, s.created)
		c.queue.pin(targets) // the next passes keep the successors' room there
		if err := c.surge(ctx, cmd, targets); err != nil {
			c.rollback(ctx, cmd, s.created)
			c.failed(cmd, err)
			return err
		}
	}
	err := c.deleteClaims(ctx, cmd)
	c.opts.Metrics.decision(cmd, "succeeded")
	return err
}

// surge moves the pods of the command's nodes that can surge, make-before-break, and records on each node which
// moved. A pod whose surge fails is evicted by the drain, as any other; when a PodDisruptionBudget would refuse
// that eviction, a voluntary command is abandoned instead (surge returns why) and the node stays.
func (c *Controller) surge(ctx context.Context, cmd *Command, targets map[types.UID]string) error {
	var pods []*corev1.Pod
	modes := map[string]stevedorev1.Replacement{}
	for _, cand := range cmd.Candidates {
		for _, pod := range cand.Pods {
			cur, err := c.opts.Pods.Pods(pod.Namespace).Get(pod.Name)
			if err != nil || cur.UID != pod.UID || !podutil.Reschedulable(cur) {
				continue // gone meanwhile
			}
			pods = append(pods, cur)
			modes[podutil.Key(cur)] = cand.NodePool.Spec.Disruption.Replacement
		}
	}
	mode := func(p *corev1.Pod) stevedorev1.Replacement { return modes[podutil.Key(p)] }
	// an owner that started rolling out or scaling since the pass chose the nodes: a voluntary command waits for it
	// (it is rolled back, and the nodes tried again later) rather than evict its pods
	if waiting := c.opts.Surge.Waiting(pods, mode); len(waiting) > 0 && !cmd.Forceful {
		var why []string
		for _, key := range slices.Sorted(maps.Keys(waiting)) {
			why = append(why, fmt.Sprintf("pod %s waits: %s", key, waiting[key]))
		}
		return fmt.Errorf("%s", listSome(why, 3))
	}
	res := c.opts.Surge.Move(ctx, pods, mode, targets, c.opts.Args.RegistrationTimeout.Duration)
	c.opts.Metrics.surged("moved", len(res.Moved))
	if len(res.Failed) > 0 {
		klog.FromContext(ctx).Info("Pods did not surge; they are evicted", "method", cmd.Method, "nodes", cmd.String(), "pods", res.Failed)
	}
	pdbs := newPDBIndex(c.opts.PDBs)
	var refused []string
	for _, cand := range cmd.Candidates {
		refused = append(refused, c.reportSurge(cand, res, pdbs, cmd.Forceful)...)
	}
	if len(refused) > 0 {
		return fmt.Errorf("%s", strings.Join(refused, "; "))
	}
	return nil
}

// targets names the node planned for each moving pod of the command, by pod UID: the existing node its simulation
// chose, or the node of the replacement NodeClaim created for it. Only a registered, initialized Node is named: a pod planned
// on a NodeClaim still coming up (the simulation names its node after the claim) has none, and so do a
// replacement's pods when some replacement was not created (the NodeClaims no longer match the plan's new nodes
// one to one) or its node has not registered.
func (c *Controller) targets(cmd *Command, created []string) map[types.UID]string {
	out := map[types.UID]string{}
	initializing := map[string]bool{}
	if claims, err := c.opts.NodeClaims.List(labels.Everything()); err == nil {
		for _, claim := range claims {
			if claim.Status.NodeName != "" && !claim.IsInitialized() {
				initializing[claim.Status.NodeName] = true
			}
		}
	}
	// a node still initializing is not named either: provisioning holds its room for the pods planned on it
	registered := func(name string) bool {
		_, err := c.opts.Nodes.Get(name)
		return name != "" && err == nil && !initializing[name]
	}
	for uid, at := range cmd.Placements {
		switch {
		case at.Node != "":
			if registered(at.Node) {
				out[uid] = at.Node
			}
		case len(created) == len(cmd.Replacements) && at.Replacement < len(created):
			if claim, err := c.opts.NodeClaims.Get(created[at.Replacement]); err == nil && registered(claim.Status.NodeName) {
				out[uid] = claim.Status.NodeName
			}
		}
	}
	return out
}

// reportSurge records which of the node's pods moved and which did not surge; it returns, for a voluntary command,
// the pods that did not surge and whose eviction a PodDisruptionBudget would refuse.
func (c *Controller) reportSurge(cand *Candidate, res surge.Result, pdbs *pdbIndex, forceful bool) []string {
	moved := map[string]bool{}
	for _, key := range res.Moved {
		moved[key] = true
	}
	var here, failed, refused []string
	for _, pod := range cand.Pods {
		key := podutil.Key(pod)
		switch {
		case moved[key]:
			here = append(here, key)
		case cand.Surging[key] && res.Failed[key] != "":
			failed = append(failed, fmt.Sprintf("%s (%s)", key, res.Failed[key]))
			c.opts.Metrics.surged("failed", 1)
			if why := pdbs.blocks(pod); why != "" && !forceful {
				refused = append(refused, fmt.Sprintf("pod %s did not surge (%s) and %s", key, res.Failed[key], why))
			}
		}
	}
	if len(here) > 0 {
		c.w.event(cand, corev1.EventTypeNormal, ReasonSurged, "moved make-before-break: "+listSome(here, 10))
	}
	if len(failed) > 0 {
		c.w.event(cand, corev1.EventTypeWarning, ReasonSurgeFailed, "did not surge, evicted instead: "+listSome(failed, 5))
	}
	return refused
}

// gitOpsEvents records, on each owner whose pods the command evicts rather than surges because a GitOps controller
// owns its replica count, an event that says so: the team that owns the workload reads it there.
func (c *Controller) gitOpsEvents(cmd *Command) {
	if c.opts.Recorder == nil {
		return
	}
	for _, cand := range cmd.Candidates {
		for _, g := range cand.gitOps {
			ref := &corev1.ObjectReference{APIVersion: "apps/v1", Kind: g.owner.Kind, Namespace: g.owner.Namespace, Name: g.owner.Name, UID: g.owner.UID}
			c.opts.Recorder.Eventf(ref, nil, corev1.EventTypeNormal, ReasonSurgeSkippedForGitOps, "Evict",
				"pods %s on node %s are evicted, not surged: spec.replicas is owned by %s, which would undo a surge", listSome(g.pods, 5),
				cand.Node.Name, g.owner.GitOps)
		}
	}
}

// anySurging reports whether a pod of the command's nodes would surge.
func anySurging(cmd *Command) bool {
	for _, cand := range cmd.Candidates {
		if len(cand.Surging) > 0 {
			return true
		}
	}
	return false
}

// listSome joins at most n items, saying how many more there are.
func listSome(items []string, n int) string {
	if len(items) <= n {
		return strings.Join(items, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(items[:n], ", "), len(items)-n)
}

// describeMoves says how the command's pods move: which surge, which are evicted and why.
func describeMoves(cmd *Command) string {
	if cmd.Evict {
		return ""
	}
	var surging, evicted []string
	for _, cand := range cmd.Candidates {
		for _, pod := range cand.Pods {
			key := podutil.Key(pod)
			if cand.Surging[key] {
				surging = append(surging, key)
			} else if why, ok := cand.Evicted[key]; ok {
				evicted = append(evicted, fmt.Sprintf("%s (%s)", key, why))
			}
		}
	}
	var parts []string
	if len(surging) > 0 {
		parts = append(parts, "surging "+listSome(surging, 5))
	}
	if len(evicted) > 0 {
		parts = append(parts, "evicting "+listSome(evicted, 3))
	}
	return strings.Join(parts, "; ")
}

// failed records a voluntary command that did not go through: the nodes stay.
func (c *Controller) failed(cmd *Command, err error) {
	c.opts.Metrics.decision(cmd, "failed")
	c.retries.failed(sortedNames(cmd.Candidates), c.opts.Clock.Now(), err.Error())
	for _, cand := range cmd.Candidates {
		c.w.event(cand, corev1.EventTypeWarning, ReasonDisruptionFailed, fmt.Sprintf("%s: %v; the node stays", cmd.Method, err))
	}
}

// disruptingNote is the Disrupting event's note: method, reason, action, replacements, savings and scores.
func disruptingNote(cmd *Command) string {
	note := fmt.Sprintf("%s (%s): %s", cmd.Method, cmd.Reason, cmd.Action())
	if len(cmd.Replacements) > 0 {
		note += " with " + describeReplacements(cmd.Replacements)
	}
	if s := cmd.Savings(); s > 0 {
		note += fmt.Sprintf(", saving $%.4f/h", s)
	}
	if len(cmd.Scores) > 0 {
		note += "; " + describeScores(cmd.Scores)
	}
	if moves := describeMoves(cmd); moves != "" {
		note += "; " + moves
	}
	return note
}

// deleteClaims deletes the command's NodeClaims, each with its drain deadline when the command bounds the drain;
// termination drains the nodes and terminates the instances.
func (c *Controller) deleteClaims(ctx context.Context, cmd *Command) error {
	var errs []error
	for _, cand := range cmd.Candidates {
		if cmd.DrainTimeout > 0 {
			deadline := c.opts.Clock.Now().Add(cmd.DrainTimeout).UTC().Format(time.RFC3339)
			if err := c.w.annotate(ctx, cand.NodeClaim.Name, stevedorev1.AnnotationDrainDeadline, deadline); err != nil && !apierrors.IsNotFound(err) {
				errs = append(errs, fmt.Errorf("bounding the drain of NodeClaim %s: %w", cand.NodeClaim.Name, err))
			}
		}
		err := c.opts.Stevedore.StevedoreV1().NodeClaims().Delete(ctx, cand.NodeClaim.Name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("deleting NodeClaim %s: %w", cand.NodeClaim.Name, err))
			continue
		}
		c.opts.Metrics.nodeDisrupted(cand, string(cmd.Reason))
	}
	return errors.Join(errs...)
}

// awaitReplacements waits until the replacement NodeClaims are initialized; it returns why not when one is deleted
// first or the timeout passes.
func (c *Controller) awaitReplacements(ctx context.Context, created []string, timeout time.Duration) error {
	var failure error
	seen := map[string]bool{}
	err := wait.PollUntilContextTimeout(ctx, time.Second, timeout, true, func(context.Context) (bool, error) {
		ready := 0
		for _, name := range created {
			cl, err := c.opts.NodeClaims.Get(name)
			if err == nil {
				seen[name] = true
			}
			// not found before the cache ever showed it is cache lag, not a deletion
			if apierrors.IsNotFound(err) && seen[name] || err == nil && cl.DeletionTimestamp != nil {
				failure = fmt.Errorf("replacement NodeClaim %s was deleted before it was ready (no capacity, or it did not register)", name)
				return true, nil
			}
			if err == nil && cl.IsInitialized() {
				ready++
			}
		}
		return ready == len(created), nil
	})
	if err != nil && failure == nil {
		failure = fmt.Errorf("replacements %s not ready within %s: %w", strings.Join(created, ","), timeout, err)
	}
	return failure
}

// rollback undoes a command that did not go through: its nodes are untainted and their disruption marks
// cleared, its replacements deleted.
func (c *Controller) rollback(ctx context.Context, cmd *Command, replacements []string) {
	logger := klog.FromContext(ctx)
	for _, name := range replacements {
		if err := c.opts.Stevedore.StevedoreV1().NodeClaims().Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			logger.Error(err, "Deleting a replacement of a failed disruption", "nodeclaim", name)
		}
	}
	for _, cand := range cmd.Candidates {
		if err := c.unmarkDisrupting(ctx, cand); err != nil {
			logger.Error(err, "Rolling back a failed disruption", "node", cand.Node.Name)
		}
	}
	logger.Info("Disruption rolled back", "method", cmd.Method, "nodes", cmd.String())
}

// markDisrupting taints the node stevedore.dev/disrupted:NoSchedule and records the reason on its NodeClaim.
func (c *Controller) markDisrupting(ctx context.Context, cand *Candidate, reason string) error {
	taint := stevedorev1.DisruptedTaint()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		node, err := c.opts.Kube.CoreV1().Nodes().Get(ctx, cand.Node.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if stevedorev1.IsDisrupted(node) {
			return nil
		}
		node.Spec.Taints = append(node.Spec.Taints, taint)
		_, err = c.opts.Kube.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return err
	}
	return c.w.updateStatus(ctx, cand.NodeClaim.Name, func(st *stevedorev1.NodeClaimStatus) {
		st.DisruptionReason = reason
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: stevedorev1.ConditionDisrupting, Status: metav1.ConditionTrue,
			Reason: reason, Message: "the node is being disrupted: " + reason})
	})
}

// unmarkDisrupting removes what markDisrupting added.
func (c *Controller) unmarkDisrupting(ctx context.Context, cand *Candidate) error {
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		node, err := c.opts.Kube.CoreV1().Nodes().Get(ctx, cand.Node.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		var kept []corev1.Taint
		for _, t := range node.Spec.Taints {
			if t.Key != stevedorev1.TaintDisrupted {
				kept = append(kept, t)
			}
		}
		if len(kept) == len(node.Spec.Taints) {
			return nil
		}
		node.Spec.Taints = kept
		_, err = c.opts.Kube.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{})
		return err
	})
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	return c.w.updateStatus(ctx, cand.NodeClaim.Name, func(st *stevedorev1.NodeClaimStatus) {
		st.DisruptionReason = ""
		meta.RemoveStatusCondition(&st.Conditions, stevedorev1.ConditionDisrupting)
	})
}
