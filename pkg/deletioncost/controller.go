/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

// Package deletioncost steers scale-in: it ranks the nodes Stevedore launched in the order consolidation would
// remove them and sets controller.kubernetes.io/pod-deletion-cost on the ReplicaSet pods whose rank decides what a
// scale-in removes next: for each ReplicaSet, its pods on the first-ranked nodes that hold half of them, below the
// cost of a pod with none (0). When a Deployment scales in, the ReplicaSet controller deletes the pods with the
// lowest cost first, so scale-in empties whole nodes, and consolidation deletes them instead of evicting pods.
package deletioncost

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/floor"
	listers "github.com/stevedore-dev/stevedore/pkg/generated/listers/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/metrics"
	"github.com/stevedore-dev/stevedore/pkg/podutil"
	"github.com/stevedore-dev/stevedore/pkg/reconcile"
)

const (
	// AnnotationDeletionCost is the ReplicaSet controller's annotation: pods with a lower cost are deleted first.
	AnnotationDeletionCost = "controller.kubernetes.io/pod-deletion-cost"
	// AnnotationManaged records the cost Stevedore set. A pod whose cost differs from it (or that had a cost
	// before Stevedore set one) is the user's: Stevedore leaves it alone.
	AnnotationManaged = "stevedore.dev/pod-deletion-cost"
)

// Defaults.
const (
	DefaultInterval = 10 * time.Second
	// patchWorkers bound the concurrent pod patches.
	patchWorkers = 4
)

// Options configure the controller.
type Options struct {
	Kube       kubernetes.Interface
	Pods       corelisters.PodLister
	Nodes      corelisters.NodeLister
	NodeClaims listers.NodeClaimLister
	NodePools  listers.NodePoolLister
	// Interval separates passes. Default DefaultInterval.
	Interval time.Duration
}

// Controller keeps the deletion costs of the pods on Stevedore's nodes in the order consolidation removes nodes.
type Controller struct {
	opts Options

	mu sync.Mutex
	// seen is each pod's wanted cost at the last pass ("" for none): a pod is patched once the cost it should have
	// held for a whole interval, so that a node filling up in a burst has its pods patched once, not at every pass.
	seen map[string]string
}

// New returns a controller.
func New(opts Options) *Controller {
	if opts.Interval == 0 {
		opts.Interval = DefaultInterval
	}
	return &Controller{opts: opts, seen: map[string]string{}}
}

// Run reconciles every Interval until ctx ends.
func (c *Controller) Run(ctx context.Context) {
	reconcile.Every(ctx, "deletioncost", c.opts.Interval, "Setting pod deletion costs failed", func(ctx context.Context) error {
		n, err := c.Reconcile(ctx)
		if err != nil {
			return fmt.Errorf("after %d pods patched: %w", n, err)
		}
		if n > 0 {
			klog.FromContext(ctx).V(2).Info("Pod deletion costs set", "patched", n)
		}
		return nil
	})
}

// rankedNode is a node with what orders it.
type rankedNode struct {
	name      string
	leaving   bool // being disrupted: its pods go anyway
	static    bool // of a static NodePool: never consolidated
	onDemand  bool // on-demand or reserved capacity: its pods may hold their workload's on-demand floor
	pods      int
	requested float64 // requested CPU share of the allocatable
}

// Costs: a node's cost depends on the node alone, so that a change on one node re-patches only its own pods.
const (
	// LeavingCost is the cost of a pod on a node being disrupted: below any other value, so that the ReplicaSet
	// controller deletes it before any sibling (a pod with no cost counts as 0), and a surge's successor stays.
	LeavingCost = math.MinInt32
	// staticCost is above every other node's (maxPods*1000 + 999 + 1).
	staticCost = 1 << 20
	maxPods    = 999
	// rankedOffset takes a ranked node's cost below 0, the cost of the pods left without one: those a scale-in
	// removes next go before them.
	rankedOffset = 1 << 21
	// floorCost is the cost of a pod that holds its workload's on-demand floor (package floor) on an on-demand
	// node: above every other, so that a scale-in removes its spot siblings first and the floor still holds.
	floorCost = 1 << 22
)

// cost orders nodes the way consolidation removes them: those being disrupted first, then the fewest
// reschedulable pods, then the least requested CPU (in thousandths); static NodePools' nodes last. Nodes alike
// cost the same. The pods of a ReplicaSet that a scale-in removes next get it less rankedOffset.
func (n rankedNode) cost() int {
	switch {
	case n.leaving:
		return LeavingCost
	case n.static:
		return staticCost
	}
	return 1 + min(n.pods, maxPods)*1000 + min(999, int(n.requested*1000))
}

// Reconcile costs the nodes and patches the pods whose wanted cost differs from theirs and held since the last
// pass. It returns how many pods it patched.
func (c *Controller) Reconcile(ctx context.Context) (int, error) {
	claims, err := c.opts.NodeClaims.List(labels.Everything())
	if err != nil {
		return 0, err
	}
	pods, err := c.opts.Pods.List(labels.Everything())
	if err != nil {
		return 0, err
	}
	byNode := map[string][]*corev1.Pod{}
	for _, p := range pods {
		if p.Spec.NodeName != "" && podutil.Reschedulable(p) {
			byNode[p.Spec.NodeName] = append(byNode[p.Spec.NodeName], p)
		}
	}
	return c.apply(ctx, costPatches(c.settled(wantedCosts(c.rankedNodes(claims, byNode), byNode))))
}

// wantedCost is the deletion cost a steered pod should have ("" for none).
type wantedCost struct {
	pod  *corev1.Pod
	cost string
}

// wantedCosts are the costs the ReplicaSet pods of the ranked nodes should have. Pods on nodes being disrupted
// get LeavingCost, on static NodePools' nodes staticCost, pods with an on-demand floor on on-demand nodes
// floorCost. Of the others, each ReplicaSet's pods on the
// first-ranked nodes (ties by name) that hold half of them (rounded up) get their node's cost less rankedOffset:
// they are what a scale-in removes next, and a scale-in by up to half is steered. The rest get none, so that a
// burst's new nodes, ranked last, cost no writes. The result is in the nodes' order, each node's pods by name.
func wantedCosts(nodes []rankedNode, byNode map[string][]*corev1.Pod) []wantedCost {
	nodes = slices.Clone(nodes)
	slices.SortFunc(nodes, func(a, b rankedNode) int { return cmp.Or(cmp.Compare(a.cost(), b.cost()), cmp.Compare(a.name, b.name)) })
	type share struct{ total, counted int }
	shares := map[string]*share{} // by ReplicaSet
	for _, n := range nodes {
		for _, p := range byNode[n.name] {
			if rs := replicaSetOf(p); rs != "" && !n.static {
				if shares[rs] == nil {
					shares[rs] = &share{}
				}
				shares[rs].total++
			}
		}
	}
	var out []wantedCost
	for _, n := range nodes {
		pods := slices.Clone(byNode[n.name])
		slices.SortFunc(pods, func(a, b *corev1.Pod) int { return cmp.Compare(podutil.Key(a), podutil.Key(b)) })
		// a node's pods count towards their ReplicaSet's half only once the whole node was looked at: a node
		// is in a ReplicaSet's first half if its pods before it were fewer than half
		before := map[string]int{}
		for _, p := range pods {
			if rs := replicaSetOf(p); rs != "" && !n.static {
				before[rs] = shares[rs].counted
			}
		}
		for _, p := range pods {
			rs := replicaSetOf(p)
			if rs == "" {
				continue
			}
			out = append(out, wantedCost{pod: p, cost: podCost(n, p, 2*before[rs] < shares[rs].total)})
			if !n.static {
				shares[rs].counted++
			}
		}
	}
	return out
}

// podCost is the cost a ReplicaSet pod on the node should have ("" for none); firstHalf says the node is among
// the first-ranked that hold half of the pod's ReplicaSet.
func podCost(n rankedNode, p *corev1.Pod, firstHalf bool) string {
	_, hasFloor := p.Annotations[floor.Annotation]
	switch {
	case n.leaving, n.static:
		return strconv.Itoa(n.cost())
	case hasFloor && n.onDemand:
		return strconv.Itoa(floorCost)
	case firstHalf:
		return strconv.Itoa(n.cost() - rankedOffset)
	}
	return ""
}

// settled returns the wanted costs that are the ones the pods had at the last pass, and remembers this pass's.
func (c *Controller) settled(wanted []wantedCost) []wantedCost {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := make(map[string]string, len(wanted))
	var out []wantedCost
	for _, w := range wanted {
		key := podutil.Key(w.pod)
		now[key] = w.cost
		if prev, ok := c.seen[key]; ok && prev == w.cost {
			out = append(out, w)
		}
	}
	c.seen = now
	return out
}

// rankedNodes describes, for costing, the initialized nodes of NodeClaims and the pods on them. The nodes of a
// NodePool with consolidation off are left out: no node of theirs is removed for being emptied.
func (c *Controller) rankedNodes(claims []*stevedorev1.NodeClaim, byNode map[string][]*corev1.Pod) []rankedNode {
	var nodes []rankedNode
	for _, cl := range claims {
		if cl.Status.NodeName == "" || !cl.IsInitialized() {
			continue
		}
		node, err := c.opts.Nodes.Get(cl.Status.NodeName)
		if err != nil {
			continue
		}
		np, err := c.opts.NodePools.Get(cl.Labels[stevedorev1.LabelNodePool])
		if err != nil {
			continue
		}
		rn := rankedNode{name: node.Name, pods: len(byNode[node.Name]), static: np.Spec.Replicas != nil, onDemand: floor.OnDemand(node),
			leaving: cl.DeletionTimestamp != nil || node.DeletionTimestamp != nil || cl.Status.DisruptionReason != ""}
		if !rn.static && !rn.leaving && np.Spec.Disruption.ConsolidationOff() {
			continue
		}
		if alloc := node.Status.Allocatable.Cpu().MilliValue(); alloc > 0 {
			var req int64
			for _, p := range byNode[node.Name] {
				for _, ctr := range p.Spec.Containers {
					req += ctr.Resources.Requests.Cpu().MilliValue()
				}
			}
			rn.requested = float64(req) / float64(alloc)
		}
		nodes = append(nodes, rn)
	}
	return nodes
}

// costPatches are the wanted costs the pods do not have yet. A cost the user set is left alone; a pod that should
// have none loses the one Stevedore set.
func costPatches(wanted []wantedCost) []wantedCost {
	var patches []wantedCost
	for _, w := range wanted {
		cur, has := w.pod.Annotations[AnnotationDeletionCost]
		managed, ours := w.pod.Annotations[AnnotationManaged]
		if has && (!ours || cur != managed) {
			continue // the user's
		}
		if cur != w.cost {
			patches = append(patches, w)
		}
	}
	return patches
}

// apply patches the pods' deletion costs (an empty one removes it); it returns how many it patched before the
// first failure.
func (c *Controller) apply(ctx context.Context, patches []wantedCost) (int, error) {
	errs := make([]error, len(patches))
	workqueue.ParallelizeUntil(ctx, patchWorkers, len(patches), func(i int) {
		p := patches[i]
		value := "null"
		if p.cost != "" {
			value = strconv.Quote(p.cost)
		}
		body := fmt.Sprintf(`{"metadata":{"annotations":{%q:%s,%q:%s}}}`, AnnotationDeletionCost, value, AnnotationManaged, value)
		_, err := c.opts.Kube.CoreV1().Pods(p.pod.Namespace).Patch(ctx, p.pod.Name, types.MergePatchType, []byte(body), metav1.PatchOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			errs[i] = fmt.Errorf("pod %s/%s: %w", p.pod.Namespace, p.pod.Name, err)
		}
	})
	patched := 0
	for _, err := range errs {
		if err != nil {
			return patched, err
		}
		patched++
	}
	metrics.PodDeletionCostPatches.Add(float64(patched))
	return patched, nil
}

// replicaSetOf names the ReplicaSet that controls a pod ("" for none).
func replicaSetOf(p *corev1.Pod) string {
	if o := metav1.GetControllerOf(p); o != nil && o.Kind == "ReplicaSet" {
		return p.Namespace + "/" + o.Name
	}
	return ""
}
