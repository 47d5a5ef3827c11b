/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package e2e

import (
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// scenarioBound is how long a scenario may run before the test stops it: more than the sum of the bounds the
// scenarios put on their own steps (the inflate scenario's are 3, 4 and 4 minutes), so a slow machine fails a step
// with the scenario's own message rather than being killed mid-step.
const scenarioBound = 13 * time.Minute

// TestDemoTellsTheStory runs what `make demo` runs (with a shorter launch delay): the inflate scenario must pass,
// print every launch and removal, progress lines without terminal escape codes (the output is not a terminal),
// a summary table whose last row, checked by the scenario against the cluster, is an empty fleet, and how long pods
// waited after their node was ready, none parked at the end.
func TestDemoTellsTheStory(t *testing.T) {
	scheduler := binary(t, "STEVEDORE_BIN", "./cmd/scheduler")
	out, err := runWithin(t, scenarioBound, nil, scheduler, "sandbox", "--scenario", "inflate", "--launch-delay", "500ms",
		"--log-file", filepath.Join(t.TempDir(), "demo.log"))
	t.Logf("demo output:\n%s", out)
	if err != nil {
		t.Fatalf("the demo failed: %v", err)
	}
	for _, want := range []string{
		"kubectl scale deployment inflate --replicas 10", "Launched instance: i-", "pods pending 10",
		"scale-up done", "Removing node", "scale to 0 (all nodes removed) done",
		"phase", "cost/h", "scenario inflate passed", "parked on a ready node now: 0",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the demo output lacks %q", want)
		}
	}
	if strings.Contains(out, "\x1b[") || strings.Contains(out, "\r") {
		t.Error("the demo printed terminal escape codes to a non-terminal")
	}
	row := ""
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "scale to 0") {
			row = line
		}
	}
	if fields := strings.Fields(row); len(fields) < 3 || fields[len(fields)-1] != "$0.0000" || fields[len(fields)-2] != "0" {
		t.Errorf("the summary's last row is not an empty fleet: %q", row)
	}
}

// TestTheGPUScenarioKeepsGPUAndPlainPodsApart runs `scheduler sandbox --scenario gpu`: the GPU NodePool beside
// the production ones; the scenario checks that GPU pods land on NVIDIA types from the NVIDIA image and plain pods
// on plain types, and that every node goes at 0 replicas.
func TestTheGPUScenarioKeepsGPUAndPlainPodsApart(t *testing.T) {
	scheduler := binary(t, "STEVEDORE_BIN", "./cmd/scheduler")
	out, err := runWithin(t, scenarioBound, nil, scheduler, "sandbox", "--scenario", "gpu", "--launch-delay", "500ms",
		"--log-file", filepath.Join(t.TempDir(), "gpu.log"))
	t.Logf("scenario output:\n%s", out)
	if err != nil {
		t.Fatalf("the gpu scenario failed: %v", err)
	}
	for _, want := range []string{"gpu-inference", "nvidia", "every node removed", "scenario gpu passed"} {
		if !strings.Contains(out, want) {
			t.Errorf("the scenario output lacks %q", want)
		}
	}
}
