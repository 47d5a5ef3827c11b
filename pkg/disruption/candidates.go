/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package disruption

import (
	"context"
	"fmt"
	"math"
	"sort"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/cloud"
	"github.com/stevedore-dev/stevedore/pkg/commitment"
	"github.com/stevedore-dev/stevedore/pkg/gang"
	"github.com/stevedore-dev/stevedore/pkg/podutil"
	"github.com/stevedore-dev/stevedore/pkg/surge"
)

// Candidate is a node Stevedore launched that disruption may remove or replace.
type Candidate struct {
	Node      *corev1.Node
	NodeClaim *stevedorev1.NodeClaim
	NodePool  *stevedorev1.NodePool // normalised copy
	// Pods are the node's reschedulable pods (not DaemonSet or mirror pods, not finished).
	Pods  []*corev1.Pod
	Price float64
	// EvictionCost is what evicting the node's pods costs: the sum of their eviction costs.
	EvictionCost float64
	// DisruptionCost is the node's disruption cost as the Balanced policy weighs it: one for the node, plus each
	// pod's eviction cost where positive.
	DisruptionCost float64
	// BlockedBecause says why voluntary disruption must leave the node alone ("" when it may disrupt it).
	BlockedBecause string
	// Surging names the pods ("namespace/name") that would move by surging their owners; Evicted says why each
	// other pod would be evicted. Both are empty without a Surger.
	Surging map[string]bool
	Evicted map[string]string
	// gitOps are the owners of the node's pods that would surge but whose replica count a GitOps controller owns,
	// with the pods evicted instead ("namespace/name"), in the order of the pods.
	gitOps []gitOpsOwned
	// evictionBlocked says why evicting the node's pods would be refused now, where surging them is not (a
	// PodDisruptionBudget at its limit): a command that evicts (interruption, repair) sees the node blocked.
	evictionBlocked string
	// surgeBusy says why a pod of the node waits before it can surge (its owner is rolling out, scaling or surging
	// for another node).
	surgeBusy string
}

func (c *Candidate) String() string {
	return fmt.Sprintf("%s/%s/%s", c.Node.Name, c.NodeClaim.Status.InstanceType, c.NodeClaim.Status.CapacityType)
}

// Empty reports whether the node runs no reschedulable pod.
func (c *Candidate) Empty() bool { return len(c.Pods) == 0 }

// clusterView is what one disruption pass reads from the caches.
type clusterView struct {
	now        time.Time
	candidates []*Candidate
	// pools by name (normalised copies), with their NodeClaims counted.
	pools map[string]*poolState
	// verdicts say why the pass left candidates, by node name.
	verdicts map[string]*verdict
}

// candidateNames are the names of the view's candidates' nodes.
func (v *clusterView) candidateNames() map[string]bool {
	out := make(map[string]bool, len(v.candidates))
	for _, cand := range v.candidates {
		out[cand.Node.Name] = true
	}
	return out
}

type poolState struct {
	pool *stevedorev1.NodePool
	// total NodeClaims of the pool, and those being disrupted (deleted, or tainted by a running command).
	total, disrupting int
	// repairing counts the NodeClaims being disrupted because their node was unhealthy.
	repairing int
	// cost and disruptionCost total the pool's candidates' prices and disruption costs (the Balanced policy's
	// denominators).
	cost, disruptionCost float64
}

// overlaidPrices returns how a pass prices a candidate: with NodeOverlays in force, by its offering's overlaid
// price (the instance type, zone and capacity type of its node, among the NodePool's types); otherwise, or when
// the offering is not found, by the price recorded at launch. Each NodePool's types are read once a pass.
func (c *Controller) overlaidPrices(ctx context.Context) func(np *stevedorev1.NodePool, node *corev1.Node, recorded float64) float64 {
	type overlaid struct {
		types  []*cloud.InstanceType
		active bool
	}
	byPool := map[string]overlaid{}
	return func(np *stevedorev1.NodePool, node *corev1.Node, recorded float64) float64 {
		if c.opts.OverlaidTypes == nil {
			return recorded
		}
		o, ok := byPool[np.Name]
		if !ok {
			o.types, o.active = c.opts.OverlaidTypes(ctx, np)
			byPool[np.Name] = o
		}
		if !o.active {
			return recorded
		}
		name, zone, ct := node.Labels[corev1.LabelInstanceTypeStable], node.Labels[corev1.LabelTopologyZone], node.Labels[stevedorev1.LabelCapacityType]
		if price, ok := cloud.OfferingPrice(o.types, name, zone, ct); ok {
			return price
		}
		return recorded
	}
}

// view reads candidates, NodePools and budget counts from the caches.
func (c *Controller) view(ctx context.Context) (*clusterView, error) {
	now := c.opts.Clock.Now()
	v := &clusterView{now: now, pools: map[string]*poolState{}}
	pools, err := c.opts.NodePools.List(labels.Everything())
	if err != nil {
		return nil, err
	}
	for _, np := range pools {
		v.pools[np.Name] = &poolState{pool: np} // normalised by the lister
	}
	claims, err := c.opts.NodeClaims.List(labels.Everything())
	if err != nil {
		return nil, err
	}
	pods, err := c.opts.Pods.List(labels.Everything())
	if err != nil {
		return nil, err
	}
	byNode, nominated := podsByNode(pods)
	pdbs := newPDBIndex(c.opts.PDBs)
	prices := c.overlaidPrices(ctx)
	var covered map[string]float64
	if c.opts.Coverage != nil {
		covered = c.opts.Coverage(ctx).Covered
	}
	for _, claim := range claims {
		ps := v.pools[claim.Labels[stevedorev1.LabelNodePool]]
		if ps == nil {
			continue
		}
		node := c.countClaim(ps, claim)
		if node == nil {
			continue
		}
		price := commitment.Effective(prices(ps.pool, node, stevedorev1.ParsePrice(claim.Status.Price)), covered[node.Name])
		cand := newCandidate(node, claim, ps.pool, price, byNode[node.Name])
		c.planMoves(cand)
		if why := c.blocked(cand, nominated[node.Name], pdbs, now); why != nil {
			cand.BlockedBecause = why.message
			v.leave(cand, why)
		}
		ps.cost += cand.Price
		ps.disruptionCost += cand.DisruptionCost
		v.candidates = append(v.candidates, cand)
	}
	// cheapest to disrupt first; ties by name, so passes are deterministic
	sort.SliceStable(v.candidates, func(i, j int) bool {
		a, b := v.candidates[i], v.candidates[j]
		if a.EvictionCost != b.EvictionCost {
			return a.EvictionCost < b.EvictionCost
		}
		return a.Node.Name < b.Node.Name
	})
	return v, nil
}

// countClaim counts a NodeClaim in its NodePool's totals (and among those disrupting, or being repaired); it
// returns its node when the node is a candidate: initialized, and neither deleted nor disrupted.
func (c *Controller) countClaim(ps *poolState, claim *stevedorev1.NodeClaim) *corev1.Node {
	ps.total++
	node, _ := c.opts.Nodes.Get(claim.Status.NodeName)
	if claim.DeletionTimestamp != nil || node != nil && (node.DeletionTimestamp != nil || stevedorev1.IsDisrupted(node)) {
		ps.disrupting++
		if claim.Status.DisruptionReason == string(ReasonUnhealthy) {
			ps.repairing++
		}
		return nil
	}
	if node == nil || !claim.IsInitialized() {
		return nil
	}
	return node
}

// podsByNode groups the bound pods by node, and names the nodes pending pods are nominated to.
func podsByNode(pods []*corev1.Pod) (map[string][]*corev1.Pod, map[string]bool) {
	byNode := map[string][]*corev1.Pod{}
	nominated := map[string]bool{}
	for _, pod := range pods {
		if pod.Spec.NodeName != "" {
			byNode[pod.Spec.NodeName] = append(byNode[pod.Spec.NodeName], pod)
		} else if pod.Status.NominatedNodeName != "" && pod.DeletionTimestamp == nil {
			nominated[pod.Status.NominatedNodeName] = true
		}
	}
	return byNode, nominated
}

// newCandidate is a node as disruption weighs it: its reschedulable pods, what evicting them costs, and its price.
func newCandidate(node *corev1.Node, claim *stevedorev1.NodeClaim, pool *stevedorev1.NodePool, price float64, pods []*corev1.Pod) *Candidate {
	cand := &Candidate{Node: node, NodeClaim: claim, NodePool: pool, Price: price, DisruptionCost: 1}
	for _, pod := range pods {
		if podutil.Reschedulable(pod) {
			cand.Pods = append(cand.Pods, pod)
			cost := evictionCost(pod)
			cand.EvictionCost += cost
			cand.DisruptionCost += max(0, cost)
		}
	}
	return cand
}

// blocked says why voluntary disruption must leave a node alone, or nil.
func (c *Controller) blocked(cand *Candidate, nominated bool, pdbs *pdbIndex, now time.Time) *verdict {
	if podutil.DoNotDisrupt(cand.Node.Annotations, time.Time{}, now) {
		return &verdict{reason: RetainDoNotDisrupt, message: "the node is annotated do-not-disrupt"}
	}
	if request := cand.NodeClaim.Annotations[stevedorev1.AnnotationProvisioningRequest]; request != "" && c.opts.Booked != nil && c.opts.Booked(request) {
		return &verdict{reason: RetainBooked, message: fmt.Sprintf("the node was launched for ProvisioningRequest %s, whose booking holds", request)}
	}
	if nominated {
		return &verdict{reason: RetainNominated, message: "pending pods are nominated to the node"}
	}
	if cand.surgeBusy != "" {
		return &verdict{reason: RetainSurging, message: cand.surgeBusy}
	}
	if c.activity.isProtected(cand.NodeClaim.Name, cand.Empty(), now) {
		return &verdict{reason: RetainJustLaunched, message: "the node was just launched as a replacement"}
	}
	for _, pod := range cand.Pods {
		if why := blockedByPod(cand, pod, pdbs, now); why != nil {
			return why
		}
	}
	return nil
}

// blockedByPod says why one of the node's pods keeps voluntary disruption off it, or nil.
func blockedByPod(cand *Candidate, pod *corev1.Pod, pdbs *pdbIndex, now time.Time) *verdict {
	started := pod.CreationTimestamp.Time
	if pod.Status.StartTime != nil {
		started = pod.Status.StartTime.Time
	}
	if podutil.DoNotDisrupt(pod.Annotations, started, now) {
		return &verdict{reason: RetainDoNotDisrupt, message: fmt.Sprintf("pod %s/%s is annotated do-not-disrupt", pod.Namespace, pod.Name)}
	}
	if key, ok := gang.Of(pod); ok && gang.Live(pod) {
		return &verdict{reason: RetainGang, message: fmt.Sprintf("pod %s/%s runs in gang %s, which stops whole if one of its pods is moved",
			pod.Namespace, pod.Name, key)}
	}
	if why := pdbs.blocks(pod); why != "" {
		msg := fmt.Sprintf("pod %s/%s: %s", pod.Namespace, pod.Name, why)
		surges := cand.Surging[podutil.Key(pod)]
		if surges && surgesPastBudget(pod) {
			// the pod asked to move make-before-break whatever its budget: a surge deletes the old pod by scaling its
			// owner down, with no eviction and no budget taken
			if cand.evictionBlocked == "" {
				cand.evictionBlocked = msg
			}
			return nil
		}
		if surges {
			msg += fmt.Sprintf(" (annotated %s: %s, it would move make-before-break)", stevedorev1.AnnotationReplacement, stevedorev1.ReplacementSurge)
		}
		return &verdict{reason: RetainPodDisruptionBudget, message: msg}
	}
	return nil
}

// surgesPastBudget reports whether a pod asked, with its own stevedore.dev/replacement: Surge annotation, to move
// make-before-break even when its PodDisruptionBudget allows no disruption. Without it such a budget keeps its pods'
// nodes, as it does for every autoscaler that evicts: teams set one so that no autoscaler restarts the pod.
func surgesPastBudget(pod *corev1.Pod) bool {
	return pod.Annotations[stevedorev1.AnnotationReplacement] == string(stevedorev1.ReplacementSurge)
}

// planMoves says how each of the candidate's pods would move: by surging its owner or by eviction.
func (c *Controller) planMoves(cand *Candidate) {
	if c.opts.Surge == nil {
		return
	}
	cand.Surging, cand.Evicted, cand.gitOps = map[string]bool{}, map[string]string{}, nil
	surged := map[string]int32{}
	for _, pod := range cand.Pods {
		if owner, why, wait := c.opts.Surge.Check(pod, cand.NodePool.Spec.Disruption.Replacement, surged[ownerKey(pod)]); why != "" {
			if owner.GitOps != "" {
				cand.gitOps = addGitOpsOwned(cand.gitOps, owner, podutil.Key(pod))
			}
			if wait && cand.surgeBusy == "" {
				cand.surgeBusy = fmt.Sprintf("pod %s/%s waits to surge: %s", pod.Namespace, pod.Name, why)
			}
			cand.Evicted[podutil.Key(pod)] = why
			continue
		}
		surged[ownerKey(pod)]++
		cand.Surging[podutil.Key(pod)] = true
	}
}

// gitOpsOwned is an owner whose pods do not surge because a GitOps controller owns its replica count, and its pods
// of a node.
type gitOpsOwned struct {
	owner surge.Owner
	pods  []string
}

// addGitOpsOwned adds a pod to its owner's entry, or the owner.
func addGitOpsOwned(owned []gitOpsOwned, owner surge.Owner, pod string) []gitOpsOwned {
	for i := range owned {
		if owned[i].owner.UID == owner.UID {
			owned[i].pods = append(owned[i].pods, pod)
			return owned
		}
	}
	return append(owned, gitOpsOwned{owner: owner, pods: []string{pod}})
}

// ownerKey identifies a pod's controller.
func ownerKey(pod *corev1.Pod) string {
	if ref := metav1.GetControllerOf(pod); ref != nil {
		return pod.Namespace + "/" + string(ref.UID)
	}
	return ""
}

// evictionCost weighs how much evicting a pod hurts: one per pod, more for a higher pod-deletion-cost or
// priority, kept within [-10, 10].
func evictionCost(pod *corev1.Pod) float64 {
	cost := 1.0
	if v, ok := pod.Annotations["controller.kubernetes.io/pod-deletion-cost"]; ok {
		if n, err := strconv.ParseFloat(v, 64); err == nil {
			cost += n / math.Pow(2, 27)
		}
	}
	if pod.Spec.Priority != nil {
		cost += float64(*pod.Spec.Priority) / math.Pow(2, 25)
	}
	return math.Max(-10, math.Min(10, cost))
}

// pdbIndex answers "would evicting this pod be refused by a PodDisruptionBudget".
type pdbIndex struct {
	byNamespace map[string][]pdbEntry
}

type pdbEntry struct {
	name     string
	selector labels.Selector
	allowed  int32
}

func newPDBIndex(lister pdbLister) *pdbIndex {
	idx := &pdbIndex{byNamespace: map[string][]pdbEntry{}}
	if lister == nil {
		return idx
	}
	pdbs, err := lister.List(labels.Everything())
	if err != nil {
		return idx
	}
	for _, pdb := range pdbs {
		sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
		if err != nil || pdb.Spec.Selector == nil {
			continue
		}
		idx.byNamespace[pdb.Namespace] = append(idx.byNamespace[pdb.Namespace],
			pdbEntry{name: pdb.Name, selector: sel, allowed: pdb.Status.DisruptionsAllowed})
	}
	return idx
}

// blocks says why the eviction API would refuse to evict the pod now: a PDB that allows no disruption, or more
// than one PDB selecting it.
func (idx *pdbIndex) blocks(pod *corev1.Pod) string {
	var matched []pdbEntry
	for _, e := range idx.byNamespace[pod.Namespace] {
		if e.selector.Matches(labels.Set(pod.Labels)) {
			matched = append(matched, e)
		}
	}
	switch {
	case len(matched) > 1:
		return "more than one PodDisruptionBudget selects it"
	case len(matched) == 1 && matched[0].allowed <= 0:
		return "PodDisruptionBudget " + matched[0].name + " allows no disruption"
	}
	return ""
}

// pdbLister lists PodDisruptionBudgets.
type pdbLister interface {
	List(selector labels.Selector) ([]*policyv1.PodDisruptionBudget, error)
}
