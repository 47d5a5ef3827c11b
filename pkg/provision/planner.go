/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package provision

import (
	"context"
	"sync"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/solver"
	"github.com/stevedore-dev/stevedore/pkg/solver/simulation"
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
// bookings each ask it a Request. It owns the live path's simulator.
type planner struct {
	sim   *simulation.Simulator
	simMu sync.Mutex // the simulator is not safe for concurrent use
}

// Plan answers a request: it solves the input, records the CapacityQuotas the plan found reached (unless the
// request is a what-if), and creates the NodeClaims the request's Launch says.
func (p *Provisioner) Plan(ctx context.Context, req Request) (*Result, error) {
	plan, err := p.planner.solve(ctx, req)
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

// solve runs the solver on the request's simulator, or on the live path's own, one question at a time.
func (pl *planner) solve(ctx context.Context, req Request) (*solver.Plan, error) {
	sim := req.Simulator
	if sim == nil {
		pl.simMu.Lock()
		defer pl.simMu.Unlock()
		sim = pl.sim
	}
	return solver.NewSolver(sim).Solve(ctx, req.Input)
}
