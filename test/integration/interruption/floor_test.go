/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package interruption

import (
	"context"
	"fmt"
	"sort"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/deletioncost"
	"github.com/stevedore-dev/stevedore/pkg/sandbox/awsemu"
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

	before := sets.New[string]()
	for _, c := range harness.LiveNodeClaimsOf(t, sb, pool) {
		before.Insert(c.Name)
	}
	harness.Scale(t, sb, ns, "filler", 0)
	harness.EventuallyWithin(t, 3*time.Minute, "consolidation to replace a node the filler left", func(context.Context) (bool, error) {
		now := sets.New[string]()
		deleting := false
		for _, c := range harness.NodeClaimsOf(t, sb, pool) {
			now.Insert(c.Name)
			deleting = deleting || c.DeletionTimestamp != nil
		}
		return !deleting && before.Difference(now).Len() > 0, nil
	})
	holds("consolidation", 10, 2)

	// the storm: every spot node of the spot pool that holds most pods is interrupted at once
	pods := harness.WaitRunning(t, sb, ns, "web", 10)
	byPool := map[string][]string{}
	for _, p := range pods {
		node := harness.Node(t, sb, p.Spec.NodeName)
		if node.Labels[stevedorev1.LabelCapacityType] != stevedorev1.CapacityTypeSpot {
			continue
		}
		key := fmt.Sprintf("%s/%s", node.Labels[corev1.LabelInstanceTypeStable], node.Labels[corev1.LabelTopologyZone])
		byPool[key] = append(byPool[key], node.Name)
	}
	if len(byPool) == 0 {
		t.Fatal("no pod of web runs on spot: there is no spot pool to interrupt")
	}
	keys := make([]string, 0, len(byPool))
	for k := range byPool {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if len(byPool[keys[i]]) != len(byPool[keys[j]]) {
			return len(byPool[keys[i]]) > len(byPool[keys[j]])
		}
		return keys[i] < keys[j]
	})
	stormed := sets.List(sets.New(byPool[keys[0]]...))
	var ids []string
	for _, node := range stormed {
		id, err := sb.Interrupt(node, awsemu.NoticeSpot)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	t.Logf("storm: interrupted %d nodes of spot pool %s, holding %d of the pods", len(stormed), keys[0], len(byPool[keys[0]]))
	harness.EventuallyWithin(t, 3*time.Minute, "the interrupted instances to be terminated", func(context.Context) (bool, error) {
		for _, id := range ids {
			if s := sb.AWS.EC2.Instance(id).State; s != "shutting-down" && s != "terminated" {
				return false, nil
			}
		}
		return true, nil
	})
	harness.EventuallyWithin(t, 3*time.Minute, "no pod of web on an interrupted node", func(ctx context.Context) (bool, error) {
		pods, err := harness.RunningPods(ctx, sb, ns, "web")
		if err != nil || len(pods) != 10 {
			return false, err
		}
		for _, p := range pods {
			if sets.New(stormed...).Has(p.Spec.NodeName) {
				return false, nil
			}
		}
		return true, nil
	})
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
