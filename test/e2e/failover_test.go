/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package e2e

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
)

// leadLine is what a scheduler process logs when it leads and starts Stevedore's background loops.
const leadLine = "Stevedore controllers starting"

// TestTheStandbyTakesOverWhenTheLeaderDiesMidBurst runs two scheduler processes against one sandbox, checks that
// only the leader starts the background loops, kills the leader with SIGKILL while a burst of pods is being
// provisioned, and checks that the standby leads within the lease duration (plus its retry period) and finishes
// the burst, and six pods created after the leader's death, without a duplicate launch or a leaked instance. It
// logs the HA figure: the time from the leader's death to the first node launched for pods that came after it.
func TestTheStandbyTakesOverWhenTheLeaderDiesMidBurst(t *testing.T) {
	scheduler := binary(t, "STEVEDORE_BIN", "./cmd/scheduler")
	dir := t.TempDir()
	sandbox, kubeconfig, envFile := startSandbox(t, scheduler, dir, "--launch-delay", "2s")
	c := connect(t, kubeconfig, envFile)
	const lease, retry = 6 * time.Second, time.Second
	config := schedulerConfig(t, dir, "failover.yaml", func(config, _ map[string]any) {
		le := config["leaderElection"].(map[string]any)
		le["leaseDuration"], le["renewDeadline"], le["retryPeriod"] = lease.String(), "4s", retry.String()
	})
	ns := c.isolatedWorkload(t, "failover", "1", func(np *stevedorev1.NodePool) {
		np.Spec.Disruption.ConsolidateAfter = stevedorev1.NeverDuration()
	})

	var mu sync.Mutex
	led := map[int]time.Time{}
	procs := make([]*process, 2)
	for i := range procs {
		procs[i] = start(t, c.env, func(line string) {
			if strings.Contains(line, leadLine) {
				mu.Lock()
				led[i] = time.Now()
				mu.Unlock()
			}
		}, scheduler, "--config", config, "--kubeconfig", kubeconfig, "--secure-port=0")
	}
	leaders := func() []int {
		mu.Lock()
		defer mu.Unlock()
		var out []int
		for i := range led {
			out = append(out, i)
		}
		return out
	}
	ctx := context.Background()
	if why := waitFor(ctx, 2*time.Minute, func(context.Context) string {
		if len(leaders()) == 0 {
			return "no process leads"
		}
		return ""
	}); why != "" {
		t.Fatal(why)
	}
	leader := leaders()[0]
	standby := 1 - leader

	c.scale(t, ns, 24)
	if why := waitFor(ctx, 2*time.Minute, func(ctx context.Context) string {
		s, err := c.snapshot(ctx, ns, "failover")
		if err != nil {
			return err.Error()
		}
		if len(s.claims) == 0 {
			return "no NodeClaim yet"
		}
		return ""
	}); why != "" {
		t.Fatal(why)
	}
	if l := leaders(); len(l) != 1 {
		t.Fatalf("processes %v started the background loops before any was killed; only the leader may", l)
	}
	before, err := c.snapshot(ctx, ns, "failover")
	if err != nil {
		t.Fatal(err)
	}
	known := map[string]bool{}
	for _, nc := range before.claims {
		known[nc.Name] = true
	}
	if err := procs[leader].cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-procs[leader].waited // killed: its exit error says so
	killed := time.Now()
	// pods arriving while no one leads: the time until one gets a new node is the outage a user sees
	c.scale(t, ns, 30)
	if why := waitFor(ctx, 2*time.Minute, func(context.Context) string {
		mu.Lock()
		defer mu.Unlock()
		if _, ok := led[standby]; !ok {
			return "the standby does not lead"
		}
		return ""
	}); why != "" {
		t.Fatal(why)
	}
	mu.Lock()
	takeover := led[standby].Sub(killed)
	mu.Unlock()
	// the standby tries every retry period (with up to 1.2x jitter) and may take the lease once the dead leader's
	// last renewal is a lease duration old; the last term is slack for a loaded two-core machine
	if limit := lease + 3*retry + 5*time.Second; takeover > limit {
		t.Errorf("the standby took over %s after the leader was killed, want within %s", takeover.Round(100*time.Millisecond), limit)
	}
	t.Logf("the standby led %s after the leader was killed (lease duration %s, retry period %s)", takeover.Round(100*time.Millisecond), lease, retry)

	if why := waitFor(ctx, 2*time.Minute, func(ctx context.Context) string {
		s, err := c.snapshot(ctx, ns, "failover")
		if err != nil {
			return err.Error()
		}
		for _, nc := range s.claims {
			// creation timestamps have whole seconds: one the dead leader made just before the kill is known
			if !known[nc.Name] && !nc.CreationTimestamp.Time.Before(killed.Truncate(time.Second)) {
				return ""
			}
		}
		return "no NodeClaim created after the leader's death"
	}); why != "" {
		t.Fatal(why)
	}
	t.Logf("the first NodeClaim for pods created after the leader's death came %s after it", time.Since(killed).Round(100*time.Millisecond))

	last, why := c.settle(ctx, ns, "failover", 30)
	if why != "" {
		t.Errorf("the burst did not settle after the failover: %s", why)
	}
	if d := last.duplicates(); len(d) > 0 {
		t.Errorf("NodeClaims with more than one instance: %v", d)
	}
	t.Logf("after the failover: 30 pods Running on %d nodes, %d instances launched, %d leaked", len(last.claims), len(last.instances), len(last.leaked()))
	if err := procs[standby].stop(t); err != nil {
		t.Logf("scheduler exited with %v after SIGTERM", err)
	}
	if err := sandbox.stop(t); err != nil {
		t.Logf("sandbox exited with %v after SIGTERM", err)
	}
}
