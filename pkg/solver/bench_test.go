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
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/cloud/catalog"
	"github.com/stevedore-dev/stevedore/pkg/solver/simulation"
)

// benchInput is Karpenter's scheduling benchmark input (testdata/karpenter-bench/README.md).
const benchInput = "testdata/karpenter-bench"

type bound struct {
	N  int     `json:"n"`
	LP float64 `json:"lp"`
}

// benchPod is a pod of the input: its requests, labels and at most one scheduling constraint.
type benchPod struct {
	Idx        int               `json:"idx"`
	Kind       string            `json:"kind"`
	CPUm       int               `json:"cpu_m"`
	MemMi      int               `json:"mem_mi"`
	Labels     map[string]string `json:"labels"`
	Constraint *struct {
		Type        string            `json:"type"`
		TopologyKey string            `json:"topology_key"`
		MaxSkew     int32             `json:"max_skew"`
		Selector    map[string]string `json:"selector"`
	} `json:"constraint"`
}

func (bp benchPod) pod(name string) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: bp.Labels,
		Annotations: map[string]string{"bench/kind": bp.Kind}}}
	p.Spec.SchedulerName = "stevedore"
	p.Spec.Containers = []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10", Resources: corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: *resource.NewMilliQuantity(int64(bp.CPUm), resource.DecimalSI),
			corev1.ResourceMemory: *resource.NewQuantity(int64(bp.MemMi)<<20, resource.BinarySI)}}}}
	c := bp.Constraint
	if c == nil {
		return p
	}
	term := corev1.PodAffinityTerm{LabelSelector: &metav1.LabelSelector{MatchLabels: c.Selector}, TopologyKey: c.TopologyKey}
	switch c.Type {
	case "topologySpread":
		p.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{MaxSkew: c.MaxSkew, TopologyKey: c.TopologyKey,
			WhenUnsatisfiable: corev1.DoNotSchedule, LabelSelector: &metav1.LabelSelector{MatchLabels: c.Selector}}}
	case "podAffinity":
		p.Spec.Affinity = &corev1.Affinity{PodAffinity: &corev1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{term}}}
	case "podAntiAffinity":
		p.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{term}}}
	}
	return p
}

// benchCatalog is the input's 400 instance types as a catalog: each type's overhead pinned to the benchmark's
// (100m CPU, 10Mi, no VM overhead), so that costs compare one to one with Karpenter's.
func benchCatalog(b testing.TB) *catalog.File {
	b.Helper()
	var types []struct {
		Name      string   `json:"name"`
		CPU       int      `json:"cpu"`
		MemGi     int64    `json:"mem_gi"`
		Pods      int      `json:"pods"`
		Offerings []string `json:"offerings"`
	}
	readJSON(b, "instance_types_400.json", &types)
	zero := 0.0
	cat := &catalog.File{Region: "test-region"}
	for _, it := range types {
		ct := catalog.InstanceType{Name: it.Name, Architecture: "amd64", VCPU: it.CPU, MemoryMiB: it.MemGi * 1024, MaxPods: it.Pods,
			Overhead: &catalog.Overhead{CPU: "100m", Memory: "10Mi", VMMemoryPercent: &zero}}
		for _, o := range it.Offerings { // "spot/test-zone-1@0.31"
			kindZone, price, _ := strings.Cut(o, "@")
			capacityType, zone, _ := strings.Cut(kindZone, "/")
			v, err := strconv.ParseFloat(price, 64)
			if err != nil {
				b.Fatalf("offering %q: %v", o, err)
			}
			ct.Offerings = append(ct.Offerings, catalog.Offering{Zone: zone, CapacityType: capacityType, Price: v})
		}
		cat.InstanceTypes = append(cat.InstanceTypes, ct)
	}
	return cat
}

func readJSON(b testing.TB, name string, v any) {
	b.Helper()
	raw, err := os.ReadFile(filepath.Join(benchInput, name))
	if err != nil {
		b.Fatal(err)
	}
	if err := json.Unmarshal(raw, v); err != nil {
		b.Fatalf("%s: %v", name, err)
	}
}

func loadProblem(b testing.TB, n int) (*OfflineProblem, float64) {
	b.Helper()
	// The input stops at 5000 pods; larger sizes repeat its 5000-pod mix (each group grows, as Karpenter's
	// benchmark does when it is given more pods).
	file, copies := n, 1
	if n > 5000 && n%5000 == 0 {
		file, copies = 5000, n/5000
	}
	var pods []benchPod
	readJSON(b, "pods_"+strconv.Itoa(file)+".json", &pods)
	objs := []runtime.Object{
		&stevedorev1.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: "default"}, Spec: stevedorev1.EC2NodeClassSpec{Role: "NodeRole"}},
		&stevedorev1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "default"}, Spec: stevedorev1.NodePoolSpec{
			Template: stevedorev1.NodeClaimTemplate{Spec: stevedorev1.NodeClaimTemplateSpec{NodeClassRef: &stevedorev1.NodeClassReference{Name: "default"}}},
			Limits:   stevedorev1.Limits{corev1.ResourceCPU: resource.MustParse("10000000"), corev1.ResourceMemory: resource.MustParse("10000000Gi")}}},
	}
	for c := 0; c < copies; c++ {
		for _, bp := range pods {
			name := fmt.Sprintf("p-%d", bp.Idx)
			if c > 0 {
				name = fmt.Sprintf("p-%d-copy%d", bp.Idx, c)
			}
			objs = append(objs, bp.pod(name))
		}
	}
	cat := benchCatalog(b)
	writeInput(b, n, objs, cat)
	p, err := NewOfflineProblem(OfflineInput{Objects: objs, Catalog: cat})
	if err != nil {
		b.Fatal(err)
	}
	var bounds []bound
	readJSON(b, "bounds_summary.json", &bounds)
	// the bound is a sum over the pods (their CPU, memory and count against the cheapest capacity of each): copies
	// of the mix multiply it
	lp := 0.0
	for _, x := range bounds {
		if x.N == file {
			lp = x.LP * float64(copies)
		}
	}
	return p, lp
}

func benchmarkPlan(b *testing.B, n int) {
	p, lp := loadProblem(b, n)
	ctx := context.Background()
	sim, err := simulation.New(ctx, simulation.NewSnapshot(), simulation.Options{})
	if err != nil {
		b.Fatal(err)
	}
	var cost, greedyCost float64
	var preFilters, filters, fullPreFilters int
	var first string
	var firstPlan *Plan
	var improvement Improvement
	timedOut := 0
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
		plan, err := NewSolver(sim).Solve(ctx, p.Input(budgetFor()))
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
		cost, greedyCost = plan.Cost, plan.GreedyCost
		if plan.Improvement.TimedOut {
			timedOut++
		}
		improvement = plan.Improvement
		b.StopTimer()
		// the determinism check: every solve of the run gives the same plan, byte for byte
		if text := planText(plan); i == 0 {
			first = text
		} else if text != first {
			identical = 0
		}
		if i == 0 {
			preFilters, filters, fullPreFilters = sim.PreFilters, sim.Filters, sim.FullPreFilters
			firstPlan = plan
			writePlan(b, n, first)
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
	b.ReportMetric(float64(fullPreFilters)/float64(n), "full-prefilters/pod")
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
		if budgetFor() > 0 {
			b.ReportMetric(greedyCost/lp, "greedy-cost/bound")
		}
	}
	if budgetFor() > 0 {
		// timed-out-solves 0: every solve's improvement ended at its bound of moves, not at the time budget
		b.ReportMetric(float64(timedOut), "timed-out-solves")
		b.ReportMetric(float64(improvement.Moves), "improvement-moves")
		b.ReportMetric(improvement.Duration.Seconds(), "improvement-s")
	}
	// first-fit decreasing, the baseline of the cost, scans every open node for every pod: above 20,000 pods it
	// would take longer than the solve it is a baseline for
	if lp > 0 && n <= 20000 {
		in := p.Input(0)
		in.FirstFitDecreasing = true
		ffd, err := NewSolver(sim).Solve(ctx, in)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(ffd.Cost/lp, "ffd-cost/bound")
	}
}

// writePlan writes the plan's canonical text to $STEVEDORE_BENCH_PLANS/plan-<n>.txt when that folder is set, so
// that two builds of the solver can be shown to give the same plans (diff the folders).
func writePlan(b *testing.B, n int, text string) {
	b.Helper()
	dir := os.Getenv("STEVEDORE_BENCH_PLANS")
	if dir == "" {
		return
	}
	//nolint:gosec // G703: the folder is the developer's own, from the environment of a benchmark run
	if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("plan-%d.txt", n)), []byte(text), 0o600); err != nil {
		b.Fatal(err)
	}
}

// writeInput writes the problem as `scheduler plan` reads it (input-<n>.json, a List of the NodePool, its
// EC2NodeClass and the pods, and catalog-<n>.json) to $STEVEDORE_BENCH_INPUT when that folder is set, so that the
// command is measured on the same input: scheduler plan -f input-<n>.json --catalog catalog-<n>.json.
func writeInput(b testing.TB, n int, objs []runtime.Object, cat *catalog.File) {
	b.Helper()
	dir := os.Getenv("STEVEDORE_BENCH_INPUT")
	if dir == "" {
		return
	}
	list := corev1.List{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "List"}}
	for _, obj := range objs {
		obj = obj.DeepCopyObject()
		switch o := obj.(type) {
		case *corev1.Pod:
			o.APIVersion, o.Kind = "v1", "Pod"
		case *stevedorev1.NodePool:
			o.APIVersion, o.Kind = stevedorev1.SchemeGroupVersion.String(), "NodePool"
		case *stevedorev1.EC2NodeClass:
			o.APIVersion, o.Kind = stevedorev1.SchemeGroupVersion.String(), "EC2NodeClass"
		}
		list.Items = append(list.Items, runtime.RawExtension{Object: obj})
	}
	for name, v := range map[string]any{fmt.Sprintf("input-%d.json", n): list, fmt.Sprintf("catalog-%d.json", n): cat} {
		raw, err := json.Marshal(v)
		if err != nil {
			b.Fatal(err)
		}
		//nolint:gosec // G703: the folder is the developer's own, from the environment of a benchmark run
		if err := os.WriteFile(filepath.Join(dir, name), raw, 0o600); err != nil {
			b.Fatal(err)
		}
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
