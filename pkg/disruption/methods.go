/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package disruption

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"k8s.io/klog/v2"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/cloud"
	"github.com/stevedore-dev/stevedore/pkg/provision"
	"github.com/stevedore-dev/stevedore/pkg/scheduling"
	"github.com/stevedore-dev/stevedore/pkg/solver"
)

// Disruption methods, in the order a pass tries them.
const (
	MethodExpiration = "expiration"
	MethodEmptiness  = "emptiness"
	MethodDrift      = "drift"
	MethodMultiNode  = "multi-node-consolidation"
	MethodSingleNode = "single-node-consolidation"
	// MethodInterruption is not a pass's method: the interruption controller asks for it (Controller.Interrupt).
	MethodInterruption = "interruption"
)

const (
	// maxMultiNodeCandidates bounds the nodes one multi-node consolidation considers (one simulation each).
	maxMultiNodeCandidates = 100
	// minSpotToSpotTypes is how many cheaper spot types a spot-to-spot replacement must be able to choose from,
	// so that it does not land in a pool about to be reclaimed.
	minSpotToSpotTypes = 15
)

// ReasonExpired is the disruption reason of expiry (not a budget reason: expiry is not budgeted).
const ReasonExpired = "Expired"

// Command is what one pass does: remove some nodes, launching replacements first.
type Command struct {
	Method string
	Reason stevedorev1.DisruptionReason
	// Forceful commands (expiry) are not budgeted and go ahead even when a replacement fails.
	Forceful     bool
	Candidates   []*Candidate
	Replacements []*solver.PlannedNode
	// Pods that move.
	Pods int
	// ReplacementWait overrides how long replacements may take to become ready (nil: ReplacementTimeout; zero or
	// less: do not wait).
	ReplacementWait *time.Duration
	// DrainTimeout, when positive, bounds the drain of the command's nodes (their pods are deleted after it).
	DrainTimeout time.Duration
	// Scores are the move's scores for the Balanced NodePools among its nodes'.
	Scores    []poolScore
	evaluated time.Duration
}

// Savings is the hourly price of the nodes removed minus that of their replacements.
func (cmd *Command) Savings() float64 {
	s := 0.0
	for _, c := range cmd.Candidates {
		s += c.Price
	}
	for _, r := range cmd.Replacements {
		s -= r.Offering.Price
	}
	return s
}

// nodes names the command's nodes (none for a nil command).
func (cmd *Command) nodes() map[string]bool {
	out := map[string]bool{}
	if cmd == nil {
		return out
	}
	for _, c := range cmd.Candidates {
		out[c.Node.Name] = true
	}
	return out
}

// Action is "delete" or "replace".
func (cmd *Command) Action() string {
	if len(cmd.Replacements) > 0 {
		return "replace"
	}
	return "delete"
}

func (cmd *Command) String() string {
	var names []string
	for _, c := range cmd.Candidates {
		names = append(names, c.String())
	}
	return strings.Join(names, ", ")
}

// budgets tracks, per NodePool, how many more nodes a pass may disrupt for a reason.
type budgets struct {
	v      *clusterView
	reason stevedorev1.DisruptionReason
	left   map[string]int
}

func (c *Controller) budgets(ctx context.Context, v *clusterView, reason stevedorev1.DisruptionReason) *budgets {
	b := &budgets{v: v, reason: reason, left: map[string]int{}}
	for name, ps := range v.pools {
		allowed, err := allowedDisruptions(ps.pool, reason, ps.total, v.now)
		if err != nil {
			klog.FromContext(ctx).Error(err, "NodePool disruption budget is invalid; nothing is disrupted under it", "nodepool", name)
		}
		b.left[name] = max(0, allowed-ps.disrupting)
	}
	return b
}

// take reserves room for one node of the candidate's NodePool.
func (b *budgets) take(cand *Candidate) bool {
	name := cand.NodePool.Name
	if b.left[name] <= 0 {
		return false
	}
	b.left[name]--
	return true
}

// expiration replaces every node past its NodeClaim's expireAfter, budgets and do-not-disrupt notwithstanding.
// A static NodePool's expired nodes are replaced one at a time within its budgets instead (staticReplacement).
func (c *Controller) expiration(ctx context.Context, v *clusterView) (*Command, error) {
	var expired, static []*Candidate
	for _, cand := range v.candidates {
		after := cand.Claim.Spec.ExpireAfter
		if after == nil || after.IsNever() {
			continue
		}
		if v.now.Before(cand.Claim.CreationTimestamp.Add(*after.Duration)) {
			continue
		}
		if isStatic(cand) {
			static = append(static, cand)
		} else {
			expired = append(expired, cand)
		}
	}
	if len(expired) == 0 {
		return c.staticReplacement(ctx, v, static, ReasonExpired)
	}
	cmd := &Command{Reason: ReasonExpired, Forceful: true, Candidates: expired}
	// Replacements are best effort: pods that fit nowhere are provisioned again when they are evicted.
	if r, err := c.simulate(ctx, expired); err == nil && len(r.Plan.Unschedulable) == 0 {
		cmd.Replacements, cmd.Pods = r.Plan.NewNodes, len(r.Pods)
	}
	return cmd, nil
}

// emptiness deletes nodes that run no reschedulable pod, within budgets.
func (c *Controller) emptiness(ctx context.Context, v *clusterView) (*Command, error) {
	b := c.budgets(ctx, v, stevedorev1.DisruptionReasonEmpty)
	cmd := &Command{Reason: stevedorev1.DisruptionReasonEmpty}
	for _, cand := range v.candidates {
		if !cand.Empty() || cand.Blocked != "" {
			continue
		}
		if why := c.unconsolidatable(cand, v.now); why != nil {
			v.leave(cand, why)
			continue
		}
		if keeps, err := c.keepsRoom(ctx, cand); err != nil || keeps {
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
func (c *Controller) keepsRoom(ctx context.Context, cand *Candidate) (bool, error) {
	if !c.opts.Provisioner.HasWarmPods() {
		return false, nil
	}
	m, err := c.cluster(ctx)
	if err != nil {
		return false, err
	}
	ni := m.Snapshot.NodeInfo(cand.Node.Name)
	if ni == nil {
		return false, nil
	}
	for _, pi := range ni.GetPods() {
		if provision.Reschedulable(pi.GetPod()) {
			return true, nil
		}
	}
	return false, nil
}

// drift replaces nodes that no longer match their NodePool or node class, within budgets.
func (c *Controller) drift(ctx context.Context, v *clusterView) (*Command, error) {
	b := c.budgets(ctx, v, stevedorev1.DisruptionReasonDrifted)
	var drifted []*Candidate
	for _, cand := range v.candidates {
		if cand.Blocked != "" {
			continue
		}
		why, err := c.driftReason(ctx, cand)
		if err != nil {
			klog.FromContext(ctx).V(2).Info("Drift check failed", "node", cand.Node.Name, "err", err)
			continue
		}
		if why == "" {
			continue
		}
		c.markDrifted(ctx, cand, why)
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
		return c.staticReplacement(ctx, v, static, stevedorev1.DisruptionReasonDrifted)
	}
	// All at once if their pods fit; else one at a time, the first whose pods fit.
	if r, err := c.simulate(ctx, drifted); err == nil && len(r.Plan.Unschedulable) == 0 {
		return &Command{Reason: stevedorev1.DisruptionReasonDrifted, Candidates: drifted, Replacements: r.Plan.NewNodes, Pods: len(r.Pods)}, nil
	}
	for _, cand := range drifted {
		r, err := c.simulate(ctx, []*Candidate{cand})
		if err != nil {
			return nil, err
		}
		if len(r.Plan.Unschedulable) == 0 {
			return &Command{Reason: stevedorev1.DisruptionReasonDrifted, Candidates: []*Candidate{cand}, Replacements: r.Plan.NewNodes, Pods: len(r.Pods)}, nil
		}
		klog.FromContext(ctx).V(1).Info("Drifted node cannot be replaced yet: some of its pods fit no node", "node", cand.Node.Name,
			"pods", len(r.Plan.Unschedulable))
	}
	return nil, nil
}

// isStatic reports whether the candidate belongs to a static NodePool (spec.replicas set).
func isStatic(cand *Candidate) bool { return cand.NodePool.Spec.Replicas != nil }

// staticReplacement replaces the first of a static NodePool's candidates (drifted or expired) whose NodePool has
// no node being disrupted and whose budget allows one: one node at a time, by a new node of the same NodePool
// when limits.nodes leaves room for it (else the node goes first and the NodePool is refilled after). Its pods
// reschedule wherever they fit.
func (c *Controller) staticReplacement(ctx context.Context, v *clusterView, cands []*Candidate, reason stevedorev1.DisruptionReason) (*Command, error) {
	if len(cands) == 0 {
		return nil, nil
	}
	b := c.budgets(ctx, v, reason)
	for _, cand := range cands {
		if v.pools[cand.NodePool.Name].disrupting > 0 || !b.take(cand) {
			continue
		}
		replacements, err := c.opts.Provisioner.PlanStaticNodes(ctx, cand.NodePool, 1, cand.Node.Name)
		if err != nil {
			klog.FromContext(ctx).V(1).Info("Static NodePool node goes before its replacement", "node", cand.Node.Name, "why", err.Error())
		}
		return &Command{Reason: reason, Candidates: []*Candidate{cand}, Replacements: replacements, Pods: len(cand.Pods)}, nil
	}
	return nil, nil
}

// driftReason says why a node no longer matches what its NodePool would launch now ("" if it does).
func (c *Controller) driftReason(ctx context.Context, cand *Candidate) (string, error) {
	if h := cand.Claim.Annotations[stevedorev1.AnnotationNodePoolHash]; h != "" && h != provision.NodePoolHash(cand.NodePool) &&
		cand.Claim.Annotations[stevedorev1.AnnotationNodePoolHashVersion] == provision.NodePoolHashVersion {
		return "NodePoolDrift", nil
	}
	reqs, err := solver.NodePoolRequirements(cand.NodePool)
	if err != nil {
		return "", err
	}
	if err := reqs.Compatible(scheduling.FromLabels(cand.Node.Labels), nodePoolDefined); err != nil {
		return "RequirementsDrift", nil
	}
	if c.opts.Cloud == nil {
		return "", nil
	}
	return c.opts.Cloud.IsDrifted(ctx, cand.Claim)
}

// nodePoolDefined: only a label whose value conflicts with a requirement is drift; a label the node does not carry
// is not (a false drift would replace nodes forever; template labels are covered by the NodePool hash).
func nodePoolDefined(string) bool { return true }

// savingsEpsilon is the smallest hourly saving that counts: prices differ by more, float sums by less.
const savingsEpsilon = 1e-9

// multiNodeConsolidation removes as many nodes as it can at once, replacing them by at most one cheaper node, as
// long as each node added to the set makes it save more.
// It grows the set one candidate at a time, cheapest to disrupt first, keeping a candidate only if the set still
// consolidates with it: a node whose pods fit nowhere is skipped instead of sinking every set that includes it
// (a binary search on prefixes of the candidate list stops at the first such node). Budgets bound the set, not
// the candidates tried: a node that does not join the set takes no room in its NodePool's budget, so nodes that
// cannot consolidate at the head of the list do not hide those further down that can. The set found is then
// pruned: a node whose leaving the set saves as much is left out (a smaller move dominates the larger).
func (c *Controller) multiNodeConsolidation(ctx context.Context, v *clusterView) (*Command, error) {
	cands, b := c.consolidationCandidates(ctx, v, maxMultiNodeCandidates, false)
	if len(cands) < 2 {
		return nil, nil
	}
	var set []*Candidate
	var best *Command
	for _, cand := range cands {
		if b.left[cand.NodePool.Name] <= 0 {
			continue // the set already holds as many of this NodePool's nodes as its budget allows
		}
		trial := append(set[:len(set):len(set)], cand)
		cmd, _, err := c.consolidate(ctx, v, trial)
		if err != nil {
			return nil, err
		}
		// a larger set only if it saves more: one that saves as much moves more pods (a smaller move dominates it)
		if cmd != nil && (best == nil || cmd.Savings() > best.Savings()+savingsEpsilon) {
			set, best = trial, cmd
			b.take(cand)
		}
	}
	if len(set) < 2 {
		return nil, nil // one node is single-node consolidation's
	}
	return c.prune(ctx, v, best)
}

// prune drops from a multi-node move each node without which the move saves at least as much, trying the nodes
// costliest to disrupt first. The nodes joined the set in growing order of disruption cost, each making it save
// more than the set before it; a node that joined early may still add nothing once later nodes are in (its pods
// now force a larger replacement, costing what its own price saved).
func (c *Controller) prune(ctx context.Context, v *clusterView, cmd *Command) (*Command, error) {
	for i := len(cmd.Candidates) - 1; i >= 0 && len(cmd.Candidates) > 1; i-- {
		rest := slices.Delete(slices.Clone(cmd.Candidates), i, i+1)
		smaller, _, err := c.consolidate(ctx, v, rest)
		if err != nil {
			return nil, err
		}
		if smaller != nil && smaller.Savings() >= cmd.Savings()-savingsEpsilon {
			cmd = smaller
		}
	}
	return cmd, nil
}

// singleNodeConsolidation removes or replaces one node: of the nodes cheapest to disrupt that consolidate, the one
// that saves the most (among equal disruption costs, a larger saving; a costlier disruption is never taken for a
// larger saving). Every node whose NodePool's budget has room for one more is tried, not only as many as the
// budget has room for (with a budget of one, a first node that cannot consolidate would otherwise hold every
// other node back). Each node tried and left gets the verdict of why.
func (c *Controller) singleNodeConsolidation(ctx context.Context, v *clusterView) (*Command, error) {
	return c.singleNode(ctx, v, false)
}

// singleNode is singleNodeConsolidation; exhaustive goes on past the command found to give every other node a
// verdict (the dry run).
func (c *Controller) singleNode(ctx context.Context, v *clusterView, exhaustive bool) (*Command, error) {
	cands, _ := c.consolidationCandidates(ctx, v, len(v.candidates), true)
	var best *Command
	for _, cand := range cands {
		if best != nil && !exhaustive && cand.Cost > best.Candidates[0].Cost+savingsEpsilon {
			break
		}
		if why := bestCaseScore(v, cand); why != nil {
			v.leave(cand, why)
			continue
		}
		cmd, why, err := c.consolidate(ctx, v, []*Candidate{cand})
		if err != nil {
			return nil, err
		}
		if cmd == nil {
			v.leave(cand, why)
			continue
		}
		switch {
		case best == nil:
			best = cmd
		case cand.Cost <= best.Candidates[0].Cost+savingsEpsilon && cmd.Savings() > best.Savings()+savingsEpsilon:
			v.leave(best.Candidates[0], dominated(best, cmd))
			best = cmd
		default:
			v.leave(cand, dominated(cmd, best))
		}
	}
	return best, nil
}

// dominated is the verdict of a node whose move another move beats: it saves as much or more for no costlier a
// disruption, or is cheaper to disrupt.
func dominated(lost, won *Command) *verdict {
	return &verdict{reason: RetainOtherMove, message: fmt.Sprintf("this pass takes %s instead: it saves $%.4f/h moving %s, this node $%.4f/h moving %s",
		won.String(), won.Savings(), pods(won.Pods), lost.Savings(), pods(lost.Pods))}
}

// pods is "1 pod" or "n pods".
func pods(n int) string {
	if n == 1 {
		return "1 pod"
	}
	return fmt.Sprintf("%d pods", n)
}

// consolidationCandidates lists, cheapest to disrupt first, at most limit non-empty nodes whose NodePool
// consolidates underutilized nodes, whose consolidateAfter has passed and whose NodePool's budget has room for one
// more node; it returns the budgets too, for a caller disrupting several nodes to take room from. With judge, the
// nodes left out get a verdict.
func (c *Controller) consolidationCandidates(ctx context.Context, v *clusterView, limit int, judge bool) ([]*Candidate, *budgets) {
	b := c.budgets(ctx, v, stevedorev1.DisruptionReasonUnderutilized)
	leave := func(cand *Candidate, why *verdict) {
		if judge {
			v.leave(cand, why)
		}
	}
	var out []*Candidate
	for _, cand := range v.candidates {
		if len(out) == limit {
			break
		}
		if cand.Empty() || cand.Blocked != "" {
			continue
		}
		if why := c.unconsolidatable(cand, v.now); why != nil {
			leave(cand, why)
			continue
		}
		if !cand.NodePool.Spec.Disruption.ConsolidationPolicy.ConsolidatesUnderutilized() {
			leave(cand, &verdict{reason: RetainWhenEmpty, message: fmt.Sprintf("NodePool %s consolidates only empty nodes (consolidationPolicy %s)",
				cand.NodePool.Name, cand.NodePool.Spec.Disruption.ConsolidationPolicy)})
			continue
		}
		if b.left[cand.NodePool.Name] <= 0 {
			leave(cand, budgetVerdict(cand, stevedorev1.DisruptionReasonUnderutilized))
			continue
		}
		out = append(out, cand)
	}
	return out, b
}

// unconsolidatable says why consolidation may not consider a node whatever its pods: its NodePool is static, has
// consolidation off, or the node saw pods arrive or leave within consolidateAfter. Nil if it may.
func (c *Controller) unconsolidatable(cand *Candidate, now time.Time) *verdict {
	if isStatic(cand) {
		return &verdict{reason: RetainStatic, message: fmt.Sprintf("NodePool %s is static: its nodes are replaced, never consolidated", cand.NodePool.Name)}
	}
	if after := cand.NodePool.Spec.Disruption.ConsolidateAfter; after == nil || after.IsNever() {
		return &verdict{reason: RetainConsolidationOff, message: fmt.Sprintf("NodePool %s has consolidation off (consolidateAfter: Never)", cand.NodePool.Name)}
	}
	if !c.consolidatable(cand, now) {
		return &verdict{reason: RetainConsolidateAfter, message: fmt.Sprintf("pods arrived on or left the node within NodePool %s's consolidateAfter (%s)",
			cand.NodePool.Name, cand.NodePool.Spec.Disruption.ConsolidateAfter.Duration)}
	}
	return nil
}

// budgetVerdict is the verdict of a node its NodePool's budget leaves no room for.
func budgetVerdict(cand *Candidate, reason stevedorev1.DisruptionReason) *verdict {
	return &verdict{reason: RetainBudget, message: fmt.Sprintf("NodePool %s's disruption budget allows no more %s disruptions now",
		cand.NodePool.Name, reason)}
}

// consolidate answers whether removing the candidates saves money: their pods fit on the other nodes, or on
// them plus one new node cheaper than the candidates together, and the move scores high enough for the Balanced
// NodePools among theirs. It returns the command, or why not.
func (c *Controller) consolidate(ctx context.Context, v *clusterView, cands []*Candidate) (*Command, *verdict, error) {
	r, err := c.simulate(ctx, cands)
	if err != nil {
		return nil, nil, err
	}
	if len(r.Plan.Unschedulable) > 0 {
		return nil, podsFitNowhere(r), nil
	}
	if len(r.Plan.NewNodes) > 1 {
		return nil, &verdict{reason: RetainNeedsSeveralNodes, message: fmt.Sprintf("its pods need %d new nodes; consolidation launches at most one", len(r.Plan.NewNodes))}, nil
	}
	cmd := &Command{Reason: stevedorev1.DisruptionReasonUnderutilized, Candidates: cands, Pods: len(r.Pods)}
	if len(r.Plan.NewNodes) == 1 {
		replacement, why := c.cheaperReplacement(cands, r.Plan.NewNodes[0])
		if replacement == nil {
			return nil, why, nil
		}
		cmd.Replacements = []*solver.PlannedNode{replacement}
	}
	if why := c.weigh(ctx, v, cmd); why != nil {
		return nil, why, nil
	}
	return cmd, nil, nil
}

// cheaperReplacement narrows the planned new node to the instance types that make the move save money, or says
// why none does.
func (c *Controller) cheaperReplacement(cands []*Candidate, planned *solver.PlannedNode) (*solver.PlannedNode, *verdict) {
	total := 0.0
	allSpot := true
	// the cheapest candidate of each instance type
	byType := map[string]float64{}
	for _, cand := range cands {
		total += cand.Price
		allSpot = allSpot && cand.Claim.Status.CapacityType == stevedorev1.CapacityTypeSpot
		if p, ok := byType[cand.Claim.Status.InstanceType]; !ok || cand.Price < p {
			byType[cand.Claim.Status.InstanceType] = cand.Price
		}
	}
	replacement := planned.Restrict(func(it *cloud.InstanceType, price float64) bool {
		cheapest, same := byType[it.Name]
		switch {
		case price >= total:
			return false
		case same && len(cands) == 1:
			return false // the same type for a single node saves nothing and churns
		case same:
			// N nodes for a node of a type one of them has, at no lower price: keeping that node and deleting
			// the others saves as much and moves fewer pods (their pods fit in a node of that type)
			return price < cheapest
		}
		return true
	})
	if replacement == nil {
		what := "the node's"
		if len(cands) > 1 {
			what = "the nodes'"
		}
		return nil, &verdict{reason: RetainNotCheaper, message: fmt.Sprintf("its pods fit elsewhere only with a new node, and none they fit on is cheaper than %s $%.4f/h (the cheapest: %s at $%.4f/h)",
			what, total, planned.InstanceType.Name, planned.Offering.Price)}
	}
	if allSpot && replacement.Offering.CapacityType == stevedorev1.CapacityTypeSpot {
		if !c.opts.SpotToSpot {
			return nil, &verdict{reason: RetainSpotToSpot, message: "the only cheaper replacement is a spot node, and spot-to-spot consolidation is off"}
		}
		if len(replacement.InstanceTypes) < minSpotToSpotTypes {
			return nil, &verdict{reason: RetainSpotToSpot, message: fmt.Sprintf("a spot-to-spot replacement needs %d cheaper spot types to choose from; %d fit",
				minSpotToSpotTypes, len(replacement.InstanceTypes))}
		}
	}
	return replacement, nil
}

// simulate asks the solver where the candidates' pods would go without them.
func (c *Controller) simulate(ctx context.Context, cands []*Candidate) (*provision.Removal, error) {
	cluster, err := c.cluster(ctx)
	if err != nil {
		return nil, err
	}
	names := make([]string, len(cands))
	for i, cand := range cands {
		names[i] = cand.Node.Name
	}
	c.simMu.Lock()
	defer c.simMu.Unlock()
	return cluster.SimulateRemoval(ctx, c.opts.Simulator, names, 0)
}

// cluster returns the pass's cluster model, built once per pass.
func (c *Controller) cluster(ctx context.Context) (*provision.Cluster, error) {
	c.simMu.Lock()
	defer c.simMu.Unlock()
	if c.model != nil {
		return c.model, nil
	}
	m, err := c.opts.Provisioner.Cluster(ctx, c.opts.Simulator)
	if err != nil {
		return nil, err
	}
	c.model = m
	return m, nil
}

// markDrifted records drift on the NodeClaim (condition Drifted) the first time it is seen.
func (c *Controller) markDrifted(ctx context.Context, cand *Candidate, why string) {
	if c.opts.DryRun {
		return
	}
	for _, cond := range cand.Claim.Status.Conditions {
		if cond.Type == stevedorev1.ConditionDrifted && cond.Status == "True" {
			return
		}
	}
	if err := c.setCondition(ctx, cand.Claim.Name, stevedorev1.ConditionDrifted, "True", why, "the node no longer matches its NodePool or node class: "+why); err != nil {
		klog.FromContext(ctx).V(2).Info("Recording drift failed", "nodeclaim", cand.Claim.Name, "err", err)
	}
}

func sortedNames(cands []*Candidate) []string {
	out := make([]string, len(cands))
	for i, c := range cands {
		out[i] = c.Node.Name
	}
	sort.Strings(out)
	return out
}

func describeReplacements(rs []*solver.PlannedNode) string {
	var parts []string
	for _, r := range rs {
		parts = append(parts, fmt.Sprintf("%s/%s/%s $%.4f/h", r.InstanceType.Name, r.Offering.Zone, r.Offering.CapacityType, r.Offering.Price))
	}
	return strings.Join(parts, ", ")
}
