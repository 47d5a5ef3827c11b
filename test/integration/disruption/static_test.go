/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package disruption

import (
	"context"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/provision"
	"github.com/stevedore-dev/stevedore/test/integration/harness"
)

// waitStaticNodes waits until the NodePool has exactly n live NodeClaims, all initialized, none being disrupted,
// and its status says so; it returns their names.
func waitStaticNodes(t *testing.T, pool string, n int) map[string]bool {
	t.Helper()
	var names map[string]bool
	harness.EventuallyWithin(t, 3*time.Minute, fmt.Sprintf("NodePool %s at %d ready nodes", pool, n), func(ctx context.Context) (bool, error) {
		names = map[string]bool{}
		for _, c := range harness.NodeClaimsOf(t, sb, pool) {
			if c.DeletionTimestamp != nil || !c.IsInitialized() || c.Status.DisruptionReason != "" {
				return false, nil
			}
			names[c.Name] = true
		}
		if len(names) != n {
			return false, nil
		}
		np, err := sb.Stevedore.StevedoreV1().NodePools().Get(ctx, pool, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return np.Status.Nodes == int64(n) && np.Status.ReadyNodes == int64(n), nil
	})
	return names
}

// wantOneNodePerZone checks that the NodePool's live nodes are in as many zones as there are nodes (three or fewer
// nodes over the sandbox's three zones).
func wantOneNodePerZone(t *testing.T, pool, when string) {
	t.Helper()
	zones := map[string]int{}
	for _, c := range harness.LiveNodeClaimsOf(t, sb, pool) {
		zones[c.Status.Zone]++
	}
	for z, n := range zones {
		if n > 1 {
			t.Errorf("%s: %d nodes of NodePool %s in %s (%v), want them spread one per zone", when, n, pool, z, zones)
		}
	}
}

func setReplicas(t *testing.T, pool string, n int64) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		np, err := sb.Stevedore.StevedoreV1().NodePools().Get(harness.Context(t), pool, metav1.GetOptions{})
		if err != nil {
			return err
		}
		np.Spec.Replicas = &n
		_, err = sb.Stevedore.StevedoreV1().NodePools().Update(harness.Context(t), np, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestAStaticNodePoolHoldsItsSize: a static NodePool of 3 launches 3 nodes with no pod asking for them, keeps them
// although they are empty (consolidation runs every second here), replaces them one at a time when they drift,
// replaces a NodeClaim deleted by hand, and follows replicas edits up and down.
func TestAStaticNodePoolHoldsItsSize(t *testing.T) {
	three := int64(3)
	harness.NodePool(t, sb, "static", "static", func(np *stevedorev1.NodePool) {
		np.Spec.Replicas = &three
		np.Spec.Disruption.Budgets = []stevedorev1.Budget{{Nodes: "100%"}}
	})
	first := waitStaticNodes(t, "static", 3)
	wantOneNodePerZone(t, "static", "launched")
	disrupting := watchDisrupting(t, "static")

	// drift: a new template label changes the NodePool's hash under every node
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		np, err := sb.Stevedore.StevedoreV1().NodePools().Get(harness.Context(t), "static", metav1.GetOptions{})
		if err != nil {
			return err
		}
		np.Spec.Template.ObjectMeta.Labels = map[string]string{"generation": "2"}
		_, err = sb.Stevedore.StevedoreV1().NodePools().Update(harness.Context(t), np, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	harness.EventuallyWithin(t, 4*time.Minute, "every drifted node replaced", func(ctx context.Context) (bool, error) {
		live := 0
		for _, c := range harness.NodeClaimsOf(t, sb, "static") {
			if first[c.Name] {
				return false, nil
			}
			if c.DeletionTimestamp == nil {
				live++
			}
		}
		return live == 3, nil
	})
	if got := disrupting(); got != 1 {
		t.Errorf("at most %d nodes were being disrupted at once; static NodePools replace one at a time (0: none seen)", got)
	}
	second := waitStaticNodes(t, "static", 3)
	wantOneNodePerZone(t, "static", "after the drift replacements")

	// a NodeClaim deleted by hand comes back
	var victim string
	for name := range second {
		victim = name
		break
	}
	if err := sb.Stevedore.StevedoreV1().NodeClaims().Delete(harness.Context(t), victim, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	third := waitStaticNodes(t, "static", 3)
	wantOneNodePerZone(t, "static", "after a NodeClaim was deleted")
	if third[victim] {
		t.Fatalf("the deleted NodeClaim %s is still there", victim)
	}

	setReplicas(t, "static", 5)
	waitStaticNodes(t, "static", 5)
	setReplicas(t, "static", 2)
	waitStaticNodes(t, "static", 2)
	setReplicas(t, "static", 0)
	waitStaticNodes(t, "static", 0)
}

// TestPendingPodsDoNotGrowAStaticNodePool: a pod that only a static NodePool's nodes could take (it tolerates
// the NodePool's taint, selects its label) stays Pending when those nodes are full; no node is launched for it.
func TestPendingPodsDoNotGrowAStaticNodePool(t *testing.T) {
	ns := harness.Namespace(t, sb)
	one := int64(1)
	harness.NodePool(t, sb, "static-full", "static-full", func(np *stevedorev1.NodePool) { np.Spec.Replicas = &one },
		harness.WithRequirements(harness.Req(stevedorev1.LabelInstanceCPU, "In", "2")))
	waitStaticNodes(t, "static-full", 1)
	pods, names := harness.Pods(ns, "static-full", "big", 2, "1500m", "512Mi")
	harness.CreatePods(t, sb, pods...)
	var pending string
	harness.EventuallyWithin(t, 2*time.Minute, "one pod bound to the static node and the other pending", func(ctx context.Context) (bool, error) {
		bound := 0
		for _, n := range names {
			p, err := sb.Kube.CoreV1().Pods(ns).Get(ctx, n, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			if p.Spec.NodeName != "" {
				bound++
			} else {
				pending = n
			}
		}
		return bound == 1, nil
	})
	// the provisioner solved for the pending pod and found no NodePool that may launch for it
	note := harness.WaitEvent(t, sb, pending, provision.ReasonFailedProvision)
	t.Logf("%s: %s", pending, note)
	if n := len(harness.NodeClaimsOf(t, sb, "static-full")); n != 1 {
		t.Errorf("%d NodeClaims in the static NodePool, want 1: pending pods made it grow", n)
	}
}
