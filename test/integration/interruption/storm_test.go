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
	"k8s.io/apimachinery/pkg/util/sets"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/sandbox/awsemu"
	"github.com/stevedore-dev/stevedore/test/integration/harness"
)

// spotPoolsOf groups pods on spot nodes by Spot pool ("<instance type>/<zone>"), each pool's node names and its
// pod count.
func spotPoolsOf(t *testing.T, pods []corev1.Pod) (nodes map[string]sets.Set[string], count map[string]int) {
	t.Helper()
	nodes, count = map[string]sets.Set[string]{}, map[string]int{}
	for _, p := range pods {
		node := harness.Node(t, sb, p.Spec.NodeName)
		if node.Labels[stevedorev1.LabelCapacityType] != stevedorev1.CapacityTypeSpot {
			continue
		}
		key := fmt.Sprintf("%s/%s", node.Labels[corev1.LabelInstanceTypeStable], node.Labels[corev1.LabelTopologyZone])
		if nodes[key] == nil {
			nodes[key] = sets.New[string]()
		}
		nodes[key].Insert(node.Name)
		count[key]++
	}
	return nodes, count
}

// stormLargestSpotPool interrupts at once every spot node of the Spot pool that holds most of app's replicas pods,
// waits until the instances are gone and app runs replicas pods again, none on them, and returns the pool and how
// many of app's pods it held.
func stormLargestSpotPool(t *testing.T, ns, app string, replicas int) (string, int) {
	t.Helper()
	byPool, count := spotPoolsOf(t, harness.WaitRunning(t, sb, ns, app, replicas))
	if len(byPool) == 0 {
		t.Fatalf("no pod of %s runs on spot: there is no spot pool to interrupt", app)
	}
	keys := make([]string, 0, len(byPool))
	for k := range byPool {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if count[keys[i]] != count[keys[j]] {
			return count[keys[i]] > count[keys[j]]
		}
		return keys[i] < keys[j]
	})
	pool, stormed := keys[0], byPool[keys[0]]
	var ids []string
	for _, node := range sets.List(stormed) {
		id, err := sb.Interrupt(node, awsemu.NoticeSpot)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	t.Logf("storm: interrupted the %d nodes of spot pool %s, holding %d pods of %s", stormed.Len(), pool, count[pool], app)
	harness.EventuallyWithin(t, 3*time.Minute, "the interrupted instances to be terminated", func(context.Context) (bool, error) {
		for _, id := range ids {
			if s := sb.AWS.EC2.Instance(id).State; s != "shutting-down" && s != "terminated" {
				return false, nil
			}
		}
		return true, nil
	})
	harness.EventuallyWithin(t, 3*time.Minute, "no pod of "+app+" on an interrupted node", func(ctx context.Context) (bool, error) {
		pods, err := harness.RunningPods(ctx, sb, ns, app)
		if err != nil || len(pods) != replicas {
			return false, err
		}
		for _, p := range pods {
			if stormed.Has(p.Spec.NodeName) {
				return false, nil
			}
		}
		return true, nil
	})
	return pool, count[pool]
}

// claimsOf returns the names of a NodePool's NodeClaims that are not being deleted.
func claimsOf(t *testing.T, pool string) sets.Set[string] {
	t.Helper()
	out := sets.New[string]()
	for _, c := range harness.LiveNodeClaimsOf(t, sb, pool) {
		out.Insert(c.Name)
	}
	return out
}

// waitConsolidated waits until one of before's NodeClaims is gone and none of the NodePool's is being deleted.
func waitConsolidated(t *testing.T, pool string, before sets.Set[string], what string) {
	t.Helper()
	harness.EventuallyWithin(t, 3*time.Minute, what, func(context.Context) (bool, error) {
		now := sets.New[string]()
		deleting := false
		for _, c := range harness.NodeClaimsOf(t, sb, pool) {
			now.Insert(c.Name)
			deleting = deleting || c.DeletionTimestamp != nil
		}
		return !deleting && before.Difference(now).Len() > 0, nil
	})
}
