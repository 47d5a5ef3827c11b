/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package sandbox

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
)

// Bootstrap node group facts, as in the seeds: on-demand t4g.medium nodes tainted CriticalAddonsOnly that run
// the autoscaler and cluster add-ons, never workloads.
const (
	BootstrapLabel        = "role"
	BootstrapLabelValue   = "bootstrap"
	BootstrapInstanceType = "t4g.medium"
	CriticalAddonsOnly    = "CriticalAddonsOnly"
)

// createBootstrapNodes registers n bootstrap Nodes (simulated by kwok) spread over the region's first zones,
// and waits until they are Ready without the not-ready taint.
func createBootstrapNodes(ctx context.Context, kube kubernetes.Interface, n int, region string) error {
	zones := []string{"a", "b", "c"}
	for i := 1; i <= n; i++ {
		name := fmt.Sprintf("bootstrap-%d", i)
		zone := region + zones[(i-1)%len(zones)]
		node := &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{
				Name:        name,
				Annotations: map[string]string{KwokNodeAnnotation: KwokNodeValue},
				Labels: map[string]string{
					"kubernetes.io/hostname":           name,
					"kubernetes.io/os":                 "linux",
					"kubernetes.io/arch":               "arm64",
					"node.kubernetes.io/instance-type": BootstrapInstanceType,
					"topology.kubernetes.io/zone":      zone,
					"topology.kubernetes.io/region":    region,
					"eks.amazonaws.com/nodegroup":      "bootstrap",
					"eks.amazonaws.com/capacityType":   "ON_DEMAND",
					BootstrapLabel:                     BootstrapLabelValue,
				},
			},
			Spec: corev1.NodeSpec{
				ProviderID: fmt.Sprintf("aws:///%s/i-0b00757a%09d", zone, i),
				Taints:     []corev1.Taint{{Key: CriticalAddonsOnly, Value: "true", Effect: corev1.TaintEffectNoSchedule}},
			},
			Status: corev1.NodeStatus{
				Capacity: corev1.ResourceList{
					corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("4Gi"),
					corev1.ResourcePods: resource.MustParse("17"), corev1.ResourceEphemeralStorage: resource.MustParse("20Gi"),
				},
				Allocatable: corev1.ResourceList{
					corev1.ResourceCPU: resource.MustParse("1930m"), corev1.ResourceMemory: resource.MustParse("3364Mi"),
					corev1.ResourcePods: resource.MustParse("17"), corev1.ResourceEphemeralStorage: resource.MustParse("18Gi"),
				},
			},
		}
		if _, err := kube.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating bootstrap node %s: %w", name, err)
		}
	}
	return wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		for i := 1; i <= n; i++ {
			node, err := kube.CoreV1().Nodes().Get(ctx, fmt.Sprintf("bootstrap-%d", i), metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			if !NodeReady(node) {
				return false, nil
			}
		}
		return true, nil
	})
}

// NodeReady reports whether a node is Ready and no longer carries the not-ready taint, i.e. the scheduler may
// use it.
func NodeReady(node *corev1.Node) bool {
	ready := false
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
			ready = true
		}
	}
	for _, t := range node.Spec.Taints {
		if t.Key == corev1.TaintNodeNotReady || t.Key == corev1.TaintNodeUnreachable {
			return false
		}
	}
	return ready
}

// waitForControllers waits until the controller manager works: its serviceaccount controller has made the
// default namespace's ServiceAccount.
func waitForControllers(ctx context.Context, kube kubernetes.Interface) error {
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := kube.CoreV1().ServiceAccounts(metav1.NamespaceDefault).Get(ctx, "default", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return err == nil, err
	})
	if err != nil {
		return fmt.Errorf("kube-controller-manager did not start: %w", err)
	}
	return nil
}
