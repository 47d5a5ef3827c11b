/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
)

// A kill point is a moment of Stevedore's work the crash test waits for before it kills the scheduler.
type killPoint struct {
	name string
	// scaleUp: the run scales the workload up (launch, registration), else down (consolidation, termination).
	scaleUp bool
	// reached reports whether a NodeClaim, as a watch delivers it, shows the moment has come.
	reached func(c *stevedorev1.NodeClaim) bool
}

var killPoints = []killPoint{
	{"launch", true, func(c *stevedorev1.NodeClaim) bool {
		return c.DeletionTimestamp == nil && !conditionTrue(c, stevedorev1.ConditionLaunched)
	}},
	{"registration", true, func(c *stevedorev1.NodeClaim) bool {
		return conditionTrue(c, stevedorev1.ConditionLaunched) && !conditionTrue(c, stevedorev1.ConditionRegistered)
	}},
	{"consolidation", false, func(c *stevedorev1.NodeClaim) bool {
		return c.Status.DisruptionReason != "" && c.DeletionTimestamp == nil
	}},
	{"termination", false, func(c *stevedorev1.NodeClaim) bool { return c.DeletionTimestamp != nil }},
}

func conditionTrue(c *stevedorev1.NodeClaim, typ string) bool {
	for _, cond := range c.Status.Conditions {
		if cond.Type == typ {
			return cond.Status == metav1.ConditionTrue
		}
	}
	return false
}

// TestSIGKILLAtRandomPointsLosesNothing kills the real scheduler binary with SIGKILL at randomised moments of
// launch, registration, consolidation and termination, restarts it, and checks after each restart that it
// recovered from the API server and the cloud alone: every pod Running, no instance without a NodeClaim (leak),
// no NodeClaim with two instances and no node launched for pods that another node took (duplicate). Runs
// STEVEDORE_CRASH_RUNS times (default 16, four per kill point); STEVEDORE_CRASH_SEED replays a run's randomness.
func TestSIGKILLAtRandomPointsLosesNothing(t *testing.T) {
	scheduler := binary(t, "STEVEDORE_BIN", "./cmd/scheduler")
	runs := envInt(t, "STEVEDORE_CRASH_RUNS", 16)
	seed := uint64(envInt(t, "STEVEDORE_CRASH_SEED", int(time.Now().UnixNano()%1e9))) //nolint:gosec // G115: any int is a seed; a negative one wraps to the same seed every time
	t.Logf("seed %d (STEVEDORE_CRASH_SEED replays it), %d runs", seed, runs)
	rng := rand.New(rand.NewPCG(seed, seed))

	dir := t.TempDir()
	// a launch delay keeps NodeClaims launched but not registered for a while: the registration kill point
	sandbox, kubeconfig, envFile := startSandbox(t, scheduler, dir, "--launch-delay", "2s")
	c := connect(t, kubeconfig, envFile)
	// short leases so a restarted process leads soon after its predecessor died holding the lease; fast
	// disruption and garbage collection so each run settles in seconds
	config := schedulerConfig(t, dir, "crash.yaml", func(config, args map[string]any) {
		le := config["leaderElection"].(map[string]any)
		le["leaseDuration"], le["renewDeadline"], le["retryPeriod"] = "3s", "2s", "500ms"
		args["disruptionPollInterval"], args["disruptionValidationDelay"], args["garbageCollectionInterval"] = "1s", "1s", "2s"
	})
	ns := c.isolatedWorkload(t, "crash", "500m", func(np *stevedorev1.NodePool) {
		after := 5 * time.Second
		np.Spec.Disruption.ConsolidateAfter = &stevedorev1.NillableDuration{Duration: &after}
	})
	startScheduler := func() *process {
		return start(t, c.env, nil, scheduler, "--config", config, "--kubeconfig", kubeconfig, "--secure-port=0", "-v=2")
	}
	sched := startScheduler()

	counts := map[string]int{}
	missed, untaggedOrphans, podsLost := 0, 0, 0
	var failures []string
	replicas := int32(0)
	ctx := context.Background()
	for run := 0; run < runs; run++ {
		point := killPoints[run%len(killPoints)]
		if point.scaleUp {
			replicas += 4 + rng.Int32N(7)
		} else {
			replicas = max(1, replicas-(3+rng.Int32N(6)))
		}
		delay := time.Duration(rng.IntN(1500)) * time.Millisecond
		c.scale(t, ns, replicas)
		why := c.watchClaims(ctx, "crash", 20*time.Second, point.reached)
		if why != "" && point.scaleUp {
			// the new pods fitted the room the nodes had: ask for more
			replicas += 8
			c.scale(t, ns, replicas)
			why = c.watchClaims(ctx, "crash", 60*time.Second, point.reached)
		}
		if why != "" {
			missed++
			t.Logf("run %d: %s point not reached (%s); killing anyway", run, point.name, why)
		}
		time.Sleep(delay) // the randomised kill point, not synchronisation
		if err := sched.cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		<-sched.waited // killed: its exit error says so
		counts[point.name]++
		sched = startScheduler()

		var idleAtBind []string
		if point.scaleUp {
			idleAtBind = c.idleWhenBound(ctx, ns, "crash", int(replicas))
		}
		last, why := c.settle(ctx, ns, "crash", int(replicas))
		untaggedOrphans = last.untagged()
		problems := []string{}
		if lost := int(replicas) - last.running(); lost > 0 {
			podsLost += lost
			problems = append(problems, fmt.Sprintf("%d pods not Running", lost))
		}
		if why != "" {
			problems = append(problems, "not settled within 4 minutes: "+why)
		}
		if len(idleAtBind) > 0 {
			problems = append(problems, "NodeClaims hosting none of the pods when the last one bound (duplicate launch): "+strings.Join(idleAtBind, ","))
		}
		if d := last.duplicates(); len(d) > 0 {
			problems = append(problems, "NodeClaims with more than one instance: "+strings.Join(d, ","))
		}
		if len(problems) > 0 {
			failures = append(failures, fmt.Sprintf("run %d (%s, kill %s after it, %d replicas): %s", run, point.name, delay, replicas, strings.Join(problems, "; ")))
			t.Logf("run %d (%s): %s", run, point.name, strings.Join(problems, "; "))
		} else {
			t.Logf("run %d: killed %s after the %s point, %d replicas: recovered, %d nodes, %d instances launched so far",
				run, delay, point.name, replicas, len(last.claims), len(last.instances))
		}
	}
	final, err := c.snapshot(ctx, ns, "crash")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("crash safety: %d runs (kill points %s; %d not reached before the kill), leaked instances %d, duplicate launches %d, "+
		"pods lost %d; %d instances launched in all, %d terminated by garbage collection before they were tagged with their NodeClaim",
		runs, formatCounts(counts), missed, len(final.leaked()), len(final.duplicates()), podsLost, len(final.instances), untaggedOrphans)
	if len(failures) > 0 {
		t.Errorf("%d of %d runs broke an invariant:\n%s", len(failures), runs, strings.Join(failures, "\n"))
	}
	if err := sched.stop(t); err != nil {
		t.Logf("scheduler exited with %v after SIGTERM", err)
	}
	if err := sandbox.stop(t); err != nil {
		t.Logf("sandbox exited with %v after SIGTERM", err)
	}
}

func formatCounts(m map[string]int) string {
	var parts []string
	for _, p := range killPoints {
		parts = append(parts, fmt.Sprintf("%s %d", p.name, m[p.name]))
	}
	return strings.Join(parts, ", ")
}

func envInt(t *testing.T, name string, def int) int {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		t.Fatalf("%s=%q: %v", name, v, err)
	}
	return n
}
