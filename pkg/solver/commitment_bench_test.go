/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package solver

import (
	"context"
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/cloud/catalog"
	"github.com/stevedore-dev/stevedore/pkg/commitment"
	"github.com/stevedore-dev/stevedore/pkg/solver/simulation"
)

// benchCommitments are an account's commitments for the bill benchmark: an m6i EC2 Instance Savings Plan, a
// Compute Savings Plan and two zonal r6i.2xlarge reservations, about a third of what the pods would cost on-demand.
func benchCommitments() []*stevedorev1.Commitment {
	sp := func(name, typ, family, hourly, discount string) *stevedorev1.Commitment {
		return &stevedorev1.Commitment{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: stevedorev1.CommitmentSpec{SavingsPlan: &stevedorev1.SavingsPlan{
			Type: typ, InstanceFamily: family, HourlyCommitment: hourly, DiscountPercent: discount}}}
	}
	return []*stevedorev1.Commitment{
		sp("m6i-plan", stevedorev1.SavingsPlanEC2Instance, "m6i", "1.5", "28"),
		sp("compute-plan", stevedorev1.SavingsPlanCompute, "", "0.5", "17"),
		{ObjectMeta: metav1.ObjectMeta{Name: "r6i-reservations"}, Spec: stevedorev1.CommitmentSpec{ReservedInstances: &stevedorev1.ReservedInstances{
			InstanceType: "r6i.2xlarge", Zone: "us-east-1a", Count: 2, HourlyRate: "0.318"}}},
	}
}

// BenchmarkCommitmentBill plans Karpenter's 1,000-pod benchmark mix on the us-east-1 catalog, in a NodePool of spot
// and on-demand and in one of on-demand only, twice each: at list price (as an autoscaler that does not know the
// account's commitments), and with the commitments declared. Both plans are billed the same way, with the
// commitments: their fees, the on-demand hours they do not cover, and spot at list price.
func BenchmarkCommitmentBill(b *testing.B) {
	b.Run("spot-and-on-demand", func(b *testing.B) {
		benchmarkCommitmentBill(b, stevedorev1.CapacityTypeSpot, stevedorev1.CapacityTypeOnDemand)
	})
	b.Run("on-demand", func(b *testing.B) { benchmarkCommitmentBill(b, stevedorev1.CapacityTypeOnDemand) })
}

func benchmarkCommitmentBill(b *testing.B, capacityTypes ...string) {
	var pods []benchPod
	readJSON(b, "pods_1000.json", &pods)
	objs := amd64Pool(capacityTypes...)
	for _, bp := range pods {
		objs = append(objs, bp.pod(fmt.Sprintf("p-%d", bp.Idx)))
	}
	declared := benchCommitments()
	compiled, problems := commitment.CompileAll(declared)
	if len(problems) > 0 {
		b.Fatal(problems)
	}
	ctx := context.Background()
	sim, err := simulation.New(ctx, simulation.NewSnapshot(), simulation.Options{})
	if err != nil {
		b.Fatal(err)
	}
	bill := func(withCommitments bool) (commitment.Coverage, int) {
		in := objs
		if withCommitments {
			in = append(append([]runtime.Object(nil), objs...), asObjects(declared)...)
		}
		p, err := NewOfflineProblem(OfflineInput{Objects: in, Catalog: catalog.Default()})
		if err != nil {
			b.Fatal(err)
		}
		plan, err := NewSolver(sim).Solve(ctx, p.Input(budgetFor()))
		if err != nil {
			b.Fatal(err)
		}
		if len(plan.Unschedulable) > 0 {
			b.Fatalf("%d pods unschedulable", len(plan.Unschedulable))
		}
		var instances []commitment.Instance
		for i, n := range plan.NewNodes {
			instances = append(instances, commitment.Instance{Name: fmt.Sprintf("node-%04d", i), InstanceType: n.InstanceType.Name,
				Zone: n.Offering.Zone, CapacityType: n.Offering.CapacityType, ListPrice: n.Offering.ListPrice()})
		}
		return commitment.Cover(compiled, instances), len(plan.NewNodes)
	}
	var list, with commitment.Coverage
	var listNodes, withNodes int
	for i := 0; i < b.N; i++ {
		list, listNodes = bill(false)
		with, withNodes = bill(true)
	}
	b.ReportMetric(list.Bill(), "bill-list-planning-$/h")
	b.ReportMetric(with.Bill(), "bill-stevedore-$/h")
	b.ReportMetric(with.Bill()/list.Bill(), "bill-ratio")
	b.ReportMetric(list.Ratio(), "coverage-list-planning")
	b.ReportMetric(with.Ratio(), "coverage-stevedore")
	used := func(c commitment.Coverage) string {
		out := ""
		for _, u := range c.Commitments {
			out += fmt.Sprintf(" %s %s of %s %s;", u.Name, commitment.FormatAmount(u.Used), commitment.FormatAmount(u.Capacity()), u.Unit())
		}
		return out
	}
	b.Logf("commitments' fees %.4f $/h; planned at list price: %d nodes, list price %.4f $/h, bill %.4f $/h,%s planned with them: %d nodes, list price %.4f $/h, bill %.4f $/h,%s",
		list.Fees, listNodes, list.OnDemand+list.Spot, list.Bill(), used(list), withNodes, with.OnDemand+with.Spot, with.Bill(), used(with))
}

func asObjects(cs []*stevedorev1.Commitment) []runtime.Object {
	out := make([]runtime.Object, 0, len(cs))
	for _, c := range cs {
		out = append(out, c)
	}
	return out
}
