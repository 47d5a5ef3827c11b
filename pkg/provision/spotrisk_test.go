/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package provision

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/solver"
	"github.com/stevedore-dev/stevedore/pkg/spotrisk"
	"github.com/stevedore-dev/stevedore/pkg/test"
)

// TestRepeatedSpotInterruptionsMakeANodePoolOnDemandForAWhile: a NodePool of spot and on-demand whose policy is
// "2/30m" plans without spot once two of its spot nodes were interrupted within 30 minutes, with a SpotFallback
// event, and with spot again 30 minutes after the last, with a SpotRestored event; a spot-only NodePool with the same
// history stays on spot, and says why. Meanwhile the interrupted pool's spot offering is priced higher, its list
// price unchanged.
func TestRepeatedSpotInterruptionsMakeANodePoolOnDemandForAWhile(t *testing.T) {
	pool := func(name string, capacityTypes ...string) *stevedorev1.NodePool {
		np := test.NodePool(name).Require(stevedorev1.LabelCapacityType, corev1.NodeSelectorOpIn, capacityTypes...).Obj()
		np.Annotations = map[string]string{spotrisk.Annotation: "2/30m"}
		return np
	}
	h := newHarness(t, pool("mixed", "spot", "on-demand"), pool("spotonly", "spot"))
	history := spotrisk.NewHistory(h.Clock)
	h.prov.opts.SpotRisk = history
	options := func() map[string]solver.NodePoolOption {
		t.Helper()
		in, _, err := h.prov.input(h.Ctx, []*corev1.Pod{test.Pod("new").Pending().Req("cpu", "1").Obj()})
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]solver.NodePoolOption{}
		for _, o := range in.NodePools {
			out[o.NodePool.Name] = o
		}
		return out
	}
	allowsSpot := func(o solver.NodePoolOption) bool {
		r := o.Requirements.Get(stevedorev1.LabelCapacityType)
		return r == nil || r.Has(stevedorev1.CapacityTypeSpot)
	}
	events := func() string { return strings.Join(h.Events(), "\n") }
	history.Record("mixed", "m5.large", "us-east-1a")
	history.Record("spotonly", "m5.large", "us-east-1a")
	if o := options(); !allowsSpot(o["mixed"]) {
		t.Fatal("one interruption made mixed on-demand")
	}
	h.Clock.Step(10 * time.Minute)
	history.Record("mixed", "m5.large", "us-east-1a")
	history.Record("spotonly", "m5.large", "us-east-1a")
	o := options()
	if allowsSpot(o["mixed"]) {
		t.Error("two interruptions within 30m left mixed on spot")
	}
	if !allowsSpot(o["spotonly"]) {
		t.Error("spotonly, which allows nothing but spot, was taken off spot")
	}
	for _, it := range o["spotonly"].InstanceTypes {
		for _, off := range it.Offerings {
			if it.Name == "m5.large" && off.Zone == "us-east-1a" && off.CapacityType == stevedorev1.CapacityTypeSpot &&
				(off.Price <= off.ListPrice() || off.RiskPremium <= 0) {
				t.Errorf("the interrupted pool's spot offering is not priced higher: price %.4f, list %.4f", off.Price, off.ListPrice())
			}
		}
	}
	got := events()
	for _, want := range []string{"SpotFallback 2 Spot interruptions within 30m0s: new nodes are on-demand",
		"SpotFallback 2 Spot interruptions within 30m0s, but the NodePool allows no capacity type other than spot"} {
		if !strings.Contains(got, want) {
			t.Errorf("no event saying %q in:\n%s", want, got)
		}
	}
	options()
	if again := events(); strings.Contains(again, "SpotFallback") {
		t.Errorf("the fallback was reported again: %s", again)
	}
	h.Clock.Step(30 * time.Minute)
	if o := options(); !allowsSpot(o["mixed"]) {
		t.Error("30 minutes after the last interruption mixed is still off spot")
	}
	if got := events(); !strings.Contains(got, "SpotRestored") {
		t.Errorf("no SpotRestored event in:\n%s", got)
	}
}

// TestAnInvalidSpotFallbackIsReportedOncePerValue: a NodePool whose spot fallback value is not one gets an
// InvalidSpotFallback event the first time it is read, none while the value stays, and one again for a new invalid
// value; it plans with spot as if it had no policy.
func TestAnInvalidSpotFallbackIsReportedOncePerValue(t *testing.T) {
	np := test.NodePool("web").Require(stevedorev1.LabelCapacityType, corev1.NodeSelectorOpIn, "spot", "on-demand").Obj()
	np.Annotations = map[string]string{spotrisk.Annotation: "often"}
	h := newHarness(t, np)
	h.prov.opts.SpotRisk = spotrisk.NewHistory(h.Clock)
	read := func() int {
		t.Helper()
		if _, _, err := h.prov.input(h.Ctx, []*corev1.Pod{test.Pod("new").Pending().Req("cpu", "1").Obj()}); err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, e := range h.Events() {
			if strings.Contains(e, ReasonInvalidSpotFallback) && strings.Contains(e, spotrisk.Annotation) {
				n++
			}
		}
		return n
	}
	if got := read(); got != 1 {
		t.Errorf("first read: %d InvalidSpotFallback events, want 1", got)
	}
	if got := read() + read(); got != 0 {
		t.Errorf("the same value read again: %d events, want 0", got)
	}
	updated := np.DeepCopy()
	updated.Annotations[spotrisk.Annotation] = "3/soon"
	if err := h.Listers.Add(updated); err != nil { // the NodePool lister's copy, as its informer would update it
		t.Fatal(err)
	}
	if got := read(); got != 1 {
		t.Errorf("a new invalid value: %d events, want 1", got)
	}
}
