/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package sandbox

import (
	"fmt"
	"math"

	"k8s.io/component-base/metrics/legacyregistry"
)

// ReadyNodeWaits summarises, from the in-process scheduler's metrics, how long pods waited for their binding after
// the node planned for them was ready: how many, and the upper bound of the slowest bucket
// (stevedore_pods_ready_node_wait_seconds), and how many are parked on a ready node now
// (stevedore_pods_parked_on_ready_node). ok is false when the scheduler runs in another process.
func ReadyNodeWaits() (count uint64, slowestWithin float64, parked float64, ok bool) {
	families, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		return 0, 0, 0, false
	}
	for _, f := range families {
		switch f.GetName() {
		case "stevedore_pods_ready_node_wait_seconds":
			for _, m := range f.GetMetric() {
				h := m.GetHistogram()
				count += h.GetSampleCount()
				prev := uint64(0)
				for _, b := range h.GetBucket() {
					if b.GetCumulativeCount() > prev {
						slowestWithin = math.Max(slowestWithin, b.GetUpperBound())
					}
					prev = b.GetCumulativeCount()
				}
				if h.GetSampleCount() > prev {
					slowestWithin = math.Inf(1)
				}
			}
			ok = true
		case "stevedore_pods_parked_on_ready_node":
			for _, m := range f.GetMetric() {
				parked += m.GetGauge().GetValue()
			}
		}
	}
	return count, slowestWithin, parked, ok
}

// waitsLine is ReadyNodeWaits in words, or "" when the scheduler's metrics are not in this process.
func waitsLine() string {
	count, slowest, parked, ok := ReadyNodeWaits()
	if !ok {
		return ""
	}
	return fmt.Sprintf("pods bound after their planned node was ready: %d, each within %gs of it (stevedore_pods_ready_node_wait_seconds); "+
		"parked on a ready node now: %g", count, slowest, parked)
}
