/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package harness

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// StevedoreSchedulerName is the scheduler name of Stevedore's profile.
const StevedoreSchedulerName = "stevedore"

// labelApp is the label Pod, Deployment and Pods give their pods: app=<name>, or app=<prefix> for Pods.
const labelApp = "app"

// Pod returns a pause pod scheduled by Stevedore that requests cpu and memory (either may be empty).
func Pod(namespace, name, cpu, memory string) *corev1.Pod {
	requests := corev1.ResourceList{}
	if cpu != "" {
		requests[corev1.ResourceCPU] = resource.MustParse(cpu)
	}
	if memory != "" {
		requests[corev1.ResourceMemory] = resource.MustParse(memory)
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: map[string]string{labelApp: name}},
		Spec: corev1.PodSpec{
			SchedulerName:                 StevedoreSchedulerName,
			TerminationGracePeriodSeconds: new(int64),
			Containers: []corev1.Container{{
				Name:      "pause",
				Image:     "registry.k8s.io/pause:3.10",
				Resources: corev1.ResourceRequirements{Requests: requests},
			}},
		},
	}
}

// Deployment returns a Deployment of pause pods scheduled by Stevedore, labelled app=name.
func Deployment(namespace, name string, replicas int32, cpu, memory string) *appsv1.Deployment {
	pod := Pod(namespace, name, cpu, memory)
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{labelApp: name}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{labelApp: name}}, Spec: pod.Spec},
		},
	}
}
