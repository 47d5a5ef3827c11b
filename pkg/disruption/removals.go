/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package disruption

import (
	"context"
	"sync"

	"k8s.io/apimachinery/pkg/types"

	"github.com/stevedore-dev/stevedore/pkg/provision"
	"github.com/stevedore-dev/stevedore/pkg/solver/simulation"
)

// removals answers "where would these nodes' pods go were the nodes removed" over one cluster model per pass,
// built on first use; simulations are serialised (they share the simulator's snapshot).
type removals struct {
	provisioner Provisioner
	sim         *simulation.Simulator
	// pins names, by pod UID, the node the moves under way planned for the pods they move (nil: none): a model
	// keeps their room there.
	pins func() map[types.UID]string

	mu    sync.Mutex
	model *provision.Cluster
	// simulated counts the removals simulated on pass models (the work of the passes).
	simulated int
}

// reset drops the cluster model, so that the next question reads the caches again.
func (r *removals) reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.model = nil
}

// cluster returns the pass's cluster model.
func (r *removals) cluster(ctx context.Context) (*provision.Cluster, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.clusterLocked(ctx)
}

func (r *removals) clusterLocked(ctx context.Context) (*provision.Cluster, error) {
	if r.model != nil {
		return r.model, nil
	}
	m, err := r.provisioner.Cluster(ctx, r.sim, r.pinned())
	if err != nil {
		return nil, err
	}
	r.model = m
	return m, nil
}

// simulate asks the solver where the candidates' pods would go without them.
func (r *removals) simulate(ctx context.Context, cands []*Candidate) (*provision.Removal, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	cluster, err := r.clusterLocked(ctx)
	if err != nil {
		return nil, err
	}
	r.simulated++
	return cluster.SimulateRemoval(ctx, r.sim, nodeNames(cands), 0)
}

// simulations is how many removals the passes have simulated.
func (r *removals) simulations() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.simulated
}

// simulateFresh answers on a model of its own, leaving the pass's alone (the interruption controller asks while
// a pass may be running).
func (r *removals) simulateFresh(ctx context.Context, cands []*Candidate) (*provision.Removal, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	cluster, err := r.provisioner.Cluster(ctx, r.sim, r.pinned())
	if err != nil {
		return nil, err
	}
	return cluster.SimulateRemoval(ctx, r.sim, nodeNames(cands), 0)
}

// pinned is what pins names now.
func (r *removals) pinned() map[types.UID]string {
	if r.pins == nil {
		return nil
	}
	return r.pins()
}

func nodeNames(cands []*Candidate) []string {
	names := make([]string, len(cands))
	for i, cand := range cands {
		names[i] = cand.Node.Name
	}
	return names
}
