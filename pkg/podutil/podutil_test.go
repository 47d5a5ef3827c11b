/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package podutil

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
)

func TestReschedulable(t *testing.T) {
	now := metav1.Now()
	for _, tc := range []struct {
		name string
		pod  corev1.Pod
		want bool
	}{
		{"a running ReplicaSet pod", corev1.Pod{ObjectMeta: metav1.ObjectMeta{OwnerReferences: []metav1.OwnerReference{{Kind: "ReplicaSet"}}}}, true},
		{"a DaemonSet pod", corev1.Pod{ObjectMeta: metav1.ObjectMeta{OwnerReferences: []metav1.OwnerReference{{Kind: "DaemonSet"}}}}, false},
		{"a mirror pod", corev1.Pod{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{corev1.MirrorPodAnnotationKey: "x"}}}, false},
		{"a finished pod", corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodSucceeded}}, false},
		{"a failed pod", corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodFailed}}, false},
		{"a pod being deleted", corev1.Pod{ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: &now}}, false},
	} {
		if got := Reschedulable(&tc.pod); got != tc.want {
			t.Errorf("%s: Reschedulable = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestDoNotDisrupt(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name    string
		key, v  string
		started time.Time
		want    bool
	}{
		{"Stevedore's key true", stevedorev1.DoNotDisruptKey, "true", time.Time{}, true},
		{"Karpenter's key true", stevedorev1.KarpenterDoNotDisruptKey, "true", time.Time{}, true},
		{"false", stevedorev1.DoNotDisruptKey, "false", time.Time{}, false},
		{"a duration not over", stevedorev1.DoNotDisruptKey, "1h", t0.Add(-30 * time.Minute), true},
		{"a duration over", stevedorev1.DoNotDisruptKey, "1h", t0.Add(-2 * time.Hour), false},
		{"a duration without a start", stevedorev1.DoNotDisruptKey, "1h", time.Time{}, false},
		{"another key", "example.com/do-not-disrupt", "true", time.Time{}, false},
	} {
		if got := DoNotDisrupt(map[string]string{tc.key: tc.v}, tc.started, t0); got != tc.want {
			t.Errorf("%s: DoNotDisrupt = %v, want %v", tc.name, got, tc.want)
		}
	}
}
