/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package disruption

import (
	"testing"
	"time"

	"github.com/stevedore-dev/stevedore/pkg/cloud/fake"
	"github.com/stevedore-dev/stevedore/pkg/test"
)

// staticPool is NodePool default made static with the given replicas (and a 100% budget, as pool()).
func staticPool(replicas int64, limitNodes string) *test.NodePoolWrapper {
	w := pool()
	w.Spec.Replicas = &replicas
	if limitNodes != "" {
		w.Limits("nodes", limitNodes)
	}
	return w
}

func TestStaticNodePoolsAreNeverConsolidated(t *testing.T) {
	// two empty nodes and three nearly empty ones: a dynamic NodePool would lose most of them
	objs := func(p *test.NodePoolWrapper) []any {
		return []any{p, machines("e", "default", 2), machines("n", "default", 3),
			pod("a", "n1", "100m", "128Mi"), pod("b", "n2", "100m", "128Mi"), pod("c", "n3", "100m", "128Mi")}
	}
	for _, method := range []string{MethodEmptiness, MethodMultiNode, MethodSingleNode} {
		t.Run(method, func(t *testing.T) {
			dynamic := newHarness(t, harnessConfig{}, objects(objs(pool())...)...)
			if cmd := dynamic.find(dynamic.method(method)); cmd == nil {
				t.Fatalf("%s finds nothing in the dynamic NodePool: the case does not test anything", method)
			}
			static := newHarness(t, harnessConfig{}, objects(objs(staticPool(4, ""))...)...)
			if cmd := static.find(static.method(method)); cmd != nil {
				t.Errorf("%s disrupts %v of a static NodePool", method, commandNames(cmd))
			}
		})
	}
}

func TestStaticNodePoolsAreReplacedOneAtATime(t *testing.T) {
	drifted := func(claims ...string) harnessConfig {
		return harnessConfig{cloud: func(p *fake.Provider) {
			for _, c := range claims {
				p.Drift(c, "AMI changed")
			}
		}}
	}
	replacedBy := func(n int) func(*testing.T, *harness, *Command) {
		return func(t *testing.T, _ *harness, cmd *Command) {
			if len(cmd.Replacements) != n {
				t.Fatalf("replacements = %s, want %d", describeReplacements(cmd.Replacements), n)
			}
			for _, r := range cmd.Replacements {
				if r.NodePool.Name != "default" || len(r.Pods) != 0 {
					t.Errorf("replacement %s of NodePool %s with %d pods; want an empty node of the static NodePool",
						r.InstanceType.Name, r.NodePool.Name, len(r.Pods))
				}
			}
			if cmd.Forceful {
				t.Error("a static node's replacement is forceful; it must wait for its replacement")
			}
		}
	}
	expired := func(m *machine) {
		m.created = t0.Add(-48 * time.Hour)
		m.claim = func(w *test.NodeClaimWrapper) { w.ExpireAfter(24 * time.Hour) }
	}
	runMethodCases(t, MethodDrift, []methodCase{
		{
			name:  "three drifted nodes: the first, replaced by a node of the NodePool",
			cfg:   drifted("claim-n1", "claim-n2", "claim-n3"),
			objs:  objects(staticPool(3, ""), machines("n", "default", 3)),
			want:  []string{"n1"},
			check: replacedBy(1),
		},
		{
			name:  "limits.nodes at replicas: the node goes first, the NodePool is refilled after",
			cfg:   drifted("claim-n1"),
			objs:  objects(staticPool(3, "3"), machines("n", "default", 3)),
			want:  []string{"n1"},
			check: replacedBy(0),
		},
		{
			name: "one node of the NodePool already being replaced: none",
			cfg:  drifted("claim-n1", "claim-n2"),
			objs: objects(staticPool(3, ""), machines("n", "default", 2), machine{name: "n3", pool: "default", typ: "m5.large",
				claim: func(w *test.NodeClaimWrapper) { w.Deleting(t0.Add(-time.Minute)) }}),
		},
		{
			name: "a budget of 0: none",
			cfg:  drifted("claim-n1"),
			objs: objects(staticPool(3, "").Budgets(budget("0", "", 0)), machines("n", "default", 3)),
		},
	})
	runMethodCases(t, MethodExpiration, []methodCase{
		{
			name:  "two expired nodes of a static NodePool: one, replaced first",
			objs:  objects(staticPool(3, ""), machines("n", "default", 3, expired)),
			want:  []string{"n1"},
			check: replacedBy(1),
		},
	})
}
