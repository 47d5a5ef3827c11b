/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

// Package gang tells which pods are gangs, which run all together or not at all: the pods a coscheduling PodGroup
// (scheduling.x-k8s.io, the scheduling.x-k8s.io/pod-group label) groups, and the pods of a Workload API PodGroup
// (scheduling.k8s.io/v1beta1, the pod's spec.schedulingGroup) whose policy is gang. The scheduler plugins
// (pkg/plugins/coscheduling; upstream's GangScheduling for the Workload API) hold a gang's pods until it can bind
// enough of them; the provisioner plans their nodes in one solve, whole or not at all (solver.Gang).
package gang

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	corelisters "k8s.io/client-go/listers/core/v1"

	schedv1alpha1 "github.com/stevedore-dev/stevedore/pkg/apis/scheduling/v1alpha1"
)

// API is the API a gang's PodGroup belongs to.
type API int

const (
	// Coscheduling is scheduler-plugins' PodGroup (scheduling.x-k8s.io/v1alpha1), named by a pod's label.
	Coscheduling API = iota
	// Workload is Kubernetes' PodGroup (scheduling.k8s.io/v1beta1), named by a pod's spec.schedulingGroup.
	Workload
)

// Key names a gang: the API, namespace and name of its PodGroup.
type Key struct {
	API             API
	Namespace, Name string
}

func (k Key) String() string { return k.Namespace + "/" + k.Name }

// Of returns the group a pod belongs to, if it belongs to one: its spec.schedulingGroup's PodGroup, or else the
// PodGroup its scheduling.x-k8s.io/pod-group label names. A Workload API group is a gang only if its policy says
// so (WorkloadGroupNeed).
func Of(pod *corev1.Pod) (Key, bool) {
	if sg := pod.Spec.SchedulingGroup; sg != nil && sg.PodGroupName != nil && *sg.PodGroupName != "" {
		return Key{API: Workload, Namespace: pod.Namespace, Name: *sg.PodGroupName}, true
	}
	return CoschedulingOf(pod)
}

// CoschedulingOf returns the coscheduling gang a pod's label puts it in, if any.
func CoschedulingOf(pod *corev1.Pod) (Key, bool) {
	name := pod.Labels[schedv1alpha1.PodGroupLabel]
	if name == "" {
		return Key{}, false
	}
	return Key{API: Coscheduling, Namespace: pod.Namespace, Name: name}, true
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

// Selector selects a coscheduling gang's pods in its namespace.
func Selector(key Key) labels.Selector {
	return labels.SelectorFromSet(labels.Set{schedv1alpha1.PodGroupLabel: key.Name})
}

// Members lists a gang's pods: by label for a coscheduling gang, by spec.schedulingGroup for a Workload API one.
func Members(pods corelisters.PodLister, key Key) ([]*corev1.Pod, error) {
	if key.API == Coscheduling {
		return pods.Pods(key.Namespace).List(Selector(key))
	}
	all, err := pods.Pods(key.Namespace).List(labels.Everything())
	if err != nil {
		return nil, err
	}
	var out []*corev1.Pod
	for _, p := range all {
		if k, ok := Of(p); ok && k == key {
			out = append(out, p)
		}
	}
	return out, nil
}

// WorkloadGroups finds the Workload API's PodGroups; nil where the cluster does not serve them.
type WorkloadGroups interface {
	Get(key Key) (*schedulingv1beta1.PodGroup, error)
}

// Need returns how many of a group's pods must be placed at once. gang is false for a Workload API PodGroup whose
// policy is basic (its pods are planned one by one). err says, for the pods' events, why the group cannot be read.
func Need(groups Groups, workloads WorkloadGroups, key Key) (need int, gang bool, err error) {
	if key.API == Coscheduling {
		pg, err := Lookup(groups, key)
		if err != nil {
			return 0, false, err
		}
		return MinMember(pg), true, nil
	}
	if workloads == nil {
		return 0, false, fmt.Errorf("the pod is in PodGroup %s (spec.schedulingGroup) but the cluster does not serve PodGroups (%s)",
			key, schedulingv1beta1.SchemeGroupVersion)
	}
	pg, err := workloads.Get(key)
	if apierrors.IsNotFound(err) {
		return 0, false, fmt.Errorf("PodGroup %s (spec.schedulingGroup of the pod, %s) does not exist", key, schedulingv1beta1.SchemeGroupVersion)
	}
	if err != nil {
		return 0, false, fmt.Errorf("PodGroup %s: %w", key, err)
	}
	if g := pg.Spec.SchedulingPolicy.Gang; g != nil {
		return max(int(g.MinCount), 1), true, nil
	}
	return 0, false, nil
}

// Live reports whether a pod counts toward its gang: not finished, not being deleted.
func Live(pod *corev1.Pod) bool {
	return pod.DeletionTimestamp == nil && pod.Status.Phase != corev1.PodSucceeded && pod.Status.Phase != corev1.PodFailed
}
