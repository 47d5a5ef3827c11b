/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package disruption

import (
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/cloud/fake"
	"github.com/stevedore-dev/stevedore/pkg/solver"
	"github.com/stevedore-dev/stevedore/pkg/test"
)

func TestValidate(t *testing.T) {
	// a change made between Find and validation
	addPod := func(p *test.PodWrapper) func(*harness) {
		return func(h *harness) {
			if err := h.Listers.Add(p.Obj()); err != nil {
				h.T.Fatal(err)
			}
		}
	}
	replaceNode := func(m machine) func(*harness) {
		return func(h *harness) {
			for _, o := range m.objs() {
				if err := h.Listers.Add(o); err != nil {
					h.T.Fatal(err)
				}
			}
		}
	}
	removeMachine := func(name string) func(*harness) {
		return func(h *harness) {
			for _, o := range node(name, "m5.xlarge").objs() {
				if err := h.Listers.Delete(o); err != nil {
					h.T.Fatal(err)
				}
			}
		}
	}
	withAnnotation := func(name string) machine {
		return machine{name: name, pool: "default", typ: "m5.large",
			node: func(w *test.NodeWrapper) { w.Annotations(stevedorev1.DoNotDisruptKey, "true") }}
	}
	quiet := pool().Consolidation(stevedorev1.ConsolidationPolicyWhenEmptyOrUnderutilized, dur(time.Minute))
	tests := []struct {
		name   string
		method string
		objs   []runtime.Object
		found  []string // what Find returns
		change func(*harness)
		ok     bool
		check  func(t *testing.T, cmd *Command)
	}{
		{name: "emptiness, nothing changed", method: MethodEmptiness, objs: objects(pool(), node("e1", "m5.large"), node("e2", "m5.large")),
			found: []string{"e1", "e2"}, ok: true},
		{name: "emptiness, a pod arrived", method: MethodEmptiness, objs: objects(pool(), node("e1", "m5.large"), node("e2", "m5.large")),
			found: []string{"e1", "e2"}, change: addPod(pod("web", "e2", "100m", "64Mi"))},
		{name: "emptiness, a pod came and went within consolidateAfter", method: MethodEmptiness,
			objs: objects(quiet, node("e1", "m5.large"), node("e2", "m5.large")), found: []string{"e1", "e2"},
			change: func(h *harness) { h.c.activity.lastPodEvent["e1"] = h.Clock.Now() }},
		{name: "emptiness, the node got annotated do-not-disrupt", method: MethodEmptiness,
			objs: objects(pool(), node("e1", "m5.large"), node("e2", "m5.large")), found: []string{"e1", "e2"},
			change: replaceNode(withAnnotation("e1"))},
		{name: "emptiness, the node went away", method: MethodEmptiness,
			objs: objects(pool(), node("e1", "m5.xlarge"), node("e2", "m5.large")), found: []string{"e1", "e2"},
			change: removeMachine("e1")},
		{name: "emptiness, the budget shrank", method: MethodEmptiness,
			objs: objects(pool().Budgets(budget("2", "", 0)), node("e1", "m5.large"), node("e2", "m5.large"),
				node("busy", "m5.large"), pod("web", "busy", "100m", "64Mi")),
			found: []string{"e1", "e2"},
			change: replaceNode(machine{name: "busy", pool: "default", typ: "m5.large",
				node: func(w *test.NodeWrapper) { w.Taint(stevedorev1.TaintDisrupted, "true", corev1.TaintEffectNoSchedule) }})},
		{name: "single-node, nothing changed", method: MethodSingleNode,
			objs: objects(onDemandPool(), node("a", "m5.xlarge"), node("b", "m5.xlarge"), pod("web", "a", "500m", "512Mi"),
				pinned("local", "b")),
			found: []string{"a"}, ok: true,
			check: func(t *testing.T, cmd *Command) {
				if len(cmd.Replacements) != 0 {
					t.Errorf("replacements = %s, want none", describeReplacements(cmd.Replacements))
				}
			}},
		{name: "single-node, the node with room went away: a replacement is planned again", method: MethodSingleNode,
			objs: objects(onDemandPool(), node("a", "m5.xlarge"), node("b", "m5.xlarge"), pod("web", "a", "500m", "512Mi"),
				pinned("local", "b")),
			found: []string{"a"}, change: removeMachine("b"), ok: true,
			check: func(t *testing.T, cmd *Command) {
				if len(cmd.Replacements) != 1 || cmd.Replacements[0].InstanceType.Name != "t3.small" || cmd.Pods != 1 {
					t.Errorf("replacements = %s, pods %d; want one t3.small for 1 pod", describeReplacements(cmd.Replacements), cmd.Pods)
				}
			}},
		{name: "single-node, a pod that fits nowhere else arrived", method: MethodSingleNode,
			objs: objects(onDemandPool(), node("a", "m5.xlarge"), node("b", "m5.xlarge"), pod("web", "a", "500m", "512Mi"),
				pinned("local", "b")),
			found: []string{"a"}, change: addPod(pinned("local-a", "a"))},
		{name: "multi-node, nothing changed", method: MethodMultiNode,
			objs: objects(onDemandPool(), node("a", "m5.large"), node("b", "m5.large"), node("c", "m5.2xlarge"),
				pod("web1", "a", "500m", "512Mi"), pod("web2", "b", "500m", "512Mi"), pinned("local", "c")),
			found: []string{"a", "b"}, ok: true},
		{name: "multi-node, a node got blocked by a PDB", method: MethodMultiNode,
			objs: objects(onDemandPool(), node("a", "m5.large"), node("b", "m5.large"), node("c", "m5.2xlarge"),
				pod("web1", "a", "500m", "512Mi"), pod("web2", "b", "500m", "512Mi"), pinned("local", "c")),
			found: []string{"a", "b"}, change: func(h *harness) {
				if err := h.Listers.Add(pdb("web2", "web2", 0)); err != nil {
					h.T.Fatal(err)
				}
			}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, harnessConfig{}, tc.objs...)
			m := h.method(tc.method)
			cmd := h.find(m)
			if got := commandNames(cmd); !slices.Equal(got, tc.found) {
				t.Fatalf("found %v, want %v", got, tc.found)
			}
			cmd.Method = m.Name()
			if tc.change != nil {
				tc.change(h)
			}
			ok, err := h.c.validate(h.Ctx, cmd, m)
			if err != nil {
				t.Fatal(err)
			}
			if ok != tc.ok {
				t.Fatalf("validate = %v, want %v", ok, tc.ok)
			}
			if want := t0.Add(h.c.opts.Args.DisruptionValidationDelay.Duration); !h.Clock.Now().Equal(want) {
				t.Errorf("validated at %s, want %s", h.Clock.Now(), want)
			}
			if ok {
				if got := commandNames(cmd); !slices.Equal(got, tc.found) {
					t.Errorf("validated candidates %v, want %v", got, tc.found)
				}
				for _, c := range cmd.Candidates {
					if c.BlockedBecause != "" {
						t.Errorf("validated candidate %s is blocked: %s", c.Node.Name, c.BlockedBecause)
					}
				}
			}
			if tc.check != nil {
				tc.check(t, cmd)
			}
		})
	}
}

func TestPass(t *testing.T) {
	tests := []struct {
		name      string
		cfg       harnessConfig
		objs      []runtime.Object
		acted     bool
		deleted   []string // NodeClaims deleted
		tainted   []string // nodes tainted stevedore.dev/disrupted
		eventNote string
	}{
		{name: "nothing to do says why", objs: objects(pool(), node("a", "m5.large"), pinned("local", "a")),
			eventNote: "Unconsolidatable consolidation leaves the node: pod default/local fits on no other node"},
		{name: "empty nodes are deleted after validation", objs: objects(pool(), node("a", "m5.large"), node("b", "m5.large"),
			pinned("local", "b")),
			acted: true, deleted: []string{"claim-a"}, tainted: []string{"a"}, eventNote: "emptiness (Empty): delete"},
		{name: "expiry runs when voluntary disruption is off", cfg: harnessConfig{opts: func(o *Options) { o.Args.DisableDisruption = true }},
			objs: objects(pool(), node("e", "m5.large"), machine{name: "x", pool: "default", typ: "m5.large", created: t0.Add(-2 * time.Hour),
				claim: func(w *test.NodeClaimWrapper) { w.ExpireAfter(time.Hour) }}),
			acted: true, deleted: []string{"claim-x"}, tainted: []string{"x"}, eventNote: "expiration (Expired): delete"},
		{name: "voluntary disruption off leaves empty nodes", cfg: harnessConfig{opts: func(o *Options) { o.Args.DisableDisruption = true }},
			objs: objects(pool(), node("a", "m5.large"))},
		{name: "expiry goes before emptiness", objs: objects(pool(), node("e", "m5.large"),
			machine{name: "x", pool: "default", typ: "m5.large", created: t0.Add(-2 * time.Hour),
				claim: func(w *test.NodeClaimWrapper) { w.ExpireAfter(time.Hour) }}, pinned("local", "x")),
			acted: true, deleted: []string{"claim-x"}, tainted: []string{"x"}, eventNote: "expiration (Expired): delete"},
		{name: "drift deletes a drifted node whose pods fit elsewhere",
			cfg: harnessConfig{cloud: func(p *fake.Provider) { p.Drift("claim-a", "AMI changed") }},
			objs: objects(pool(), node("a", "m5.large"), node("b", "m5.large"), pod("web", "a", "100m", "64Mi"),
				pinned("local", "b")),
			acted: true, deleted: []string{"claim-a"}, tainted: []string{"a"}, eventNote: "drift (Drifted): delete"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, tc.cfg, tc.objs...)
			acted, err := h.c.pass(h.Ctx)
			if err != nil {
				t.Fatal(err)
			}
			if acted != tc.acted {
				t.Fatalf("acted = %v, want %v", acted, tc.acted)
			}
			claims, err := h.Stevedore.StevedoreV1().NodeClaims().List(h.Ctx, metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			live := map[string]bool{}
			for _, c := range claims.Items {
				live[c.Name] = c.DeletionTimestamp == nil // deleted: its finalizer waits for termination
			}
			for _, o := range tc.objs {
				if cl, ok := o.(*stevedorev1.NodeClaim); ok {
					if want := !slices.Contains(tc.deleted, cl.Name); live[cl.Name] != want {
						t.Errorf("NodeClaim %s live = %v, want %v", cl.Name, live[cl.Name], want)
					}
				}
			}
			nodes, err := h.Kube.CoreV1().Nodes().List(h.Ctx, metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			for _, n := range nodes.Items {
				if got, want := stevedorev1.IsDisrupted(&n), slices.Contains(tc.tainted, n.Name); got != want {
					t.Errorf("node %s tainted = %v, want %v", n.Name, got, want)
				}
			}
			var events []string
			for len(h.Recorder.Events) > 0 {
				events = append(events, <-h.Recorder.Events)
			}
			if tc.eventNote != "" && !slices.ContainsFunc(events, func(e string) bool { return strings.Contains(e, tc.eventNote) }) {
				t.Errorf("events %q, want one with %q", events, tc.eventNote)
			}
			if tc.eventNote == "" && len(events) > 0 {
				t.Errorf("events %q, want none", events)
			}
		})
	}
}

func TestExecuteRecordsTheReasonAndRollsBack(t *testing.T) {
	h := newHarness(t, harnessConfig{}, objects(pool(), node("a", "m5.large"))...)
	cand := h.view().candidate("a")
	cmd := &Command{Method: MethodEmptiness, Reason: stevedorev1.DisruptionReasonEmpty, Candidates: []*Candidate{cand}}
	if err := h.c.markDisrupting(h.Ctx, cand, string(cmd.Reason)); err != nil {
		t.Fatal(err)
	}
	cl := h.claim("claim-a")
	if cl.Status.DisruptionReason != "Empty" || !conditionTrue(cl, stevedorev1.ConditionDisrupting) {
		t.Errorf("status = %+v, want disruption reason Empty and Disrupting true", cl.Status)
	}
	h.c.rollback(h.Ctx, cmd, nil)
	cl = h.claim("claim-a")
	n, err := h.Kube.CoreV1().Nodes().Get(h.Ctx, "a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if cl.Status.DisruptionReason != "" || conditionTrue(cl, stevedorev1.ConditionDisrupting) || stevedorev1.IsDisrupted(n) {
		t.Errorf("after rollback: status %+v, taints %v", cl.Status, n.Spec.Taints)
	}
	// a NodeClaim gone meanwhile is not an error
	h.deleteNow("claim-a")
	if err := h.c.w.updateStatus(h.Ctx, "claim-a", func(*stevedorev1.NodeClaimStatus) {}); err != nil {
		t.Errorf("updating a deleted NodeClaim: %v", err)
	}
	if _, err := h.Stevedore.StevedoreV1().NodeClaims().Get(h.Ctx, "claim-a", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("get = %v", err)
	}
}

func conditionTrue(cl *stevedorev1.NodeClaim, condType string) bool {
	for _, c := range cl.Status.Conditions {
		if c.Type == condType {
			return c.Status == metav1.ConditionTrue
		}
	}
	return false
}

// TestASurgeWaitsForAnOwnerThatStartedMoving: an owner that began surging (or rolling out) after the pass chose
// the node makes a voluntary command wait (it fails, the node stays and is tried later) instead of evicting its
// pod; a forceful command goes ahead.
func TestASurgeWaitsForAnOwnerThatStartedMoving(t *testing.T) {
	h := newHarness(t, harnessConfig{}, objects(pool(), node("a", "m5.large"), pod("web", "a", "100m", "64Mi"))...)
	cand := h.view().candidate("a")
	h.c.opts.Surge = surgerOf(t, map[string]string{stevedorev1.AnnotationSurge: "1:2"})
	cmd := &Command{Method: MethodSingleNode, Reason: stevedorev1.DisruptionReasonUnderutilized, Candidates: []*Candidate{cand}}
	err := h.c.surge(h.Ctx, cmd, nil)
	if want := "pod default/web waits: its ReplicaSet rs-web is surging already"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("voluntary: surge = %v, want an error containing %q", err, want)
	}
	cmd.Forceful = true
	if err := h.c.surge(h.Ctx, cmd, nil); err != nil {
		t.Errorf("forceful: surge = %v, want the pod left to the drain", err)
	}
}

// TestAPodWhoseReplicasAGitOpsControllerOwnsIsEvicted: the pod of a ReplicaSet whose spec.replicas Flux's
// kustomize-controller owns is planned to be evicted, not surged, and the command that starts says so on the
// ReplicaSet, with the controller's name.
func TestAPodWhoseReplicasAGitOpsControllerOwnsIsEvicted(t *testing.T) {
	h := newHarness(t, harnessConfig{}, objects(pool(), node("a", "m5.large"), pod("web", "a", "100m", "64Mi"))...)
	h.c.opts.Surge = surgerOf(t, nil, metav1.ManagedFieldsEntry{Manager: "kustomize-controller", Operation: metav1.ManagedFieldsOperationApply,
		FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(`{"f:spec":{"f:replicas":{}}}`)})
	cand := h.view().candidate("a")
	h.c.planMoves(cand)
	if why := cand.Evicted["default/web"]; cand.Surging["default/web"] || !strings.Contains(why, "owned by kustomize-controller") {
		t.Fatalf("pod web: surging %v, evicted because %q; want it evicted because kustomize-controller owns its replicas",
			cand.Surging["default/web"], why)
	}
	for len(h.Recorder.Events) > 0 {
		<-h.Recorder.Events
	}
	cmd := &Command{Method: MethodSingleNode, Reason: stevedorev1.DisruptionReasonUnderutilized, Candidates: []*Candidate{cand}}
	if _, err := h.c.begin(h.Ctx, cmd); err != nil {
		t.Fatal(err)
	}
	var events []string
	for len(h.Recorder.Events) > 0 {
		events = append(events, <-h.Recorder.Events)
	}
	want := ReasonSurgeSkippedForGitOps + " pods default/web on node a are evicted, not surged: spec.replicas is owned by kustomize-controller"
	if !slices.ContainsFunc(events, func(e string) bool { return strings.Contains(e, want) }) {
		t.Errorf("events %q, want one containing %q", events, want)
	}
}

// TestSurgeTargetsAreThePlannedNodes: a surged pod's successor is nominated to the existing node the command
// planned for the pod, or to the node of the replacement created for it; none when that replacement has no node
// yet, when fewer replacements were created than planned (which is whose is no longer known), or when the pod was
// planned on a NodeClaim still coming up (no Node of that name).
func TestSurgeTargetsAreThePlannedNodes(t *testing.T) {
	h := newHarness(t, harnessConfig{}, objects(pool(), node("a", "m5.large"), node("b", "m5.large"))...)
	cmd := &Command{Replacements: []*solver.PlannedNode{{}, {}}, Placements: map[types.UID]Placement{
		"on-a": {Node: "a"}, "first": {Replacement: 0}, "second": {Replacement: 1}, "coming": {Node: "nodeclaim-c"}}}
	cases := []struct {
		name    string
		created []string
		want    map[types.UID]string
	}{
		{name: "every replacement created", created: []string{"claim-b", "claim-gone"},
			want: map[types.UID]string{"on-a": "a", "first": "b"}},
		{name: "a replacement missing", created: []string{"claim-b"}, want: map[types.UID]string{"on-a": "a"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := h.c.targets(cmd, tc.created); !maps.Equal(got, tc.want) {
				t.Errorf("targets = %v, want %v", got, tc.want)
			}
		})
	}
}
