/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package disruption

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/test"
)

func TestExpiration(t *testing.T) {
	expiring := func(name string, age, after time.Duration) machine {
		return machine{name: name, pool: "default", typ: "m5.large", created: t0.Add(-age),
			claim: func(w *test.NodeClaimWrapper) { w.ExpireAfter(after) }}
	}
	forceful := func(t *testing.T, _ *harness, cmd *Command) {
		if !cmd.Forceful || cmd.Reason != ReasonExpired {
			t.Errorf("forceful = %v, reason = %s; want a forceful %s command", cmd.Forceful, cmd.Reason, ReasonExpired)
		}
	}
	pods := func(n int) func(*testing.T, *harness, *Command) {
		return func(t *testing.T, _ *harness, cmd *Command) {
			if cmd.Pods != n {
				t.Errorf("pods = %d, want %d", cmd.Pods, n)
			}
		}
	}
	runMethodCases(t, MethodExpiration, []methodCase{
		{
			name:  "a node past expireAfter expires, one not yet does not",
			objs:  objects(pool(), expiring("old", 2*time.Hour, time.Hour), expiring("young", 2*time.Hour, 3*time.Hour)),
			want:  []string{"old"},
			check: checks(forceful, wantReplacement("", ""), pods(0)),
		},
		{
			name: "expireAfter is reached exactly",
			objs: objects(pool(), expiring("a", time.Hour, time.Hour)),
			want: []string{"a"},
		},
		{
			name: "every expired node at once",
			objs: objects(pool(), expiring("a", 48*time.Hour, 24*time.Hour), expiring("b", 25*time.Hour, 24*time.Hour),
				expiring("c", 23*time.Hour, 24*time.Hour)),
			want: []string{"a", "b"},
		},
		{
			name: "expireAfter Never and no expireAfter do not expire",
			objs: objects(pool(),
				machine{name: "never", pool: "default", typ: "m5.large", created: t0.Add(-1000 * time.Hour),
					claim: func(w *test.NodeClaimWrapper) { w.Spec.ExpireAfter = stevedorev1.NeverDuration() }},
				machine{name: "unset", pool: "default", typ: "m5.large", created: t0.Add(-1000 * time.Hour)}),
		},
		{
			name: "the NodeClaim's expireAfter counts, not the NodePool's",
			objs: objects(pool().ExpireAfter(time.Minute), expiring("a", time.Hour, 2*time.Hour)),
		},
		{
			name: "budgets, do-not-disrupt and PDBs do not hold expiry back",
			objs: objects(pool().Budgets(budget("0", "", 0)),
				machine{name: "a", pool: "default", typ: "m5.large", created: t0.Add(-2 * time.Hour),
					claim: func(w *test.NodeClaimWrapper) { w.ExpireAfter(time.Hour) },
					node:  func(w *test.NodeWrapper) { w.Annotations(stevedorev1.DoNotDisruptKey, "true") }},
				pod("web", "a", "100m", "128Mi").Annotations(stevedorev1.KarpenterDoNotDisruptKey, "true"), pdb("web", "web", 0),
				node("b", "m5.large")),
			want:  []string{"a"},
			check: checks(forceful, wantReplacement("", ""), pods(1)),
		},
		{
			name:  "pods that fit on another node need no replacement",
			objs:  objects(pool(), expiring("a", 2*time.Hour, time.Hour), pod("web", "a", "500m", "512Mi"), node("b", "m5.large")),
			want:  []string{"a"},
			check: checks(wantReplacement("", ""), pods(1)),
		},
		{
			name: "pods that fit nowhere else get a replacement, which may be the same type",
			objs: objects(onDemandPool().Require(corev1.LabelInstanceTypeStable, corev1.NodeSelectorOpIn, "m5.large"),
				expiring("a", 2*time.Hour, time.Hour), pod("web", "a", "500m", "512Mi")),
			want: []string{"a"},
			check: checks(pods(1), func(t *testing.T, _ *harness, cmd *Command) {
				if len(cmd.Replacements) != 1 || cmd.Replacements[0].InstanceType.Name != "m5.large" {
					t.Errorf("replacements = %s, want one m5.large", describeReplacements(cmd.Replacements))
				}
			}),
		},
		{
			name: "a pod no node can run: expired anyway, without replacements",
			objs: objects(pool(), expiring("a", 2*time.Hour, time.Hour), pinned("local", "a"), node("b", "m5.large")),
			want: []string{"a"},
			check: checks(forceful, pods(0), func(t *testing.T, _ *harness, cmd *Command) {
				if cmd.Replacements != nil {
					t.Errorf("replacements = %s, want none", describeReplacements(cmd.Replacements))
				}
			}),
		},
		{
			// A NodeClaim that never initialized is no candidate, so expiry does not see it (registration and
			// initialization timeouts are the lifecycle controller's).
			name: "a NodeClaim not initialized does not expire here",
			objs: objects(pool(), machine{name: "a", pool: "default", typ: "m5.large", created: t0.Add(-2 * time.Hour),
				claim: func(w *test.NodeClaimWrapper) {
					w.ExpireAfter(time.Hour)
					meta.RemoveStatusCondition(&w.Status.Conditions, stevedorev1.ConditionInitialized)
				}}),
		},
		{
			name: "a NodeClaim already being deleted does not expire again",
			objs: objects(pool(), machine{name: "a", pool: "default", typ: "m5.large", created: t0.Add(-2 * time.Hour),
				claim: func(w *test.NodeClaimWrapper) { w.ExpireAfter(time.Hour).Deleting(t0) }}),
		},
	})
}
