/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package provision

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/podutil"
	"github.com/stevedore-dev/stevedore/pkg/solver"
	"github.com/stevedore-dev/stevedore/pkg/solver/simulation"
)

// Cluster models the cluster for "what if these nodes went away" questions: a snapshot of every node with its
// pods (NodeClaims in flight as the nodes they will be, with the pods planned on them), the NodePools as the
// solver sees them, and the nodes pods may move to. Disruption builds one per pass and asks it many questions;
// each question leaves the snapshot as it found it.
type Cluster struct {
	Snapshot  *simulation.Snapshot
	NodePools []solver.NodePoolOption
	// Targets are the nodes a pod may move to: every node but those leaving (deleted, tainted disrupted,
	// cordoned).
	Targets []solver.InFlightNode
	Region  string
	// Displaced is how many pods were waiting for a place when the model was built.
	Displaced int
	// plan is the provisioner's door into the solver.
	plan func(context.Context, Request) (*Result, error)
}

// Cluster builds a model of the cluster as the caches show it now. Pods that must find a new place — those of
// nodes being drained and pending pods not yet planned on a NodeClaim — are placed on the target nodes first, with
// sim, so that the room they will take is not promised to another node's pods; those that fit no target keep no
// room (the provisioner launches nodes for them). Displaced counts them. A pod whose place is known already keeps
// its room there when it fits: a pending pod nominated to a node (the scheduler counts it there), and a pod of a
// draining node that pinned names, by UID (a move under way planned its successor there).
//
// Warm pods (bookings of ProvisioningRequests, then capacity buffers) are placed after them, so the room they keep is kept in every answer.
func (p *planner) Cluster(ctx context.Context, sim *simulation.Simulator, pinned map[types.UID]string) (*Cluster, error) {
	return p.cluster(ctx, sim, p.warmPods(), pinned)
}

// cluster builds the model with held, pods that keep room (warm pods), placed after the displaced ones.
func (p *planner) cluster(ctx context.Context, sim *simulation.Simulator, held []*corev1.Pod, pinned map[types.UID]string) (*Cluster, error) {
	in, _, err := p.input(ctx, nil)
	if err != nil {
		return nil, err
	}
	c := &Cluster{Snapshot: in.Snapshot, NodePools: in.NodePools, Region: in.Region, plan: p.Plan}
	displaced := p.leavingPods(c)
	pending, err := p.opts.Pods.List(labels.Everything())
	if err != nil {
		return nil, err
	}
	for _, pod := range pending {
		if pod.Spec.NodeName == "" && podutil.Reschedulable(pod) && !p.isPlanned(pod.UID) && !p.plans.IsBinding(pod.UID) {
			displaced = append(displaced, pod)
		}
	}
	c.Displaced = len(displaced)
	displaced = c.pin(ctx, sim, displaced, pinned)
	displaced = append(displaced, held...)
	if len(displaced) == 0 {
		return c, nil
	}
	// The solver leaves the pods it puts on existing nodes in the snapshot: that is the room they keep.
	if _, err := p.Plan(ctx, Request{Simulator: sim, WhatIf: true, Input: solver.Input{Pods: displaced, NodePools: c.NodePools,
		Snapshot: c.Snapshot, InFlight: c.Targets, Region: c.Region}}); err != nil {
		return nil, fmt.Errorf("placing %d displaced pods: %w", len(displaced), err)
	}
	return c, nil
}

// leavingPods takes out of the cluster's snapshot the pods of nodes leaving (not planned on a NodeClaim already),
// and returns them unbound; every other node becomes a target.
func (p *planner) leavingPods(c *Cluster) []*corev1.Pod {
	infos, _ := c.Snapshot.List()
	var displaced []*corev1.Pod
	for _, ni := range infos {
		node := ni.Node()
		if node == nil {
			continue
		}
		if !leaving(node) {
			c.Targets = append(c.Targets, solver.InFlightNode{Name: node.Name, Claim: node.Labels[stevedorev1.LabelNodeClaim],
				NodePool: node.Labels[stevedorev1.LabelNodePool]})
			continue
		}
		for _, pi := range ni.GetPods() {
			if pod := pi.GetPod(); podutil.Reschedulable(pod) && !p.isPlanned(pod.UID) {
				displaced = append(displaced, pod)
			}
		}
	}
	for _, pod := range displaced {
		_ = c.Snapshot.RemovePod(pod.Spec.NodeName, pod)
	}
	for i, pod := range displaced {
		moved := pod.DeepCopy()
		moved.Spec.NodeName = ""
		moved.Status.NominatedNodeName = ""
		displaced[i] = moved
	}
	return displaced
}

// pin puts each displaced pod whose place is known (pinned, by UID, or its nomination) on that node of the
// snapshot when it is a target and the pod fits there, and returns the others, in their order.
func (c *Cluster) pin(ctx context.Context, sim *simulation.Simulator, displaced []*corev1.Pod, pinned map[types.UID]string) []*corev1.Pod {
	targets := make(map[string]bool, len(c.Targets))
	for _, t := range c.Targets {
		targets[t.Name] = true
	}
	rest := displaced[:0:0]
	used := false
	for _, pod := range displaced {
		node, ok := pinned[pod.UID]
		if !ok {
			node = pod.Status.NominatedNodeName
		}
		if node == "" || !targets[node] || c.Snapshot.NodeInfo(node) == nil {
			rest = append(rest, pod)
			continue
		}
		if !used {
			sim.Use(c.Snapshot)
			used = true
		}
		if err := sim.Fits(ctx, pod, node); err != nil {
			rest = append(rest, pod)
			continue
		}
		placed := pod.DeepCopy()
		placed.Spec.NodeName = node
		placed.Status.NominatedNodeName = ""
		_ = c.Snapshot.AddPod(node, placed)
	}
	return rest
}

// isPlanned reports whether a pod is planned on a NodeClaim (it counts there already).
func (p *planner) isPlanned(uid types.UID) bool {
	_, ok := p.plans.ClaimOf(uid)
	return ok
}

// leaving reports whether a node takes no new pods because it is going away or cordoned.
func leaving(node *corev1.Node) bool {
	return node.DeletionTimestamp != nil || node.Spec.Unschedulable || stevedorev1.IsDisrupted(node)
}

// Removal is the answer to "what if these nodes went away".
type Removal struct {
	// Plan places the nodes' reschedulable pods on the remaining nodes (Plan.InFlight, by node) and new nodes.
	Plan *solver.Plan
	// Pods are the reschedulable pods of the removed nodes.
	Pods []*corev1.Pod
}

// SimulateRemoval plans where the reschedulable pods of the named nodes would go were the nodes removed: onto the
// other target nodes first, then onto new nodes of the NodePools, every placement checked with the scheduler's
// Filter plugins. budget bounds the solver's improvement search (0: greedy only). The snapshot is restored
// before it returns.
func (c *Cluster) SimulateRemoval(ctx context.Context, sim *simulation.Simulator, nodes []string, budget time.Duration) (*Removal, error) {
	removed := map[string]bool{}
	type saved struct {
		node *corev1.Node
		pods []*corev1.Pod
	}
	var restore []saved
	var pods []*corev1.Pod
	for _, name := range nodes {
		ni := c.Snapshot.NodeInfo(name)
		if ni == nil || removed[name] {
			continue
		}
		removed[name] = true
		s := saved{node: ni.Node()}
		for _, pi := range ni.GetPods() {
			pod := pi.GetPod()
			s.pods = append(s.pods, pod)
			if podutil.Reschedulable(pod) {
				moved := pod.DeepCopy()
				moved.Spec.NodeName = ""
				moved.Status.NominatedNodeName = ""
				pods = append(pods, moved)
			}
		}
		restore = append(restore, s)
		c.Snapshot.RemoveNode(name)
	}
	defer func() {
		for _, s := range restore {
			c.Snapshot.AddNode(s.node, s.pods...)
		}
	}()
	targets := make([]solver.InFlightNode, 0, len(c.Targets))
	for _, t := range c.Targets {
		if !removed[t.Name] {
			targets = append(targets, t)
		}
	}
	res, err := c.plan(ctx, Request{Simulator: sim, WhatIf: true, Input: solver.Input{Pods: pods, NodePools: c.NodePools,
		Snapshot: c.Snapshot, InFlight: targets, TimeBudget: budget, Region: c.Region}})
	if err != nil {
		return nil, err
	}
	plan := res.Plan
	for node, placed := range plan.InFlight {
		for _, pod := range placed {
			_ = c.Snapshot.RemovePod(node, pod)
		}
	}
	return &Removal{Plan: plan, Pods: pods}, nil
}
