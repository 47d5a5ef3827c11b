/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

// Package deletioncost steers scale-in: it ranks the nodes Stevedore launched in the order consolidation would
// remove them and sets controller.kubernetes.io/pod-deletion-cost on the ReplicaSet pods they run, lowest on the
// node to go first. When a Deployment scales in, the ReplicaSet controller deletes the pods with the lowest cost
// first, so scale-in empties whole nodes, and consolidation deletes them instead of evicting pods.
package deletioncost

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	listers "github.com/stevedore-dev/stevedore/pkg/generated/listers/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/metrics"
	"github.com/stevedore-dev/stevedore/pkg/podutil"
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
	// seen is each node's cost at the last pass: a node's pods are patched once its cost held for a whole
	// interval, so that a node filling up in a burst has its pods patched once, not at every pass.
	seen map[string]int
}

// New returns a controller.
func New(opts Options) *Controller {
	if opts.Interval == 0 {
		opts.Interval = DefaultInterval
	}
	return &Controller{opts: opts, seen: map[string]int{}}
}

// Run reconciles every Interval until ctx ends.
func (c *Controller) Run(ctx context.Context) {
	logger := klog.FromContext(ctx).WithName("deletioncost")
	ctx = klog.NewContext(ctx, logger)
	wait.UntilWithContext(ctx, func(ctx context.Context) {
		if n, err := c.Reconcile(ctx); err != nil && ctx.Err() == nil {
			logger.Error(err, "Setting pod deletion costs failed", "patched", n)
		} else if n > 0 {
			logger.V(2).Info("Pod deletion costs set", "patched", n)
		}
	}, c.opts.Interval)
}

// rankedNode is a node with what orders it.
type rankedNode struct {
	name      string
	leaving   bool // being disrupted: its pods go anyway
	static    bool // of a static NodePool: never consolidated
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
)

// cost orders nodes the way consolidation removes them: those being disrupted first, then the fewest
// reschedulable pods, then the least requested CPU (in thousandths); static NodePools' nodes last. Nodes alike
// cost the same: the ReplicaSet controller breaks the tie, and either node empties.
func (n rankedNode) cost() int {
	switch {
	case n.leaving:
		return LeavingCost
	case n.static:
		return staticCost
	}
	return 1 + min(n.pods, maxPods)*1000 + min(999, int(n.requested*1000))
}

// Reconcile costs the nodes and patches the pods whose cost changed on nodes whose cost held since the last
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
	return c.apply(ctx, costPatches(c.settled(c.rankedNodes(claims, byNode)), byNode))
}

// settled returns the nodes whose cost is the one they had at the last pass, and remembers this pass's costs.
func (c *Controller) settled(nodes []rankedNode) []rankedNode {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := make(map[string]int, len(nodes))
	var out []rankedNode
	for _, n := range nodes {
		cost := n.cost()
		now[n.name] = cost
		if prev, ok := c.seen[n.name]; ok && prev == cost {
			out = append(out, n)
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
		rn := rankedNode{name: node.Name, pods: len(byNode[node.Name]), static: np.Spec.Replicas != nil,
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

// costPatch sets a pod's deletion cost.
type costPatch struct {
	pod  *corev1.Pod
	cost string
}

// costPatches are the ReplicaSet pods whose deletion cost is not their node's yet (a cost the user set is left
// alone), in the nodes' order.
func costPatches(nodes []rankedNode, byNode map[string][]*corev1.Pod) []costPatch {
	var patches []costPatch
	for _, n := range nodes {
		cost := strconv.Itoa(n.cost())
		for _, p := range byNode[n.name] {
			if !ownedByReplicaSet(p) {
				continue
			}
			cur, has := p.Annotations[AnnotationDeletionCost]
			managed, ours := p.Annotations[AnnotationManaged]
			if has && (!ours || cur != managed) {
				continue // the user's
			}
			if cur != cost {
				patches = append(patches, costPatch{p, cost})
			}
		}
	}
	return patches
}

// apply patches the pods' deletion costs; it returns how many it patched before the first failure.
func (c *Controller) apply(ctx context.Context, patches []costPatch) (int, error) {
	errs := make([]error, len(patches))
	workqueue.ParallelizeUntil(ctx, patchWorkers, len(patches), func(i int) {
		p := patches[i]
		body := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q,%q:%q}}}`, AnnotationDeletionCost, p.cost, AnnotationManaged, p.cost)
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

func ownedByReplicaSet(p *corev1.Pod) bool {
	for _, o := range p.OwnerReferences {
		if o.Kind == "ReplicaSet" && o.Controller != nil && *o.Controller {
			return true
		}
	}
	return false
}
