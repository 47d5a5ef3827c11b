/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package disruption

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/disruption"
	"github.com/stevedore-dev/stevedore/test/integration/harness"
)

// waitBufferReady waits until the buffer's Ready condition is True.
func waitBufferReady(t *testing.T, ns, name string) *stevedorev1.CapacityBuffer {
	t.Helper()
	var b *stevedorev1.CapacityBuffer
	harness.EventuallyWithin(t, 3*time.Minute, "CapacityBuffer "+name+" Ready", func(ctx context.Context) (bool, error) {
		var err error
		b, err = sb.Stevedore.StevedoreV1().CapacityBuffers(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return meta.IsStatusConditionTrue(b.Status.Conditions, stevedorev1.ConditionReady), nil
	})
	return b
}

// warmNodesReady returns the names of the initialized nodes of NodePool warm.
func warmNodesReady(t *testing.T) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	for _, c := range harness.LiveNodeClaimsOf(t, sb, "warm") {
		if c.IsInitialized() {
			out[c.Status.NodeName] = true
		}
	}
	return out
}

// TestACapacityBufferMakesABurstBindWithoutALaunch keeps a buffer of four 1-CPU chunks: nodes come up for it with
// no pod asking, and stay although empty (emptiness runs every second here); a burst of four such pods then binds
// on those nodes within 5 s of creation with no NodeClaim created in between, and the buffer launches again.
func TestACapacityBufferMakesABurstBindWithoutALaunch(t *testing.T) {
	ns := harness.Namespace(t, sb)
	ctx := harness.Context(t)
	harness.NodePool(t, sb, "warm", "warm")
	tmpl := harness.Isolated(harness.Pod(ns, "chunk", "1", "1Gi"), "warm")
	if _, err := sb.Kube.CoreV1().PodTemplates(ns).Create(ctx, &corev1.PodTemplate{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}}, Spec: tmpl.Spec}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	four := int32(4)
	buf := &stevedorev1.CapacityBuffer{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec: stevedorev1.CapacityBufferSpec{PodTemplateRef: &stevedorev1.LocalObjectReference{Name: "web"}, Replicas: &four}}
	if _, err := sb.Stevedore.StevedoreV1().CapacityBuffers(ns).Create(ctx, buf, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = sb.Stevedore.StevedoreV1().CapacityBuffers(ns).Delete(context.Background(), "web", metav1.DeleteOptions{})
	})
	b := waitBufferReady(t, ns, "web")
	if b.Status.Replicas != 4 {
		t.Fatalf("status.replicas = %d, want 4", b.Status.Replicas)
	}
	harness.EventuallyWithin(t, 2*time.Minute, "the buffer's nodes initialized", func(context.Context) (bool, error) {
		return len(warmNodesReady(t)) > 0 && len(warmNodesReady(t)) == len(harness.NodeClaimsOf(t, sb, "warm")), nil
	})
	warmNodes := warmNodesReady(t)
	claimsBefore := len(harness.NodeClaimsOf(t, sb, "warm"))
	// emptiness looks at the empty buffer nodes many times and leaves them
	passes := harness.Metric(t, "stevedore_disruption_evaluation_duration_seconds", map[string]string{"method": disruption.MethodEmptiness})
	harness.EventuallyWithin(t, 2*time.Minute, "ten more emptiness passes", func(context.Context) (bool, error) {
		return harness.Metric(t, "stevedore_disruption_evaluation_duration_seconds", map[string]string{"method": disruption.MethodEmptiness}) >= passes+10, nil
	})
	if got := warmNodesReady(t); len(got) != len(warmNodes) {
		t.Fatalf("buffer nodes %v became %v: the warm capacity was consolidated away", warmNodes, got)
	}

	pods, names := harness.Pods(ns, "warm", "burst", 4, "1", "1Gi")
	harness.CreatePods(t, sb, pods...)
	bound := harness.WaitBound(t, sb, ns, names)
	slowest := time.Duration(0)
	for _, p := range bound {
		if !warmNodes[p.Spec.NodeName] {
			t.Errorf("pod %s bound to %s, not to a node of the buffer %v", p.Name, p.Spec.NodeName, warmNodes)
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionTrue {
				slowest = max(slowest, c.LastTransitionTime.Sub(p.CreationTimestamp.Time))
			}
		}
	}
	t.Logf("burst of 4 pods bound within %s of creation (API timestamps, 1 s resolution)", slowest)
	if slowest > 5*time.Second {
		t.Errorf("the burst took %s to bind; with a buffer it must bind within 5 s", slowest)
	}
	// the buffer launches again for the chunks the burst took the room of, until all four have room again
	harness.EventuallyWithin(t, 3*time.Minute, "the buffer provisioned again: 4 chunks with room on new nodes", func(ctx context.Context) (bool, error) {
		withRoom := harness.Metric(t, "stevedore_capacity_buffer_chunks", map[string]string{"namespace": ns, "name": "web", "state": "withRoom"})
		return len(harness.NodeClaimsOf(t, sb, "warm")) > claimsBefore && withRoom == 4, nil
	})
	waitBufferReady(t, ns, "web")
}

// TestACapacityBufferFollowsItsWorkload keeps 50% of a Deployment's replicas warm: 2 chunks for 4 replicas, 3 once
// it has 6, each chunk shaped like the Deployment's pods.
func TestACapacityBufferFollowsItsWorkload(t *testing.T) {
	ns := harness.Namespace(t, sb)
	ctx := harness.Context(t)
	harness.NodePool(t, sb, "warm-workload", "warm-workload")
	harness.IsolatedDeployment(t, sb, harness.Deployment(ns, "api", 4, "500m", "512Mi"), "warm-workload")
	harness.WaitRunning(t, sb, ns, "api", 4)
	half := int32(50)
	buf := &stevedorev1.CapacityBuffer{ObjectMeta: metav1.ObjectMeta{Name: "api", Namespace: ns},
		Spec: stevedorev1.CapacityBufferSpec{ScalableRef: &stevedorev1.ScalableReference{APIGroup: "apps", Kind: "Deployment", Name: "api"},
			Percentage: &half}}
	if _, err := sb.Stevedore.StevedoreV1().CapacityBuffers(ns).Create(ctx, buf, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = sb.Stevedore.StevedoreV1().CapacityBuffers(ns).Delete(context.Background(), "api", metav1.DeleteOptions{})
	})
	if b := waitBufferReady(t, ns, "api"); b.Status.Replicas != 2 {
		t.Fatalf("status.replicas = %d for 50%% of 4, want 2", b.Status.Replicas)
	}
	harness.Scale(t, sb, ns, "api", 6)
	harness.EventuallyWithin(t, 2*time.Minute, "3 chunks with room for 50% of 6 replicas", func(ctx context.Context) (bool, error) {
		b, err := sb.Stevedore.StevedoreV1().CapacityBuffers(ns).Get(ctx, "api", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return b.Status.Replicas == 3 && meta.IsStatusConditionTrue(b.Status.Conditions, stevedorev1.ConditionReady), nil
	})
}
