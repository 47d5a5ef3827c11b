/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package disruption

import (
	"errors"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	schedv1alpha1 "github.com/stevedore-dev/stevedore/pkg/apis/scheduling/v1alpha1"
	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/cloud/fake"
	"github.com/stevedore-dev/stevedore/pkg/test"
)

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
			name: "a drifted node running a pod of a gang is left alone",
			cfg:  harnessConfig{cloud: drifted("claim-a")},
			objs: objects(pool(), node("a", "m5.large"), node("b", "m5.large"),
				pod("worker", "a", "500m", "512Mi").Labels(schedv1alpha1.PodGroupLabel, "train")),
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
