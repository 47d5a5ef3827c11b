/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package provisioning

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/test/integration/harness"
)

// TestMetricsEventsAndStatusFollowALaunch launches nodes for two pods and checks that the metrics move, that the
// pods and the NodeClaim carry events saying what happened, that the NodePool's status shows its nodes and cost,
// and that a pod no NodePool can run gets an event with the precise reason.
func TestMetricsEventsAndStatusFollowALaunch(t *testing.T) {
	pool := map[string]string{"nodepool": "observe"}
	bound0 := harness.Metric(t, "stevedore_pods_bound_duration_seconds", nil)
	batches0 := harness.Metric(t, "stevedore_provisioning_batch_pods", nil)
	fleets0 := harness.Metric(t, "stevedore_cloudprovider_api_calls_total", map[string]string{"service": "EC2", "operation": "CreateFleet", "error": ""})
	unschedulable0 := harness.Metric(t, "stevedore_provisioning_unschedulable_pods_total", nil)

	ns := harness.Namespace(t, sb)
	harness.NodePool(t, sb, "observe", "observe")
	ps, names := harness.Pods(ns, "observe", "obs", 2, "1", "1Gi")
	harness.CreatePods(t, sb, ps...)
	bound := harness.WaitBound(t, sb, ns, names)

	if got := harness.Metric(t, "stevedore_nodeclaims_created_total", map[string]string{"nodepool": "observe", "reason": "provisioning"}); got < 1 {
		t.Errorf("stevedore_nodeclaims_created_total{nodepool=observe} = %v, want at least 1", got)
	}
	harness.Eventually(t, "stevedore_nodes_created_total for the NodePool", func(context.Context) (bool, error) {
		return harness.Metric(t, "stevedore_nodes_created_total", pool) >= 1, nil
	})
	for _, c := range []struct {
		name      string
		got, want float64
	}{
		{"stevedore_pods_bound_duration_seconds (count)", harness.Metric(t, "stevedore_pods_bound_duration_seconds", nil) - bound0, 2},
		{"stevedore_provisioning_batch_pods (count)", harness.Metric(t, "stevedore_provisioning_batch_pods", nil) - batches0, 1},
		{"stevedore_cloudprovider_api_calls_total{EC2,CreateFleet}", harness.Metric(t, "stevedore_cloudprovider_api_calls_total",
			map[string]string{"service": "EC2", "operation": "CreateFleet", "error": ""}) - fleets0, 1},
	} {
		if c.got < c.want {
			t.Errorf("%s went up by %v, want at least %v", c.name, c.got, c.want)
		}
	}

	// events on a pod and on its NodeClaim: the pod's names the NodeClaim it waits for, the NodeClaim's its node
	// and its pods
	node, err := sb.Kube.CoreV1().Nodes().Get(context.Background(), bound[names[0]].Spec.NodeName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	claim := node.Labels[stevedorev1.LabelNodeClaim]
	if e := harness.WaitEvent(t, sb, names[0], "Nominated"); !strings.Contains(e, claim) {
		t.Errorf("the Nominated event does not name the NodeClaim %s: %s", claim, e)
	}
	if e := harness.WaitEvent(t, sb, claim, "Launched"); !strings.Contains(e, node.Name) || !strings.Contains(e, ns+"/"+names[0]) {
		t.Errorf("the Launched event does not name the node %s and the pod %s: %s", node.Name, names[0], e)
	}

	// the NodePool's status and gauges
	harness.EventuallyWithin(t, time.Minute, "the NodePool's status to show its nodes and cost", func(ctx context.Context) (bool, error) {
		np, err := sb.Stevedore.StevedoreV1().NodePools().Get(ctx, "observe", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		live := harness.LiveNodeClaimsOf(t, sb, "observe")
		cpu := np.Status.Resources[corev1.ResourceCPU]
		return np.Status.Nodes == int64(len(live)) && np.Status.HourlyCost != "" && np.Status.HourlyCost != "0.0000" &&
			meta.IsStatusConditionTrue(np.Status.Conditions, "Ready") &&
			cpu.Value() >= 2 && harness.Metric(t, "stevedore_nodepool_nodes", pool) == float64(len(live)) &&
			harness.Metric(t, "stevedore_nodepool_hourly_cost_dollars", pool) > 0, nil
	})

	// a pod no NodePool can run says why
	huge := harness.Isolated(harness.Pod(ns, "huge", "1000", "1Gi"), "observe")
	harness.CreatePods(t, sb, huge)
	e := harness.WaitEvent(t, sb, "huge", "FailedProvisioning")
	t.Logf("event on the pod no NodePool can run: %s", e)
	if !strings.Contains(e, "cpu") {
		t.Errorf("the FailedProvisioning event does not say the pod's cpu is what no instance type has: %s", e)
	}
	harness.Eventually(t, "stevedore_provisioning_unschedulable_pods_total to count the pod", func(context.Context) (bool, error) {
		return harness.Metric(t, "stevedore_provisioning_unschedulable_pods_total", nil) > unschedulable0, nil
	})

	// termination is counted with its reason
	if err := sb.Kube.CoreV1().Pods(ns).Delete(context.Background(), "huge", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	harness.DeleteNodePool(t, sb, "observe")
	if got := harness.Metric(t, "stevedore_nodes_terminated_total", pool); got < 1 {
		t.Errorf("stevedore_nodes_terminated_total{nodepool=observe} = %v after the NodePool was deleted, want at least 1", got)
	}
}
