/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package solver

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	goruntime "runtime"
	"sort"
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

// benchDir is where the input's convert.py (`python3 $BENCH_INPUT/convert.py DIR`) wrote Karpenter's scheduling benchmark as
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
	var first string
	var firstPlan *Plan
	identical := 1.0
	// allocations are counted around the solves only (not the checks between them)
	var mem goruntime.MemStats
	var mallocs, bytes uint64
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		goruntime.ReadMemStats(&mem)
		mallocs, bytes = mallocs-mem.Mallocs, bytes-mem.TotalAlloc
		b.StartTimer()
		plan, err := p.Solve(ctx, sim, budgetFor())
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		goruntime.ReadMemStats(&mem)
		mallocs, bytes = mallocs+mem.Mallocs, bytes+mem.TotalAlloc
		b.StartTimer()
		if len(plan.Unschedulable) > 0 {
			b.Fatalf("%d pods unschedulable", len(plan.Unschedulable))
		}
		cost = plan.Cost
		b.StopTimer()
		// the determinism check: every solve of the run gives the same plan, byte for byte
		if text := planText(plan); i == 0 {
			first = text
		} else if text != first {
			identical = 0
		}
		if i == 0 {
			preFilters, filters = sim.PreFilters, sim.Filters
			firstPlan = plan
		}
		b.StartTimer()
	}
	b.StopTimer()
	// the solves' own peak, before the checks below build their own snapshots
	peak := peakRSSMiB()
	if v := Verify(ctx, sim, nil, p.Region, firstPlan, p.DaemonSets); len(v) > 0 {
		b.Fatalf("%d placements break a scheduling rule, first: %s", len(v), v[0])
	}
	b.ReportMetric(float64(preFilters)/float64(n), "prefilters/pod")
	b.ReportMetric(float64(filters)/float64(n), "filters/pod")
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "pods/s")
	b.ReportMetric(float64(mallocs)/float64(b.N)/float64(n), "allocs/pod")
	b.ReportMetric(float64(bytes)/float64(b.N)/float64(n)/1024, "KiB/pod")
	if b.N > 1 {
		b.ReportMetric(identical, "identical-plans")
	}
	if peak > 0 {
		b.ReportMetric(peak, "peak-RSS-MiB")
	}
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

// planText renders a plan's decisions (nodes, their offerings and pods, unschedulable pods) in a canonical form.
func planText(plan *Plan) string {
	var sb strings.Builder
	for _, n := range plan.NewNodes {
		fmt.Fprintf(&sb, "%s %s %s %s %d:", n.NodePool.Name, n.Offering.Zone, n.Offering.CapacityType, n.InstanceType.Name, len(n.InstanceTypes))
		for _, pod := range n.Pods {
			sb.WriteString(" " + pod.Namespace + "/" + pod.Name)
		}
		sb.WriteByte('\n')
	}
	uids := make([]string, 0, len(plan.Unschedulable))
	for uid := range plan.Unschedulable {
		uids = append(uids, string(uid))
	}
	sort.Strings(uids)
	for _, uid := range uids {
		fmt.Fprintf(&sb, "unschedulable %s\n", uid)
	}
	return sb.String()
}

// peakRSSMiB is the process's peak resident set (VmHWM) so far, 0 where /proc does not say; `make bench` runs each
// size in its own process so that it is the peak of that size.
func peakRSSMiB() float64 {
	raw, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if f := strings.Fields(line); len(f) == 3 && f[0] == "VmHWM:" {
			kb, _ := strconv.ParseFloat(f[1], 64)
			return kb / 1024
		}
	}
	return 0
}

func BenchmarkPlan100(b *testing.B)   { benchmarkPlan(b, 100) }
func BenchmarkPlan1000(b *testing.B)  { benchmarkPlan(b, 1000) }
func BenchmarkPlan5000(b *testing.B)  { benchmarkPlan(b, 5000) }
func BenchmarkPlan20000(b *testing.B) { benchmarkPlan(b, 20000) }
func BenchmarkPlan50000(b *testing.B) { benchmarkPlan(b, 50000) }

// budgetFor is the improvement time a benchmark solve gets; zero measures the greedy packing alone.
func budgetFor() time.Duration {
	if v := os.Getenv("STEVEDORE_BENCH_BUDGET"); v != "" {
		d, _ := time.ParseDuration(v)
		return d
	}
	return 0
}
