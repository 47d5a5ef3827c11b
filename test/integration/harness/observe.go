/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package harness

import (
	"context"
	"fmt"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/component-base/metrics/legacyregistry"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/sandbox"
)

// Metric sums the samples of a metric family whose labels include want (counters and gauges by value, histograms
// by sample count), as the scheduler's /metrics endpoint serves them: the in-process scheduler registers in the
// same registry.
func Metric(t testing.TB, name string, want map[string]string) float64 {
	t.Helper()
	families, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	total := 0.0
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	samples:
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			for k, v := range want {
				if labels[k] != v {
					continue samples
				}
			}
			switch f.GetType() {
			case dto.MetricType_COUNTER:
				total += m.GetCounter().GetValue()
			case dto.MetricType_GAUGE:
				total += m.GetGauge().GetValue()
			case dto.MetricType_HISTOGRAM:
				total += float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return total
}

// Events returns the events about an object, as "Reason: note".
func Events(ctx context.Context, sb *sandbox.Sandbox, name string) ([]string, error) {
	list, err := sb.Kube.EventsV1().Events(metav1.NamespaceAll).List(ctx, metav1.ListOptions{FieldSelector: "regarding.name=" + name})
	if err != nil {
		return nil, err
	}
	var out []string
	for _, ev := range list.Items {
		out = append(out, ev.Reason+": "+ev.Note)
	}
	return out, nil
}

// WaitEvent waits for an event with the reason about an object and returns it as "Reason: note".
func WaitEvent(t testing.TB, sb *sandbox.Sandbox, name, reason string) string {
	t.Helper()
	var found string
	Eventually(t, "a "+reason+" event on "+name, func(ctx context.Context) (bool, error) {
		evs, err := Events(ctx, sb, name)
		for _, e := range evs {
			if strings.HasPrefix(e, reason+": ") {
				found = e
				return true, nil
			}
		}
		return false, err
	})
	return found
}

// WaitEventSaying waits until the object has an event of the reason whose message contains text.
func WaitEventSaying(t testing.TB, sb *sandbox.Sandbox, name, reason, text string) {
	t.Helper()
	Eventually(t, "a "+reason+" event on "+name+" saying "+text, func(ctx context.Context) (bool, error) {
		evs, err := Events(ctx, sb, name)
		for _, e := range evs {
			if strings.HasPrefix(e, reason+": ") && strings.Contains(e, text) {
				return true, nil
			}
		}
		return false, err
	})
}

// Pods returns n pods prefix-0..n-1 labelled app=prefix, isolated to a test's NodePools, and their names.
func Pods(ns, isolation, prefix string, n int, cpu, mem string, mutate ...func(*corev1.Pod)) ([]*corev1.Pod, []string) {
	var out []*corev1.Pod
	var names []string
	for i := 0; i < n; i++ {
		p := Isolated(Pod(ns, fmt.Sprintf("%s-%d", prefix, i), cpu, mem), isolation)
		p.Labels = map[string]string{labelApp: prefix}
		for _, m := range mutate {
			m(p)
		}
		out = append(out, p)
		names = append(names, p.Name)
	}
	return out, names
}

// Req is a NodePool requirement.
func Req(key, op string, values ...string) stevedorev1.NodeSelectorRequirementWithMinValues {
	return stevedorev1.NodeSelectorRequirementWithMinValues{Key: key, Operator: stevedorev1.NodeSelectorOperator(op), Values: values}
}

// WithRequirements adds requirements to a NodePool.
func WithRequirements(reqs ...stevedorev1.NodeSelectorRequirementWithMinValues) func(*stevedorev1.NodePool) {
	return func(np *stevedorev1.NodePool) {
		np.Spec.Template.Spec.Requirements = append(np.Spec.Template.Spec.Requirements, reqs...)
	}
}
