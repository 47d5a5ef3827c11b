/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package provision

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/solver"
	"github.com/stevedore-dev/stevedore/pkg/solver/simulation"
)

// SetWarmPods gives the provisioner the pods of warm capacity (bookings of ProvisioningRequests, capacity
// buffers): virtual pods no node runs, for which room is kept, from each source in the order given (the first
// source's pods take room first). Disruption's cluster model places them before it answers what may go (so the
// room they keep is not consolidated away); provisioning for real pods ignores them (real pods take that room
// first).
func (p *planner) SetWarmPods(sources ...func() []*corev1.Pod) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.warm = sources
}

// HasWarmPods reports whether there is warm capacity to keep room for.
func (p *planner) HasWarmPods() bool { return len(p.warmPods()) > 0 }

func (p *planner) warmPods() []*corev1.Pod {
	p.mu.Lock()
	sources := p.warm
	p.mu.Unlock()
	var out []*corev1.Pod
	for _, pods := range sources {
		out = append(out, pods()...)
	}
	return out
}

// WarmPlan is where warm capacity goes.
type WarmPlan struct {
	// Placed are the UIDs of the pods that have room on ready or in-flight nodes.
	Placed map[string]bool
	// Launched are the NodeClaims created for the others.
	Launched []*stevedorev1.NodeClaim
	// Unschedulable says why a pod has no room and no node can be launched for it, by pod UID.
	Unschedulable map[string]string
}

// ProvisionWarm keeps room for warm pods: those that fit the room left on the nodes (after the pods waiting for a
// place and the warm pods ahead of them took theirs) count as placed; nodes are launched for the others, carrying
// no pod, so that pending pods may be nominated to them and later solves see their room free. sim is the
// caller's own simulator (not the live path's, which provisioning for real pods must not wait for).
func (p *planner) ProvisionWarm(ctx context.Context, sim *simulation.Simulator, ahead, pods []*corev1.Pod) (*WarmPlan, error) {
	out := &WarmPlan{Placed: map[string]bool{}, Unschedulable: map[string]string{}}
	if len(pods) == 0 {
		return out, nil
	}
	c, err := p.cluster(ctx, sim, ahead, nil)
	if err != nil {
		return nil, err
	}
	res, err := p.Plan(ctx, Request{Simulator: sim, Input: solver.Input{Pods: pods, NodePools: c.NodePools, Snapshot: c.Snapshot,
		InFlight: c.Targets, Region: c.Region},
		// the room stays free for real pods; the next pass finds the warm pods a place on it
		Launch: &Launch{Reason: launchProvisioning, RoomOnly: true}})
	if err != nil {
		return nil, fmt.Errorf("planning %d warm pods: %w", len(pods), err)
	}
	for _, placed := range res.Plan.InFlight {
		for _, pod := range placed {
			out.Placed[string(pod.UID)] = true
		}
	}
	for uid, why := range res.Plan.Unschedulable {
		out.Unschedulable[string(uid)] = why
	}
	out.Launched = res.Launched
	return out, nil
}
