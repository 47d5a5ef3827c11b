package solver

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/stevedore-dev/stevedore/pkg/cloud/catalog"
	"github.com/stevedore-dev/stevedore/pkg/manifest"
	"github.com/stevedore-dev/stevedore/pkg/solver/simulation"
)

// benchDir is where `python3 shared/bench/karpenter-400/convert.py DIR` wrote Karpenter's scheduling benchmark as
// Kubernetes objects; `make bench` sets it.
func benchDir(b *testing.B) string {
	dir := os.Getenv("STEVEDORE_BENCH_DIR")
	if dir == "" {
		b.Skip("STEVEDORE_BENCH_DIR is not set: run `make bench`")
	}
	return dir
}

type bound struct {
	N  int     `json:"n"`
	LP float64 `json:"lp"`
}

func loadProblem(b *testing.B, dir string, n int) (*OfflineProblem, float64) {
	b.Helper()
	cat, err := catalog.ReadFile(filepath.Join(dir, "catalog.json"))
	if err != nil {
		b.Fatal(err)
	}
	dec := manifest.NewDecoder()
	var objs []runtime.Object
	// The input stops at 5000 pods; larger sizes repeat its 5000-pod mix (each group grows, as Karpenter's
	// benchmark does when it is given more pods).
	file, copies := n, 1
	if _, err := os.Stat(filepath.Join(dir, "pods_"+strconv.Itoa(n)+".json")); err != nil && n > 5000 && n%5000 == 0 {
		file, copies = 5000, n/5000
	}
	for _, f := range []string{"nodepool.yaml", "pods_" + strconv.Itoa(file) + ".json"} {
		o, err := dec.DecodeFile(filepath.Join(dir, f))
		if err != nil {
			b.Fatal(err)
		}
		objs = append(objs, o...)
		for c := 1; c < copies && strings.HasPrefix(f, "pods_"); c++ {
			for _, obj := range o {
				pod, ok := obj.(*corev1.Pod)
				if !ok {
					continue
				}
				cp := pod.DeepCopy()
				cp.Name = fmt.Sprintf("%s-copy%d", pod.Name, c)
				cp.UID = ""
				objs = append(objs, cp)
			}
		}
	}
	p, err := NewOfflineProblem(OfflineInput{Objects: objs, Catalog: cat})
	if err != nil {
		b.Fatal(err)
	}
	lp := 0.0
	if raw, err := os.ReadFile(filepath.Join(dir, "bounds_summary.json")); err == nil {
		var bounds []bound
		_ = json.Unmarshal(raw, &bounds)
		for _, x := range bounds {
			if x.N == n {
				lp = x.LP
			}
		}
	}
	return p, lp
}

func benchmarkPlan(b *testing.B, n int) {
	dir := benchDir(b)
	p, lp := loadProblem(b, dir, n)
	ctx := context.Background()
	sim, err := simulation.New(ctx, simulation.NewSnapshot(), simulation.Options{})
	if err != nil {
		b.Fatal(err)
	}
	var cost float64
	var preFilters, filters int
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		plan, err := p.Solve(ctx, sim, budgetFor())
		if err != nil {
			b.Fatal(err)
		}
		if len(plan.Unschedulable) > 0 {
			b.Fatalf("%d pods unschedulable", len(plan.Unschedulable))
		}
		cost = plan.Cost
		if i == 0 {
			b.StopTimer()
			preFilters, filters = sim.PreFilters, sim.Filters
			if v := Verify(ctx, sim, nil, p.Region, plan, p.DaemonSets); len(v) > 0 {
				b.Fatalf("%d placements break a scheduling rule, first: %s", len(v), v[0])
			}
			b.StartTimer()
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(preFilters)/float64(n), "prefilters/pod")
	b.ReportMetric(float64(filters)/float64(n), "filters/pod")
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "pods/s")
	b.ReportMetric(cost, "$/h")
	if lp > 0 {
		b.ReportMetric(cost/lp, "cost/bound")
		in := p.Input(0)
		in.FirstFitDecreasing = true
		ffd, err := NewSolver(sim).Solve(ctx, in)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(ffd.Cost/lp, "ffd-cost/bound")
	}
}

func BenchmarkPlan100(b *testing.B)   { benchmarkPlan(b, 100) }
func BenchmarkPlan1000(b *testing.B)  { benchmarkPlan(b, 1000) }
func BenchmarkPlan5000(b *testing.B)  { benchmarkPlan(b, 5000) }
func BenchmarkPlan20000(b *testing.B) { benchmarkPlan(b, 20000) }

// budgetFor is the improvement time a benchmark solve gets; zero measures the greedy packing alone.
func budgetFor() time.Duration {
	if v := os.Getenv("STEVEDORE_BENCH_BUDGET"); v != "" {
		d, _ := time.ParseDuration(v)
		return d
	}
	return 0
}
