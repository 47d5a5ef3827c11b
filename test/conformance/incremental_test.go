/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package conformance_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/stevedore-dev/stevedore/pkg/cloud/catalog"
	"github.com/stevedore-dev/stevedore/pkg/solver"
	"github.com/stevedore-dev/stevedore/pkg/solver/simulation"
)

// incrementalCases are the random workloads of the incremental-state test: half as generated, half with every pod
// repeated as the replicas of a Deployment would be (more pods per class, more nodes, more changes per class).
const incrementalCases = 120

// TestIncrementalPreFilterMatchesFromScratch checks the simulator's incremental PodTopologySpread and
// InterPodAffinity state, which the solver's every placement reads, against the plugins' own PreFilter run from
// scratch: on random workloads and on every conformance scenario, each state lent during a solve must give the
// same Filter result as a fresh one on every node of the snapshot (including the solver's trials, relabels,
// removed nodes and the improvement phase's moves), no lent state may be used after the snapshot changed, the open
// nodes each placement tries must be those a scan of every open node finds, and the plan must be the one the
// from-scratch simulator gives, byte for byte.
func TestIncrementalPreFilterMatchesFromScratch(t *testing.T) {
	rng := rand.New(rand.NewPCG(20261127, 0))
	for i := 0; i < incrementalCases; i++ {
		c := generate(rng, 1000+i)
		objects := c.objects
		if i%2 == 1 {
			objects = replicate(c.objects, 2+rng.IntN(6))
		}
		t.Run(fmt.Sprintf("random-%03d", i), func(t *testing.T) { compareIncremental(t, objects, c.catalog, 2*time.Second) })
	}
	files, err := filepath.Glob("testdata/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		sc, err := load(f)
		if err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		t.Run(sc.header.Name, func(t *testing.T) { compareIncremental(t, sc.objects, sc.catalog, 2*time.Second) })
	}
}

// replicate repeats every pod of objects n times (named and identified apart, alike in everything else).
func replicate(objects []runtime.Object, n int) []runtime.Object {
	var out []runtime.Object
	for _, o := range objects {
		p, ok := o.(*corev1.Pod)
		if !ok {
			out = append(out, o)
			continue
		}
		for r := 0; r < n; r++ {
			cp := p.DeepCopy()
			cp.Name = fmt.Sprintf("%s-%d", p.Name, r)
			cp.UID = types.UID(fmt.Sprintf("%s-%d", p.UID, r))
			out = append(out, cp)
		}
	}
	return out
}

func compareIncremental(t *testing.T, objects []runtime.Object, cat *catalog.File, budget time.Duration) {
	t.Helper()
	ctx := context.Background()
	plans := map[bool]*solved{}
	for _, fromScratch := range []bool{true, false} {
		problem, err := solver.NewOfflineProblem(solver.OfflineInput{Objects: objects, Catalog: cat, VMMemoryOverheadPercent: 7.5})
		if err != nil {
			t.Fatalf("reading the input: %v", err)
		}
		sim, err := simulation.New(ctx, simulation.NewSnapshot(), simulation.Options{FromScratch: fromScratch, CheckIncremental: !fromScratch})
		if err != nil {
			t.Fatal(err)
		}
		in := problem.Input(budget)
		in.CheckCandidates = !fromScratch
		plan, err := solver.NewSolver(sim).Solve(ctx, in)
		if err != nil {
			t.Fatal(err)
		}
		plans[fromScratch] = &solved{problem: problem, plan: plan}
		if fromScratch {
			continue
		}
		for i, m := range sim.Mismatches {
			if i == 5 {
				t.Errorf("... and %d more", len(sim.Mismatches)-i)
				break
			}
			t.Errorf("incremental state differs from scratch: %s", m)
		}
		for i, m := range plan.CandidateMismatches {
			if i == 5 {
				t.Errorf("... and %d more", len(plan.CandidateMismatches)-i)
				break
			}
			t.Errorf("kept candidates differ from a scan: %s", m)
		}
		if sim.Stale > 0 {
			t.Errorf("%d Filter calls were given a lent state after the snapshot changed", sim.Stale)
		}
	}
	if a, b := plans[false].render(), plans[true].render(); a != b {
		t.Errorf("the plan differs with the incremental state:\n%s\nfrom scratch:\n%s", a, b)
	}
}
