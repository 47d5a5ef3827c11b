/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package solver

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/cloud/catalog"
	"github.com/stevedore-dev/stevedore/pkg/floor"
	"github.com/stevedore-dev/stevedore/pkg/poolcap"
	"github.com/stevedore-dev/stevedore/pkg/solver/simulation"
	"github.com/stevedore-dev/stevedore/pkg/spotrisk"
)

// spotMix plans Karpenter's 1,000-pod benchmark mix, each of its five kinds of pod a workload, on the us-east-1
// catalog in a NodePool of the given capacity types (amd64), as provisioning does (the pods an on-demand floor
// needs pinned to on-demand), and measures the plan.
type spotMix struct {
	b    *testing.B
	pods []benchPod
	sim  *simulation.Simulator
	// risk, when set, prices the spot offerings of recently interrupted pools as provisioning does.
	risk *spotrisk.History
}

func newSpotMix(b *testing.B) *spotMix {
	var pods []benchPod
	readJSON(b, "pods_1000.json", &pods)
	sim, err := simulation.New(context.Background(), simulation.NewSnapshot(), simulation.Options{})
	if err != nil {
		b.Fatal(err)
	}
	return &spotMix{b: b, pods: pods, sim: sim}
}

// spotOutcome is what a plan of the mix costs and risks.
type spotOutcome struct {
	bill                float64
	onDemand, worstPool int
	// worstWorkload is the most pods of one workload one spot pool holds: what an interruption storm in that pool
	// takes from it.
	worstWorkload int
	// pools are the pods and nodes per spot pool, and largest the pool with the most pods.
	pools, nodes map[string]int
	largest      string
}

// plan solves the mix with the annotations on every pod, in a NodePool of capacityTypes.
func (m *spotMix) plan(annotations map[string]string, capacityTypes ...string) spotOutcome {
	b := m.b
	objs := amd64Pool(capacityTypes...)
	for _, bp := range m.pods {
		p := bp.pod(fmt.Sprintf("p-%04d", bp.Idx))
		p.UID = types.UID(p.Name)
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: bp.Kind, UID: types.UID(bp.Kind),
			Controller: ptr.To(true)}}
		maps.Copy(p.Annotations, annotations)
		objs = append(objs, p)
	}
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
	if m.risk != nil {
		for i, opt := range in.NodePools {
			if in.NodePools[i], err = NewNodePoolOption(opt.NodePool, m.risk.Apply(opt.InstanceTypes), opt.Remaining, p.DaemonSets, p.Region); err != nil {
				b.Fatal(err)
			}
		}
	}
	plan, err := NewSolver(m.sim).Solve(context.Background(), in)
	if err != nil {
		b.Fatal(err)
	}
	if len(plan.Unschedulable) > 0 {
		kinds := map[string]int{}
		for _, pod := range in.Pods {
			if _, ok := plan.Unschedulable[pod.UID]; ok {
				kinds[pod.OwnerReferences[0].Name]++
			}
		}
		for _, why := range plan.Unschedulable {
			b.Fatalf("%d pods unschedulable (%v; by workload %v), one because: %s", len(plan.Unschedulable), annotations, kinds, why)
		}
	}
	o := spotOutcome{pools: map[string]int{}, nodes: map[string]int{}}
	byPool := o.pools
	byWorkload := map[string]int{}
	for _, n := range plan.NewNodes {
		o.bill += n.Offering.ListPrice()
		if n.Offering.CapacityType != stevedorev1.CapacityTypeSpot {
			o.onDemand += len(n.Pods)
			continue
		}
		key := n.InstanceType.Name + "/" + n.Offering.Zone
		byPool[key] += len(n.Pods)
		o.nodes[key]++
		if byPool[key] > o.worstPool || (byPool[key] == o.worstPool && key < o.largest) {
			o.worstPool, o.largest = byPool[key], key
		}
		for _, pod := range n.Pods {
			wk := key + "|" + pod.OwnerReferences[0].Name
			byWorkload[wk]++
			o.worstWorkload = max(o.worstWorkload, byWorkload[wk])
		}
	}
	return o
}

// amd64Pool is the default EC2NodeClass and a NodePool "default" of its amd64 types with capacityTypes.
func amd64Pool(capacityTypes ...string) []runtime.Object {
	return []runtime.Object{
		&stevedorev1.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: "default"}, Spec: stevedorev1.EC2NodeClassSpec{Role: "NodeRole"}},
		&stevedorev1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "default"}, Spec: stevedorev1.NodePoolSpec{
			Template: stevedorev1.NodeClaimTemplate{Spec: stevedorev1.NodeClaimTemplateSpec{
				NodeClassRef: &stevedorev1.NodeClassReference{Name: "default"},
				Requirements: []stevedorev1.NodeSelectorRequirementWithMinValues{
					{Key: stevedorev1.LabelCapacityType, Operator: stevedorev1.NodeSelectorOperator(corev1.NodeSelectorOpIn), Values: capacityTypes},
					{Key: corev1.LabelArchStable, Operator: stevedorev1.NodeSelectorOperator(corev1.NodeSelectorOpIn), Values: []string{"amd64"}},
				}}}}},
	}
}

// BenchmarkOnDemandFloorBill plans the mix (spotMix) with no floor, with a 20% on-demand floor on every workload,
// and all on-demand (what a service that must not lose every replica to spot runs without a floor). For each it
// reports the hourly bill, the share of pods on on-demand, and how many pods the spot pool (instance type and zone)
// holding the most would take down in an interruption storm.
func BenchmarkOnDemandFloorBill(b *testing.B) {
	m := newSpotMix(b)
	var none, floored, onDemand spotOutcome
	for i := 0; i < b.N; i++ {
		none = m.plan(nil, stevedorev1.CapacityTypeSpot, stevedorev1.CapacityTypeOnDemand)
		floored = m.plan(map[string]string{stevedorev1.AnnotationOnDemandFloor: "20%"}, stevedorev1.CapacityTypeSpot, stevedorev1.CapacityTypeOnDemand)
		onDemand = m.plan(nil, stevedorev1.CapacityTypeOnDemand)
	}
	b.ReportMetric(none.bill, "bill-no-floor-$/h")
	b.ReportMetric(floored.bill, "bill-floor-20%-$/h")
	b.ReportMetric(onDemand.bill, "bill-all-on-demand-$/h")
	b.ReportMetric(float64(floored.onDemand)/float64(len(m.pods)), "on-demand-share-floor")
	b.ReportMetric(float64(none.worstPool), "pods-in-largest-spot-pool-no-floor")
	b.ReportMetric(float64(floored.worstPool), "pods-in-largest-spot-pool-floor")
	b.Logf("no floor: $%.4f/h, %d pods on on-demand, %d in the largest spot pool; 20%% floor: $%.4f/h, %d on on-demand, %d in the largest spot pool; all on-demand: $%.4f/h",
		none.bill, none.onDemand, none.worstPool, floored.bill, floored.onDemand, floored.worstPool, onDemand.bill)
}

// BenchmarkSpotPoolCapBill plans the mix (spotMix) on spot only, with no cap and with a cap of 20 and of 10 pods
// per Spot pool on every workload (about 200 pods each). For each it reports the hourly bill, the most pods of one
// workload one pool holds (what an interruption storm in that pool takes from it) and the most pods of all
// workloads one pool holds.
func BenchmarkSpotPoolCapBill(b *testing.B) {
	m := newSpotMix(b)
	caps := []string{"", "20", "10"}
	outcomes := make([]spotOutcome, len(caps))
	for i := 0; i < b.N; i++ {
		for j, c := range caps {
			var annotations map[string]string
			if c != "" {
				annotations = map[string]string{poolcap.Annotation: c}
			}
			outcomes[j] = m.plan(annotations, stevedorev1.CapacityTypeSpot)
		}
	}
	for j, c := range caps {
		name := "no-cap"
		if c != "" {
			name = "cap-" + c
		}
		o := outcomes[j]
		b.ReportMetric(o.bill, "bill-"+name+"-$/h")
		b.ReportMetric(float64(o.worstWorkload), "workload-pods-in-a-pool-"+name)
		b.Logf("%s: $%.4f/h, at most %d pods of one workload and %d pods in all in one spot pool", name, o.bill, o.worstWorkload, o.worstPool)
	}
}

// BenchmarkSpotRiskPremium plans the mix (spotMix) on spot only, then has every node of the spot pool holding the
// most pods interrupted, and plans the mix again five minutes later, once the unavailable-offerings cache has let
// the pool go: without the interruption history (the pool is as cheap as before, and takes as many pods) and with
// it (each interruption adds half the pool's price, fading over an hour). It reports how many pods the
// interrupted pool takes in each plan, and the bill at list price.
func BenchmarkSpotRiskPremium(b *testing.B) {
	m := newSpotMix(b)
	var before, without, with spotOutcome
	for i := 0; i < b.N; i++ {
		m.risk = nil
		before = m.plan(nil, stevedorev1.CapacityTypeSpot)
		without = m.plan(nil, stevedorev1.CapacityTypeSpot)
		clk := clocktesting.NewFakeClock(time.Date(2026, 12, 8, 12, 0, 0, 0, time.UTC))
		m.risk = spotrisk.NewHistory(clk)
		it, zone, _ := strings.Cut(before.largest, "/")
		for range before.nodes[before.largest] {
			m.risk.Record("default", it, zone)
		}
		clk.Step(5 * time.Minute)
		with = m.plan(nil, stevedorev1.CapacityTypeSpot)
	}
	b.ReportMetric(float64(before.pools[before.largest]), "pods-in-pool-before-storm")
	b.ReportMetric(float64(without.pools[before.largest]), "pods-in-pool-after-no-history")
	b.ReportMetric(float64(with.pools[before.largest]), "pods-in-pool-after-history")
	b.ReportMetric(without.bill, "bill-no-history-$/h")
	b.ReportMetric(with.bill, "bill-history-$/h")
	b.Logf("storm in %s (%d nodes, %d pods): five minutes later it takes %d pods without the history ($%.4f/h), %d with it ($%.4f/h); the largest pool then is %s with %d",
		before.largest, before.nodes[before.largest], before.pools[before.largest], without.pools[before.largest], without.bill,
		with.pools[before.largest], with.bill, with.largest, with.worstPool)
}
