/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package disruption

import (
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/test"
)

// pool is NodePool default allowing every node to be disrupted at once (the default budget, 10%, would allow one
// node in the small clusters of these tests).
func pool() *test.NodePoolWrapper {
	return test.NodePool("default").Budgets(budget("100%", "", 0))
}

// onDemandPool is NodePool default limited to on-demand capacity.
func onDemandPool() *test.NodePoolWrapper {
	return pool().Require(stevedorev1.LabelCapacityType, corev1.NodeSelectorOpIn, onDemand)
}

// machines returns n m5.large machines of a NodePool named prefix1..prefixN.
func machines(prefix, nodePool string, n int, mutate ...func(*machine)) []machine {
	out := make([]machine, n)
	for i := range out {
		out[i] = machine{name: fmt.Sprintf("%s%d", prefix, i+1), pool: nodePool, typ: "m5.large"}
		for _, m := range mutate {
			m(&out[i])
		}
	}
	return out
}

// createdAgo sets a machine's creation (and so initialization) time.
func createdAgo(d time.Duration) func(*machine) {
	return func(m *machine) { m.created = t0.Add(-d) }
}

// pinned is a pod that only its node can run (a nodeSelector on the node's hostname).
func pinned(name, nodeName string) *test.PodWrapper {
	return pod(name, nodeName, "100m", "128Mi").NodeSelector(corev1.LabelHostname, nodeName)
}

// methodCase is one table row for a method's Find.
type methodCase struct {
	name  string
	cfg   harnessConfig
	objs  []runtime.Object
	setup func(*harness)
	// want are the command's candidates, sorted; nil expects no command.
	want  []string
	check func(t *testing.T, h *harness, cmd *Command)
	// why are the verdicts wanted on nodes the method left, by node name.
	why map[string]RetainReason
}

func runMethodCases(t *testing.T, method string, cases []methodCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, tc.cfg, tc.objs...)
			if tc.setup != nil {
				tc.setup(h)
			}
			v := h.view()
			cmd, err := h.method(method).Find(h.Ctx, v)
			if err != nil {
				t.Fatal(err)
			}
			for node, want := range tc.why {
				if got := v.verdicts[node]; got == nil || got.reason != want {
					t.Errorf("verdict on %s = %+v, want %s", node, got, want)
				}
			}
			if got := commandNames(cmd); !slices.Equal(got, tc.want) {
				t.Fatalf("candidates = %v, want %v", got, tc.want)
			}
			// every case with several candidates gives them equal costs, so view order is name order
			if cmd != nil && !slices.IsSorted(names(cmd.Candidates)) {
				t.Errorf("candidates %v are not in view order", names(cmd.Candidates))
			}
			if tc.check != nil {
				tc.check(t, h, cmd)
			}
		})
	}
}

// wantReplacement checks a command's replacements: none for "", else one of that type and capacity type, cheaper than
// the candidates.
func wantReplacement(typ, capacityType string) func(t *testing.T, h *harness, cmd *Command) {
	return func(t *testing.T, _ *harness, cmd *Command) {
		t.Helper()
		if typ == "" {
			if len(cmd.Replacements) != 0 {
				t.Errorf("replacements = %s, want none", describeReplacements(cmd.Replacements))
			}
			if cmd.Action() != "delete" {
				t.Errorf("action = %s", cmd.Action())
			}
			return
		}
		if len(cmd.Replacements) != 1 {
			t.Fatalf("replacements = %s, want one %s", describeReplacements(cmd.Replacements), typ)
		}
		r := cmd.Replacements[0]
		if r.InstanceType.Name != typ || r.Offering.CapacityType != capacityType {
			t.Errorf("replacement = %s, want %s/%s", describeReplacements(cmd.Replacements), typ, capacityType)
		}
		if want := priceOf(typ, capacityType); r.Offering.Price != want {
			t.Errorf("replacement price = %v, want %v", r.Offering.Price, want)
		}
		if cmd.Action() != "replace" || cmd.Savings() <= 0 {
			t.Errorf("action = %s, savings = %v; want a replace that saves", cmd.Action(), cmd.Savings())
		}
		for _, it := range r.InstanceTypes {
			if len(cmd.Candidates) == 1 && it.Name == cmd.Candidates[0].NodeClaim.Status.InstanceType {
				t.Errorf("replacement may launch the candidate's own type %s", it.Name)
			}
		}
	}
}

func TestMethodsOfAPass(t *testing.T) {
	for _, voluntary := range []bool{false, true} {
		h := newHarness(t, harnessConfig{opts: func(o *Options) { o.Args.DisableDisruption = !voluntary }})
		var got []string
		for _, m := range h.c.methods {
			got = append(got, m.Name())
		}
		want := []string{MethodExpiration}
		if voluntary {
			want = []string{MethodExpiration, MethodEmptiness, MethodDrift, MethodMultiNode, MethodSingleNode}
		}
		if !slices.Equal(got, want) {
			t.Errorf("voluntary %v: methods = %v, want %v", voluntary, got, want)
		}
	}
	h := newHarness(t, repairOn(harnessConfig{opts: func(o *Options) { o.Args.DisableDisruption = true }}))
	if got := h.c.methods; len(got) != 2 || got[0].Name() != MethodRepair || got[1].Name() != MethodExpiration {
		t.Errorf("with repair on, methods start %v; want repair, then expiration", got)
	}
}

func TestMethodTraits(t *testing.T) {
	tests := []struct {
		method                string
		validated, resimulate bool
	}{
		{MethodExpiration, false, false},
		{MethodEmptiness, true, false},
		{MethodDrift, false, false},
		{MethodMultiNode, true, true},
		{MethodSingleNode, true, true},
	}
	h := newHarness(t, harnessConfig{})
	for _, tc := range tests {
		m := h.method(tc.method)
		if m.Validated() != tc.validated || m.Resimulate() != tc.resimulate {
			t.Errorf("%s: validated %v, resimulate %v; want %v, %v", tc.method, m.Validated(), m.Resimulate(), tc.validated, tc.resimulate)
		}
	}
}

func TestStillHolds(t *testing.T) {
	all := []string{MethodExpiration, MethodEmptiness, MethodDrift, MethodMultiNode, MethodSingleNode}
	tests := []struct {
		name      string
		pool      *test.NodePoolWrapper
		withPod   bool
		lastEvent time.Duration // ago; 0 for none
		holds     []string      // the methods for which the candidate still qualifies
	}{
		{name: "an empty, quiet node", pool: pool(), holds: all},
		{name: "a pod arrived", pool: pool(), withPod: true,
			holds: []string{MethodExpiration, MethodDrift, MethodMultiNode, MethodSingleNode}},
		{name: "a pod came and went within consolidateAfter", pool: pool().Consolidation(stevedorev1.ConsolidationPolicyWhenEmptyOrUnderutilized, dur(5*time.Minute)),
			lastEvent: time.Minute, holds: []string{MethodExpiration, MethodDrift}},
		{name: "the last pod event is older than consolidateAfter", pool: pool().Consolidation(stevedorev1.ConsolidationPolicyWhenEmptyOrUnderutilized, dur(5*time.Minute)),
			lastEvent: 10 * time.Minute, holds: all},
		{name: "consolidateAfter Never", pool: pool().Consolidation(stevedorev1.ConsolidationPolicyWhenEmptyOrUnderutilized, nil),
			holds: []string{MethodExpiration, MethodDrift}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			objs := objects(tc.pool, node("a", "m5.large"))
			if tc.withPod {
				objs = append(objs, pod("web", "a", "100m", "128Mi").Obj())
			}
			h := newHarness(t, harnessConfig{}, objs...)
			if tc.lastEvent > 0 {
				h.c.activity.lastPodEvent["a"] = t0.Add(-tc.lastEvent)
			}
			cand := h.view().candidate("a")
			for _, name := range all {
				if got, want := h.method(name).StillHolds(cand, t0), slices.Contains(tc.holds, name); got != want {
					t.Errorf("%s: StillHolds = %v, want %v", name, got, want)
				}
			}
		})
	}
}
