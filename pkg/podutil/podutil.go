/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

// Package podutil answers questions about a pod that provisioning, termination and disruption all ask: does it
// move when its node goes, may it be disrupted now, who owns it.
package podutil

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
)

// Reschedulable reports whether the pod would need a new place were its node removed: not a DaemonSet or mirror
// pod, not finished, not being deleted.
func Reschedulable(pod *corev1.Pod) bool {
	return !IsDaemonSetPod(pod) && !IsMirrorPod(pod) && pod.Status.Phase != corev1.PodSucceeded &&
		pod.Status.Phase != corev1.PodFailed && pod.DeletionTimestamp == nil
}

// IsDaemonSetPod reports whether a DaemonSet owns the pod.
func IsDaemonSetPod(pod *corev1.Pod) bool {
	return DaemonSetOwner(pod) != nil
}

// DaemonSetOwner returns the pod's owner reference to its DaemonSet, nil when no DaemonSet owns it.
func DaemonSetOwner(pod *corev1.Pod) *metav1.OwnerReference {
	for i := range pod.OwnerReferences {
		if pod.OwnerReferences[i].Kind == "DaemonSet" {
			return &pod.OwnerReferences[i]
		}
	}
	return nil
}

// IsMirrorPod reports whether the pod is the API server's mirror of a static pod: it carries the mirror
// annotation, or its Node owns it (what the scheduling admission policy reads).
func IsMirrorPod(pod *corev1.Pod) bool {
	if _, ok := pod.Annotations[corev1.MirrorPodAnnotationKey]; ok {
		return true
	}
	for _, o := range pod.OwnerReferences {
		if o.Kind == "Node" {
			return true
		}
	}
	return false
}

// DoNotDisrupt reads the do-not-disrupt annotation (Stevedore's or Karpenter's): "true", or a duration counted
// from started during which the object must not be disrupted.
func DoNotDisrupt(annotations map[string]string, started, now time.Time) bool {
	for _, key := range []string{stevedorev1.DoNotDisruptKey, stevedorev1.KarpenterDoNotDisruptKey} {
		v, ok := annotations[key]
		if !ok {
			continue
		}
		if v == "true" {
			return true
		}
		if d, err := time.ParseDuration(v); err == nil && !started.IsZero() && now.Before(started.Add(d)) {
			return true
		}
	}
	return false
}

// Key is the pod's "namespace/name".
func Key(pod *corev1.Pod) string { return pod.Namespace + "/" + pod.Name }

// Finished reports whether the pod succeeded or failed.
func Finished(pod *corev1.Pod) bool {
	return pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed
}

// Ready reports whether the pod's Ready condition is true.
func Ready(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// Requiring returns a copy of the pod whose required node affinity also asks for req, in every one of its terms
// (a term of its own when it has none): the pod as a solver sees it when only some nodes may take it.
func Requiring(pod *corev1.Pod, req corev1.NodeSelectorRequirement) *corev1.Pod {
	out := pod.DeepCopy()
	if out.Spec.Affinity == nil {
		out.Spec.Affinity = &corev1.Affinity{}
	}
	if out.Spec.Affinity.NodeAffinity == nil {
		out.Spec.Affinity.NodeAffinity = &corev1.NodeAffinity{}
	}
	na := out.Spec.Affinity.NodeAffinity
	if na.RequiredDuringSchedulingIgnoredDuringExecution == nil || len(na.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms) == 0 {
		na.RequiredDuringSchedulingIgnoredDuringExecution = &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{}}}
	}
	terms := na.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	for i := range terms {
		terms[i].MatchExpressions = append(terms[i].MatchExpressions, req)
	}
	return out
}
