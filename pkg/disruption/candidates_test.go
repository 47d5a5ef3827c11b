/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package disruption

import (
	"context"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	appslisters "k8s.io/client-go/listers/apps/v1"
	"k8s.io/client-go/tools/cache"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/cloud"
	"github.com/stevedore-dev/stevedore/pkg/surge"
	"github.com/stevedore-dev/stevedore/pkg/test"
)

func TestViewCandidates(t *testing.T) {
	type counts struct{ total, disrupting int }
	ok := node("ok", "m5.large")
	tests := []struct {
		name  string
		objs  []runtime.Object
		want  []string
		pools map[string]counts
	}{
		{
			name:  "an initialized node of an existing NodePool is a candidate",
			objs:  objects(test.NodePool("default"), ok),
			want:  []string{"ok"},
			pools: map[string]counts{"default": {1, 0}},
		},
		{
			name: "a NodeClaim not initialized is no candidate but counts in its NodePool",
			objs: objects(test.NodePool("default"), ok, machine{name: "booting", pool: "default", typ: "m5.large",
				claim: func(w *test.NodeClaimWrapper) {
					meta.RemoveStatusCondition(&w.Status.Conditions, stevedorev1.ConditionInitialized)
				}}),
			want:  []string{"ok"},
			pools: map[string]counts{"default": {2, 0}},
		},
		{
			name: "a NodeClaim whose node has not registered is no candidate",
			objs: objects(test.NodePool("default"), ok,
				test.NodeClaim("claim-ghost", "default").Created(t0.Add(-time.Hour)).
					Launched("ghost", "m5.large", testZone, onDemand, "0.096").Initialized().Obj()),
			want:  []string{"ok"},
			pools: map[string]counts{"default": {2, 0}},
		},
		{
			name: "a deleting NodeClaim is being disrupted",
			objs: objects(test.NodePool("default"), ok, machine{name: "going", pool: "default", typ: "m5.large",
				claim: func(w *test.NodeClaimWrapper) { w.Deleting(t0) }}),
			want:  []string{"ok"},
			pools: map[string]counts{"default": {2, 1}},
		},
		{
			name: "a node tainted stevedore.dev/disrupted is being disrupted",
			objs: objects(test.NodePool("default"), ok, machine{name: "tainted", pool: "default", typ: "m5.large",
				node: func(w *test.NodeWrapper) { w.Taint(stevedorev1.TaintDisrupted, "true", corev1.TaintEffectNoSchedule) }}),
			want:  []string{"ok"},
			pools: map[string]counts{"default": {2, 1}},
		},
		{
			name: "a deleting node is being disrupted",
			objs: objects(test.NodePool("default"), ok, machine{name: "draining", pool: "default", typ: "m5.large",
				node: func(w *test.NodeWrapper) { w.Deleting(metav1.NewTime(t0)) }}),
			want:  []string{"ok"},
			pools: map[string]counts{"default": {2, 1}},
		},
		{
			name: "another taint does not make a node disrupting",
			objs: objects(test.NodePool("default"), ok, machine{name: "other", pool: "default", typ: "m5.large",
				node: func(w *test.NodeWrapper) { w.Taint("example.com/dedicated", "x", corev1.TaintEffectNoSchedule) }}),
			want:  []string{"ok", "other"},
			pools: map[string]counts{"default": {2, 0}},
		},
		{
			name:  "a NodeClaim of a missing NodePool is neither a candidate nor counted",
			objs:  objects(test.NodePool("default"), ok, machine{name: "orphan", pool: "gone", typ: "m5.large"}),
			want:  []string{"ok"},
			pools: map[string]counts{"default": {1, 0}},
		},
		{
			name: "NodeClaims count in their own NodePool",
			objs: objects(test.NodePool("default"), test.NodePool("batch"), ok,
				machine{name: "b1", pool: "batch", typ: "c5.large"}, machine{name: "b2", pool: "batch", typ: "c5.large",
					claim: func(w *test.NodeClaimWrapper) { w.Deleting(t0) }}),
			want:  []string{"b1", "ok"},
			pools: map[string]counts{"default": {1, 0}, "batch": {2, 1}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, harnessConfig{}, tc.objs...)
			v := h.view()
			if got := names(v.candidates); !slices.Equal(got, tc.want) {
				t.Errorf("candidates = %v, want %v", got, tc.want)
			}
			if len(v.pools) != len(tc.pools) {
				t.Errorf("pools = %d, want %d", len(v.pools), len(tc.pools))
			}
			for name, want := range tc.pools {
				ps := v.pools[name]
				if ps == nil {
					t.Errorf("pool %s missing", name)
					continue
				}
				if got := (counts{ps.total, ps.disrupting}); got != want {
					t.Errorf("pool %s: total, disrupting = %v, want %v", name, got, want)
				}
			}
			for _, c := range v.candidates {
				if c.NodePool.Name != c.NodeClaim.Labels[stevedorev1.LabelNodePool] || c.NodeClaim.Status.NodeName != c.Node.Name {
					t.Errorf("candidate %s: NodePool %s, claim %s mismatched", c.Node.Name, c.NodePool.Name, c.NodeClaim.Name)
				}
			}
		})
	}
}

func TestViewCandidateFields(t *testing.T) {
	h := newHarness(t, harnessConfig{}, objects(test.NodePool("default").Consolidation(stevedorev1.ConsolidationPolicyWhenUnderutilized, dur(time.Minute)),
		machine{name: "a", pool: "default", typ: "m5.xlarge", capacity: spot})...)
	c := h.view().candidate("a")
	if c == nil {
		t.Fatal("no candidate a")
	}
	if want := priceOf("m5.xlarge", spot); c.Price != want {
		t.Errorf("price = %v, want %v", c.Price, want)
	}
	if c.String() != "a/m5.xlarge/spot" {
		t.Errorf("String() = %q", c.String())
	}
	// the view hands out the lister's normalised NodePool
	if c.NodePool.Spec.Disruption.ConsolidationPolicy != stevedorev1.ConsolidationPolicyWhenEmptyOrUnderutilized {
		t.Errorf("policy = %s, want it normalised", c.NodePool.Spec.Disruption.ConsolidationPolicy)
	}
	if !c.Empty() || c.EvictionCost != 0 {
		t.Errorf("empty = %v, cost = %v, want an empty node of cost 0", c.Empty(), c.EvictionCost)
	}
}

func TestCandidatePods(t *testing.T) {
	tests := []struct {
		name    string
		pod     *test.PodWrapper
		counted bool
	}{
		{name: "a ReplicaSet pod", pod: pod("web", "a", "100m", "128Mi"), counted: true},
		{name: "a bare pod", pod: test.Pod("bare").Node("a"), counted: true},
		{name: "a pending pod without a phase on the node", pod: pod("starting", "a", "100m", "128Mi").Phase(corev1.PodPending), counted: true},
		{name: "a DaemonSet pod", pod: test.Pod("ds").Node("a").OwnedBy("DaemonSet", "logs")},
		{name: "a mirror pod", pod: test.Pod("static").Node("a").OwnedBy("Node", "a").Annotations(corev1.MirrorPodAnnotationKey, "x")},
		{name: "a succeeded pod", pod: pod("job", "a", "100m", "128Mi").Phase(corev1.PodSucceeded)},
		{name: "a failed pod", pod: pod("crashed", "a", "100m", "128Mi").Phase(corev1.PodFailed)},
		{name: "a terminating pod", pod: pod("leaving", "a", "100m", "128Mi").Deleting(metav1.NewTime(t0))},
		{name: "a pod of another node", pod: pod("elsewhere", "b", "100m", "128Mi")},
		{name: "an unbound pod", pod: test.Pod("pending").Pending()},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, harnessConfig{}, objects(test.NodePool("default"), node("a", "m5.large"), node("b", "m5.large"), tc.pod)...)
			c := h.view().candidate("a")
			if c == nil {
				t.Fatal("node a is no candidate")
			}
			var got []string
			for _, p := range c.Pods {
				got = append(got, p.Name)
			}
			var want []string
			wantCost := 0.0
			if tc.counted {
				want, wantCost = []string{tc.pod.Name}, 1
			}
			if !slices.Equal(got, want) {
				t.Errorf("pods = %v, want %v", got, want)
			}
			if c.EvictionCost != wantCost || c.Empty() != !tc.counted {
				t.Errorf("cost = %v, empty = %v; want %v, %v", c.EvictionCost, c.Empty(), wantCost, !tc.counted)
			}
		})
	}
}

func TestCandidateOrder(t *testing.T) {
	prio := func(p int32) func(*corev1.Pod) { return func(pod *corev1.Pod) { pod.Spec.Priority = &p } }
	on := func(nodeName, podName string, mutate ...func(*corev1.Pod)) *corev1.Pod {
		p := pod(podName, nodeName, "100m", "64Mi").Obj()
		for _, m := range mutate {
			m(p)
		}
		return p
	}
	tests := []struct {
		name  string
		nodes []string
		pods  []runtime.Object
		want  []string
	}{
		{
			name:  "fewer pods first, ties by name",
			nodes: []string{"c", "b", "a", "d"},
			pods:  []runtime.Object{on("c", "c1"), on("c", "c2"), on("b", "b1"), on("a", "a1")},
			want:  []string{"d", "a", "b", "c"},
		},
		{
			name:  "a negative pod-deletion-cost makes a node cheaper to disrupt",
			nodes: []string{"b", "z"},
			pods: []runtime.Object{on("b", "b1"), on("z", "z1", func(p *corev1.Pod) {
				p.Annotations = map[string]string{"controller.kubernetes.io/pod-deletion-cost": "-67108864"}
			})},
			want: []string{"z", "b"},
		},
		{
			name:  "a higher priority makes a node dearer to disrupt than one more pod",
			nodes: []string{"a", "b"},
			pods:  []runtime.Object{on("a", "a1", prio(1<<26)), on("b", "b1"), on("b", "b2")},
			want:  []string{"b", "a"},
		},
		{
			name:  "DaemonSet pods cost nothing",
			nodes: []string{"a", "b"},
			pods: []runtime.Object{test.Pod("ds1").Node("a").OwnedBy("DaemonSet", "x").Obj(),
				test.Pod("ds2").Node("a").OwnedBy("DaemonSet", "y").Obj(), on("b", "b1")},
			want: []string{"a", "b"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			objs := objects(test.NodePool("default"), tc.pods)
			for _, n := range tc.nodes {
				objs = append(objs, node(n, "m5.large").objs()...)
			}
			h := newHarness(t, harnessConfig{}, objs...)
			if got := names(h.view().candidates); !slices.Equal(got, tc.want) {
				t.Errorf("order = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestEvictionCost(t *testing.T) {
	prio := func(p int32) *int32 { return &p }
	tests := []struct {
		name        string
		annotations map[string]string
		priority    *int32
		want        float64
	}{
		{name: "a plain pod costs one", want: 1},
		{name: "pod-deletion-cost 2^27 adds one", annotations: map[string]string{"controller.kubernetes.io/pod-deletion-cost": "134217728"}, want: 2},
		{name: "an unparsable pod-deletion-cost is ignored", annotations: map[string]string{"controller.kubernetes.io/pod-deletion-cost": "high"}, want: 1},
		{name: "a very negative pod-deletion-cost is clamped at -10", annotations: map[string]string{"controller.kubernetes.io/pod-deletion-cost": "-2147483648"}, want: -10},
		{name: "priority 2^25 adds one", priority: prio(1 << 25), want: 2},
		{name: "system-node-critical priority is clamped at 10", priority: prio(2000001000), want: 10},
		{name: "a negative priority lowers it", priority: prio(-(1 << 24)), want: 0.5},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := test.Pod("p").Obj()
			p.Annotations = tc.annotations
			p.Spec.Priority = tc.priority
			if got := evictionCost(p); math.Abs(got-tc.want) > 1e-9 {
				t.Errorf("evictionCost = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestBlocked(t *testing.T) {
	nodeDND := func(key, value string) func(*test.NodeWrapper) {
		return func(w *test.NodeWrapper) { w.Annotations(key, value) }
	}
	podDND := func(key, value string) func(*test.PodWrapper) {
		return func(w *test.PodWrapper) { w.Annotations(key, value) }
	}
	started := func(ago time.Duration) func(*test.PodWrapper) {
		return func(w *test.PodWrapper) {
			st := metav1.NewTime(t0.Add(-ago))
			w.Status.StartTime = &st
		}
	}
	otherNS := pdb("web-pdb", "web", 0)
	otherNS.Namespace = "other"
	selectAll := pdb("all", "web", 0)
	selectAll.Spec.Selector = &metav1.LabelSelector{}
	noSelector := pdb("none", "web", 0)
	noSelector.Spec.Selector = nil
	const podBlocked = "pod default/web is annotated do-not-disrupt"
	booked := func(w *test.NodeClaimWrapper) { w.Annotations(stevedorev1.AnnotationProvisioningRequest, "ml/train") }
	bookings := func(held bool) func(*Controller) {
		return func(c *Controller) {
			c.opts.Booked = func(request string) bool { return held && request == "ml/train" }
		}
	}
	bare := func(w *test.PodWrapper) { w.OwnerReferences = nil }
	surger := func(annotations map[string]string) func(*Controller) {
		return func(c *Controller) { c.opts.Surge = surgerOf(t, annotations) }
	}
	evictAnnotated := func(w *test.PodWrapper) { w.Annotations(stevedorev1.AnnotationReplacement, "Evict") }
	surgeAnnotated := func(w *test.PodWrapper) { w.Annotations(stevedorev1.AnnotationReplacement, "Surge") }
	tests := []struct {
		name  string
		claim func(*test.NodeClaimWrapper)
		node  func(*test.NodeWrapper)
		pod   []func(*test.PodWrapper)
		noPod bool
		extra []runtime.Object
		setup func(*Controller)
		want  string
	}{
		{name: "nothing blocks", want: ""},
		{name: "node annotated stevedore.dev/do-not-disrupt", node: nodeDND(stevedorev1.DoNotDisruptKey, "true"),
			want: "the node is annotated do-not-disrupt"},
		{name: "node annotated karpenter.sh/do-not-disrupt", node: nodeDND(stevedorev1.KarpenterDoNotDisruptKey, "true"),
			want: "the node is annotated do-not-disrupt"},
		{name: "node annotated do-not-disrupt false", node: nodeDND(stevedorev1.KarpenterDoNotDisruptKey, "false"), want: ""},
		{name: "a duration on a node does not block (a node has no start time)", node: nodeDND(stevedorev1.DoNotDisruptKey, "1h"), want: ""},
		{name: "pod annotated stevedore.dev/do-not-disrupt", pod: []func(*test.PodWrapper){podDND(stevedorev1.DoNotDisruptKey, "true")},
			want: podBlocked},
		{name: "pod annotated karpenter.sh/do-not-disrupt", pod: []func(*test.PodWrapper){podDND(stevedorev1.KarpenterDoNotDisruptKey, "true")},
			want: podBlocked},
		{name: "pod do-not-disrupt duration not yet over",
			pod: []func(*test.PodWrapper){podDND(stevedorev1.KarpenterDoNotDisruptKey, "1h"), started(30 * time.Minute)}, want: podBlocked},
		{name: "pod do-not-disrupt duration over",
			pod: []func(*test.PodWrapper){podDND(stevedorev1.KarpenterDoNotDisruptKey, "1h"), started(2 * time.Hour)}, want: ""},
		{name: "pod do-not-disrupt duration counts from creation without a start time",
			pod: []func(*test.PodWrapper){podDND(stevedorev1.DoNotDisruptKey, "1h"), func(w *test.PodWrapper) {
				w.CreationTimestamp = metav1.NewTime(t0.Add(-10 * time.Minute))
			}}, want: podBlocked},
		{name: "do-not-disrupt on a DaemonSet pod does not block", noPod: true,
			extra: []runtime.Object{test.Pod("agent").Node("a").OwnedBy("DaemonSet", "agent").
				Annotations(stevedorev1.KarpenterDoNotDisruptKey, "true").Obj()}, want: ""},
		{name: "PDB allowing no disruption", extra: []runtime.Object{pdb("web-pdb", "web", 0)},
			want: "pod default/web: PodDisruptionBudget web-pdb allows no disruption"},
		{name: "PDB allowing a disruption", extra: []runtime.Object{pdb("web-pdb", "web", 1)}, want: ""},
		{name: "PDB allowing no disruption of a pod that could surge",
			extra: []runtime.Object{pdb("web-pdb", "web", 0)}, setup: surger(nil),
			want: "pod default/web: PodDisruptionBudget web-pdb allows no disruption (annotated stevedore.dev/replacement: Surge, it would move make-before-break)"},
		{name: "PDB allowing no disruption of a pod annotated Surge", pod: []func(*test.PodWrapper){surgeAnnotated},
			extra: []runtime.Object{pdb("web-pdb", "web", 0)}, setup: surger(nil), want: ""},
		{name: "PDB allowing no disruption of a pod annotated Surge that cannot surge", pod: []func(*test.PodWrapper){surgeAnnotated, bare},
			extra: []runtime.Object{pdb("web-pdb", "web", 0)}, setup: surger(nil),
			want: "pod default/web: PodDisruptionBudget web-pdb allows no disruption"},
		{name: "PDB allowing no disruption of a pod annotated Evict", pod: []func(*test.PodWrapper){evictAnnotated},
			extra: []runtime.Object{pdb("web-pdb", "web", 0)}, setup: surger(nil),
			want: "pod default/web: PodDisruptionBudget web-pdb allows no disruption"},
		{name: "PDB allowing no disruption of a bare pod", pod: []func(*test.PodWrapper){bare}, extra: []runtime.Object{pdb("web-pdb", "web", 0)}, setup: surger(nil),
			want: "pod default/web: PodDisruptionBudget web-pdb allows no disruption"},
		{name: "a pod whose owner surges for another node waits",
			setup: surger(map[string]string{stevedorev1.AnnotationSurge: "1:2"}),
			want:  "pod default/web waits to surge: its ReplicaSet rs-web is surging already"},
		{name: "two PDBs select the pod", extra: []runtime.Object{pdb("one", "web", 1), pdb("two", "web", 1)},
			want: "pod default/web: more than one PodDisruptionBudget selects it"},
		{name: "PDB of another namespace", extra: []runtime.Object{otherNS}, want: ""},
		{name: "PDB selecting other pods", extra: []runtime.Object{pdb("api-pdb", "api", 0)}, want: ""},
		{name: "PDB with an empty selector selects every pod", extra: []runtime.Object{selectAll},
			want: "pod default/web: PodDisruptionBudget all allows no disruption"},
		{name: "PDB without a selector selects nothing", extra: []runtime.Object{noSelector}, want: ""},
		{name: "the node annotation is reported before a PDB", node: nodeDND(stevedorev1.DoNotDisruptKey, "true"),
			extra: []runtime.Object{pdb("web-pdb", "web", 0)}, want: "the node is annotated do-not-disrupt"},
		{name: "a pending pod nominated to the node", extra: []runtime.Object{test.Pod("next").Pending().Nominated("a").Obj()},
			want: "pending pods are nominated to the node"},
		{name: "a deleted pending pod nominated to the node does not block",
			extra: []runtime.Object{test.Pod("next").Pending().Nominated("a").Deleting(metav1.NewTime(t0)).Obj()}, want: ""},
		{name: "a pending pod nominated to another node", extra: []runtime.Object{test.Pod("next").Pending().Nominated("elsewhere").Obj()}, want: ""},
		{name: "an empty replacement under protection", noPod: true,
			setup: func(c *Controller) { c.activity.protect([]string{"claim-a"}, t0.Add(time.Minute)) }, want: "the node was just launched as a replacement"},
		{name: "protection lapses", noPod: true,
			setup: func(c *Controller) { c.activity.protect([]string{"claim-a"}, t0.Add(-time.Second)) }, want: ""},
		{name: "launched for a ProvisioningRequest whose booking holds", claim: booked, setup: bookings(true),
			want: "the node was launched for ProvisioningRequest ml/train, whose booking holds"},
		{name: "launched for a ProvisioningRequest whose booking ended", claim: booked, setup: bookings(false), want: ""},
		{name: "a replacement that got pods is no longer protected",
			setup: func(c *Controller) { c.activity.protect([]string{"claim-a"}, t0.Add(time.Minute)) }, want: ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			objs := objects(test.NodePool("default"), machine{name: "a", pool: "default", typ: "m5.large", node: tc.node, claim: tc.claim},
				node("b", "m5.large"), tc.extra)
			if !tc.noPod {
				w := pod("web", "a", "100m", "128Mi")
				for _, m := range tc.pod {
					m(w)
				}
				objs = append(objs, w.Obj())
			}
			h := newHarness(t, harnessConfig{}, objs...)
			if tc.setup != nil {
				tc.setup(h.c)
			}
			v := h.view()
			c := v.candidate("a")
			if c == nil {
				t.Fatal("node a is no candidate")
			}
			if c.BlockedBecause != tc.want {
				t.Errorf("blocked = %q, want %q", c.BlockedBecause, tc.want)
			}
			if b := v.candidate("b"); b == nil || b.BlockedBecause != "" {
				t.Errorf("node b: %+v, want an unblocked candidate", b)
			}
			// a protection is dropped once the replacement got pods or it lapsed
			if tc.setup != nil && tc.want == "" {
				if _, ok := h.c.activity.protected["claim-a"]; ok {
					t.Error("protection of claim-a kept")
				}
			}
		})
	}
}

func TestBlockedIsReportedOncePerReason(t *testing.T) {
	h := newHarness(t, harnessConfig{}, objects(test.NodePool("default"),
		machine{name: "a", pool: "default", typ: "m5.large", node: func(w *test.NodeWrapper) { w.Annotations(stevedorev1.DoNotDisruptKey, "true") }},
		node("b", "m5.large"), test.Pod("next").Pending().Nominated("b"))...)
	drain := func() []string {
		var out []string
		for {
			select {
			case e := <-h.Recorder.Events:
				out = append(out, e)
			default:
				return out
			}
		}
	}
	h.c.report(h.Ctx, h.view(), nil)
	got := drain()
	// one event on the NodeClaim and one on the Node of a; none for b (nominated pods are a passing reason)
	if len(got) != 2 {
		t.Fatalf("events = %q, want 2", got)
	}
	for _, e := range got {
		if !strings.Contains(e, ReasonDisruptionBlocked) || !strings.Contains(e, "the node is annotated do-not-disrupt") {
			t.Errorf("event %q", e)
		}
	}
	h.c.report(h.Ctx, h.view(), nil)
	if got := drain(); len(got) != 0 {
		t.Errorf("events on an unchanged reason = %q, want none", got)
	}
	if h.c.reported["a"] == nil || h.c.reported["b"] != nil {
		t.Errorf("reported = %v", h.c.reported)
	}
	cond := meta.FindStatusCondition(h.claim("claim-a").Status.Conditions, stevedorev1.ConditionConsolidatable)
	if cond == nil || cond.Status != metav1.ConditionFalse || cond.Reason != string(RetainDoNotDisrupt) {
		t.Errorf("claim-a's Consolidatable condition = %+v, want False/DoNotDisrupt", cond)
	}
}

// TestCandidatesArePricedUnderNodeOverlays: with NodeOverlays in force a candidate costs its offering's overlaid
// price, which replacements are compared against; without, the price recorded at launch.
func TestCandidatesArePricedUnderNodeOverlays(t *testing.T) {
	for _, tc := range []struct {
		name   string
		active bool
		want   float64
	}{{"no overlay in force", false, priceOf("m5.xlarge", spot)}, {"an overlay in force", true, 0.0123}} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, harnessConfig{opts: func(o *Options) {
				o.OverlaidTypes = func(ctx context.Context, np *stevedorev1.NodePool) ([]*cloud.InstanceType, bool) {
					its, err := o.Cloud.InstanceTypes(ctx, np)
					if err != nil {
						t.Fatal(err)
					}
					for i, it := range its {
						c := *it
						c.Offerings = slices.Clone(it.Offerings)
						for j := range c.Offerings {
							if c.Name == "m5.xlarge" && c.Offerings[j].CapacityType == spot {
								c.Offerings[j].Price = 0.0123
							}
						}
						its[i] = &c
					}
					return its, tc.active
				}
			}}, objects(test.NodePool("default").Consolidation(stevedorev1.ConsolidationPolicyWhenUnderutilized, dur(time.Minute)),
				machine{name: "a", pool: "default", typ: "m5.xlarge", capacity: spot})...)
			c := h.view().candidate("a")
			if c == nil || math.Abs(c.Price-tc.want) > 1e-9 {
				t.Fatalf("candidate %v, want price %v", c, tc.want)
			}
		})
	}
}

// TestVerdictsAreReportedOncePerChange: a node consolidation leaves gets one event (on the Node and the NodeClaim)
// and the Consolidatable=False condition when its verdict first appears or changes, and nothing while it holds; a
// verdict already on the NodeClaim when the controller starts is not reported again.
func TestVerdictsAreReportedOncePerChange(t *testing.T) {
	drain := func(h *harness) []string {
		var out []string
		for len(h.Recorder.Events) > 0 {
			out = append(out, <-h.Recorder.Events)
		}
		return out
	}
	pass := func(t *testing.T, h *harness) {
		t.Helper()
		if acted, err := h.c.pass(h.Ctx); err != nil || acted {
			t.Fatalf("pass acted %v, err %v; want nothing done", acted, err)
		}
	}
	condition := func(h *harness) *metav1.Condition {
		return meta.FindStatusCondition(h.claim("claim-a").Status.Conditions, stevedorev1.ConditionConsolidatable)
	}
	expect := func(t *testing.T, h *harness, events int, eventReason string, reason RetainReason) {
		t.Helper()
		got := drain(h)
		if len(got) != events {
			t.Fatalf("events %q, want %d", got, events)
		}
		for _, e := range got {
			if !strings.Contains(e, eventReason) {
				t.Errorf("event %q, want reason %s", e, eventReason)
			}
		}
		if c := condition(h); c == nil || c.Status != metav1.ConditionFalse || c.Reason != string(reason) {
			t.Errorf("condition %+v, want False/%s", c, reason)
		}
	}

	h := newHarness(t, harnessConfig{}, objects(pool(), node("a", "m5.large"), pinned("local", "a"))...)
	pass(t, h)
	expect(t, h, 2, ReasonUnconsolidatable, RetainPodsFitNowhere)
	if c := condition(h); !strings.Contains(c.Message, "pod default/local fits on no other node") {
		t.Errorf("condition message %q", c.Message)
	}
	pass(t, h)
	expect(t, h, 0, "", RetainPodsFitNowhere)

	block := pdb("local", "local", 0)
	if err := h.Listers.Add(block); err != nil {
		t.Fatal(err)
	}
	pass(t, h)
	expect(t, h, 2, ReasonDisruptionBlocked, RetainPodDisruptionBudget)
	pass(t, h)
	expect(t, h, 0, "", RetainPodDisruptionBudget)

	if err := h.Listers.Delete(block); err != nil {
		t.Fatal(err)
	}
	pass(t, h)
	expect(t, h, 2, ReasonUnconsolidatable, RetainPodsFitNowhere)

	// a restart: the NodeClaim the new controller reads already carries the verdict
	recordedClaim := func(w *test.NodeClaimWrapper) {
		w.Status.Conditions = append(w.Status.Conditions, metav1.Condition{Type: stevedorev1.ConditionConsolidatable, Status: metav1.ConditionFalse,
			Reason: string(RetainPodsFitNowhere), Message: "pod default/local fits on no other node (an older message)"})
	}
	h = newHarness(t, harnessConfig{}, objects(pool(), machine{name: "a", pool: "default", typ: "m5.large", claim: recordedClaim}, pinned("local", "a"))...)
	pass(t, h)
	if got := drain(h); len(got) != 0 {
		t.Errorf("events after a restart = %q, want none", got)
	}

	// consolidation off is the NodePool's setting: the condition says so, no event on each of its nodes
	h = newHarness(t, harnessConfig{}, objects(pool().Consolidation(stevedorev1.ConsolidationPolicyWhenEmptyOrUnderutilized, nil),
		node("a", "m5.large"), pinned("local", "a"))...)
	pass(t, h)
	expect(t, h, 0, "", RetainConsolidationOff)
}

// surgerOf is a Surger whose cache holds one bare ReplicaSet, default/rs-web of one replica (pod web's), with
// annotations.
func surgerOf(t *testing.T, annotations map[string]string, managedFields ...metav1.ManagedFieldsEntry) *surge.Surger {
	t.Helper()
	one := int32(1)
	rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: "rs-web", Namespace: "default", UID: "ReplicaSet-rs-web", Annotations: annotations,
		ManagedFields: managedFields}, Spec: appsv1.ReplicaSetSpec{Replicas: &one}, Status: appsv1.ReplicaSetStatus{Replicas: 1}}
	indexer := func(objs ...any) cache.Indexer {
		idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
		for _, o := range objs {
			if err := idx.Add(o); err != nil {
				t.Fatal(err)
			}
		}
		return idx
	}
	return surge.New(surge.Options{ReplicaSets: appslisters.NewReplicaSetLister(indexer(rs)), Deployments: appslisters.NewDeploymentLister(indexer()),
		GitOpsManagers: []string{"kustomize-controller"}})
}
