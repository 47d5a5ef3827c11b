/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package sandbox

import (
	"context"
	"fmt"
	"io"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
)

// smokeDeployment names the smoke scenario's Deployment and its pods' app label.
const smokeDeployment = "smoke"

// smokeScenario proves the control plane works: a Deployment tolerating the bootstrap taint gets its pods
// created by the controllers, bound by the default scheduler and Running on the simulated kubelets.
func smokeScenario(ctx context.Context, sb *Sandbox, out io.Writer) error {
	labels := map[string]string{"app": smokeDeployment}
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: smokeDeployment, Namespace: metav1.NamespaceDefault},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](3),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					Tolerations: []corev1.Toleration{{Key: CriticalAddonsOnly, Operator: corev1.TolerationOpExists}},
					Containers:  []corev1.Container{{Name: "pause", Image: "registry.k8s.io/pause:3.10"}},
				},
			},
		},
	}
	if _, err := sb.Kube.AppsV1().Deployments(dep.Namespace).Create(ctx, dep, metav1.CreateOptions{}); err != nil {
		return err
	}
	fmt.Fprintln(out, "deployment smoke created (3 replicas on the bootstrap nodes)")
	start := time.Now()
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		d, err := sb.Kube.AppsV1().Deployments(dep.Namespace).Get(ctx, dep.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return d.Status.AvailableReplicas == 3, nil
	})
	if err != nil {
		return fmt.Errorf("deployment smoke not available: %w", err)
	}
	fmt.Fprintf(out, "3 pods Running after %.2fs\n", time.Since(start).Seconds())
	return sb.Kube.AppsV1().Deployments(dep.Namespace).Delete(ctx, dep.Name, metav1.DeleteOptions{})
}
