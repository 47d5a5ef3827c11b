/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package interruption

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/poolcap"
	"github.com/stevedore-dev/stevedore/pkg/provision"
	"github.com/stevedore-dev/stevedore/test/integration/harness"
)

// TestACapPerSpotPoolBoundsWhatAStormTakes: a 20-replica Deployment on a spot-only NodePool, beside a filler, with
// a cap of 2 pods per Spot pool (instance type and zone), has at most 2 pods in any pool when it starts, after
// consolidation removes nodes once the filler leaves and it scales in to 12, after it scales back to 20, and after
// an interruption storm takes every node of the pool holding most of its pods, which takes at most 2 of them. Without the cap (the control run), the same
// storm takes more. A pod whose cap is not a count gets an InvalidSpotPoolCap event when a node is planned for it,
// and runs all the same.
func TestACapPerSpotPoolBoundsWhatAStormTakes(t *testing.T) {
	const replicas = 20
	for _, tc := range []struct {
		name, cap string
		most      int // the most pods of web a pool may hold (0: no cap)
	}{
		{name: "cap of 2", cap: "2", most: 2},
		{name: "no cap", cap: ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns := harness.Namespace(t, sb)
			pool := "poolcap"
			if tc.most == 0 {
				pool = "nocap"
			}
			harness.NodePool(t, sb, pool, pool, capacityType(stevedorev1.CapacityTypeSpot), func(np *stevedorev1.NodePool) {
				np.Spec.Disruption.ConsolidationPolicy = stevedorev1.ConsolidationPolicyWhenEmptyOrUnderutilized
				np.Spec.Disruption.ConsolidateAfter = stevedorev1.NewDuration(0)
			})
			filler := harness.Deployment(ns, "filler", 2, "3", "4Gi")
			harness.IsolatedDeployment(t, sb, filler, pool)
			web := harness.Deployment(ns, "web", replicas, "500m", "512Mi")
			if tc.cap != "" {
				web.Spec.Template.Annotations = map[string]string{poolcap.Annotation: tc.cap}
			}
			harness.IsolatedDeployment(t, sb, web, pool)
			held := func(stage string, replicas int) {
				t.Helper()
				_, count := spotPoolsOf(t, harness.WaitRunning(t, sb, ns, "web", replicas))
				most := 0
				for _, n := range count {
					most = max(most, n)
				}
				t.Logf("%s: %d pods of web in %d spot pools, at most %d in one: %v", stage, replicas, len(count), most, count)
				if tc.most > 0 && most > tc.most {
					t.Errorf("%s: a spot pool holds %d pods of web, over the cap of %d: %v", stage, most, tc.most, count)
				}
			}
			harness.WaitRunning(t, sb, ns, "filler", 2)
			held("start", replicas)

			before := claimsOf(t, pool)
			// the filler leaves and web scales in: consolidation removes the nodes left empty or underused, moving
			// pods only into pools with room under the cap (a capped pod's spot node is one instance type, so
			// spot-to-spot replacement, which wants many types to choose from, does not apply)
			harness.Scale(t, sb, ns, "filler", 0)
			harness.Scale(t, sb, ns, "web", 12)
			waitConsolidated(t, pool, before, "consolidation to remove or replace a node")
			held("consolidation", 12)
			harness.Scale(t, sb, ns, "web", replicas)
			held("scale-up", replicas)

			stormed, lost := stormLargestSpotPool(t, ns, "web", replicas)
			t.Logf("storm: spot pool %s held %d of the %d pods", stormed, lost, replicas)
			switch {
			case tc.most > 0 && lost > tc.most:
				t.Errorf("the storm took %d pods of web, over the cap of %d", lost, tc.most)
			case tc.most == 0 && lost <= 2:
				t.Errorf("without a cap the storm took %d pods of web: the control shows nothing the cap changes", lost)
			}
			held("storm", replicas)

			if tc.most > 0 {
				// large enough to need a node of its own: the event comes when a node is planned for the pod
				odd := harness.Isolated(harness.Pod(ns, "odd", "7500m", "1Gi"), pool)
				odd.Annotations = map[string]string{poolcap.Annotation: "lots"}
				if _, err := sb.Kube.CoreV1().Pods(ns).Create(context.Background(), odd, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
				t.Log(harness.WaitEvent(t, sb, "odd", provision.ReasonInvalidPoolCap))
				harness.EventuallyWithin(t, 3*time.Minute, "pod odd to run", func(ctx context.Context) (bool, error) {
					p, err := sb.Kube.CoreV1().Pods(ns).Get(ctx, "odd", metav1.GetOptions{})
					return err == nil && p.Spec.NodeName != "", err
				})
			}
		})
	}
}
