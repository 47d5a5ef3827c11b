/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package disruption

import (
	"context"
	"fmt"
	"slices"
	"sort"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/provision"
)

// verdict is why a pass left a node.
type verdict struct {
	reason  RetainReason
	message string
	// volatile: the message carries figures that move with the cluster (a score, a scheduler's node count), so
	// only a change of reason or subject is reported again.
	volatile bool
	// subject names what the verdict is about when volatile (a pod), for telling one verdict from the next.
	subject string
}

// key identifies the verdict for "report once per change".
func (v *verdict) key() string {
	if v.volatile {
		return string(v.reason) + "/" + v.subject
	}
	return string(v.reason) + "/" + v.message
}

// passing reports whether the verdict is too short-lived to be worth an event or a condition.
func (v *verdict) passing() bool {
	switch v.reason {
	case RetainNominated, RetainJustLaunched, RetainSurging, RetainConsolidateAfter, RetainOtherMove, RetainStatic:
		return true
	}
	return false
}

// poolWide reports whether the verdict is a setting of the node's NodePool rather than news about the node: it
// is recorded in the NodeClaim's condition, without an event on each of the NodePool's nodes (hundreds in a burst).
func (v *verdict) poolWide() bool {
	return v.reason == RetainConsolidationOff
}

// blocks reports whether the verdict blocks every voluntary disruption, not only consolidation.
func (v *verdict) blocks() bool {
	return v.reason == RetainDoNotDisrupt || v.reason == RetainPodDisruptionBudget || v.reason == RetainGang || v.reason == RetainBooked
}

// leave records why the pass left a candidate (the last verdict of a pass wins).
func (v *clusterView) leave(cand *Candidate, why *verdict) {
	if why == nil {
		return
	}
	if v.verdicts == nil {
		v.verdicts = map[string]*verdict{}
	}
	v.verdicts[cand.Node.Name] = why
}

// podsFitNowhere is the verdict of a removal that left pods without a place: the first such pod by name, and the
// scheduler's reason.
func podsFitNowhere(r *provision.Removal) *verdict {
	pods := slices.Clone(r.Pods)
	sort.Slice(pods, func(i, j int) bool {
		if pods[i].Namespace != pods[j].Namespace {
			return pods[i].Namespace < pods[j].Namespace
		}
		return pods[i].Name < pods[j].Name
	})
	for _, pod := range pods {
		if why, ok := r.Plan.Unschedulable[pod.UID]; ok {
			name := pod.Namespace + "/" + pod.Name
			return &verdict{reason: RetainPodsFitNowhere, subject: name, volatile: true,
				message: fmt.Sprintf("pod %s fits on no other node and on no node its NodePools can launch: %s", name, why)}
		}
	}
	return &verdict{reason: RetainPodsFitNowhere, message: fmt.Sprintf("%d of its pods fit nowhere else", len(r.Plan.Unschedulable))}
}

// report records, for each candidate the pass left with a verdict that changed since it was last reported, an
// event on the node and its NodeClaim and the NodeClaim's Consolidatable=False condition. skip names the nodes a
// command is taking (not left). A node no longer blocked by do-not-disrupt or a PodDisruptionBudget may be
// reported blocked again later.
func (c *Controller) report(ctx context.Context, v *clusterView, skip map[string]bool) {
	seen := map[string]bool{}
	for _, cand := range v.candidates {
		name := cand.Node.Name
		seen[name] = true
		why := v.verdicts[name]
		if why == nil || skip[name] || why.passing() {
			c.clearBlocked(cand)
			continue
		}
		if c.changedVerdict(cand, why) {
			c.reportVerdict(ctx, cand, why)
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for name := range c.reported {
		if !seen[name] {
			delete(c.reported, name)
		}
	}
}

// clearBlocked forgets a blocked verdict reported for a node no longer blocked, so that it is reported again if the
// node is blocked again.
func (c *Controller) clearBlocked(cand *Candidate) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if prev, had := c.reported[cand.Node.Name]; had && prev.blocks() && cand.BlockedBecause == "" {
		delete(c.reported, cand.Node.Name)
	}
}

// changedVerdict records a node's verdict and reports whether it is news: not the one reported last, and not one
// its NodeClaim carries from before this process started.
func (c *Controller) changedVerdict(cand *Candidate, why *verdict) bool {
	c.mu.Lock()
	prev, had := c.reported[cand.Node.Name]
	if had && prev.key() == why.key() {
		c.mu.Unlock()
		return false
	}
	c.reported[cand.Node.Name] = why
	c.mu.Unlock()
	return had || !recorded(cand.NodeClaim, why)
}

// reportVerdict records a verdict: an event on the node and its NodeClaim (none for a poolWide one), and the
// NodeClaim's condition.
func (c *Controller) reportVerdict(ctx context.Context, cand *Candidate, why *verdict) {
	eventReason := ReasonUnconsolidatable
	prefix := "consolidation leaves the node: "
	if why.blocks() {
		eventReason, prefix = ReasonDisruptionBlocked, "voluntary disruption leaves the node alone: "
	}
	if !why.poolWide() {
		c.w.eventFor(cand, corev1.EventTypeNormal, eventReason, string(why.reason), prefix+why.message)
	}
	if err := c.w.setCondition(ctx, cand.NodeClaim.Name, stevedorev1.ConditionConsolidatable, metav1.ConditionFalse, string(why.reason), why.message); err != nil {
		klog.FromContext(ctx).V(2).Info("Recording why the node stays failed", "nodeclaim", cand.NodeClaim.Name, "err", err)
	}
}

// recorded reports whether the NodeClaim already carries the verdict as its Consolidatable condition.
func recorded(claim *stevedorev1.NodeClaim, why *verdict) bool {
	cond := meta.FindStatusCondition(claim.Status.Conditions, stevedorev1.ConditionConsolidatable)
	return cond != nil && cond.Status == metav1.ConditionFalse && cond.Reason == string(why.reason) &&
		(why.volatile || cond.Message == why.message)
}
