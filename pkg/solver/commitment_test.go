/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package solver

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/commitment"
	"github.com/stevedore-dev/stevedore/pkg/test"
)

// TestACommitmentIsFilledBeforeSpotIsBought: four pods that need a node each, in a NodePool of spot and on-demand,
// with an m5 Savings Plan whose room takes two m5.large: two nodes are planned on-demand m5.large under the plan
// (pinned on-demand, so the launch cannot take spot instead), the other two at the cheapest list price (spot);
// without room left (the cluster's on-demand m5 use it) or without a plan, none is.
func TestACommitmentIsFilledBeforeSpotIsBought(t *testing.T) {
	plan := &stevedorev1.Commitment{ObjectMeta: metav1.ObjectMeta{Name: "m5-plan"}, Spec: stevedorev1.CommitmentSpec{SavingsPlan: &stevedorev1.SavingsPlan{
		Type: stevedorev1.SavingsPlanEC2Instance, InstanceFamily: "m5", HourlyCommitment: "0.14", DiscountPercent: "28"}}}
	running := []commitment.Instance{
		{Name: "old-1", InstanceType: "m5.large", Zone: "us-east-1a", CapacityType: stevedorev1.CapacityTypeOnDemand, ListPrice: 0.096},
		{Name: "old-2", InstanceType: "m5.large", Zone: "us-east-1b", CapacityType: stevedorev1.CapacityTypeOnDemand, ListPrice: 0.096},
	}
	cases := []struct {
		name        string
		commitments []*stevedorev1.Commitment
		running     []commitment.Instance
		wantCovered int
	}{
		{"the plan's room takes two nodes", []*stevedorev1.Commitment{plan}, nil, 2},
		{"the running nodes use the room", []*stevedorev1.Commitment{plan}, running, 0},
		{"no plan", nil, nil, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			compiled, problems := commitment.CompileAll(tc.commitments)
			if len(problems) > 0 {
				t.Fatal(problems)
			}
			its := commitment.Offer(testInstanceTypes(t), commitment.Cover(compiled, tc.running))
			np := test.NodePool("pool").Require(stevedorev1.LabelCapacityType, corev1.NodeSelectorOpIn,
				stevedorev1.CapacityTypeSpot, stevedorev1.CapacityTypeOnDemand).Obj()
			np.Normalize()
			opt, err := NewNodePoolOption(np, its, nil, nil, "us-east-1")
			if err != nil {
				t.Fatal(err)
			}
			out := solveApart(t, opt, "web", 4)
			covered := 0
			for _, n := range out.NewNodes {
				ct := n.Requirements.Get(stevedorev1.LabelCapacityType)
				if c := n.Offering.Covered; c != nil {
					covered++
					if n.InstanceType.Name != "m5.large" || c.Commitment != "m5-plan" || n.Offering.CapacityType != stevedorev1.CapacityTypeOnDemand {
						t.Errorf("covered node %s/%s under %q, want an on-demand m5.large under m5-plan", n.InstanceType.Name, n.Offering.CapacityType, c.Commitment)
					}
					if ct.Has(stevedorev1.CapacityTypeSpot) || !ct.Has(stevedorev1.CapacityTypeOnDemand) {
						t.Errorf("covered node's capacity type requirement %v, want on-demand only", ct)
					}
					continue
				}
				if n.Offering.CapacityType != stevedorev1.CapacityTypeSpot {
					t.Errorf("uncovered node %s at %s, want spot (cheapest at list price)", n.InstanceType.Name, n.Offering.CapacityType)
				}
			}
			if covered != tc.wantCovered {
				t.Errorf("%d nodes under the plan, want %d", covered, tc.wantCovered)
			}
		})
	}
}
