/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package disruption

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/deletioncost"
	"github.com/stevedore-dev/stevedore/test/integration/harness"
)

// TestScaleInDeletesThePodsOfTheNodesConsolidationRemovesFirst runs six pods, one per node, waits until Stevedore
// has ranked the first half of them (three pods, costs below 0) and left the others without a cost, scales the
// Deployment to three and checks that the ReplicaSet controller deleted the three ranked pods: those of the nodes
// consolidation removes first, which are left empty.
func TestScaleInDeletesThePodsOfTheNodesConsolidationRemovesFirst(t *testing.T) {
	ns := harness.Namespace(t, sb)
	harness.NodePool(t, sb, "steer", "steer", harness.WithRequirements(harness.Req(stevedorev1.LabelInstanceCPU, "In", "2")))
	harness.IsolatedDeployment(t, sb, harness.Deployment(ns, "web", 6, "1", "512Mi"), "steer")
	harness.WaitRunning(t, sb, ns, "web", 6)
	ranked := map[string]int{} // pod -> cost
	harness.EventuallyWithin(t, 2*time.Minute, "the first half of the pods ranked", func(ctx context.Context) (bool, error) {
		pods, err := harness.RunningPods(ctx, sb, ns, "web")
		if err != nil {
			return false, err
		}
		clear(ranked)
		for _, p := range pods {
			v, ok := p.Annotations[deletioncost.AnnotationDeletionCost]
			if !ok {
				continue
			}
			if p.Annotations[deletioncost.AnnotationManaged] != v {
				return false, fmt.Errorf("pod %s: cost %s is not the one Stevedore records (%q)", p.Name, v, p.Annotations[deletioncost.AnnotationManaged])
			}
			n, err := strconv.Atoi(v)
			if err != nil {
				return false, err
			}
			if n >= 0 {
				return false, fmt.Errorf("pod %s: cost %d is not below 0, the cost of a pod without one", p.Name, n)
			}
			ranked[p.Name] = n
		}
		return len(pods) == 6 && len(ranked) == 3, nil
	})
	harness.Scale(t, sb, ns, "web", 3)
	kept := harness.WaitRunning(t, sb, ns, "web", 3)
	for _, p := range kept {
		if c, ok := ranked[p.Name]; ok {
			t.Errorf("the ReplicaSet kept pod %s of cost %d and deleted one without a cost: scale-in was not steered (ranked %v)",
				p.Name, c, ranked)
		}
	}
}
