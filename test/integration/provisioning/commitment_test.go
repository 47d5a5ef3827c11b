/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package provisioning

import (
	"context"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/cloud/catalog"
	"github.com/stevedore-dev/stevedore/pkg/cost"
	"github.com/stevedore-dev/stevedore/test/integration/harness"
)

// TestASavingsPlanIsFilledBeforeSpotIsBought: with an m5 Savings Plan whose room takes two m5.large (0.14 an hour
// at 28% off their 0.096), four pods that need a node each, in a NodePool of spot and on-demand, get two on-demand
// m5 nodes under the plan and two spot nodes; the Commitment's status, its metrics and `scheduler cost` show the
// plan used by those two nodes, and the bill with it.
func TestASavingsPlanIsFilledBeforeSpotIsBought(t *testing.T) {
	const pool, plan = "committed", "m5-plan"
	ctx := context.Background()
	_, err := sb.Stevedore.StevedoreV1().Commitments().Create(ctx, &stevedorev1.Commitment{ObjectMeta: metav1.ObjectMeta{Name: plan},
		Spec: stevedorev1.CommitmentSpec{SavingsPlan: &stevedorev1.SavingsPlan{Type: stevedorev1.SavingsPlanEC2Instance, InstanceFamily: "m5",
			HourlyCommitment: "0.14", DiscountPercent: "28"}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = sb.Stevedore.StevedoreV1().Commitments().Delete(context.Background(), plan, metav1.DeleteOptions{})
	})
	harness.NodePool(t, sb, pool, pool, harness.WithRequirements(
		harness.Req(stevedorev1.LabelCapacityType, "In", stevedorev1.CapacityTypeSpot, stevedorev1.CapacityTypeOnDemand)))
	ns := harness.Namespace(t, sb)
	pods, _ := harness.Pods(ns, pool, "web", 4, "1", "2Gi", func(p *corev1.Pod) {
		p.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}, TopologyKey: corev1.LabelHostname}}}}
	})
	harness.CreatePods(t, sb, pods...)
	harness.WaitRunning(t, sb, ns, "web", 4)

	var covered, spot []stevedorev1.NodeClaim
	harness.EventuallyWithin(t, time.Minute, "the pool's four nodes launched", func(context.Context) (bool, error) {
		covered, spot = covered[:0], spot[:0]
		claims := harness.LiveNodeClaimsOf(t, sb, pool)
		for _, c := range claims {
			switch {
			case c.Status.InstanceType == "":
				return false, nil
			case c.Annotations[stevedorev1.AnnotationCommitment] != "":
				covered = append(covered, c)
			case c.Status.CapacityType == stevedorev1.CapacityTypeSpot:
				spot = append(spot, c)
			}
		}
		return len(claims) == 4, nil
	})
	used := 0.0
	for _, c := range covered {
		if c.Annotations[stevedorev1.AnnotationCommitment] != plan || c.Status.CapacityType != stevedorev1.CapacityTypeOnDemand ||
			!strings.HasPrefix(c.Status.InstanceType, "m5.") {
			t.Errorf("NodeClaim %s under %q launched %s %s, want an on-demand m5 under %s", c.Name, c.Annotations[stevedorev1.AnnotationCommitment],
				c.Status.CapacityType, c.Status.InstanceType, plan)
		}
		price, err := strconv.ParseFloat(c.Status.Price, 64)
		if err != nil {
			t.Fatalf("NodeClaim %s price %q: %v", c.Name, c.Status.Price, err)
		}
		used += price * 0.72
	}
	if len(covered) != 2 || len(spot) != 2 {
		t.Fatalf("%d nodes under the plan and %d spot, want 2 and 2", len(covered), len(spot))
	}

	harness.EventuallyWithin(t, time.Minute, "the Commitment's status to show its two nodes", func(ctx context.Context) (bool, error) {
		c, err := sb.Stevedore.StevedoreV1().Commitments().Get(ctx, plan, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		got, _ := strconv.ParseFloat(c.Status.Used, 64)
		return c.Status.CoveredNodes == 2 && math.Abs(got-used) < 1e-3 && c.Status.Kind == "SavingsPlan/EC2Instance" && c.Status.Capacity == "0.14", nil
	})
	harness.EventuallyWithin(t, time.Minute, "the commitment metrics", func(context.Context) (bool, error) {
		return math.Abs(harness.Metric(t, "stevedore_commitment_used", map[string]string{"commitment": plan})-used) < 1e-3 &&
			harness.Metric(t, "stevedore_commitment_capacity", map[string]string{"commitment": plan}) == 0.14, nil
	})

	objs, err := cost.Live(ctx, sb.Kube, sb.Stevedore)
	if err != nil {
		t.Fatal(err)
	}
	r, _, err := cost.FromObjects(ctx, objs, catalog.Default())
	if err != nil {
		t.Fatal(err)
	}
	if r.Commitments == nil || len(r.Commitments.Commitments) != 1 {
		t.Fatalf("scheduler cost shows no commitment: %+v", r.Commitments)
	}
	u := r.Commitments.Commitments[0]
	if u.Name != plan || u.Nodes != 2 || math.Abs(u.Used-used) > 1e-3 {
		t.Errorf("scheduler cost: %s used %v on %d nodes, want %s used %v on 2", u.Name, u.Used, u.Nodes, plan, used)
	}
	for _, c := range covered {
		if got := r.Commitments.Covered[c.Status.NodeName]; math.Abs(got-1) > 1e-9 {
			t.Errorf("node %s covered %v of its hour, want all of it", c.Status.NodeName, got)
		}
	}
	t.Logf("bill with the plan %.4f an hour (fees %.4f), at list price %.4f; coverage %.0f%%",
		r.Commitments.Bill(), r.Commitments.Fees, r.Commitments.OnDemand+r.Commitments.Spot, 100*r.Commitments.Ratio())
}
