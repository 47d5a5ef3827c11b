// Package metrics defines Stevedore's Prometheus metrics. They are registered in component-base's legacy
// registry, which kube-scheduler serves on /metrics, so one scrape of the scheduler pod returns the scheduler's
// metrics and Stevedore's. As everywhere in Kubernetes, the collectors are process-wide and registered once.
package metrics

import (
	"sync"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

const namespace = "stevedore"

// Disruption metrics.
var (
	// DisruptionDecisions counts disruption commands by method, action (delete, replace) and result
	// (succeeded, failed).
	DisruptionDecisions = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace: namespace, Subsystem: "disruption", Name: "decisions_total",
		Help:           "Disruption commands carried out, by method, action and result.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"method", "action", "result"})
	// NodesDisrupted counts nodes removed by disruption, by NodePool and reason.
	NodesDisrupted = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace: namespace, Subsystem: "disruption", Name: "nodes_disrupted_total",
		Help:           "Nodes removed by disruption, by NodePool and reason (Empty, Underutilized, Drifted, Expired, Interrupted).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"nodepool", "reason"})
	// DisruptionSavings sums the hourly price saved by disruption commands.
	DisruptionSavings = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace: namespace, Subsystem: "disruption", Name: "hourly_savings_dollars_total",
		Help:           "Hourly price (USD) saved by the disruption commands carried out, by method.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"method"})
	// DisruptionEvaluation times how long each method takes to find a command.
	DisruptionEvaluation = metrics.NewHistogramVec(&metrics.HistogramOpts{
		Namespace: namespace, Subsystem: "disruption", Name: "evaluation_duration_seconds",
		Help:           "Time a disruption method took to evaluate the cluster, by method.",
		Buckets:        metrics.ExponentialBuckets(0.001, 2, 16),
		StabilityLevel: metrics.ALPHA,
	}, []string{"method"})
	// GarbageCollected counts instances and NodeClaims removed by garbage collection.
	GarbageCollected = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace: namespace, Subsystem: "garbage_collection", Name: "removed_total",
		Help:           "Orphaned instances terminated and NodeClaims deleted because their instance was gone, by kind.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"kind"})
)

// Interruption metrics.
var (
	// InterruptionMessages counts the messages read from the interruption queue, by kind (SpotInterruption,
	// RebalanceRecommendation, StateChange, ScheduledChange, Noop, Unknown, Unparseable).
	InterruptionMessages = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace: namespace, Subsystem: "interruption", Name: "messages_total",
		Help:           "Messages read from the interruption queue, by kind (Unknown and Unparseable ones are deleted too).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"kind"})
	// InterruptionActions counts what interruption notices led to, by action (replace-and-drain, drain, event,
	// deferred, unknown-instance, failed).
	InterruptionActions = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace: namespace, Subsystem: "interruption", Name: "actions_total",
		Help:           "Actions taken on interruption notices, by kind and action.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"kind", "action"})
	// InterruptionLatency times from the notice's event time to the start of the node's drain.
	InterruptionLatency = metrics.NewHistogramVec(&metrics.HistogramOpts{
		Namespace: namespace, Subsystem: "interruption", Name: "notice_to_drain_seconds",
		Help:           "Time from an interruption notice's event time to the start of the node's drain, by kind.",
		Buckets:        metrics.ExponentialBuckets(0.25, 2, 12),
		StabilityLevel: metrics.ALPHA,
	}, []string{"kind"})
)

var registerOnce sync.Once

// Register registers every Stevedore metric in the legacy registry (once per process).
func Register() {
	registerOnce.Do(func() {
		for _, m := range []metrics.Registerable{DisruptionDecisions, NodesDisrupted, DisruptionSavings, DisruptionEvaluation,
			GarbageCollected, InterruptionMessages, InterruptionActions, InterruptionLatency} {
			legacyregistry.MustRegister(m)
		}
	})
}
