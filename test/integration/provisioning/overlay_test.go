/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package provisioning

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/test/integration/harness"
)

// TestNodeOverlaysSteerTheLiveProvisioner: a NodeOverlay that makes the cheapest family dearer moves the launch to
// the other family; its status says it is applied, and an overlay of the same weight that prices the same
// offerings differently says it conflicts and changes nothing.
func TestNodeOverlaysSteerTheLiveProvisioner(t *testing.T) {
	ctx := context.Background()
	ns := harness.Namespace(t, sb)
	family := func(f string) stevedorev1.NodeOverlayRequirement {
		return stevedorev1.NodeOverlayRequirement{Key: stevedorev1.LabelInstanceFamily, Operator: "In", Values: []string{f}}
	}
	create := func(name, adjust string, reqs ...stevedorev1.NodeOverlayRequirement) {
		no := &stevedorev1.NodeOverlay{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: stevedorev1.NodeOverlaySpec{PriceAdjustment: &adjust, Requirements: reqs}}
		if _, err := sb.Stevedore.StevedoreV1().NodeOverlays().Create(ctx, no, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = sb.Stevedore.StevedoreV1().NodeOverlays().Delete(context.Background(), name, metav1.DeleteOptions{})
		})
	}
	create("overlay-c5-fee", "+50%", family("c5"))
	create("overlay-c5-half", "-50%", family("c5"), stevedorev1.NodeOverlayRequirement{Key: stevedorev1.LabelCapacityType, Operator: "In", Values: []string{"on-demand"}})
	ready := func(name string) *metav1.Condition {
		no, err := sb.Stevedore.StevedoreV1().NodeOverlays().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil
		}
		return meta.FindStatusCondition(no.Status.Conditions, stevedorev1.ConditionReady)
	}
	harness.Eventually(t, "the overlays' status", func(context.Context) (bool, error) {
		a, b := ready("overlay-c5-fee"), ready("overlay-c5-half")
		return a != nil && a.Status == metav1.ConditionTrue && b != nil && b.Status == metav1.ConditionFalse && b.Reason == "Conflict", nil
	})
	t.Logf("overlay-c5-half: %s", ready("overlay-c5-half").Message)

	pool := "overlaid"
	harness.NodePool(t, sb, pool, pool, harness.WithRequirements(
		harness.Req(corev1.LabelInstanceTypeStable, "In", "c5.large", "m5.large"), harness.Req(stevedorev1.LabelCapacityType, "In", "on-demand")))
	pods, names := harness.Pods(ns, pool, "web", 1, "500m", "512Mi")
	harness.CreatePods(t, sb, pods...)
	bound := harness.WaitBound(t, sb, ns, names)
	node := harness.Node(t, sb, bound[names[0]].Spec.NodeName)
	if got := node.Labels[corev1.LabelInstanceTypeStable]; got != "m5.large" {
		t.Fatalf("launched %s; with c5 made 50%% dearer, m5.large is the cheapest", got)
	}
}
