/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package disruption

import (
	"time"

	"github.com/stevedore-dev/stevedore/pkg/metrics"
)

// Metrics records what disruption does in Stevedore's Prometheus metrics.
type Metrics struct{}

// NewMetrics registers the metrics (once per process) and returns the recorder.
func NewMetrics() *Metrics {
	metrics.Register()
	return &Metrics{}
}

func (*Metrics) observeEvaluation(method string, d time.Duration) {
	metrics.DisruptionEvaluation.WithLabelValues(method).Observe(d.Seconds())
}

func (*Metrics) decision(cmd *Command, result string) {
	metrics.DisruptionDecisions.WithLabelValues(cmd.Method, cmd.Action(), result).Inc()
	if result == "succeeded" && cmd.Savings() > 0 {
		metrics.DisruptionSavings.WithLabelValues(cmd.Method).Add(cmd.Savings())
	}
}

func (*Metrics) nodeDisrupted(cand *Candidate, reason string) {
	metrics.NodesDisrupted.WithLabelValues(cand.NodePool.Name, reason).Inc()
}

func (*Metrics) garbageCollected(kind string) {
	metrics.GarbageCollected.WithLabelValues(kind).Inc()
}

func (*Metrics) surged(result string, n int) {
	if n > 0 {
		metrics.PodsSurged.WithLabelValues(result).Add(float64(n))
	}
}
