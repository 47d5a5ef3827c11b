/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

// Package bench holds benchmarks that run a whole sandbox. They are run by `make bench`, not by `make test` (the
// package has no tests).
package bench

import (
	"context"
	"fmt"
	"math"
	"os"
	"runtime/pprof"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/cloud"
	"github.com/stevedore-dev/stevedore/pkg/cloud/catalog"
	"github.com/stevedore-dev/stevedore/pkg/deletioncost"
	"github.com/stevedore-dev/stevedore/pkg/sandbox"
	"github.com/stevedore-dev/stevedore/pkg/scheduling"
	"github.com/stevedore-dev/stevedore/pkg/solver"
	"github.com/stevedore-dev/stevedore/pkg/solver/simulation"
	"github.com/stevedore-dev/stevedore/test/integration/harness"
)

// quiet is how long the fleet's cost must stay unchanged, with nothing being disrupted, for consolidation to
// count as finished: several disruption passes (10s apart) with their validation delay (15s).
const quiet = 2 * time.Minute

// podSizes are the requests of the benchmark's five Deployments (200 replicas each, then 140).
var podSizes = []struct{ cpu, mem string }{{"100m", "128Mi"}, {"250m", "512Mi"}, {"500m", "1Gi"}, {"1", "2Gi"}, {"1500m", "3Gi"}}

// BenchmarkConsolidation1000To700 provisions 1000 pods of mixed sizes (five Deployments) in a sandbox with the
// default plugin arguments, scales them to 700, and measures how long consolidation takes until the fleet's cost
// stops falling, and the final cost against the fractional lower bound for the 700 pods and against what
// provisioning the 700 pods from scratch costs. Run it with -benchtime 1x.
//
// It runs twice: with pod-deletion-cost steering (the default) and without (podDeletionCost: false), and reports the
// pods the drains evicted in each, and the final cost.
func BenchmarkConsolidation1000To700(b *testing.B) {
	for _, steered := range []bool{true, false} {
		name := "steered"
		if !steered {
			name = "unsteered"
		}
		b.Run(name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				runConsolidation(b, steered)
			}
		})
	}
}

func runConsolidation(b *testing.B, steered bool) {
	ctx := context.Background()
	// cleanup registered first, run last: the namespace goes first; the NodePool with the sandbox
	sb, err := sandbox.Start(ctx, sandbox.Options{WithScheduler: true, LaunchDelay: 0,
		PluginArgs: map[string]any{"podDeletionCost": steered}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(sb.Stop)
	ns := harness.Namespace(b, sb)
	harness.NodeClass(b, sb)
	// not harness.NodePool: it goes with the sandbox, not node by node
	np, err := sb.Stevedore.StevedoreV1().NodePools().Create(ctx, harness.NewNodePool("bench", "bench"), metav1.CreateOptions{})
	if err != nil {
		b.Fatal(err)
	}
	for i, s := range podSizes {
		harness.IsolatedDeployment(b, sb, harness.Deployment(ns, fmt.Sprintf("app-%d", i), 200, s.cpu, s.mem), "bench")
	}
	for i := range podSizes {
		harness.WaitRunning(b, sb, ns, fmt.Sprintf("app-%d", i), 200)
	}
	if steered { // steady state: the first half of each Deployment's pods is ranked before the scale-in
		err := wait.PollUntilContextTimeout(ctx, 2*time.Second, 10*time.Minute, true, func(ctx context.Context) (bool, error) {
			pods, err := sb.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				return false, err
			}
			ranked := map[string]int{}
			for _, p := range pods.Items {
				if _, ok := p.Annotations[deletioncost.AnnotationDeletionCost]; ok {
					ranked[p.Labels["app"]]++
				}
			}
			for i := range podSizes {
				if ranked[fmt.Sprintf("app-%d", i)] < 100 {
					return false, nil
				}
			}
			return len(pods.Items) == 1000, nil
		})
		if err != nil {
			b.Fatalf("waiting for the first half of each Deployment's pods ranked: %v", err)
		}
	}
	evictedBefore := harness.Metric(b, "stevedore_termination_pods_evicted_total", nil)
	before, beforeCost := fleet(b, sb)
	start := time.Now()
	profileSelf(b, "STEVEDORE_PROFILE")
	for i := range podSizes {
		harness.Scale(b, sb, ns, fmt.Sprintf("app-%d", i), 140)
	}
	cost, lastFall, settledSince := beforeCost, start, start
	var after []stevedorev1.NodeClaim
	// every 2 s, one list: listing hundreds of NodeClaims (JSON) ten times a second took most of the two cores the
	// sandbox and the scheduler share, and slowed consolidation down
	err = wait.PollUntilContextTimeout(ctx, 2*time.Second, 60*time.Minute, true, func(ctx context.Context) (bool, error) {
		all := harness.NodeClaimsOf(b, sb, "bench")
		live, c := liveAndCost(all)
		switch {
		case c < cost-1e-9:
			cost, lastFall, settledSince = c, time.Now(), time.Now()
		case c != cost || len(live) != len(all):
			cost, settledSince = c, time.Now()
		}
		after = live
		return time.Since(settledSince) >= quiet, nil
	})
	if err != nil {
		b.Fatalf("waiting for consolidation to settle: %v", err)
	}
	pods := 0
	for i := range podSizes {
		pods += len(harness.WaitRunning(b, sb, ns, fmt.Sprintf("app-%d", i), 140))
	}
	lower, fresh := bounds(b, np, 140)
	took := lastFall.Sub(start)
	evicted := harness.Metric(b, "stevedore_termination_pods_evicted_total", nil) - evictedBefore
	b.ReportMetric(evicted, "pods-evicted")
	b.ReportMetric(cost, "final-$/h")
	b.ReportMetric(took.Seconds(), "s-until-cost-stops-falling")
	b.ReportMetric(cost/lower, "cost/lower-bound")
	b.ReportMetric(cost/fresh, "cost/fresh-plan")
	b.Logf("steered %v: 1000 pods on %d nodes ($%.4f/h) -> %d pods: %d nodes ($%.4f/h) after %s, %.0f pods evicted; lower bound $%.4f/h (ratio %.3f), "+
		"provisioning the %d pods from scratch $%.4f/h (ratio %.3f)", steered, len(before), beforeCost, pods, len(after), cost,
		took.Round(time.Second), evicted, lower, cost/lower, pods, fresh, cost/fresh)
}

// profileSelf writes a CPU profile of this process (the sandbox, and its scheduler when in-process) over the next
// STEVEDORE_PROFILE_SECONDS seconds to the file the environment variable pathVar names (both set, else nothing),
// for `go tool pprof`.
func profileSelf(b *testing.B, pathVar string) {
	path, seconds := os.Getenv(pathVar), os.Getenv("STEVEDORE_PROFILE_SECONDS")
	if path == "" || seconds == "" {
		return
	}
	d, err := time.ParseDuration(seconds + "s")
	if err != nil {
		b.Fatalf("STEVEDORE_PROFILE_SECONDS: %v", err)
	}
	f, err := os.Create(path) //nolint:gosec // G703: the path is the benchmark runner's own environment variable
	if err != nil {
		b.Fatal(err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		b.Fatal(err)
	}
	stop := sync.OnceFunc(func() {
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			b.Errorf("profile: %v", err)
		}
	})
	time.AfterFunc(d, stop)
	b.Cleanup(stop)
}

// fleet returns the live NodeClaims of the benchmark's NodePool and their total hourly price.
func fleet(b *testing.B, sb *sandbox.Sandbox) ([]stevedorev1.NodeClaim, float64) {
	return liveAndCost(harness.NodeClaimsOf(b, sb, "bench"))
}

// liveAndCost returns the NodeClaims not being deleted and their total hourly price.
func liveAndCost(claims []stevedorev1.NodeClaim) ([]stevedorev1.NodeClaim, float64) {
	var live []stevedorev1.NodeClaim
	total := 0.0
	for _, c := range claims {
		if c.DeletionTimestamp == nil {
			live = append(live, c)
			total += stevedorev1.ParsePrice(c.Status.Price)
		}
	}
	return live, total
}

// bounds returns, for perSize replicas of each pod size on the NodePool's instance types (the sandbox's default
// catalog), the fractional lower bound on the hourly cost and the cost of the solver's plan from scratch.
func bounds(b *testing.B, np *stevedorev1.NodePool, perSize int) (lower, fresh float64) {
	objs := []runtime.Object{np.DeepCopy()}
	var cpu, mem float64
	for i, s := range podSizes {
		for j := 0; j < perSize; j++ {
			pod := harness.Isolated(harness.Pod("bench", fmt.Sprintf("app-%d-%d", i, j), s.cpu, s.mem), "bench")
			objs = append(objs, pod)
			req := pod.Spec.Containers[0].Resources.Requests
			cpu += float64(req.Cpu().MilliValue())
			mem += float64(req.Memory().Value())
		}
	}
	return solveOffline(b, objs, cpu, mem)
}

// solveOffline returns, for the objects (a NodePool and pods requesting cpu millicores and mem bytes in total),
// the fractional lower bound on the hourly cost over the NodePool's instance types (the sandbox's default
// catalog) and the cost of the solver's offline plan.
func solveOffline(b *testing.B, objs []runtime.Object, cpu, mem float64) (lower, plan float64) {
	p, err := solver.NewOfflineProblem(solver.OfflineInput{Objects: objs, Catalog: catalog.Default(), VMMemoryOverheadPercent: 7.5})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	sim, err := simulation.New(ctx, simulation.NewSnapshot(), simulation.Options{})
	if err != nil {
		b.Fatal(err)
	}
	solved, err := solver.NewSolver(sim).Solve(ctx, p.Input(2*time.Second))
	if err != nil {
		b.Fatal(err)
	}
	opt := p.NodePools[0]
	return fractionalBound(opt.InstanceTypes, opt.Requirements, cpu, mem), solved.Cost
}

// fractionalBound is the optimum of the linear relaxation "buy fractions of instance types whose allocatable CPU
// (millicores) and memory (bytes) cover the demand, at the cheapest offering the requirements allow": an optimum
// uses at most two types, so every type and every pair of types is tried.
func fractionalBound(its []*cloud.InstanceType, reqs scheduling.Requirements, cpu, mem float64) float64 {
	type unit struct{ c, m, p float64 }
	var units []unit
	for _, it := range its {
		o, ok := it.Offerings.Compatible(reqs).Cheapest()
		c, m, _ := it.AllocatableCPUMemoryPods()
		if ok && c > 0 && m > 0 {
			units = append(units, unit{c: float64(c), m: float64(m), p: o.Price})
		}
	}
	best := math.Inf(1)
	for i, a := range units {
		best = math.Min(best, a.p*math.Max(cpu/a.c, mem/a.m))
		for _, b := range units[i+1:] {
			det := a.c*b.m - b.c*a.m
			if det == 0 {
				continue
			}
			xa, xb := (cpu*b.m-b.c*mem)/det, (a.c*mem-cpu*a.m)/det
			if xa >= 0 && xb >= 0 {
				best = math.Min(best, a.p*xa+b.p*xb)
			}
		}
	}
	return best
}
