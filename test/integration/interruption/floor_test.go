/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package interruption

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/deletioncost"
	"github.com/stevedore-dev/stevedore/test/integration/harness"
)

// onDemandOf counts the pods that run on on-demand (or reserved) nodes.
func onDemandOf(t *testing.T, pods []corev1.Pod) int {
	t.Helper()
	n := 0
	for _, p := range pods {
		switch harness.Node(t, sb, p.Spec.NodeName).Labels[stevedorev1.LabelCapacityType] {
		case stevedorev1.CapacityTypeOnDemand, stevedorev1.CapacityTypeReserved:
			n++
		}
	}
	return n
}

// TestAnOnDemandFloorHoldsThroughScaleUpConsolidationAndAStorm: a Deployment whose pods ask for 20% on on-demand,
// on a NodePool that may launch spot or on-demand beside a filler, has its floor held when it starts (one of five on
// on-demand), after a scale-up to ten (two), after consolidation replaces the nodes the filler left underused, and
// after every spot node of the spot pool (instance type and zone) holding most of its pods is interrupted at once,
// and after a scale-in to three (one).
func TestAnOnDemandFloorHoldsThroughScaleUpConsolidationAndAStorm(t *testing.T) {
	ns := harness.Namespace(t, sb)
	const pool = "floor"
	harness.NodePool(t, sb, pool, pool, func(np *stevedorev1.NodePool) {
		np.Spec.Template.Spec.Requirements = append(np.Spec.Template.Spec.Requirements, stevedorev1.NodeSelectorRequirementWithMinValues{
			Key: stevedorev1.LabelCapacityType, Operator: "In", Values: []string{stevedorev1.CapacityTypeSpot, stevedorev1.CapacityTypeOnDemand}})
		np.Spec.Disruption.ConsolidationPolicy = stevedorev1.ConsolidationPolicyWhenEmptyOrUnderutilized
		np.Spec.Disruption.ConsolidateAfter = stevedorev1.NewDuration(0)
	})
	filler := harness.Deployment(ns, "filler", 2, "3", "4Gi")
	harness.IsolatedDeployment(t, sb, filler, pool)
	web := harness.Deployment(ns, "web", 5, "500m", "512Mi")
	web.Spec.Template.Annotations = map[string]string{stevedorev1.AnnotationOnDemandFloor: "20%"}
	harness.IsolatedDeployment(t, sb, web, pool)
	holds := func(stage string, replicas, want int) {
		t.Helper()
		pods := harness.WaitRunning(t, sb, ns, "web", replicas)
		if got := onDemandOf(t, pods); got < want {
			t.Errorf("%s: %d of the %d pods run on on-demand nodes, want at least %d", stage, got, replicas, want)
		} else {
			t.Logf("%s: %d of the %d pods run on on-demand nodes (at least %d)", stage, got, replicas, want)
		}
	}
	harness.WaitRunning(t, sb, ns, "filler", 2)
	holds("start", 5, 1)

	harness.Scale(t, sb, ns, "web", 10)
	holds("scale-up", 10, 2)

	before := claimsOf(t, pool)
	harness.Scale(t, sb, ns, "filler", 0)
	waitConsolidated(t, pool, before, "consolidation to replace a node the filler left")
	holds("consolidation", 10, 2)

	// the storm: every spot node of the spot pool that holds most pods is interrupted at once
	stormLargestSpotPool(t, ns, "web", 10)
	holds("storm", 10, 2)

	// a scale-in: the pods holding the floor on on-demand nodes are ranked last for deletion, so it still holds
	harness.EventuallyWithin(t, time.Minute, "the pods on on-demand nodes to be ranked last for deletion", func(ctx context.Context) (bool, error) {
		pods, err := harness.RunningPods(ctx, sb, ns, "web")
		if err != nil {
			return false, err
		}
		for _, p := range pods {
			onDemand := onDemandOf(t, []corev1.Pod{p}) == 1
			if ranked := p.Annotations[deletioncost.AnnotationDeletionCost] != ""; onDemand && !ranked {
				return false, nil
			}
		}
		return true, nil
	})
	harness.Scale(t, sb, ns, "web", 3)
	harness.EventuallyWithin(t, 3*time.Minute, "web to scale in to 3", func(ctx context.Context) (bool, error) {
		pods, err := sb.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
		return err == nil && len(pods.Items) == 3, err
	})
	holds("scale-in", 3, 1)
}
