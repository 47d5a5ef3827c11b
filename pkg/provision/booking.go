/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package provision

import (
	"context"
	"fmt"
	"maps"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/solver"
	"github.com/stevedore-dev/stevedore/pkg/solver/simulation"
)

// Booking asks for room for a set of virtual pods, all of them or none: the pods a ProvisioningRequest stands for.
type Booking struct {
	// Name names the booking in the reasons given (namespace/name of the request).
	Name string
	// Pods are the virtual pods.
	Pods []*corev1.Pod
	// Ahead are the warm pods that take room before these (the bookings before this one).
	Ahead []*corev1.Pod
	// Launch allows new nodes for the pods the cluster's nodes have no room for; without it only the room there
	// is counts.
	Launch bool
	// Annotations go on the NodeClaims launched.
	Annotations map[string]string
}

// BookingPlan is where a booking's pods have room.
type BookingPlan struct {
	// Nodes names, by pod UID, the node each pod has room on: a node of the cluster or of a NodeClaim in flight.
	Nodes map[types.UID]string
	// Unschedulable says why the pods have no room, by pod UID; when set, no pod of the booking has any.
	Unschedulable map[types.UID]string
	// Launched are the NodeClaims created for the pods without room; they launch all or nothing, one fleet per
	// shape, and carry no pod (the room stays free for the pods that consume the booking).
	Launched []*stevedorev1.NodeClaim
}

// ProvisionBooking finds room for every pod of the booking or for none: on the room the cluster's nodes (and the
// NodeClaims in flight) have left once the pods waiting for a place and the booking's Ahead took theirs, and, when
// b.Launch, on new nodes, created here. sim is the caller's own simulator.
func (p *planner) ProvisionBooking(ctx context.Context, sim *simulation.Simulator, b Booking) (*BookingPlan, error) {
	out := &BookingPlan{Nodes: map[types.UID]string{}, Unschedulable: map[types.UID]string{}}
	if len(b.Pods) == 0 {
		return out, nil
	}
	c, err := p.cluster(ctx, sim, b.Ahead, nil)
	if err != nil {
		return nil, err
	}
	uids := make([]types.UID, len(b.Pods))
	for i, pod := range b.Pods {
		uids[i] = pod.UID
	}
	in := solver.Input{Pods: b.Pods, Snapshot: c.Snapshot, InFlight: c.Targets, Region: c.Region,
		Gangs: []solver.Gang{{Name: b.Name, MinMember: len(b.Pods), Pods: uids}}}
	if b.Launch {
		in.NodePools = c.NodePools
	}
	res, err := p.Plan(ctx, Request{Simulator: sim, Input: in, Launch: &Launch{Reason: launchBooking, RoomOnly: true,
		Select: func(plan *solver.Plan) []*solver.PlannedNode {
			if len(plan.Unschedulable) > 0 {
				return nil // all or nothing
			}
			for node, placed := range plan.InFlight {
				for _, pod := range placed {
					out.Nodes[pod.UID] = node
				}
			}
			for _, pn := range plan.NewNodes {
				for _, pod := range pn.Pods {
					out.Nodes[pod.UID] = "" // on a node being launched
				}
			}
			return plan.NewNodes
		},
		// the room stays free for the pods that consume the booking; the nodes of one shape launch all or nothing
		Annotations: func(nodes []*solver.PlannedNode) []map[string]string {
			groups := groupsByShape(nodes, time.Now(), func(*solver.PlannedNode) (string, bool) { return b.Name, true })
			extra := make([]map[string]string, len(nodes))
			for i := range nodes {
				extra[i] = maps.Clone(b.Annotations)
				if extra[i] == nil {
					extra[i] = map[string]string{}
				}
				if groups[i] != "" {
					extra[i][stevedorev1.AnnotationLaunchGroup] = groups[i]
				}
			}
			return extra
		},
	}})
	if err != nil {
		return nil, fmt.Errorf("planning the %d pods of %s: %w", len(b.Pods), b.Name, err)
	}
	for uid, why := range res.Plan.Unschedulable {
		out.Unschedulable[uid] = why
	}
	out.Launched = res.Launched
	return out, nil
}
