/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package solver

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	resourcehelper "k8s.io/component-helpers/resource"

	"github.com/stevedore-dev/stevedore/pkg/resources"
)

// vec is a resource vector in the units the solver compares fast (resources.Requests). The Filter plugins check
// every resource exactly; vec only orders and pre-screens candidates.
type vec = resources.Requests

// podRequests sums the full requests (every resource) of pods.
func podRequests(pods []*corev1.Pod) corev1.ResourceList {
	out := corev1.ResourceList{}
	for _, p := range pods {
		for name, q := range resourcehelper.PodRequests(p, resourcehelper.PodResourcesOptions{}) {
			sum := out[name]
			sum.Add(q)
			out[name] = sum
		}
	}
	out[corev1.ResourcePods] = *resource.NewQuantity(int64(len(pods)), resource.DecimalSI)
	return out
}

// fitsList reports whether requests fit allocatable for every resource requests names.
func fitsList(requests, allocatable corev1.ResourceList) bool {
	for name, q := range requests {
		if q.IsZero() {
			continue
		}
		a, ok := allocatable[name]
		if !ok || q.Cmp(a) > 0 {
			return false
		}
	}
	return true
}
