/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package disruption

import (
	"context"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/disruption"
	"github.com/stevedore-dev/stevedore/test/integration/harness"
)

// onePodPerNode starts n pods of 3 CPU on 4-vCPU nodes of a new NodePool (one pod per node) and returns the
// pods' node names, sorted.
func onePodPerNode(t *testing.T, ns, pool string, n int) []string {
	t.Helper()
	harness.NodePool(t, sb, pool, pool, harness.WithRequirements(harness.Req(stevedorev1.LabelInstanceCPU, "In", "4")))
	harness.IsolatedDeployment(t, sb, harness.Deployment(ns, "app", int32(n), "3", "1Gi"), pool) //nolint:gosec // G115: n is the few nodes a test starts
	var nodes []string
	for _, p := range harness.WaitRunning(t, sb, ns, "app", n) {
		nodes = append(nodes, p.Spec.NodeName)
	}
	slices.Sort(nodes)
	if len(slices.Compact(slices.Clone(nodes))) != n {
		t.Fatalf("%d pods on nodes %v; the test needs one pod per node", n, nodes)
	}
	return nodes
}

// claimOfNode returns the name of the node's NodeClaim.
func claimOfNode(t *testing.T, node string) string {
	t.Helper()
	return harness.Node(t, sb, node).Labels[stevedorev1.LabelNodeClaim]
}

func claimGone(ctx context.Context, name string) (bool, error) {
	cl, err := sb.Stevedore.StevedoreV1().NodeClaims().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, err
	}
	return cl.DeletionTimestamp != nil, nil
}

// TestAnUnhealthyNodeIsReplaced stops the kubelet of one of five nodes: past its toleration (45 s here) the node
// is replaced, its pods run on the replacement, and the repair is counted.
func TestAnUnhealthyNodeIsReplaced(t *testing.T) {
	ns := harness.Namespace(t, sb)
	nodes := onePodPerNode(t, ns, "repair", 5)
	broken := nodes[2]
	claim := claimOfNode(t, broken)
	before := harness.Metric(t, "stevedore_node_repair_actions_total", map[string]string{"nodepool": "repair", "action": "replace"})
	if err := sb.BreakNode(harness.Context(t), broken, corev1.NodeReady, corev1.ConditionUnknown, "KubeletStopped"); err != nil {
		t.Fatal(err)
	}
	harness.EventuallyWithin(t, 3*time.Minute, "the unhealthy node's NodeClaim to be deleted", func(ctx context.Context) (bool, error) {
		return claimGone(ctx, claim)
	})
	harness.EventuallyWithin(t, 3*time.Minute, "five pods Running, none on the broken node", func(ctx context.Context) (bool, error) {
		pods, err := harness.RunningPods(ctx, sb, ns, "app")
		if err != nil || len(pods) != 5 {
			return false, err
		}
		for _, p := range pods {
			if p.Spec.NodeName == broken {
				return false, nil
			}
		}
		return true, nil
	})
	if got := harness.Metric(t, "stevedore_node_repair_actions_total", map[string]string{"nodepool": "repair", "action": "replace"}); got != before+1 {
		t.Errorf("repair replacements counted %v, want %v", got, before+1)
	}
	if n := len(harness.LiveNodeClaimsOf(t, sb, "repair")); n != 5 {
		t.Errorf("%d live NodeClaims, want 5 (one replacement)", n)
	}
}

// TestRepairWaitsWhileAThirdOfANodePoolIsUnhealthy breaks two of six nodes at once (a third: an outage, not two
// broken nodes): repair replaces none of them and says why; once one recovers, the other (one of six, within
// 20%) is replaced.
func TestRepairWaitsWhileAThirdOfANodePoolIsUnhealthy(t *testing.T) {
	ns := harness.Namespace(t, sb)
	nodes := onePodPerNode(t, ns, "outage", 6)
	broken := []string{nodes[0], nodes[3]}
	claims := []string{claimOfNode(t, broken[0]), claimOfNode(t, broken[1])}
	brokenAt := time.Now()
	for _, n := range broken {
		if err := sb.BreakNode(harness.Context(t), n, corev1.NodeReady, corev1.ConditionUnknown, "ZoneOutage"); err != nil {
			t.Fatal(err)
		}
	}
	note := harness.WaitEvent(t, sb, "outage", disruption.ReasonNodeRepairBlocked)
	t.Logf("event: %s", note)
	// the toleration (45 s) runs out, then repair looks at the NodePool three more times: it must still wait
	evaluations := func() float64 {
		return harness.Metric(t, "stevedore_disruption_evaluation_duration_seconds", map[string]string{"method": disruption.MethodRepair})
	}
	mark := 0.0
	harness.EventuallyWithin(t, 3*time.Minute, "three repair passes after the toleration ran out", func(context.Context) (bool, error) {
		if time.Since(brokenAt) < 50*time.Second {
			mark = evaluations()
			return false, nil
		}
		return evaluations() >= mark+3, nil
	})
	for _, c := range claims {
		if gone, err := claimGone(harness.Context(t), c); err != nil || gone {
			t.Fatalf("NodeClaim %s was repaired while a third of the NodePool was unhealthy (err %v)", c, err)
		}
	}
	if g := harness.Metric(t, "stevedore_node_repair_blocked", map[string]string{"nodepool": "outage"}); g != 1 {
		t.Errorf("stevedore_node_repair_blocked = %v, want 1", g)
	}
	if err := sb.HealNode(harness.Context(t), broken[0]); err != nil {
		t.Fatal(err)
	}
	harness.EventuallyWithin(t, 3*time.Minute, "the node still unhealthy to be repaired", func(ctx context.Context) (bool, error) {
		return claimGone(ctx, claims[1])
	})
	if gone, err := claimGone(harness.Context(t), claims[0]); err != nil || gone {
		t.Errorf("the recovered node's NodeClaim %s was deleted (err %v)", claims[0], err)
	}
	harness.WaitRunning(t, sb, ns, "app", 6)
}

// TestAKernelFaultRebootsTheNodeFirst reports KernelReady False on one node: past its toleration the instance is
// rebooted through EC2 (not replaced), which clears the fault; the node and its NodeClaim stay.
func TestAKernelFaultRebootsTheNodeFirst(t *testing.T) {
	ns := harness.Namespace(t, sb)
	nodes := onePodPerNode(t, ns, "reboot", 5)
	broken := nodes[1]
	claim := claimOfNode(t, broken)
	if err := sb.BreakNode(harness.Context(t), broken, disruption.ConditionKernelReady, corev1.ConditionFalse, "KernelDeadlock"); err != nil {
		t.Fatal(err)
	}
	harness.WaitEvent(t, sb, claim, disruption.ReasonNodeRebooted)
	harness.EventuallyWithin(t, 2*time.Minute, "the rebooted node to report KernelReady True", func(ctx context.Context) (bool, error) {
		node, err := sb.Kube.CoreV1().Nodes().Get(ctx, broken, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, c := range node.Status.Conditions {
			if c.Type == disruption.ConditionKernelReady {
				return c.Status == corev1.ConditionTrue, nil
			}
		}
		return false, nil
	})
	cl, err := sb.Stevedore.StevedoreV1().NodeClaims().Get(harness.Context(t), claim, metav1.GetOptions{})
	if err != nil || cl.DeletionTimestamp != nil {
		t.Fatalf("the rebooted node's NodeClaim: %v, deleting %v", err, cl != nil && cl.DeletionTimestamp != nil)
	}
	reboots := 0
	for _, inst := range sb.AWS.EC2.Instances() {
		if inst.ID == cl.Status.InstanceID {
			reboots = inst.Reboots
		}
	}
	if reboots != 1 {
		t.Errorf("instance %s rebooted %d times, want 1", cl.Status.InstanceID, reboots)
	}
	if n := len(harness.LiveNodeClaimsOf(t, sb, "reboot")); n != 5 {
		t.Errorf("%d live NodeClaims, want 5 (nothing replaced)", n)
	}
}
