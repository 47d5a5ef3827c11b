/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package disruption

import (
	"slices"
	"testing"
	"time"
)

func TestRetriesDoubleUpToTheirCap(t *testing.T) {
	cases := []struct {
		failures int
		wait     time.Duration
	}{
		{1, 10 * time.Second}, {2, 20 * time.Second}, {3, 40 * time.Second}, {6, 320 * time.Second}, {7, retryCap}, {40, retryCap},
	}
	for _, tc := range cases {
		r := newRetries(10 * time.Second)
		for range tc.failures {
			r.failed([]string{"a"}, t0, "x")
		}
		after, why, ok := r.waiting("a", t0)
		if !ok || why != "x" || after.Sub(t0) != tc.wait {
			t.Errorf("after %d failures: waiting = %v, %q, %v; want %s", tc.failures, after.Sub(t0), why, ok, tc.wait)
		}
		if _, _, ok := r.waiting("a", t0.Add(tc.wait)); ok {
			t.Errorf("after %d failures: still waiting once %s passed", tc.failures, tc.wait)
		}
		r.keep(map[string]bool{"b": true})
		if _, _, ok := r.waiting("a", t0); ok {
			t.Errorf("a node no longer a candidate is remembered")
		}
	}
}

// TestANodeWhoseConsolidationFailedLetsOthersGoFirst: the node consolidation takes first failed; the next passes
// take another node, and say why the first waits, until its wait has passed.
func TestANodeWhoseConsolidationFailedLetsOthersGoFirst(t *testing.T) {
	h := newHarness(t, harnessConfig{}, objects(onDemandPool(), node("a", "m5.xlarge"), node("b", "m5.xlarge"),
		pod("web1", "a", "500m", "512Mi"), pod("web2", "a", "500m", "512Mi"), pod("web3", "b", "500m", "512Mi"))...)
	single := h.method(MethodSingleNode)
	names := func(cmd *Command) []string {
		if cmd == nil {
			return nil
		}
		return sortedNames(cmd.Candidates)
	}
	if got := names(h.find(single)); !slices.Equal(got, []string{"b"}) {
		t.Fatalf("first move = %v, want [b] (cheapest to disrupt)", got)
	}
	h.c.retries.failed([]string{"b"}, h.Clock.Now(), "pods arrived on the node")
	v := h.view()
	cmd, err := single.Find(h.Ctx, v)
	if err != nil {
		t.Fatal(err)
	}
	if got := names(cmd); !slices.Equal(got, []string{"a"}) {
		t.Errorf("move while b waits = %v, want [a]", got)
	}
	if why := v.verdicts["b"]; why == nil || why.reason != RetainRecentlyFailed {
		t.Errorf("b's verdict = %+v, want %s", why, RetainRecentlyFailed)
	}
	h.Clock.Step(10 * time.Second)
	if got := names(h.find(single)); !slices.Equal(got, []string{"b"}) {
		t.Errorf("move once b's wait passed = %v, want [b]", got)
	}
}
