/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package v1

import (
	"testing"
	"time"
)

func TestNodePoolNormalize(t *testing.T) {
	cases := []struct {
		name        string
		in          NodePool
		wantPolicy  ConsolidationPolicy
		wantExpire  string
		wantGroup   string
		wantBudgets int
		// wantReplacement is Surge unless set
		wantReplacement Replacement
	}{
		{
			name:        "empty NodePool gets every default",
			in:          NodePool{},
			wantPolicy:  ConsolidationPolicyWhenEmptyOrUnderutilized,
			wantExpire:  (720 * time.Hour).String(),
			wantGroup:   GroupName,
			wantBudgets: 1,
		},
		{
			name: "WhenUnderutilized and disruption.expireAfter are the older spellings",
			in: NodePool{Spec: NodePoolSpec{Disruption: Disruption{
				ConsolidationPolicy: ConsolidationPolicyWhenUnderutilized, ExpireAfter: NewDuration(24 * time.Hour),
			}}},
			wantPolicy:  ConsolidationPolicyWhenEmptyOrUnderutilized,
			wantExpire:  (24 * time.Hour).String(),
			wantGroup:   GroupName,
			wantBudgets: 1,
		},
		{
			name: "template expireAfter wins over the older place",
			in: NodePool{Spec: NodePoolSpec{
				Template:   NodeClaimTemplate{Spec: NodeClaimTemplateSpec{ExpireAfter: NeverDuration()}},
				Disruption: Disruption{ConsolidationPolicy: ConsolidationPolicyWhenEmpty, ExpireAfter: NewDuration(time.Hour)},
			}},
			wantPolicy:  ConsolidationPolicyWhenEmpty,
			wantExpire:  Never,
			wantGroup:   GroupName,
			wantBudgets: 1,
		},
		{
			name:            "a replacement set is kept",
			in:              NodePool{Spec: NodePoolSpec{Disruption: Disruption{Replacement: ReplacementEvict}}},
			wantPolicy:      ConsolidationPolicyWhenEmptyOrUnderutilized,
			wantExpire:      (720 * time.Hour).String(),
			wantGroup:       GroupName,
			wantBudgets:     1,
			wantReplacement: ReplacementEvict,
		},
		{
			name: "Karpenter's node class group maps onto Stevedore's",
			in: NodePool{Spec: NodePoolSpec{Template: NodeClaimTemplate{Spec: NodeClaimTemplateSpec{
				NodeClassRef: &NodeClassReference{Group: KarpenterNodeClassGroup, Kind: "EC2NodeClass", Name: "x"},
			}}, Disruption: Disruption{Budgets: []Budget{{Nodes: "1"}, {Nodes: "2"}}}}},
			wantPolicy:  ConsolidationPolicyWhenEmptyOrUnderutilized,
			wantExpire:  (720 * time.Hour).String(),
			wantGroup:   GroupName,
			wantBudgets: 2,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			np := tc.in.DeepCopy()
			np.Normalize()
			if got := np.Spec.Disruption.ConsolidationPolicy; got != tc.wantPolicy {
				t.Errorf("policy = %q, want %q", got, tc.wantPolicy)
			}
			if got := np.Spec.Template.Spec.ExpireAfter.String(); got != tc.wantExpire {
				t.Errorf("expireAfter = %q, want %q", got, tc.wantExpire)
			}
			if np.Spec.Disruption.ExpireAfter != nil {
				t.Errorf("the older expireAfter place must be cleared")
			}
			if got := np.Spec.Template.Spec.NodeClassRef.Group; got != tc.wantGroup {
				t.Errorf("group = %q, want %q", got, tc.wantGroup)
			}
			if got := len(np.Spec.Disruption.Budgets); got != tc.wantBudgets {
				t.Errorf("budgets = %d, want %d", got, tc.wantBudgets)
			}
			want := tc.wantReplacement
			if want == "" {
				want = ReplacementSurge
			}
			if got := np.Spec.Disruption.Replacement; got != want {
				t.Errorf("replacement = %q, want %q", got, want)
			}
		})
	}
}

func TestNillableDurationJSON(t *testing.T) {
	for _, s := range []string{`"Never"`, `"5m0s"`, `"720h0m0s"`} {
		var d NillableDuration
		if err := d.UnmarshalJSON([]byte(s)); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
		out, err := d.MarshalJSON()
		if err != nil || string(out) != s {
			t.Errorf("round trip of %s gave %s, %v", s, out, err)
		}
	}
	var d NillableDuration
	if err := d.UnmarshalJSON([]byte(`"30d"`)); err == nil {
		t.Error("30d must be refused")
	}
}
