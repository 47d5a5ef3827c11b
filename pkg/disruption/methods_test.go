/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package disruption

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/cloud/fake"
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

func TestDrift(t *testing.T) {
	drifted := func(claims ...string) func(*fake.Provider) {
		return func(p *fake.Provider) {
			for _, c := range claims {
				p.Drift(c, "AMI changed")
			}
		}
	}
	hashed := func(hash, version string) func(*test.NodeClaimWrapper) {
		return func(w *test.NodeClaimWrapper) {
			w.Annotations(stevedorev1.AnnotationNodePoolHash, hash, stevedorev1.AnnotationNodePoolHashVersion, version)
		}
	}
	// recorded checks the Drifted condition written on the claims (and on no other).
	recorded := func(reason string, claims ...string) func(*testing.T, *harness, *Command) {
		return func(t *testing.T, h *harness, _ *Command) {
			t.Helper()
			list, err := h.Stevedore.StevedoreV1().NodeClaims().List(h.Ctx, metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			for _, cl := range list.Items {
				cond := meta.FindStatusCondition(cl.Status.Conditions, stevedorev1.ConditionDrifted)
				want := slices.Contains(claims, cl.Name)
				switch {
				case want && (cond == nil || cond.Status != "True" || cond.Reason != reason):
					t.Errorf("%s: Drifted condition %+v, want True/%s", cl.Name, cond, reason)
				case !want && cond != nil:
					t.Errorf("%s: Drifted condition %+v, want none", cl.Name, cond)
				}
			}
		}
	}
	isDrift := func(t *testing.T, _ *harness, cmd *Command) {
		if cmd.Reason != stevedorev1.DisruptionReasonDrifted || cmd.Forceful {
			t.Errorf("reason %s, forceful %v; want an unforced Drifted command", cmd.Reason, cmd.Forceful)
		}
	}
	runMethodCases(t, MethodDrift, []methodCase{
		{
			name:  "the cloud reports drift",
			cfg:   harnessConfig{cloud: drifted("claim-a")},
			objs:  objects(pool(), node("a", "m5.large"), node("b", "m5.large")),
			want:  []string{"a"},
			check: checks(isDrift, wantReplacement("", ""), recorded("AMI changed", "claim-a")),
		},
		{
			name:  "a budget of 0 for Drifted: nothing, but drift is recorded",
			cfg:   harnessConfig{cloud: drifted("claim-a")},
			objs:  objects(pool().Budgets(budget("100%", "", 0), budget("0", "", 0, stevedorev1.DisruptionReasonDrifted)), node("a", "m5.large")),
			check: recorded("AMI changed", "claim-a"),
		},
		{
			name: "the budget bounds how many drifted nodes go at once",
			cfg:  harnessConfig{cloud: drifted("claim-a", "claim-b", "claim-c")},
			objs: objects(test.NodePool("default").Budgets(budget("2", "", 0)), node("a", "m5.large"), node("b", "m5.large"),
				node("c", "m5.large")),
			want:  []string{"a", "b"},
			check: recorded("AMI changed", "claim-a", "claim-b", "claim-c"),
		},
		{
			name: "a blocked node is not even checked",
			cfg:  harnessConfig{cloud: drifted("claim-a")},
			objs: objects(pool(), machine{name: "a", pool: "default", typ: "m5.large",
				node: func(w *test.NodeWrapper) { w.Annotations(stevedorev1.DoNotDisruptKey, "true") }}),
			check: func(t *testing.T, h *harness, _ *Command) {
				if calls := h.Cloud.Calls(); slices.Contains(calls, fake.CallIsDrifted+" claim-a") {
					t.Errorf("blocked node checked for drift: %v", calls)
				}
				recorded("")(t, h, nil)
			},
		},
		{
			name:  "the node's labels no longer satisfy the NodePool's requirements",
			objs:  objects(pool().Require(stevedorev1.LabelCapacityType, corev1.NodeSelectorOpIn, spot), node("a", "m5.large"), machine{name: "b", pool: "default", typ: "m5.large", capacity: spot}),
			want:  []string{"a"},
			check: recorded("RequirementsDrift", "claim-a"),
		},
		{
			name: "a required label the node does not carry is no drift",
			objs: objects(pool().Require("example.com/team", corev1.NodeSelectorOpIn, "payments"), node("a", "m5.large")),
		},
		{
			name:  "the NodePool template changed (hash differs)",
			objs:  objects(pool(), machine{name: "a", pool: "default", typ: "m5.large", claim: hashed("0123456789abcdef", stevedorev1.NodePoolHashVersion)}),
			want:  []string{"a"},
			check: recorded("NodePoolDrift", "claim-a"),
		},
		{
			name: "a hash of another hash version is not compared",
			objs: objects(pool(), machine{name: "a", pool: "default", typ: "m5.large", claim: hashed("0123456789abcdef", "v1")}),
		},
		{
			name: "the NodePool's current hash is no drift",
			objs: objects(pool(), machine{name: "a", pool: "default", typ: "m5.large",
				claim: hashed(pool().Obj().TemplateHash(), stevedorev1.NodePoolHashVersion)}),
		},
		{
			name: "a failed drift check skips the node",
			cfg: harnessConfig{cloud: func(p *fake.Provider) {
				drifted("claim-a", "claim-b")(p)
				p.FailNext(fake.CallIsDrifted, errors.New("throttled"))
			}},
			objs: objects(pool(), node("a", "m5.large"), node("b", "m5.large")),
			want: []string{"b"},
		},
		{
			name:  "drifted nodes whose pods fit go together",
			cfg:   harnessConfig{cloud: drifted("claim-a", "claim-b")},
			objs:  objects(pool(), node("a", "m5.large"), node("b", "m5.large"), node("c", "m5.2xlarge"), pod("web1", "a", "500m", "512Mi"), pod("web2", "b", "500m", "512Mi")),
			want:  []string{"a", "b"},
			check: checks(wantReplacement("", ""), func(t *testing.T, _ *harness, cmd *Command) { checkPods(t, cmd, 2) }),
		},
		{
			name:  "a drifted node whose pods fit nowhere waits; the next one goes",
			cfg:   harnessConfig{cloud: drifted("claim-a", "claim-b")},
			objs:  objects(pool(), node("a", "m5.large"), node("b", "m5.large"), node("c", "m5.2xlarge"), pinned("local", "a"), pod("web", "b", "500m", "512Mi")),
			want:  []string{"b"},
			check: recorded("AMI changed", "claim-a", "claim-b"),
		},
		{
			name: "a drifted node alone is replaced",
			cfg:  harnessConfig{cloud: drifted("claim-a")},
			objs: objects(onDemandPool().Require(corev1.LabelInstanceTypeStable, corev1.NodeSelectorOpIn, "m5.large"),
				node("a", "m5.large"), pod("web", "a", "500m", "512Mi")),
			want: []string{"a"},
			check: func(t *testing.T, _ *harness, cmd *Command) {
				checkPods(t, cmd, 1)
				if len(cmd.Replacements) != 1 || cmd.Replacements[0].InstanceType.Name != "m5.large" {
					t.Errorf("replacements = %s, want one m5.large", describeReplacements(cmd.Replacements))
				}
			},
		},
	})
}

// checks runs several checks of a command.
func checks(cs ...func(*testing.T, *harness, *Command)) func(*testing.T, *harness, *Command) {
	return func(t *testing.T, h *harness, cmd *Command) {
		for _, c := range cs {
			c(t, h, cmd)
		}
	}
}

func checkPods(t *testing.T, cmd *Command, n int) {
	t.Helper()
	if cmd.Pods != n {
		t.Errorf("pods = %d, want %d", cmd.Pods, n)
	}
}

func TestSingleNodeConsolidation(t *testing.T) {
	spotToSpot := func(o *Options) { o.Args.SpotToSpotConsolidation = true }
	spotPool := func() *test.NodePoolWrapper {
		return pool().Require(stevedorev1.LabelCapacityType, corev1.NodeSelectorOpIn, spot)
	}
	bigSpot := machine{name: "big", pool: "default", typ: "m5.2xlarge", capacity: spot}
	small := func() *test.PodWrapper { return pod("web", "big", "500m", "512Mi") }
	isUnderutilized := func(t *testing.T, cmd *Command) {
		if cmd.Reason != stevedorev1.DisruptionReasonUnderutilized || cmd.Forceful {
			t.Errorf("reason %s, forceful %v", cmd.Reason, cmd.Forceful)
		}
	}
	runMethodCases(t, MethodSingleNode, []methodCase{
		{
			name: "a small pod moves to a node with room: delete",
			objs: objects(onDemandPool(), node("a", "m5.xlarge"), node("b", "m5.xlarge"),
				pod("web1", "a", "500m", "512Mi"), pod("web2", "b", "500m", "512Mi")),
			want: []string{"a"},
			check: func(t *testing.T, h *harness, cmd *Command) {
				isUnderutilized(t, cmd)
				wantReplacement("", "")(t, h, cmd)
				checkPods(t, cmd, 1)
				if cmd.Savings() != priceOf("m5.xlarge", onDemand) {
					t.Errorf("savings = %v", cmd.Savings())
				}
			},
		},
		{
			name: "the node cheapest to disrupt goes first",
			objs: objects(onDemandPool(), node("a", "m5.xlarge"), node("b", "m5.xlarge"),
				pod("web1", "a", "500m", "512Mi"), pod("web2", "a", "500m", "512Mi"), pod("web3", "b", "500m", "512Mi")),
			want: []string{"b"},
		},
		{
			name:  "a big node with a small pod is replaced by the cheapest type that fits",
			objs:  objects(onDemandPool(), node("big", "m5.2xlarge"), small()),
			want:  []string{"big"},
			check: wantReplacement("t3.small", onDemand),
		},
		{
			name:  "DaemonSets count in the replacement's size",
			objs:  objects(onDemandPool(), node("big", "m5.2xlarge"), small(), test.DaemonSet("agent").Req("cpu", "200m", "memory", "1Gi")),
			want:  []string{"big"},
			check: wantReplacement("t3.medium", onDemand),
		},
		{
			name: "no cheaper type fits: the node stays",
			objs: objects(onDemandPool(), node("a", "t3.medium"), pod("web", "a", "1", "2500Mi")),
		},
		{
			name: "the cheapest type already: the node stays",
			objs: objects(onDemandPool(), node("a", "t3.small"), pod("web", "a", "500m", "512Mi")),
		},
		{
			name:  "on-demand may be replaced by spot",
			objs:  objects(pool(), node("big", "m5.2xlarge"), small()),
			want:  []string{"big"},
			check: wantReplacement("t3.small", spot),
		},
		{
			name: "spot is not replaced by spot when spot-to-spot is off",
			objs: objects(spotPool(), bigSpot, small()),
		},
		{
			name: "nor when the NodePool also allows on-demand (the cheapest replacement is spot)",
			objs: objects(pool(), bigSpot, small()),
		},
		{
			name: "spot-to-spot needs 15 cheaper spot types to choose from",
			cfg:  harnessConfig{opts: spotToSpot},
			objs: objects(spotPool(), bigSpot, small()),
		},
		{
			name: "spot-to-spot with enough cheaper types",
			cfg:  harnessConfig{opts: spotToSpot, allTypes: true},
			objs: objects(spotPool(), bigSpot, small()),
			want: []string{"big"},
			check: func(t *testing.T, _ *harness, cmd *Command) {
				if len(cmd.Replacements) != 1 {
					t.Fatalf("replacements = %s", describeReplacements(cmd.Replacements))
				}
				r := cmd.Replacements[0]
				if r.Offering.CapacityType != spot || r.Offering.Price >= priceOf("m5.2xlarge", spot) || len(r.InstanceTypes) < minSpotToSpotTypes {
					t.Errorf("replacement %s with %d types, want a cheaper spot one with at least %d", describeReplacements(cmd.Replacements),
						len(r.InstanceTypes), minSpotToSpotTypes)
				}
			},
		},
		{
			name: "a pod fitting nowhere keeps its node",
			objs: objects(onDemandPool(), node("a", "m5.xlarge"), node("b", "m5.xlarge"), pinned("local", "a"), pinned("local2", "b")),
			why:  map[string]RetainReason{"a": RetainPodsFitNowhere, "b": RetainPodsFitNowhere},
		},
		{
			name: "a PDB allowing no disruption blocks the node",
			objs: objects(onDemandPool(), node("a", "m5.xlarge"), node("b", "m5.xlarge"),
				pod("web", "a", "500m", "512Mi"), pinned("local", "b"), pdb("web", "web", 0)),
			why: map[string]RetainReason{"a": RetainPodDisruptionBudget, "b": RetainPodsFitNowhere},
		},
		{
			name: "WhenEmpty does not consolidate",
			objs: objects(onDemandPool().Consolidation(stevedorev1.ConsolidationPolicyWhenEmpty, dur(0)), node("big", "m5.2xlarge"), small()),
			why:  map[string]RetainReason{"big": RetainWhenEmpty},
		},
		{
			name: "consolidateAfter not passed",
			objs: objects(onDemandPool().Consolidation(stevedorev1.ConsolidationPolicyWhenEmptyOrUnderutilized, dur(2*time.Hour)),
				node("big", "m5.2xlarge"), small()),
			why: map[string]RetainReason{"big": RetainConsolidateAfter},
		},
		{
			name: "a budget of 0 for Underutilized",
			objs: objects(onDemandPool().Budgets(budget("100%", "", 0), budget("0", "", 0, stevedorev1.DisruptionReasonUnderutilized)),
				node("big", "m5.2xlarge"), small()),
			why: map[string]RetainReason{"big": RetainBudget},
		},
		{
			// single-node consolidation disrupts one node: a budget of 1 must not stop at the first candidate
			name: "a budget of 1: a node that cannot consolidate does not hold the next one back",
			objs: objects(test.NodePool("default").Require(stevedorev1.LabelCapacityType, corev1.NodeSelectorOpIn, onDemand).Budgets(budget("1", "", 0)),
				node("a", "m5.xlarge"), node("b", "m5.xlarge"), node("c", "m5.xlarge"), pinned("local-a", "a"), pinned("local-b", "b"),
				pod("web1", "c", "500m", "512Mi"), pod("web2", "c", "500m", "512Mi")),
			want: []string{"c"},
			why:  map[string]RetainReason{"a": RetainPodsFitNowhere, "b": RetainPodsFitNowhere},
		},
		{
			name: "empty nodes are emptiness's",
			objs: objects(onDemandPool(), node("a", "m5.xlarge"), node("b", "m5.xlarge")),
		},
		{
			// already paid for: any replacement costs more
			name: "a reserved node with a small pod is not replaced",
			objs: objects(pool().Require(stevedorev1.LabelCapacityType, corev1.NodeSelectorOpIn, stevedorev1.CapacityTypeReserved, onDemand, spot),
				machine{name: "big", pool: "default", typ: "m5.2xlarge", capacity: stevedorev1.CapacityTypeReserved}, small()),
			why: map[string]RetainReason{"big": RetainNotCheaper},
		},
		{
			// both move one pod; deleting b saves an m5.xlarge, deleting a an m5.large (the first by name)
			name: "among nodes equally cheap to disrupt, the one that saves most",
			objs: objects(onDemandPool(), node("a", "m5.large"), node("b", "m5.xlarge"),
				pod("web1", "a", "250m", "256Mi"), pod("web2", "b", "250m", "256Mi")),
			want:  []string{"b"},
			check: wantReplacement("", ""),
			why:   map[string]RetainReason{"a": RetainOtherMove},
		},
		{
			// deleting b saves more but moves two pods: a costlier disruption is not taken for a larger saving
			name: "a node cheaper to disrupt goes first even when another saves more",
			objs: objects(onDemandPool(), node("a", "m5.large"), node("b", "m5.xlarge"),
				pod("web1", "a", "250m", "256Mi"), pod("web2", "b", "250m", "256Mi"), pod("web3", "b", "250m", "256Mi")),
			want: []string{"a"},
		},
		{
			name: "a spot node whose only cheaper replacement is spot stays without spot-to-spot",
			objs: objects(spotPool(), bigSpot, small()),
			why:  map[string]RetainReason{"big": RetainSpotToSpot},
		},
		{
			name: "consolidateAfter Never",
			objs: objects(onDemandPool().Consolidation(stevedorev1.ConsolidationPolicyWhenEmptyOrUnderutilized, nil),
				node("big", "m5.2xlarge"), small()),
			why: map[string]RetainReason{"big": RetainConsolidationOff},
		},
		{
			name: "do-not-disrupt",
			objs: objects(onDemandPool(), machine{name: "big", pool: "default", typ: "m5.2xlarge",
				node: func(w *test.NodeWrapper) { w.Annotations(stevedorev1.DoNotDisruptKey, "true") }}, small()),
			why: map[string]RetainReason{"big": RetainDoNotDisrupt},
		},
	})
}

func TestMultiNodeConsolidation(t *testing.T) {
	runMethodCases(t, MethodMultiNode, []methodCase{
		{
			// replacing both by a new m5.xlarge saves one m5.xlarge, as deleting one of them does, and moves both
			// pods instead of one: single-node consolidation's to do (Karpenter refuses such a merge too)
			name: "two half-empty nodes are not merged into a node of their own type",
			objs: objects(onDemandPool().Require(corev1.LabelInstanceTypeStable, corev1.NodeSelectorOpIn, "m5.xlarge", "m5.2xlarge"),
				node("a", "m5.xlarge"), node("b", "m5.xlarge"), pod("web1", "a", "1500m", "1Gi"), pod("web2", "b", "1500m", "1Gi")),
		},
		{
			name: "three nodes are not merged into one of their type: two of them are deleted instead",
			objs: objects(onDemandPool().Require(corev1.LabelInstanceTypeStable, corev1.NodeSelectorOpIn, "m5.xlarge", "m5.2xlarge"),
				node("a", "m5.xlarge"), node("b", "m5.xlarge"), node("c", "m5.xlarge"),
				pod("web1", "a", "1200m", "1Gi"), pod("web2", "b", "1200m", "1Gi"), pod("web3", "c", "1200m", "1Gi")),
			want: []string{"a", "b"},
			check: func(t *testing.T, h *harness, cmd *Command) {
				wantReplacement("", "")(t, h, cmd)
				checkPods(t, cmd, 2)
			},
		},
		{
			// the same type as spot costs less than the on-demand nodes: that merge saves more than any deletion
			name: "two on-demand nodes merge into a cheaper spot node of their type",
			objs: objects(pool().Require(corev1.LabelInstanceTypeStable, corev1.NodeSelectorOpIn, "m5.xlarge", "m5.2xlarge").
				Require(stevedorev1.LabelCapacityType, corev1.NodeSelectorOpIn, spot, onDemand),
				machine{name: "a", pool: "default", typ: "m5.xlarge", capacity: onDemand}, machine{name: "b", pool: "default", typ: "m5.xlarge", capacity: onDemand},
				pod("web1", "a", "1500m", "1Gi"), pod("web2", "b", "1500m", "1Gi")),
			want: []string{"a", "b"},
			check: func(t *testing.T, h *harness, cmd *Command) {
				wantReplacement("m5.xlarge", spot)(t, h, cmd)
				checkPods(t, cmd, 2)
				if want := 2*priceOf("m5.xlarge", onDemand) - priceOf("m5.xlarge", spot); math.Abs(cmd.Savings()-want) > 1e-9 {
					t.Errorf("savings = %v, want %v", cmd.Savings(), want)
				}
			},
		},
		{
			// a and b join in name order, {a, b} saving more than {a}; but b alone (its pod moves onto a) saves
			// more than both with a new node for the two pods, and moves one pod instead of two
			name: "a node that adds nothing to the set is pruned from it",
			objs: objects(onDemandPool(), node("a", "t3.medium"), node("b", "m5.xlarge"),
				pod("web1", "a", "500m", "1Gi"), pod("web2", "b", "1300m", "1536Mi")),
			want: []string{"b"},
			check: func(t *testing.T, h *harness, cmd *Command) {
				wantReplacement("", "")(t, h, cmd)
				checkPods(t, cmd, 1)
			},
		},
		{
			name: "pods move onto a node with room: two nodes deleted",
			objs: objects(onDemandPool(), node("a", "m5.large"), node("b", "m5.large"), node("c", "m5.2xlarge"),
				pod("web1", "a", "500m", "512Mi"), pod("web2", "b", "500m", "512Mi"), pinned("local", "c")),
			want:  []string{"a", "b"},
			check: wantReplacement("", ""),
		},
		{
			name: "a node whose pods fit nowhere is skipped, not the end of the set",
			objs: objects(onDemandPool(), node("a", "m5.large"), node("b", "m5.large"), node("c", "m5.large"),
				node("d", "m5.2xlarge"), pinned("local-a", "a"), pod("web1", "b", "500m", "512Mi"), pod("web2", "c", "500m", "512Mi"),
				pinned("local-d", "d")),
			want:  []string{"b", "c"},
			check: wantReplacement("", ""),
		},
		{
			name: "the budget bounds the set",
			objs: objects(test.NodePool("default").Require(stevedorev1.LabelCapacityType, corev1.NodeSelectorOpIn, onDemand).Budgets(budget("2", "", 0)),
				node("a", "m5.large"), node("b", "m5.large"), node("c", "m5.large"), node("d", "m5.2xlarge"),
				pod("web1", "a", "500m", "512Mi"), pod("web2", "b", "500m", "512Mi"), pod("web3", "c", "500m", "512Mi"), pinned("local", "d")),
			want: []string{"a", "b"},
		},
		{
			// the nodes that cannot go (their pods are pinned) come first, cheapest to disrupt: they must not take
			// the budget's two places before the nodes that can go are tried
			name: "a budget of 2: nodes that cannot consolidate take no room in it",
			objs: objects(test.NodePool("default").Require(stevedorev1.LabelCapacityType, corev1.NodeSelectorOpIn, onDemand).Budgets(budget("2", "", 0)),
				node("a", "m5.large"), node("b", "m5.large"), node("c", "m5.large"), node("d", "m5.large"), node("e", "m5.2xlarge"),
				pinned("local-a", "a"), pinned("local-b", "b"), pod("web1", "c", "500m", "512Mi"), pod("web2", "c", "500m", "512Mi"),
				pod("web3", "d", "500m", "512Mi"), pod("web4", "d", "500m", "512Mi"), pinned("local-e", "e")),
			want:  []string{"c", "d"},
			check: wantReplacement("", ""),
		},
		{
			name: "one consolidatable node is single-node consolidation's",
			objs: objects(onDemandPool(), node("a", "m5.xlarge"), node("b", "m5.xlarge"),
				pod("web", "a", "500m", "512Mi"), pod("db", "b", "500m", "512Mi"), pdb("db", "db", 0)),
		},
		{
			name: "merging is not cheaper than the nodes: nothing",
			objs: objects(onDemandPool(), node("a", "t3.small"), node("b", "t3.small"),
				pod("web1", "a", "1200m", "512Mi"), pod("web2", "b", "1200m", "512Mi")),
		},
		{
			name: "two new nodes are no merge",
			objs: objects(onDemandPool(), node("a", "m5.xlarge"), node("b", "m5.xlarge"),
				pod("web1", "a", "1500m", "1Gi"), pod("web2", "b", "1500m", "1Gi")),
		},
		{
			name: "nodes of WhenEmpty NodePools are not merged",
			objs: objects(onDemandPool().Consolidation(stevedorev1.ConsolidationPolicyWhenEmpty, dur(0)),
				node("a", "m5.xlarge"), node("b", "m5.xlarge"), pod("web1", "a", "1500m", "1Gi"), pod("web2", "b", "1500m", "1Gi")),
		},
	})
}
