/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package solver

import (
	"context"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/cloud/catalog"
	"github.com/stevedore-dev/stevedore/pkg/floor"
	"github.com/stevedore-dev/stevedore/pkg/solver/simulation"
)

// BenchmarkOnDemandFloorBill plans Karpenter's 1,000-pod benchmark mix, each of its five kinds of pod a workload,
// on the us-east-1 catalog in a NodePool of spot and on-demand: with no floor, with a 20% on-demand floor on every
// workload (the pods the floor needs pinned to on-demand, as provisioning does), and all on-demand (what a service
// that must not lose every replica to spot runs without a floor). For each it reports the hourly bill, the share of
// pods on on-demand, and how many pods the spot pool (instance type and zone) holding the most would take down in
// an interruption storm.
func BenchmarkOnDemandFloorBill(b *testing.B) {
	var pods []benchPod
	readJSON(b, "pods_1000.json", &pods)
	pool := func(capacityTypes ...string) runtime.Object {
		return &stevedorev1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "default"}, Spec: stevedorev1.NodePoolSpec{
			Template: stevedorev1.NodeClaimTemplate{Spec: stevedorev1.NodeClaimTemplateSpec{
				NodeClassRef: &stevedorev1.NodeClassReference{Name: "default"},
				Requirements: []stevedorev1.NodeSelectorRequirementWithMinValues{
					{Key: stevedorev1.LabelCapacityType, Operator: stevedorev1.NodeSelectorOperator(corev1.NodeSelectorOpIn), Values: capacityTypes},
					{Key: corev1.LabelArchStable, Operator: stevedorev1.NodeSelectorOperator(corev1.NodeSelectorOpIn), Values: []string{"amd64"}},
				}}}}}
	}
	class := &stevedorev1.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: "default"}, Spec: stevedorev1.EC2NodeClassSpec{Role: "NodeRole"}}
	workloadPods := func(value string) []runtime.Object {
		var out []runtime.Object
		for _, bp := range pods {
			p := bp.pod(fmt.Sprintf("p-%04d", bp.Idx))
			p.UID = types.UID(p.Name)
			p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: bp.Kind, UID: types.UID(bp.Kind),
				Controller: ptr.To(true)}}
			if value != "" {
				p.Annotations[stevedorev1.AnnotationOnDemandFloor] = value
			}
			out = append(out, p)
		}
		return out
	}
	ctx := context.Background()
	sim, err := simulation.New(ctx, simulation.NewSnapshot(), simulation.Options{})
	if err != nil {
		b.Fatal(err)
	}
	solve := func(objs []runtime.Object) *Plan {
		p, err := NewOfflineProblem(OfflineInput{Objects: objs, Catalog: catalog.Default()})
		if err != nil {
			b.Fatal(err)
		}
		in := p.Input(budgetFor())
		pinned, problems := floor.Pin(in.Pods, floor.Tallies{})
		if len(problems) > 0 {
			b.Fatal(problems)
		}
		in.Pods = floor.Apply(in.Pods, pinned)
		plan, err := NewSolver(sim).Solve(ctx, in)
		if err != nil {
			b.Fatal(err)
		}
		if len(plan.Unschedulable) > 0 {
			b.Fatalf("%d pods unschedulable", len(plan.Unschedulable))
		}
		return plan
	}
	type outcome struct {
		bill                float64
		onDemand, worstPool int
	}
	measure := func(plan *Plan) outcome {
		var o outcome
		byPool := map[string]int{}
		for _, n := range plan.NewNodes {
			o.bill += n.Offering.Price
			if n.Offering.CapacityType == stevedorev1.CapacityTypeSpot {
				key := n.InstanceType.Name + "/" + n.Offering.Zone
				byPool[key] += len(n.Pods)
				o.worstPool = max(o.worstPool, byPool[key])
			} else {
				o.onDemand += len(n.Pods)
			}
		}
		return o
	}
	var none, floored, onDemand outcome
	for i := 0; i < b.N; i++ {
		none = measure(solve(append([]runtime.Object{class, pool(stevedorev1.CapacityTypeSpot, stevedorev1.CapacityTypeOnDemand)}, workloadPods("")...)))
		floored = measure(solve(append([]runtime.Object{class, pool(stevedorev1.CapacityTypeSpot, stevedorev1.CapacityTypeOnDemand)}, workloadPods("20%")...)))
		onDemand = measure(solve(append([]runtime.Object{class, pool(stevedorev1.CapacityTypeOnDemand)}, workloadPods("")...)))
	}
	b.ReportMetric(none.bill, "bill-no-floor-$/h")
	b.ReportMetric(floored.bill, "bill-floor-20%-$/h")
	b.ReportMetric(onDemand.bill, "bill-all-on-demand-$/h")
	b.ReportMetric(float64(floored.onDemand)/float64(len(pods)), "on-demand-share-floor")
	b.ReportMetric(float64(none.worstPool), "pods-in-largest-spot-pool-no-floor")
	b.ReportMetric(float64(floored.worstPool), "pods-in-largest-spot-pool-floor")
	b.Logf("no floor: $%.4f/h, %d pods on on-demand, %d in the largest spot pool; 20%% floor: $%.4f/h, %d on on-demand, %d in the largest spot pool; all on-demand: $%.4f/h",
		none.bill, none.onDemand, none.worstPool, floored.bill, floored.onDemand, floored.worstPool, onDemand.bill)
}
