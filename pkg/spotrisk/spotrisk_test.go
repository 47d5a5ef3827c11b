/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package spotrisk

import (
	"math"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/cloud"
)

var t0 = time.Date(2026, 12, 8, 12, 0, 0, 0, time.UTC)

func TestParsePolicy(t *testing.T) {
	for _, tc := range []struct {
		value string
		want  Policy
		err   bool
	}{
		{"3/30m", Policy{3, 30 * time.Minute}, false},
		{" 1 / 2h ", Policy{1, 2 * time.Hour}, false},
		{"0/30m", Policy{}, true},
		{"3", Policy{}, true},
		{"3/", Policy{}, true},
		{"3/-5m", Policy{}, true},
		{"three/30m", Policy{}, true},
	} {
		got, err := ParsePolicy(tc.value)
		if (err != nil) != tc.err || got != tc.want {
			t.Errorf("ParsePolicy(%q) = %v, %v; want %v, error %t", tc.value, got, err, tc.want, tc.err)
		}
	}
	np := &stevedorev1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "web", Annotations: map[string]string{Annotation: "2/10m"}}}
	if p, ok, err := PolicyOf(np); !ok || err != nil || p != (Policy{2, 10 * time.Minute}) {
		t.Errorf("PolicyOf = %v, %t, %v", p, ok, err)
	}
	if _, ok, err := PolicyOf(&stevedorev1.NodePool{}); ok || err != nil {
		t.Errorf("a NodePool without the annotation has a policy: %t, %v", ok, err)
	}
}

// TestAnInterruptionRaisesItsPoolsSpotPriceForAnHour: each interruption adds half the spot price, fading over an
// hour; other pools, other zones and on-demand offerings keep their price, and the list price is the same.
func TestAnInterruptionRaisesItsPoolsSpotPriceForAnHour(t *testing.T) {
	clk := clocktesting.NewFakeClock(t0)
	h := NewHistory(clk)
	m5 := &cloud.InstanceType{Name: "m5.large", Offerings: cloud.Offerings{
		{Zone: "us-east-1a", CapacityType: "spot", Price: 0.04, Available: true},
		{Zone: "us-east-1b", CapacityType: "spot", Price: 0.04, Available: true},
		{Zone: "us-east-1a", CapacityType: "on-demand", Price: 0.096, Available: true},
	}}
	c5 := &cloud.InstanceType{Name: "c5.large", Offerings: cloud.Offerings{{Zone: "us-east-1a", CapacityType: "spot", Price: 0.035, Available: true}}}
	its := []*cloud.InstanceType{m5, c5}
	if out := h.Apply(its); &out[0] != &its[0] {
		t.Error("with no interruption the types are copied")
	}
	h.Record("default", "m5.large", "us-east-1a")
	h.Record("default", "m5.large", "us-east-1a") // a storm: two nodes of the pool
	for _, tc := range []struct {
		after time.Duration
		want  float64 // the premium, a share of the price
	}{{0, 1.0}, {30 * time.Minute, 0.5}, {time.Hour, 0}} {
		clk.SetTime(t0.Add(tc.after))
		if got := h.Premium("m5.large", "us-east-1a"); math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("%s after: premium %.3f, want %.3f", tc.after, got, tc.want)
		}
	}
	clk.SetTime(t0.Add(30 * time.Minute))
	out := h.Apply(its)
	got := out[0].Offerings
	if math.Abs(got[0].Price-0.06) > 1e-9 || math.Abs(got[0].ListPrice()-0.04) > 1e-9 {
		t.Errorf("the interrupted pool's offering: price %.4f (want 0.06), list price %.4f (want 0.04)", got[0].Price, got[0].ListPrice())
	}
	if got[1].Price != 0.04 || got[2].Price != 0.096 || out[1] != c5 {
		t.Errorf("other offerings changed: %+v, %+v; c5 copied: %t", got[1], got[2], out[1] != c5)
	}
	if m5.Offerings[0].Price != 0.04 {
		t.Error("Apply changed the types it was given")
	}
}

// TestANodePoolFallsBackToOnDemandAndReturnsToSpot: with "3/30m", two interruptions do nothing, the third within 30
// minutes starts the fallback (reported changed once), another extends it, and 30 minutes after the last one it
// ends (reported changed once). Another NodePool's interruptions do not count.
func TestANodePoolFallsBackToOnDemandAndReturnsToSpot(t *testing.T) {
	clk := clocktesting.NewFakeClock(t0)
	h := NewHistory(clk)
	policy := Policy{Interruptions: 3, Window: 30 * time.Minute}
	step := func(what string, d time.Duration, active, changed bool) Fallback {
		t.Helper()
		clk.SetTime(clk.Now().Add(d))
		f := h.FallbackOf("web", policy)
		if f.Active != active || f.Changed != changed {
			t.Errorf("%s: active %t changed %t, want %t %t (%+v)", what, f.Active, f.Changed, active, changed, f)
		}
		return f
	}
	h.Record("web", "m5.large", "us-east-1a")
	h.Record("batch", "m5.large", "us-east-1a")
	h.Record("batch", "m5.large", "us-east-1a")
	step("one interruption", 0, false, false)
	clk.SetTime(clk.Now().Add(10 * time.Minute))
	h.Record("web", "c5.large", "us-east-1b")
	step("two", 0, false, false)
	clk.SetTime(clk.Now().Add(10 * time.Minute))
	h.Record("web", "c5.large", "us-east-1b")
	f := step("three within 30m", 0, true, true)
	if want := clk.Now().Add(30 * time.Minute); !f.Until.Equal(want) {
		t.Errorf("until %s, want %s", f.Until, want)
	}
	step("asked again", time.Minute, true, false)
	h.Record("web", "m5.large", "us-east-1c")
	step("one more extends it", 20*time.Minute, true, false)
	step("29 minutes after the last", 9*time.Minute, true, false)
	step("30 minutes after the last", time.Minute, false, true)
	step("asked again", time.Minute, false, false)
	if h.Forget("web") {
		t.Error("Forget reports a fallback that ended")
	}
}
