/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package disruption

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/stevedore-dev/stevedore/pkg/apis/config"
	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/cloud"
	"github.com/stevedore-dev/stevedore/pkg/metrics"
)

// AnnotationRepairReboot on a NodeClaim is when repair rebooted its instance (RFC 3339). A node is rebooted at
// most once: a fault that outlives the reboot, or comes back, replaces it.
const AnnotationRepairReboot = "stevedore.dev/repair-rebooted-at"

// RepairPolicy says when a node condition makes a node unhealthy.
type RepairPolicy struct {
	ConditionType corev1.NodeConditionType
	Status        corev1.ConditionStatus
	// Toleration is how long the condition may hold before the node is repaired.
	Toleration time.Duration
	// Reboot restarts the instance once before replacing it: for software faults a restart clears (a kernel
	// deadlock, a hung container runtime), on a node whose kubelet still reports.
	Reboot bool
}

// RepairOptions are the nodeRepair arguments as repair uses them.
type RepairOptions struct {
	// Policies, checked in order.
	Policies []RepairPolicy
	// MaxUnhealthyPercent of a NodePool's nodes (rounded down, at least one) may be repaired at once; when more
	// are unhealthy, repair waits (a zone or network outage is not fixed by replacing nodes). Default 20.
	MaxUnhealthyPercent int
	// DrainTimeout bounds the drain of a repaired node, after which its remaining pods are deleted. Default 5m.
	DrainTimeout time.Duration
	// RebootWait is how long a rebooted node has to become healthy before it is replaced. Default 10m.
	RebootWait time.Duration
}

// Node conditions of the EKS node monitoring agent (node-problem-detector style) that repair acts on.
const (
	ConditionAcceleratedHardwareReady corev1.NodeConditionType = config.ConditionAcceleratedHardwareReady
	ConditionStorageReady             corev1.NodeConditionType = config.ConditionStorageReady
	ConditionNetworkingReady          corev1.NodeConditionType = config.ConditionNetworkingReady
	ConditionKernelReady              corev1.NodeConditionType = config.ConditionKernelReady
	ConditionContainerRuntimeReady    corev1.NodeConditionType = config.ConditionContainerRuntimeReady
)

// repairOptions are defaulted repair arguments in the form repair uses, nil when repair is off.
func repairOptions(r *config.NodeRepairArgs) *RepairOptions {
	if r == nil || r.Enabled == nil || !*r.Enabled {
		return nil
	}
	out := &RepairOptions{MaxUnhealthyPercent: r.MaxUnhealthyPercent, DrainTimeout: r.DrainTimeout.Duration, RebootWait: r.RebootWait.Duration}
	for _, p := range r.Policies {
		out.Policies = append(out.Policies, RepairPolicy{ConditionType: corev1.NodeConditionType(p.ConditionType),
			Status: corev1.ConditionStatus(p.ConditionStatus), Toleration: p.Toleration.Duration, Reboot: p.Reboot})
	}
	return out
}

// unhealthy is a node's fault: the condition a policy matches and since when.
type unhealthy struct {
	policy RepairPolicy
	since  time.Time
}

// due is when the fault's toleration ends.
func (u unhealthy) due() time.Time { return u.since.Add(u.policy.Toleration) }

// fault returns the node's fault that ends its toleration first, or nil if no policy matches the node.
func (o *RepairOptions) fault(node *corev1.Node) *unhealthy {
	var out *unhealthy
	for _, p := range o.Policies {
		for _, cond := range node.Status.Conditions {
			if cond.Type != p.ConditionType || cond.Status != p.Status {
				continue
			}
			u := unhealthy{policy: p, since: cond.LastTransitionTime.Time}
			if out == nil || u.due().Before(out.due()) {
				out = &u
			}
		}
	}
	return out
}

// repairThreshold is how many of a NodePool's total nodes may be repaired at once: pct rounded down, at least one.
func repairThreshold(total, pct int) int {
	return max(1, total*pct/100)
}

// rebootedAt returns when repair rebooted the claim's instance, or the zero time.
func rebootedAt(claim *stevedorev1.NodeClaim) time.Time {
	t, err := time.Parse(time.RFC3339, claim.Annotations[AnnotationRepairReboot])
	if err != nil {
		return time.Time{}
	}
	return t
}

// nodeReachable reports whether the node's kubelet still reports (Ready is not Unknown).
func nodeReachable(node *corev1.Node) bool {
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status != corev1.ConditionUnknown
		}
	}
	return false
}

func nodeReady(node *corev1.Node) bool {
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// repair replaces (or first reboots) nodes unhealthy past their toleration (forceful: not budgeted, not
// validated; bounded by RepairOptions.MaxUnhealthyPercent).
type repair struct {
	opts     *RepairOptions
	removals *removals
	cloud    cloud.Provider
	w        *claimWriter
	clock    clock.Clock

	mu sync.Mutex
	// blocked is whether repair last waited for a NodePool with too many unhealthy nodes, by name.
	blocked map[string]bool
}

func (*repair) Name() string                          { return MethodRepair }
func (*repair) Validated() bool                       { return false }
func (*repair) StillHolds(*Candidate, time.Time) bool { return true }
func (*repair) Resimulate() bool                      { return false }

// Find finds the nodes whose fault outlasted its toleration and replaces them, or reboots them first where
// the policy says so. Per NodePool, at most repairThreshold nodes are repaired at once (those being replaced or
// waiting after a reboot count), and none while more than that many are unhealthy. Repair is forceful otherwise:
// budgets, do-not-disrupt and PodDisruptionBudgets do not hold it back beyond the bounded drain.
func (m *repair) Find(ctx context.Context, v *clusterView) (*Command, error) {
	o := m.opts
	type faulty struct {
		cand  *Candidate
		fault *unhealthy
	}
	byPool := map[string][]faulty{}
	for _, cand := range v.candidates {
		if f := o.fault(cand.Node); f != nil {
			byPool[cand.NodePool.Name] = append(byPool[cand.NodePool.Name], faulty{cand, f})
		}
	}
	poolNames := make([]string, 0, len(v.pools))
	for name := range v.pools {
		poolNames = append(poolNames, name)
	}
	sort.Strings(poolNames)
	cmd := &Command{Reason: ReasonUnhealthy, Forceful: true, Evict: true}
	anyReachable := false
	for _, name := range poolNames {
		ps := v.pools[name]
		faults := byPool[name]
		threshold := repairThreshold(ps.total, o.MaxUnhealthyPercent)
		// The unhealthy nodes (rebooted ones within their wait among them) and those being replaced: when they are
		// within the threshold, every one may be repaired, so repairs in flight never exceed it either.
		unhealthyNodes := len(faults) + ps.repairing
		blocked := unhealthyNodes > threshold
		m.reportBlocked(ctx, ps.pool, blocked, unhealthyNodes, ps.total, threshold)
		if blocked {
			continue
		}
		for _, f := range faults {
			if m.replace(ctx, v.now, name, f.cand, f.fault) {
				cmd.Candidates = append(cmd.Candidates, f.cand)
				anyReachable = anyReachable || nodeReady(f.cand.Node)
			}
		}
	}
	if len(cmd.Candidates) == 0 {
		return nil, nil
	}
	// in the view's order, as every command
	order := make(map[*Candidate]int, len(v.candidates))
	for i, cand := range v.candidates {
		order[cand] = i
	}
	sort.SliceStable(cmd.Candidates, func(i, j int) bool { return order[cmd.Candidates[i]] < order[cmd.Candidates[j]] })
	cmd.DrainTimeout = o.DrainTimeout
	// Replacements are best effort, as for expiry: pods that fit nowhere are provisioned again when evicted.
	if r, err := m.removals.simulate(ctx, cmd.Candidates); err == nil && len(r.Plan.Unschedulable) == 0 {
		cmd.Replacements, cmd.Pods = r.Plan.NewNodes, len(r.Pods)
	}
	if !anyReachable {
		// The nodes' pods are not serving: waiting for replacements gains nothing, drain at once.
		var zero time.Duration
		cmd.ReplacementWait = &zero
	}
	return cmd, nil
}

// replace decides what to do with an unhealthy node of NodePool pool: nothing before its toleration is over or while
// a reboot has time to clear the fault, a reboot first where the policy asks for one and the node can be reached,
// else a replacement (it reports true).
func (m *repair) replace(ctx context.Context, now time.Time, pool string, cand *Candidate, fault *unhealthy) bool {
	if now.Before(fault.due()) {
		return false
	}
	at := rebootedAt(cand.NodeClaim)
	if !at.IsZero() && now.Before(at.Add(m.opts.RebootWait)) {
		return false // counted in flight: the reboot has time to clear the fault
	}
	logger := klog.FromContext(ctx)
	if fault.policy.Reboot && at.IsZero() && nodeReachable(cand.Node) {
		err := m.reboot(ctx, cand, fault)
		if err == nil {
			return false
		}
		logger.Error(err, "Rebooting an unhealthy node failed; it is replaced instead", "node", cand.Node.Name)
	}
	metrics.NodesRepaired.WithLabelValues(pool, string(fault.policy.ConditionType), "replace").Inc()
	logger.Info("Node unhealthy past its toleration; replacing it", "node", cand.Node.Name, "nodepool", pool,
		"condition", fault.policy.ConditionType, "status", fault.policy.Status, "since", fault.since.UTC().Format(time.RFC3339))
	return true
}

// reboot restarts the candidate's instance and records it on its NodeClaim.
func (m *repair) reboot(ctx context.Context, cand *Candidate, f *unhealthy) error {
	if m.cloud == nil || cand.NodeClaim.Status.InstanceID == "" {
		return fmt.Errorf("no instance to reboot")
	}
	// Record first: a reboot that happened but was not recorded would be repeated.
	if err := m.w.annotate(ctx, cand.NodeClaim.Name, AnnotationRepairReboot, m.clock.Now().UTC().Format(time.RFC3339)); err != nil {
		return fmt.Errorf("recording the reboot on NodeClaim %s: %w", cand.NodeClaim.Name, err)
	}
	if err := m.cloud.Reboot(ctx, cand.NodeClaim.Status.InstanceID); err != nil {
		return err
	}
	metrics.NodesRepaired.WithLabelValues(cand.NodePool.Name, string(f.policy.ConditionType), "reboot").Inc()
	klog.FromContext(ctx).Info("Node unhealthy past its toleration; rebooted its instance", "node", cand.Node.Name,
		"instance", cand.NodeClaim.Status.InstanceID, "condition", f.policy.ConditionType, "status", f.policy.Status,
		"replacedIfStillUnhealthyAfter", m.opts.RebootWait)
	m.w.event(cand, corev1.EventTypeNormal, ReasonNodeRebooted, fmt.Sprintf("%s has been %s since %s: instance %s rebooted; the node is replaced if it is still unhealthy in %s",
		f.policy.ConditionType, f.policy.Status, f.since.UTC().Format(time.RFC3339), cand.NodeClaim.Status.InstanceID, m.opts.RebootWait))
	return nil
}

// reportBlocked records a NodeRepairBlocked event on the NodePool when repair starts waiting for it, and
// sets the blocked gauge.
func (m *repair) reportBlocked(ctx context.Context, pool *stevedorev1.NodePool, blocked bool, unhealthyNodes, total, threshold int) {
	gauge := 0.0
	if blocked {
		gauge = 1
	}
	metrics.NodeRepairBlocked.WithLabelValues(pool.Name).Set(gauge)
	m.mu.Lock()
	was := m.blocked[pool.Name]
	m.blocked[pool.Name] = blocked
	m.mu.Unlock()
	if !blocked || was {
		return
	}
	msg := fmt.Sprintf("%d of the NodePool's %d nodes are unhealthy, more than the %d repair may replace at once (%d%%): repair waits",
		unhealthyNodes, total, threshold, m.opts.MaxUnhealthyPercent)
	klog.FromContext(ctx).Info("Node repair blocked", "nodepool", pool.Name, "unhealthy", unhealthyNodes, "nodes", total, "threshold", threshold)
	if m.w.recorder != nil {
		m.w.recorder.Eventf(pool, nil, corev1.EventTypeWarning, ReasonNodeRepairBlocked, "Repair", "%s", msg)
	}
}
