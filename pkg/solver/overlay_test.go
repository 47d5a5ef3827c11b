/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package solver

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/cloud/catalog"
)

func nodeOverlay(name, adjust string, capacity corev1.ResourceList, reqs ...stevedorev1.NodeOverlayRequirement) *stevedorev1.NodeOverlay {
	no := &stevedorev1.NodeOverlay{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: stevedorev1.NodeOverlaySpec{Requirements: reqs, Capacity: capacity}}
	if adjust != "" {
		no.Spec.PriceAdjustment = &adjust
	}
	return no
}

// TestNodeOverlaysChangeThePlan: the planner picks by overlaid prices and fits pods by overlaid capacity; overlays
// that conflict make the offline plan an error naming them.
func TestNodeOverlaysChangeThePlan(t *testing.T) {
	pool := testPool("default", 0, req(corev1.LabelInstanceTypeStable, "In", "m5.large", "c5.large"), req(stevedorev1.LabelCapacityType, "In", "on-demand"))
	family := func(f string) stevedorev1.NodeOverlayRequirement {
		return stevedorev1.NodeOverlayRequirement{Key: stevedorev1.LabelInstanceFamily, Operator: "In", Values: []string{f}}
	}
	hugepages := testPod("db", "500m", "512Mi")
	hugepages.Spec.Containers[0].Resources.Requests["hugepages-2Mi"] = resource.MustParse("256Mi")
	hugepages.Spec.Containers[0].Resources.Limits = corev1.ResourceList{"hugepages-2Mi": resource.MustParse("256Mi")}
	tests := []struct {
		name     string
		objs     []runtime.Object
		wantType string
	}{
		{"the catalog's cheapest", []runtime.Object{pool, testPod("web", "500m", "512Mi")}, "c5.large"},
		{"c5 made dearer", []runtime.Object{pool, testPod("web", "500m", "512Mi"), nodeOverlay("c5-fee", "+50%", nil, family("c5"))}, "m5.large"},
		{"only m5 has hugepages", []runtime.Object{pool, hugepages,
			nodeOverlay("hugepages", "", corev1.ResourceList{"hugepages-2Mi": resource.MustParse("1Gi")}, family("m5"))}, "m5.large"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			plan, _, _ := solveObjects(t, tc.objs...)
			if len(plan.NewNodes) != 1 || plan.NewNodes[0].InstanceType.Name != tc.wantType {
				var got []string
				for _, n := range plan.NewNodes {
					got = append(got, n.InstanceType.Name)
				}
				t.Fatalf("planned %v (unschedulable %d), want one %s", got, len(plan.Unschedulable), tc.wantType)
			}
		})
	}
	_, err := NewOfflineProblem(OfflineInput{Objects: []runtime.Object{pool, testPod("web", "500m", "512Mi"),
		nodeOverlay("a", "-10%", nil), nodeOverlay("b", "+10%", nil)}, Catalog: catalog.Default(), VMMemoryOverheadPercent: 7.5})
	if err == nil || !strings.Contains(err.Error(), "NodeOverlay b is not applied: conflicts with NodeOverlay a") {
		t.Fatalf("conflicting overlays: %v", err)
	}
}
