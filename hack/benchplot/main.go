/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

// Command benchplot draws the benchmark figures of docs/benchmarks.md as SVG from the counters `make bench` writes
// (docs/benchmarks-raw.md) and Karpenter's figures measured beside them: its speed from the BenchmarkBesideKarpenter
// figures of the same report when it was run (make bench with KARPENTER_SRC), else, like its plan cost, from
// docs/figures/karpenter.json:
//
//	go run . --raw ../../docs/benchmarks-raw.md --karpenter ../../docs/figures/karpenter.json --out ../../docs/figures
//
// planning-speed.svg (pods planned per second by batch size), planning-cost.svg (plan cost over the fractional
// lower bound, of the greedy placement and after the live path's improvement phase, against first-fit-decreasing
// and Karpenter), scale-out.svg (time until every pod is bound, and the scheduler's CPU, through the real binary)
// and consolidation.svg (pods evicted and time until the cost stops falling, with and without pod-deletion-cost
// steering).
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"image/color"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// figures are the counters of the raw report: benchmark name -> figure -> value.
type figures map[string]map[string]float64

var row = regexp.MustCompile(`^\| (Benchmark[A-Za-z0-9/_.-]+) \| ([^|]+) \| ([0-9.e+-]+) \|$`)

func readRaw(path string) (figures, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := figures{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		m := row.FindStringSubmatch(strings.TrimSpace(sc.Text()))
		if m == nil {
			continue
		}
		v, err := strconv.ParseFloat(m[3], 64)
		if err != nil {
			continue
		}
		if out[m[1]] == nil {
			out[m[1]] = map[string]float64{}
		}
		out[m[1]][strings.TrimSpace(m[2])] = v // a later table (a separate measurement) wins
	}
	return out, sc.Err()
}

type karpenter struct {
	Plan []struct {
		Pods          int     `json:"pods"`
		PodsPerSecond float64 `json:"podsPerSecond"`
		CostPerBound  float64 `json:"costPerBound"`
	} `json:"plan"`
}

func main() {
	raw := flag.String("raw", "docs/benchmarks-raw.md", "the raw benchmark report")
	kfile := flag.String("karpenter", "docs/figures/karpenter.json", "Karpenter's figures")
	out := flag.String("out", "docs/figures", "directory of the SVG files")
	flag.Parse()
	if err := run(*raw, *kfile, *out); err != nil {
		fmt.Fprintln(os.Stderr, "benchplot:", err)
		os.Exit(1)
	}
}

func run(rawPath, karpenterPath, out string) error {
	figs, err := readRaw(rawPath)
	if err != nil {
		return err
	}
	var k karpenter
	b, err := os.ReadFile(karpenterPath)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, &k); err != nil {
		return fmt.Errorf("%s: %w", karpenterPath, err)
	}
	sizes := planSizes(figs)
	if len(sizes) == 0 {
		return fmt.Errorf("%s has no BenchmarkPlan<n> figures", rawPath)
	}
	labels := make([]string, len(sizes))
	for i, n := range sizes {
		labels[i] = strconv.Itoa(n)
	}
	kBy := map[int]int{}
	for i, p := range k.Plan {
		kBy[p.Pods] = i
	}
	series := func(f func(n int) float64) plotter.Values {
		v := make(plotter.Values, len(sizes))
		for i, n := range sizes {
			v[i] = f(n)
		}
		return v
	}
	plan := func(fig string) func(int) float64 {
		return func(n int) float64 { return figs[fmt.Sprintf("BenchmarkPlan%d", n)][fig] }
	}
	kar := func(get func(i int) float64) func(int) float64 {
		return func(n int) float64 {
			if i, ok := kBy[n]; ok {
				return get(i)
			}
			return 0
		}
	}
	// Karpenter's speed as measured beside the solver by the same make bench run, where it ran; else the figures
	// file's
	karSpeed := func(n int) float64 {
		if v, ok := figs[fmt.Sprintf("BenchmarkBesideKarpenter%d", n)]["karpenter-pods/s"]; ok {
			return v
		}
		return kar(func(i int) float64 { return k.Plan[i].PodsPerSecond })(n)
	}
	// the plan cost after the live path's improvement phase, where that was measured (0: not measured)
	budget := func(n int) float64 { return figs[fmt.Sprintf("BenchmarkPlan%d/budget-2s", n)]["cost/bound"] }
	if err := bars(filepath.Join(out, "planning-speed.svg"), "Pods planned per second", "pods in the batch", "pods/s", labels,
		[]named{{"Stevedore", series(plan("pods/s"))}, {"Karpenter", series(karSpeed)}}); err != nil {
		return err
	}
	if err := bars(filepath.Join(out, "planning-cost.svg"), "Plan cost over the fractional lower bound (lower is better)", "pods in the batch",
		"cost / lower bound", labels, []named{{"Stevedore, greedy placement", series(plan("cost/bound"))},
			{"Stevedore, with the live path's 2 s improvement", series(budget)}, {"first-fit decreasing", series(plan("ffd-cost/bound"))},
			{"Karpenter", series(kar(func(i int) float64 { return k.Plan[i].CostPerBound }))}}); err != nil {
		return err
	}
	scale := []string{"1000 pods", "5000 pods"}
	get := func(b, f string) float64 { return figs[b][f] }
	if err := bars(filepath.Join(out, "scale-out.svg"), "Scale-out through the real scheduler (sandbox)", "pending pods", "seconds", scale,
		[]named{{"until every pod is bound", plotter.Values{get("BenchmarkScaleOut1000", "s-until-all-bound"), get("BenchmarkScaleOut5000", "s-until-all-bound")}},
			{"scheduler CPU", plotter.Values{get("BenchmarkScaleOut1000", "scheduler-CPU-s"), get("BenchmarkScaleOut5000", "scheduler-CPU-s")}}}); err != nil {
		return err
	}
	steered, unsteered := "BenchmarkConsolidation1000To700/steered", "BenchmarkConsolidation1000To700/unsteered"
	return bars(filepath.Join(out, "consolidation.svg"), "Consolidation after 1000 pods scale down to 700", "", "", []string{"pods evicted", "seconds until cost stops falling"},
		[]named{{"pod-deletion-cost steering (default)", plotter.Values{get(steered, "pods-evicted"), get(steered, "s-until-cost-stops-falling")}},
			{"no steering", plotter.Values{get(unsteered, "pods-evicted"), get(unsteered, "s-until-cost-stops-falling")}}})
}

// planSizes are the batch sizes of the BenchmarkPlan<n> figures, ascending.
func planSizes(figs figures) []int {
	var out []int
	for name := range figs {
		if n, err := strconv.Atoi(strings.TrimPrefix(name, "BenchmarkPlan")); err == nil && strings.HasPrefix(name, "BenchmarkPlan") {
			out = append(out, n)
		}
	}
	sort.Ints(out)
	return out
}

type named struct {
	name   string
	values plotter.Values
}

// bars draws grouped bars, one group per label and one bar per series, to an SVG file.
func bars(path, title, xLabel, yLabel string, labels []string, series []named) error {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = xLabel
	p.Y.Label.Text = yLabel
	p.Legend.Top = true
	width := vg.Points(14)
	for i, s := range series {
		b, err := plotter.NewBarChart(s.values, width)
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		b.LineStyle.Width = 0
		b.Color = palette(i)
		b.Offset = vg.Length(float64(i)-float64(len(series)-1)/2) * width
		p.Add(b)
		p.Legend.Add(s.name, b)
	}
	p.NominalX(labels...)
	p.Legend.Left = true
	p.Y.Min, p.Y.Max = 0, p.Y.Max*1.3 // room for the legend above the bars
	return p.Save(6*vg.Inch, 3.5*vg.Inch, path)
}

func palette(i int) color.Color {
	colors := []color.Color{color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}, color.RGBA{R: 0xff, G: 0x7f, B: 0x0e, A: 0xff},
		color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff}}
	if i < len(colors) {
		return colors[i]
	}
	return plotutil.Color(i)
}
