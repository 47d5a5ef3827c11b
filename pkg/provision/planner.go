/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package provision

import (
	"context"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/metrics"
	"github.com/stevedore-dev/stevedore/pkg/solver"
	"github.com/stevedore-dev/stevedore/pkg/solver/simulation"
	"github.com/stevedore-dev/stevedore/pkg/state"
)

// Request is one question to the planner: the solver's input (the pods, the NodePools they may open nodes of,
// the nodes they may go on), the simulator to answer it with, and what to launch of the answer.
type Request struct {
	Input solver.Input
	// Simulator runs the scheduler's plugins for this question; nil takes the live path's own, which answers one
	// question at a time.
	Simulator *simulation.Simulator
	// WhatIf marks a question about a cluster that may be (disruption's model): the CapacityQuotas its plan finds
	// reached kept no node from launching, and are not recorded.
	WhatIf bool
	// Launch creates NodeClaims for the plan's new nodes; nil plans only.
	Launch *Launch
	// Devices are the DRA objects of a dry run's input (nil: the cluster's). A dry run refuses a pod whose claim
	// is not among them, where the live path waits for it to be created.
	Devices *DeviceObjects
}

// Why NodeClaims are created, as the created-NodeClaims metric counts them.
const (
	launchProvisioning = "provisioning"
	launchBooking      = "booking"
	launchReplacement  = "replacement"
)

// Launch says which of a plan's new nodes are launched, and how.
type Launch struct {
	// Reason is what the created-NodeClaims metric counts them under (launchProvisioning, launchBooking).
	Reason string
	// Select picks the nodes to launch once the plan is made (nil: every new node, in the plan's order).
	Select func(*solver.Plan) []*solver.PlannedNode
	// RoomOnly launches the nodes carrying no pod: the room stays free for the pods that will take it (warm
	// capacity, bookings).
	RoomOnly bool
	// Annotations returns the extra annotations of each node's NodeClaim, by its index among the nodes launched
	// (nil: none), read before RoomOnly takes the pods off them.
	Annotations func(nodes []*solver.PlannedNode) []map[string]string
}

// Result is the planner's answer: the plan, and the NodeClaims created for it.
type Result struct {
	Plan     *solver.Plan
	Launched []*stevedorev1.NodeClaim
}

// planner is the one door into the solver: the live batch, static NodePools, disruption's model, warm capacity and
// bookings each ask it a Request, and it creates the NodeClaims the answer launches. It owns the live path's
// simulator and the PodInfos its snapshots keep from one to the next, and records the CapacityQuotas plans find
// reached.
type planner struct {
	*base
	// wakeups adopts the previous leader's plan before a snapshot of the cluster is taken (clusterSnapshot).
	wakeups *wakeups

	sim   *simulation.Simulator
	simMu sync.Mutex // the simulator is not safe for concurrent use
	// podInfos keeps the PodInfos of the pods the snapshots of the cluster hold, from one snapshot to the next.
	podInfos *simulation.PodInfos
	// devices keeps pods with ResourceClaims to the instance types whose devices satisfy them.
	devices deviceTypes

	mu sync.Mutex
	// warm are the sources of warm pods (bookings, capacity buffers), in the order their pods take room.
	warm []func() []*corev1.Pod
	// quotasReached is when each CapacityQuota last kept a node from launching (noteQuotas).
	quotasReached map[string]state.QuotaReached
	// invalidFallbacks holds, per NodePool, the spot fallback value last reported invalid (withSpotRisk), so that
	// the event is made once, not on every plan.
	invalidFallbacks map[string]string
}

func newPlanner(b *base, w *wakeups) *planner {
	return &planner{base: b, wakeups: w, sim: b.opts.Simulator, podInfos: simulation.NewPodInfos()}
}

// Plan answers a request: it solves the input, records the CapacityQuotas the plan found reached (unless the
// request is a what-if), and creates the NodeClaims the request's Launch says.
func (p *planner) Plan(ctx context.Context, req Request) (*Result, error) {
	plan, err := p.solve(ctx, req)
	if err != nil {
		return nil, err
	}
	if !req.WhatIf {
		p.noteQuotas(plan)
	}
	out := &Result{Plan: plan}
	if req.Launch == nil {
		return out, nil
	}
	nodes := plan.NewNodes
	if req.Launch.Select != nil {
		nodes = req.Launch.Select(plan)
	}
	if len(nodes) == 0 {
		return out, nil
	}
	var extra []map[string]string
	if req.Launch.Annotations != nil {
		extra = req.Launch.Annotations(nodes)
	}
	annotations := func(i int) map[string]string {
		if i < len(extra) {
			return extra[i]
		}
		return nil
	}
	if req.Launch.RoomOnly {
		for _, pn := range nodes {
			pn.Pods = nil
		}
	}
	out.Launched = p.createNodeClaims(ctx, nodes, req.Launch.Reason, annotations)
	return out, nil
}

// DryRun answers a request that launches nothing, on its own simulator, with no cluster behind it (the plan
// command): the CapacityQuotas its plan finds reached are not recorded.
func DryRun(ctx context.Context, req Request) (*Result, error) {
	if req.Launch != nil || req.Simulator == nil {
		return nil, fmt.Errorf("a dry run launches nothing and brings its own simulator")
	}
	req.WhatIf = true
	return (&planner{}).Plan(ctx, req)
}

// solve runs the solver on the request's simulator, or on the live path's own, one question at a time.
func (p *planner) solve(ctx context.Context, req Request) (*solver.Plan, error) {
	in := req.Input
	var refused map[types.UID]string
	objects, live := req.Devices, req.Devices == nil
	if live && p.base != nil {
		objects = &p.opts.Devices
	}
	if objects != nil {
		var err error
		if in.Pods, refused, err = p.devices.forSolver(ctx, *objects, in.Pods, in.NodePools, live); err != nil {
			return nil, fmt.Errorf("fitting the pods' ResourceClaims on instance types: %w", err)
		}
	}
	in.Pods = p.withFloors(ctx, in.Pods, in.Snapshot, live && !req.WhatIf)
	p.checkPoolCaps(ctx, in.Pods, live && !req.WhatIf)
	sim := req.Simulator
	if sim == nil {
		p.simMu.Lock()
		defer p.simMu.Unlock()
		sim = p.sim
	}
	plan, err := solver.NewSolver(sim).Solve(ctx, in)
	if err != nil {
		return nil, err
	}
	for uid, why := range refused {
		plan.Unschedulable[uid] = why
	}
	return plan, nil
}

// CreateNodeClaims creates a NodeClaim for each planned node, in parallel (a burst plans hundreds and each create
// is an API round trip), with extra annotations, and plans each node's pods on it. It returns the NodeClaims
// created; a failed create is logged and its pods are provisioned again.
// Extra annotations mean replacements (the metric's reason).
func (p *planner) CreateNodeClaims(ctx context.Context, nodes []*solver.PlannedNode, annotations map[string]string) []*stevedorev1.NodeClaim {
	reason := launchProvisioning
	if len(annotations) > 0 {
		reason = launchReplacement
	}
	return p.createNodeClaims(ctx, nodes, reason, func(int) map[string]string { return annotations })
}

// createNodeClaims is CreateNodeClaims with the extra annotations of each node, by its index, and the reason the
// created-NodeClaims metric counts them under.
func (p *planner) createNodeClaims(ctx context.Context, nodes []*solver.PlannedNode, reason string,
	annotationsOf func(i int) map[string]string) []*stevedorev1.NodeClaim {
	logger := klog.FromContext(ctx)
	created := make([]*stevedorev1.NodeClaim, len(nodes))
	workqueue.ParallelizeUntil(ctx, createWorkers, len(nodes), func(i int) {
		pn := nodes[i]
		hash := ""
		if p.opts.NodeClassHash != nil {
			hash = p.opts.NodeClassHash(ctx, pn.NodePool.Spec.Template.Spec.NodeClassRef)
		}
		nc := NewNodeClaim(pn, hash)
		annotations := annotationsOf(i)
		for k, v := range annotations {
			nc.Annotations[k] = v
		}
		claim, err := p.opts.Stevedore.StevedoreV1().NodeClaims().Create(ctx, nc, metav1.CreateOptions{})
		if err != nil {
			logger.Error(err, "Creating a NodeClaim failed; its pods will be provisioned again", "nodepool", pn.NodePool.Name)
			return
		}
		p.plans.Created(claim)
		p.plans.Plan(ctx, claim.Name, pn.Pods)
		p.notePlanned(claim.Name, fmt.Sprintf("a new %s in %s (%s)", pn.InstanceType.Name, pn.Offering.Zone, pn.Offering.CapacityType), pn.Pods)
		created[i] = claim
		metrics.NodeClaimsCreated.WithLabelValues(pn.NodePool.Name, pn.Offering.CapacityType, reason).Inc()
		logger.Info("Created NodeClaim", "nodeclaim", klog.KObj(claim), "nodepool", pn.NodePool.Name,
			"instanceTypes", len(pn.InstanceTypes), "cheapest", pn.InstanceType.Name, "zone", pn.Offering.Zone,
			"capacityType", pn.Offering.CapacityType, "price", stevedorev1.FormatPrice(pn.Offering.Price), "pods", len(pn.Pods))
	})
	out := created[:0]
	for _, c := range created {
		if c != nil {
			out = append(out, c)
		}
	}
	return out
}
