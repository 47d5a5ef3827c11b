/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package provision

import (
	"context"
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/klog/v2"

	"github.com/stevedore-dev/stevedore/pkg/apis/config"
	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/cloud"
	"github.com/stevedore-dev/stevedore/pkg/commitment"
	"github.com/stevedore-dev/stevedore/pkg/nodeclaim"
	"github.com/stevedore-dev/stevedore/pkg/solver"
	"github.com/stevedore-dev/stevedore/pkg/solver/simulation"
	"github.com/stevedore-dev/stevedore/pkg/state"
)

// input builds the solver input: the NodePools with their instance types and what their limits still allow, the
// DaemonSets, and a snapshot of the cluster with the NodeClaims being launched as nodes.
func (p *planner) input(ctx context.Context, pods []*corev1.Pod) (solver.Input, map[string]*stevedorev1.NodeClaim, error) {
	logger := klog.FromContext(ctx)
	pools, err := p.opts.NodePools.List(labels.Everything())
	if err != nil {
		return solver.Input{}, nil, err
	}
	daemonSets := p.daemonSetPods()
	claims, err := p.NodeClaims()
	if err != nil {
		return solver.Input{}, nil, err
	}
	usage := state.NodePoolUsage(claims)
	byName := map[string]*cloud.InstanceType{}
	typesOf := map[string][]*cloud.InstanceType{}
	var unavailable []string
	for _, np := range pools {
		if np.DeletionTimestamp != nil || np.Spec.Replicas != nil {
			continue // a static NodePool keeps its size whatever the pods
		}
		its, err := p.InstanceTypes(ctx, np)
		if err != nil {
			logger.Error(err, "NodePool cannot launch nodes now", "nodepool", np.Name)
			unavailable = append(unavailable, fmt.Sprintf("NodePool %s cannot launch nodes now: %v", np.Name, err))
			continue
		}
		for _, it := range its {
			byName[it.Name] = it
		}
		typesOf[np.Name] = its
	}
	coverage := p.coverage(ctx, claims, byName)
	var options []solver.NodePoolOption
	for _, np := range pools {
		its, ok := typesOf[np.Name]
		if !ok {
			continue
		}
		its = commitment.Offer(its, coverage)
		np, its := p.withSpotRisk(ctx, np, its)
		opt, err := solver.NewNodePoolOption(np, its, solver.RemainingLimits(np, usage[np.Name].List()), daemonSets, p.opts.Args.Region)
		if err != nil {
			logger.Error(err, "NodePool is invalid", "nodepool", np.Name)
			continue
		}
		opt.MinValuesBestEffort = p.opts.Args.MinValuesPolicy == config.MinValuesBestEffort
		options = append(options, opt)
	}
	solver.SortNodePools(options)
	quotas, err := p.quotas(ctx, claims)
	if err != nil {
		return solver.Input{}, nil, err
	}
	solver.AttachQuotas(options, quotas)
	snap, inflight, claimByNode, err := p.clusterSnapshot(ctx, claims, byName)
	if err != nil {
		return solver.Input{}, nil, err
	}
	return solver.Input{Pods: pods, NodePools: options, Snapshot: snap, InFlight: inflight, TimeBudget: p.opts.Args.SolveTimeout.Duration,
		Region: p.opts.Args.Region, Unavailable: unavailable}, claimByNode, nil
}

// Coverage is how the Commitments cover the cluster's on-demand instances now (none without a Commitments
// lister).
func (p *planner) Coverage(ctx context.Context) commitment.Coverage {
	if p.opts.Commitments == nil {
		return commitment.Coverage{}
	}
	claims, err := p.NodeClaims()
	if err != nil {
		return commitment.Coverage{}
	}
	byName := map[string]*cloud.InstanceType{}
	if pools, err := p.opts.NodePools.List(labels.Everything()); err == nil {
		for _, np := range pools {
			its, err := p.InstanceTypes(ctx, np)
			if err != nil {
				continue
			}
			for _, it := range its {
				byName[it.Name] = it
			}
		}
	}
	return p.coverage(ctx, claims, byName)
}

// coverage is how the Commitments cover the cluster's on-demand instances now: what each has left is offered to
// the solve. Nodes Stevedore did not launch are priced from the NodePools' types (left out when none has theirs).
func (p *planner) coverage(ctx context.Context, claims []*stevedorev1.NodeClaim, byName map[string]*cloud.InstanceType) commitment.Coverage {
	if p.opts.Commitments == nil {
		return commitment.Coverage{}
	}
	objs, err := p.opts.Commitments.List(labels.Everything())
	if err != nil || len(objs) == 0 {
		return commitment.Coverage{}
	}
	commitments, problems := commitment.CompileAll(objs)
	for name, err := range problems {
		klog.FromContext(ctx).V(2).Info("Commitment cannot apply", "commitment", name, "err", err)
	}
	nodes, err := p.opts.Nodes.List(labels.Everything())
	if err != nil {
		nodes = nil
	}
	types := make([]*cloud.InstanceType, 0, len(byName))
	for _, it := range byName {
		types = append(types, it)
	}
	listed := func(name, zone, ct string) float64 {
		price, _ := cloud.OfferingPrice(types, name, zone, ct)
		return price
	}
	return commitment.Cover(commitments, commitment.Instances(claims, nodes, listed))
}

// daemonSetPods returns one pod per DaemonSet of the cluster, as the solver counts them on new nodes.
func (p *planner) daemonSetPods() []*corev1.Pod {
	var out []*corev1.Pod
	if dss, err := p.opts.DaemonSets.List(labels.Everything()); err == nil {
		for _, ds := range dss {
			out = append(out, solver.DaemonSetPod(ds))
		}
	}
	return out
}

// podsByNode groups the live pods bound to a node, and those binding to one, by node.
func (p *planner) podsByNode(pods []*corev1.Pod) map[string][]*corev1.Pod {
	byNode := map[string][]*corev1.Pod{}
	for _, pod := range pods {
		if pod.Spec.NodeName != "" && pod.Status.Phase != corev1.PodSucceeded && pod.Status.Phase != corev1.PodFailed {
			byNode[pod.Spec.NodeName] = append(byNode[pod.Spec.NodeName], pod)
		}
	}
	for node, ps := range p.plans.Binding() {
		byNode[node] = append(byNode[node], ps...)
	}
	return byNode
}

// plannedLive returns the pods planned on a NodeClaim that still exist and are neither bound nor binding yet. A planned pod that
// was deleted (e.g. evicted from a node being replaced) is forgotten: it gives its room to the pod that replaces it.
func (p *planner) plannedLive(claim string) []*corev1.Pod {
	var out []*corev1.Pod
	for _, pod := range p.plans.Pods(claim) {
		cur, err := p.opts.Pods.Pods(pod.Namespace).Get(pod.Name)
		if err != nil || cur.UID != pod.UID || cur.DeletionTimestamp != nil {
			p.plans.Forget(pod.UID)
			continue
		}
		if cur.Spec.NodeName == "" && !p.plans.IsBinding(pod.UID) { // a bound pod counts on its node already
			out = append(out, pod)
		}
	}
	return out
}

// clusterSnapshot puts the cluster's nodes and bound pods in a snapshot, with the pods planned on the nodes of
// initialized NodeClaims that are not bound yet, replacing the nodes of NodeClaims not yet initialized (and adding
// those not yet registered) by the node they will be, with the pods planned on them.
func (p *planner) clusterSnapshot(ctx context.Context, claims []*stevedorev1.NodeClaim, its map[string]*cloud.InstanceType) (*simulation.Snapshot, []solver.InFlightNode, map[string]*stevedorev1.NodeClaim, error) {
	nodes, err := p.opts.Nodes.List(labels.Everything())
	if err != nil {
		return nil, nil, nil, err
	}
	pods, err := p.opts.Pods.List(labels.Everything())
	if err != nil {
		return nil, nil, nil, err
	}
	byNode := p.podsByNode(pods)
	for node, placed := range byNode {
		for i, pod := range placed {
			placed[i] = withAllocatedDevices(p.opts.Devices, pod)
		}
		byNode[node] = placed
	}
	p.wakeups.adoptNominations(ctx, pods, claims)
	type inflightNode struct {
		claim *stevedorev1.NodeClaim
		node  *corev1.Node
	}
	inflightNodes := map[string]inflightNode{}
	readyClaims := map[string]string{} // node -> NodeClaim, for the initialized ones
	for _, c := range claims {
		if c.DeletionTimestamp != nil {
			continue
		}
		if c.IsInitialized() {
			if c.Status.NodeName != "" {
				readyClaims[c.Status.NodeName] = c.Name
			}
			continue
		}
		node := nodeclaim.Node(c, its, p.opts.Args.Region)
		inflightNodes[node.Name] = inflightNode{claim: c, node: node}
	}
	sort.Slice(nodes, func(i, j int) bool { return nodes[i].Name < nodes[j].Name })
	snap := simulation.NewSnapshot()
	p.podInfos.Rotate()
	snap.UsePodInfos(p.podInfos)
	for _, n := range nodes {
		if _, inflight := inflightNodes[n.Name]; inflight {
			continue
		}
		placed := byNode[n.Name]
		if claim, ok := readyClaims[n.Name]; ok {
			// the pods planned on a ready node and not bound yet (in a burst, waiting their turn in the queue)
			// hold its room and count in its spread domains, as on a node still coming
			placed = append(append([]*corev1.Pod(nil), placed...), p.plannedLive(claim)...)
		}
		snap.AddNode(n, placed...)
	}
	var inflight []solver.InFlightNode
	claimByNode := map[string]*stevedorev1.NodeClaim{}
	names := make([]string, 0, len(inflightNodes))
	for name := range inflightNodes {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		c, node := inflightNodes[name].claim, inflightNodes[name].node
		if len(node.Status.Allocatable) == 0 {
			continue
		}
		placed := append(append([]*corev1.Pod(nil), byNode[name]...), p.plannedLive(c.Name)...)
		snap.AddNode(node, placed...)
		inflight = append(inflight, solver.InFlightNode{Name: name, Claim: c.Name, NodePool: c.Labels[stevedorev1.LabelNodePool]})
		claimByNode[name] = c
	}
	return snap, inflight, claimByNode, nil
}
