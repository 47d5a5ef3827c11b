/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

// Package gang tells which pods are gangs: the pods a coscheduling PodGroup (scheduling.x-k8s.io, the
// scheduling.x-k8s.io/pod-group label) groups, which run all together or not at all. The scheduler plugin
// (pkg/plugins/coscheduling) holds a gang's pods until it can bind enough of them; the provisioner plans their
// nodes in one solve, whole or not at all (solver.Gang).
package gang

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"

	schedv1alpha1 "github.com/stevedore-dev/stevedore/pkg/apis/scheduling/v1alpha1"
)

// Key names a gang: the namespace and name of its PodGroup.
type Key struct {
	Namespace, Name string
}

func (k Key) String() string { return k.Namespace + "/" + k.Name }

// Of returns the gang a pod belongs to, if it belongs to one.
func Of(pod *corev1.Pod) (Key, bool) {
	name := pod.Labels[schedv1alpha1.PodGroupLabel]
	if name == "" {
		return Key{}, false
	}
	return Key{Namespace: pod.Namespace, Name: name}, true
}

// Groups finds PodGroups; nil where the cluster does not serve the API.
type Groups interface {
	Get(key Key) (*schedv1alpha1.PodGroup, error)
}

// MinMember is how many of a PodGroup's pods must run at once: spec.minMember, and at least one.
func MinMember(pg *schedv1alpha1.PodGroup) int {
	return max(int(pg.Spec.MinMember), 1)
}

// Lookup returns the PodGroup of a gang, or an error saying, for the pod's events and status, why there is none.
func Lookup(groups Groups, key Key) (*schedv1alpha1.PodGroup, error) {
	if groups == nil {
		return nil, fmt.Errorf("the pod is in gang %s (label %s) but the cluster does not serve PodGroups (%s)", key,
			schedv1alpha1.PodGroupLabel, schedv1alpha1.SchemeGroupVersion)
	}
	pg, err := groups.Get(key)
	if apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("PodGroup %s (label %s of the pod) does not exist", key, schedv1alpha1.PodGroupLabel)
	}
	if err != nil {
		return nil, fmt.Errorf("PodGroup %s: %w", key, err)
	}
	return pg, nil
}

// Selector selects a gang's pods in its namespace.
func Selector(key Key) labels.Selector {
	return labels.SelectorFromSet(labels.Set{schedv1alpha1.PodGroupLabel: key.Name})
}

// Live reports whether a pod counts toward its gang: not finished, not being deleted.
func Live(pod *corev1.Pod) bool {
	return pod.DeletionTimestamp == nil && pod.Status.Phase != corev1.PodSucceeded && pod.Status.Phase != corev1.PodFailed
}
