/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package interruption

import (
	"context"
	"testing"
	"time"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/metrics"
	"github.com/stevedore-dev/stevedore/pkg/poolcap"
	"github.com/stevedore-dev/stevedore/pkg/provision"
	"github.com/stevedore-dev/stevedore/pkg/sandbox/awsemu"
	"github.com/stevedore-dev/stevedore/pkg/spotrisk"
	"github.com/stevedore-dev/stevedore/test/integration/harness"
)

// TestRepeatedInterruptionsFallBackToOnDemandUntilTheWindowPasses: a NodePool of spot and on-demand whose policy
// is "2/1m" runs four replicas on spot, at most two per pool (so on two spot nodes at least). A storm interrupts
// every one of those nodes: the NodePool falls back to on-demand (a SpotFallback event, the fallback counted), so
// the replacements are on-demand. Once a minute passes without another interruption, the NodePool may use spot
// again (a SpotRestored event) and consolidation moves the pods back to spot.
func TestRepeatedInterruptionsFallBackToOnDemandUntilTheWindowPasses(t *testing.T) {
	ns := harness.Namespace(t, sb)
	const pool = "fallback"
	harness.NodePool(t, sb, pool, pool, capacityType(stevedorev1.CapacityTypeSpot, stevedorev1.CapacityTypeOnDemand),
		func(np *stevedorev1.NodePool) {
			np.Annotations = map[string]string{spotrisk.Annotation: "2/1m"}
			np.Spec.Disruption.ConsolidationPolicy = stevedorev1.ConsolidationPolicyWhenEmptyOrUnderutilized
			np.Spec.Disruption.ConsolidateAfter = stevedorev1.NewDuration(0)
		})
	fallbacks := metricValue(t, metrics.NodePoolSpotFallbacks.WithLabelValues(pool))
	web := harness.Deployment(ns, "web", 4, "500m", "512Mi")
	web.Spec.Template.Annotations = map[string]string{poolcap.Annotation: "2"}
	harness.IsolatedDeployment(t, sb, web, pool)
	pods := harness.WaitRunning(t, sb, ns, "web", 4)
	if onDemandOf(t, pods) != 0 {
		t.Fatalf("%d pods of web start on on-demand: the spot nodes to interrupt are not there", onDemandOf(t, pods))
	}
	nodes, _ := spotPoolsOf(t, pods)
	var stormed []string
	for _, names := range nodes {
		stormed = append(stormed, names.UnsortedList()...)
	}
	if len(stormed) < 2 {
		t.Fatalf("web runs on %d spot nodes, want 2 or more", len(stormed))
	}
	for _, node := range stormed {
		if _, err := sb.Interrupt(node, awsemu.NoticeSpot); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("storm: interrupted %d spot nodes", len(stormed))
	t.Log(harness.WaitEvent(t, sb, pool, provision.ReasonSpotFallback))
	harness.EventuallyWithin(t, 3*time.Minute, "web to run on on-demand nodes only", func(ctx context.Context) (bool, error) {
		pods, err := harness.RunningPods(ctx, sb, ns, "web")
		return err == nil && len(pods) == 4 && onDemandOf(t, pods) == 4, err
	})
	if got := metricValue(t, metrics.NodePoolSpotFallbacks.WithLabelValues(pool)); got != fallbacks+1 {
		t.Errorf("fallbacks counted %v, want %v", got, fallbacks+1)
	}

	// a minute after the last interruption the NodePool may plan spot again: the first plan after that says so,
	// and consolidation replaces the on-demand nodes by cheaper spot ones
	t.Log(harness.WaitEvent(t, sb, pool, provision.ReasonSpotRestored))
	harness.EventuallyWithin(t, 5*time.Minute, "web to run on spot again", func(ctx context.Context) (bool, error) {
		pods, err := harness.RunningPods(ctx, sb, ns, "web")
		return err == nil && len(pods) == 4 && onDemandOf(t, pods) == 0, err
	})
}
