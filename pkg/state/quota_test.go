/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package state_test

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	autoscalingv1beta1 "github.com/stevedore-dev/stevedore/pkg/apis/autoscaling/v1beta1"
	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/state"
	"github.com/stevedore-dev/stevedore/pkg/test"
)

func TestQuotaUsage(t *testing.T) {
	cq := &autoscalingv1beta1.CapacityQuota{ObjectMeta: metav1.ObjectMeta{Name: "q"}, Spec: autoscalingv1beta1.CapacityQuotaSpec{
		Limits: autoscalingv1beta1.CapacityQuotaLimits{Resources: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100"),
			stevedorev1.ResourceNodes: resource.MustParse("10"), autoscalingv1beta1.ResourceHourlyCost: resource.MustParse("5"),
			"nvidia.com/gpu": resource.MustParse("8")}}}}
	launched := test.NodeClaim("launched", "ml").Labels("team", "ml").Launched("n1", "m5.xlarge", "us-east-1a", "on-demand", "0.1920").
		Capacity("cpu", "4", "memory", "16Gi").Obj()
	planned := test.NodeClaim("planned", "ml").Labels("team", "ml").Require(corev1.LabelInstanceTypeStable, corev1.NodeSelectorOpIn, "m5.2xlarge", "m5.4xlarge").
		Annotations(stevedorev1.AnnotationNodeClaimPrice, "0.3840").Requests("cpu", "5").Obj()
	deleting := test.NodeClaim("deleting", "ml").Labels("team", "ml").Capacity("cpu", "4").Deleting(time.Now()).Obj()
	other := test.NodeClaim("other", "web").Labels("team", "web").Capacity("cpu", "2").Obj()
	ownNode := test.Node("n1").Allocatable("cpu", "4").Labels("team", "ml").Obj()
	foreign := test.Node("bootstrap").Allocatable("cpu", "2", "nvidia.com/gpu", "1").Labels("team", "ml").Obj()
	claims := []*stevedorev1.NodeClaim{launched, planned, deleting, other}
	nodes := []*corev1.Node{ownNode, foreign}
	capacityOf := func(c *stevedorev1.NodeClaim) corev1.ResourceList {
		if c.Name == "planned" {
			return test.Resources("cpu", "8")
		}
		return nil
	}
	for _, tc := range []struct {
		name    string
		sel     labels.Selector
		planned func(*stevedorev1.NodeClaim) corev1.ResourceList
		want    map[corev1.ResourceName]string
	}{
		{"every node; a claim not launched at its planned type", nil, capacityOf,
			map[corev1.ResourceName]string{"cpu": "16", "nodes": "4", "stevedore.dev/hourly-cost": "0.576", "nvidia.com/gpu": "1"}},
		{"a claim not launched at its requests when the type is unknown", nil, nil,
			map[corev1.ResourceName]string{"cpu": "13", "nodes": "4"}},
		{"a selector", labels.SelectorFromSet(labels.Set{"team": "ml"}), capacityOf,
			map[corev1.ResourceName]string{"cpu": "14", "nodes": "3", "nvidia.com/gpu": "1"}},
		{"a selector on a planned requirement", labels.SelectorFromSet(labels.Set{stevedorev1.LabelNodePool: "web"}), capacityOf,
			map[corev1.ResourceName]string{"cpu": "2", "nodes": "1", "stevedore.dev/hourly-cost": "0", "nvidia.com/gpu": "0"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			used := state.QuotaUsage(cq, tc.sel, claims, nodes, tc.planned)
			for name, want := range tc.want {
				got := used[name]
				if got.Cmp(resource.MustParse(want)) != 0 {
					t.Errorf("%s = %s, want %s", name, got.String(), want)
				}
			}
			if len(used) != len(cq.Spec.Limits.Resources) {
				t.Errorf("used has %d resources, want the %d limited", len(used), len(cq.Spec.Limits.Resources))
			}
		})
	}
}
