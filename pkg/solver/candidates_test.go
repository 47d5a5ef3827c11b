/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package solver

import (
	"context"
	"fmt"
	"testing"

	"github.com/stevedore-dev/stevedore/pkg/solver/simulation"
)

// TestKeptCandidatesMatchAScan solves Karpenter's benchmark input with every placement's candidates taken from the
// kept per-shape lists checked against a scan of every open node: they must be the same nodes in the same order.
// (The improvement phase's moves leave a node out, and always scan.)
func TestKeptCandidatesMatchAScan(t *testing.T) {
	for _, n := range []int{100, 1000} {
		t.Run(fmt.Sprintf("%d-pods", n), func(t *testing.T) {
			ctx := context.Background()
			p, _ := loadProblem(t, n)
			sim, err := simulation.New(ctx, simulation.NewSnapshot(), simulation.Options{})
			if err != nil {
				t.Fatal(err)
			}
			in := p.Input(0)
			in.CheckCandidates = true
			plan, err := NewSolver(sim).Solve(ctx, in)
			if err != nil {
				t.Fatal(err)
			}
			if len(plan.Unschedulable) > 0 {
				t.Fatalf("%d pods unschedulable", len(plan.Unschedulable))
			}
			for i, m := range plan.CandidateMismatches {
				if i == 3 {
					t.Errorf("... and %d more", len(plan.CandidateMismatches)-i)
					break
				}
				t.Error(m)
			}
		})
	}
}
