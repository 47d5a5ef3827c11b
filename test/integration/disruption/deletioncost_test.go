/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package disruption

import (
	"context"
	"strconv"
	"testing"
	"time"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/deletioncost"
	"github.com/stevedore-dev/stevedore/test/integration/harness"
)

// TestScaleInDeletesThePodsOfTheNodesConsolidationRemovesFirst runs six pods, one per node, waits until Stevedore
// has set their deletion costs, scales the Deployment to three and checks that the ReplicaSet controller deleted
// the three cheapest pods: those of the nodes consolidation removes first, which are left empty.
func TestScaleInDeletesThePodsOfTheNodesConsolidationRemovesFirst(t *testing.T) {
	ns := harness.Namespace(t, sb)
	harness.NodePool(t, sb, "steer", "steer", harness.WithRequirements(harness.Req(stevedorev1.LabelInstanceCPU, "In", "2")))
	harness.IsolatedDeployment(t, sb, harness.Deployment(ns, "web", 6, "1", "512Mi"), "steer")
	harness.WaitRunning(t, sb, ns, "web", 6)
	costs := map[string]int{} // pod -> cost
	harness.EventuallyWithin(t, 2*time.Minute, "every pod's deletion cost set", func(ctx context.Context) (bool, error) {
		pods, err := harness.RunningPods(ctx, sb, ns, "web")
		if err != nil {
			return false, err
		}
		clear(costs)
		for _, p := range pods {
			v, ok := p.Annotations[deletioncost.AnnotationDeletionCost]
			if !ok || p.Annotations[deletioncost.AnnotationManaged] != v {
				return false, nil
			}
			n, err := strconv.Atoi(v)
			if err != nil {
				return false, err
			}
			costs[p.Name] = n
		}
		return len(costs) == 6, nil
	})
	harness.Scale(t, sb, ns, "web", 3)
	kept := harness.WaitRunning(t, sb, ns, "web", 3)
	lowestKept := 1 << 30
	for _, p := range kept {
		c, ok := costs[p.Name]
		if !ok {
			t.Fatalf("pod %s was not among the six", p.Name)
		}
		lowestKept = min(lowestKept, c)
	}
	var deleted []int
	for name, c := range costs {
		found := false
		for _, p := range kept {
			found = found || p.Name == name
		}
		if !found {
			deleted = append(deleted, c)
		}
	}
	// nodes alike cost the same (the ReplicaSet controller breaks the tie, and either node empties): a pod deleted
	// must not cost more than one kept
	for _, c := range deleted {
		if c > lowestKept {
			t.Errorf("the ReplicaSet deleted a pod of cost %d and kept one of cost %d: scale-in was not steered (costs %v)", c, lowestKept, costs)
		}
	}
}
