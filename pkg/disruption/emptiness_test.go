/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package disruption

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/test"
)

func TestEmptiness(t *testing.T) {
	reason := func(t *testing.T, _ *harness, cmd *Command) {
		if cmd.Reason != stevedorev1.DisruptionReasonEmpty || cmd.Forceful || len(cmd.Replacements) != 0 {
			t.Errorf("reason %s, forceful %v, replacements %d; want an unforced Empty delete", cmd.Reason, cmd.Forceful, len(cmd.Replacements))
		}
	}
	five := machines("e", "default", 5)
	quietFor := func(d time.Duration) []machine { return machines("e", "default", 3, createdAgo(d)) }
	after10m := func(policy stevedorev1.ConsolidationPolicy) *test.NodePoolWrapper {
		return pool().Consolidation(policy, dur(10*time.Minute))
	}
	runMethodCases(t, MethodEmptiness, []methodCase{
		{
			name:  "five empty nodes, budget 2: the first two",
			objs:  objects(test.NodePool("default").Budgets(budget("2", "", 0)), five),
			want:  []string{"e1", "e2"},
			check: reason,
		},
		{name: "the default budget, 10% of 5, allows one", objs: objects(test.NodePool("default"), five), want: []string{"e1"}},
		{
			name: "a budget for drift only does not limit emptiness",
			objs: objects(test.NodePool("default").Budgets(budget("0", "", 0, stevedorev1.DisruptionReasonDrifted)), five),
			want: []string{"e1", "e2", "e3", "e4", "e5"},
		},
		{
			name: "a budget of 0 for Empty",
			objs: objects(test.NodePool("default").Budgets(budget("100%", "", 0), budget("0", "", 0, stevedorev1.DisruptionReasonEmpty)), five),
		},
		{
			name: "nodes already being disrupted use the budget up",
			objs: objects(test.NodePool("default").Budgets(budget("2", "", 0)), five, machine{name: "going", pool: "default", typ: "m5.large",
				node: func(w *test.NodeWrapper) { w.Taint(stevedorev1.TaintDisrupted, "true", corev1.TaintEffectNoSchedule) }}),
			want: []string{"e1"},
		},
		{
			name: "budgets are per NodePool",
			objs: objects(test.NodePool("a").Budgets(budget("1", "", 0)), test.NodePool("b").Budgets(budget("1", "", 0)),
				machines("a", "a", 2), machines("b", "b", 2)),
			want: []string{"a1", "b1"},
		},
		{name: "consolidateAfter not yet passed since initialization", objs: objects(after10m(stevedorev1.ConsolidationPolicyWhenEmpty), quietFor(5*time.Minute))},
		{
			name: "consolidateAfter passed",
			objs: objects(after10m(stevedorev1.ConsolidationPolicyWhenEmpty), quietFor(15*time.Minute)),
			want: []string{"e1", "e2", "e3"},
		},
		{
			name:  "consolidateAfter not yet passed since a pod left",
			objs:  objects(after10m(stevedorev1.ConsolidationPolicyWhenEmpty), quietFor(15*time.Minute)),
			setup: func(h *harness) { h.c.activity.lastPodEvent["e2"] = t0.Add(-time.Minute) },
			want:  []string{"e1", "e3"},
		},
		{
			name:  "consolidateAfter counts from when the controller started",
			objs:  objects(after10m(stevedorev1.ConsolidationPolicyWhenEmpty), quietFor(15*time.Minute)),
			setup: func(h *harness) { h.c.activity.started = t0.Add(-time.Minute) },
		},
		{
			name: "consolidateAfter Never",
			objs: objects(pool().Consolidation(stevedorev1.ConsolidationPolicyWhenEmpty, nil), five),
		},
		{
			name: "WhenEmptyOrUnderutilized deletes empty nodes too",
			objs: objects(after10m(stevedorev1.ConsolidationPolicyWhenEmptyOrUnderutilized), quietFor(15*time.Minute)),
			want: []string{"e1", "e2", "e3"},
		},
		{
			name: "WhenUnderutilized (v1beta1) is read as WhenEmptyOrUnderutilized",
			objs: objects(after10m(stevedorev1.ConsolidationPolicyWhenUnderutilized), quietFor(15*time.Minute)),
			want: []string{"e1", "e2", "e3"},
		},
		{
			name: "nodes with pods are not empty; DaemonSet, mirror and finished pods do not count",
			objs: objects(pool(), five, pod("web", "e1", "100m", "128Mi"),
				test.Pod("agent").Node("e2").OwnedBy("DaemonSet", "agent"),
				test.Pod("static").Node("e3").Annotations(corev1.MirrorPodAnnotationKey, "x"),
				pod("job", "e4", "100m", "128Mi").Phase(corev1.PodSucceeded)),
			want: []string{"e2", "e3", "e4", "e5"},
		},
		{
			name: "blocked nodes are left alone",
			objs: objects(pool(), machines("e", "default", 3, func(m *machine) {
				if m.name == "e2" {
					m.node = func(w *test.NodeWrapper) { w.Annotations(stevedorev1.KarpenterDoNotDisruptKey, "true") }
				}
			}), test.Pod("next").Pending().Nominated("e3")),
			want: []string{"e1"},
		},
		{
			name:  "an empty replacement under protection is left alone",
			objs:  objects(pool(), machines("e", "default", 2)),
			setup: func(h *harness) { h.c.activity.protect([]string{"claim-e1"}, t0.Add(time.Minute)) },
			want:  []string{"e2"},
		},
	})
}
