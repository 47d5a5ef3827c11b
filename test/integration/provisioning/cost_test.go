/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package provisioning

import (
	"context"
	"math"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/cloud/catalog"
	"github.com/stevedore-dev/stevedore/pkg/cost"
	"github.com/stevedore-dev/stevedore/test/integration/harness"
)

// TestAttributedCostsSumToTheBill runs known workloads in two namespaces on nodes of their own NodePool
// (on-demand) and reads the cluster's cost as `scheduler cost` does: the nodes are priced as the NodeClaims
// recorded at launch, the two namespaces, the DaemonSets and idle add up to the pool's nodes within a cent an hour,
// and each namespace's cost is what the binding-resource rule gives, worked out here from the nodes and pods
// alone. The scheduler's cost metrics show the same figures.
func TestAttributedCostsSumToTheBill(t *testing.T) {
	const pool = "cost"
	harness.NodePool(t, sb, pool, pool, func(np *stevedorev1.NodePool) {
		np.Spec.Template.Spec.Requirements = append(np.Spec.Template.Spec.Requirements,
			harness.Req(stevedorev1.LabelCapacityType, "In", stevedorev1.CapacityTypeOnDemand))
	})
	web, batch := harness.Namespace(t, sb), harness.Namespace(t, sb)
	harness.IsolatedDeployment(t, sb, harness.Deployment(web, "web", 3, "1", "1Gi"), pool)
	harness.IsolatedDeployment(t, sb, harness.Deployment(batch, "batch", 2, "500m", "6Gi"), pool)
	harness.WaitRunning(t, sb, web, "web", 3)
	harness.WaitRunning(t, sb, batch, "batch", 2)

	var r *cost.Report
	var mine []cost.NodeCost
	harness.EventuallyWithin(t, time.Minute, "the pool's nodes to be priced with all their pods", func(ctx context.Context) (bool, error) {
		objs, err := cost.Live(ctx, sb.Kube, sb.Stevedore)
		if err != nil {
			return false, err
		}
		if r, _, err = cost.FromObjects(ctx, objs, catalog.Default()); err != nil {
			return false, err
		}
		mine = mine[:0]
		pods := 0
		for _, n := range r.Nodes {
			if n.NodePool == pool {
				mine = append(mine, n)
				pods += len(n.Node.Pods)
			}
		}
		return len(mine) == len(harness.LiveNodeClaimsOf(t, sb, pool)) && pods >= 5, nil
	})

	recorded := map[string]float64{}
	for _, c := range harness.LiveNodeClaimsOf(t, sb, pool) {
		p, err := strconv.ParseFloat(c.Status.Price, 64)
		if err != nil {
			t.Fatalf("NodeClaim %s price %q: %v", c.Name, c.Status.Price, err)
		}
		recorded[c.Status.NodeName] = p
	}
	bill, split := 0.0, 0.0
	want := map[string]float64{}
	for _, n := range mine {
		bill += recorded[n.Name]
		split += n.Pods + n.DaemonSets + n.Idle
		if math.Abs(n.Price-recorded[n.Name]) > 1e-6 {
			t.Errorf("node %s priced %v, its NodeClaim recorded %v", n.Name, n.Price, recorded[n.Name])
		}
		for ns, c := range expectedSplit(n) {
			want[ns] += c
		}
	}
	if math.Abs(split-bill) > 0.01 {
		t.Errorf("the pool's nodes split into %.4f an hour, their bill is %.4f", split, bill)
	}
	for _, ns := range []string{web, batch} {
		if math.Abs(r.ByNamespace[ns]-want[ns]) > 1e-6 || want[ns] <= 0 {
			t.Errorf("namespace %s costs %.6f an hour, the rule gives %.6f", ns, r.ByNamespace[ns], want[ns])
		}
	}
	harness.EventuallyWithin(t, time.Minute, "the cost metrics to show the namespaces", func(context.Context) (bool, error) {
		for _, ns := range []string{web, batch} {
			if math.Abs(harness.Metric(t, "stevedore_cost_namespace_hourly_dollars", map[string]string{"namespace": ns})-want[ns]) > 0.01 {
				return false, nil
			}
		}
		return harness.Metric(t, "stevedore_cost_workload_hourly_dollars", map[string]string{"namespace": web, "kind": "Deployment", "name": "web"}) > 0, nil
	})
}

// expectedSplit works out a node's cost by namespace from its pods' requests: the resource (cpu or memory) they
// request the largest fraction of, each pod paying its fraction of it.
func expectedSplit(n cost.NodeCost) map[string]float64 {
	var cpu, mem float64
	for _, pod := range n.Node.Pods {
		for _, c := range pod.Spec.Containers {
			cpu += c.Resources.Requests.Cpu().AsApproximateFloat64()
			mem += c.Resources.Requests.Memory().AsApproximateFloat64()
		}
	}
	allocCPU, allocMem := n.Allocatable.Cpu().AsApproximateFloat64(), n.Allocatable.Memory().AsApproximateFloat64()
	byMemory := mem/allocMem > cpu/allocCPU
	out := map[string]float64{}
	for _, pod := range n.Node.Pods {
		var q resource.Quantity
		for _, c := range pod.Spec.Containers {
			if byMemory {
				q.Add(*c.Resources.Requests.Memory())
			} else {
				q.Add(*c.Resources.Requests.Cpu())
			}
		}
		of := allocCPU
		if byMemory {
			of = allocMem
		}
		if pod.Status.Phase != corev1.PodSucceeded && pod.Status.Phase != corev1.PodFailed {
			out[pod.Namespace] += n.Price * q.AsApproximateFloat64() / of
		}
	}
	return out
}
