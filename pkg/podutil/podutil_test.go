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
		{"a pod its Node owns", corev1.Pod{ObjectMeta: metav1.ObjectMeta{OwnerReferences: []metav1.OwnerReference{{Kind: "Node"}}}}, false},
		{"a finished pod", corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodSucceeded}}, false},
		{"a failed pod", corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodFailed}}, false},
		{"a pod being deleted", corev1.Pod{ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: &now}}, false},
	} {
		if got := Reschedulable(&tc.pod); got != tc.want {
			t.Errorf("%s: Reschedulable = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestDaemonSetOwner(t *testing.T) {
	for _, tc := range []struct {
		name   string
		owners []metav1.OwnerReference
		want   string
	}{
		{"no owner", nil, ""},
		{"a ReplicaSet", []metav1.OwnerReference{{Kind: "ReplicaSet", Name: "rs"}}, ""},
		{"a DaemonSet after another owner", []metav1.OwnerReference{{Kind: "Node", Name: "n"}, {Kind: "DaemonSet", Name: "ds"}}, "ds"},
	} {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{OwnerReferences: tc.owners}}
		got := ""
		if o := DaemonSetOwner(pod); o != nil {
			got = o.Name
		}
		if got != tc.want || IsDaemonSetPod(pod) != (tc.want != "") {
			t.Errorf("%s: DaemonSetOwner = %q, IsDaemonSetPod = %v; want %q", tc.name, got, IsDaemonSetPod(pod), tc.want)
		}
	}
}

// t0 is the time the do-not-disrupt cases are judged at.
var t0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

func TestDoNotDisrupt(t *testing.T) {
	started := t0.Add(-30 * time.Minute)
	tests := []struct {
		name        string
		annotations map[string]string
		started     time.Time
		want        bool
	}{
		{name: "no annotations", annotations: nil, started: started, want: false},
		{name: "Stevedore's key true", annotations: map[string]string{stevedorev1.DoNotDisruptKey: "true"}, started: started, want: true},
		{name: "Karpenter's key true", annotations: map[string]string{stevedorev1.KarpenterDoNotDisruptKey: "true"}, started: started, want: true},
		{name: "false", annotations: map[string]string{stevedorev1.DoNotDisruptKey: "false"}, started: started, want: false},
		{name: "True is not true", annotations: map[string]string{stevedorev1.DoNotDisruptKey: "True"}, started: started, want: false},
		{name: "Stevedore's false does not override Karpenter's true",
			annotations: map[string]string{stevedorev1.DoNotDisruptKey: "false", stevedorev1.KarpenterDoNotDisruptKey: "true"},
			started:     started, want: true},
		{name: "duration not over", annotations: map[string]string{stevedorev1.DoNotDisruptKey: "1h"}, started: started, want: true},
		{name: "duration over", annotations: map[string]string{stevedorev1.DoNotDisruptKey: "20m"}, started: started, want: false},
		{name: "duration ending now is over", annotations: map[string]string{stevedorev1.DoNotDisruptKey: "30m"}, started: started, want: false},
		{name: "duration without a start", annotations: map[string]string{stevedorev1.DoNotDisruptKey: "1h"}, want: false},
		{name: "Karpenter's key with a duration", annotations: map[string]string{stevedorev1.KarpenterDoNotDisruptKey: "45m"},
			started: started, want: true},
		{name: "malformed", annotations: map[string]string{stevedorev1.DoNotDisruptKey: "forever"}, started: started, want: false},
		{name: "other keys", annotations: map[string]string{"example.com/do-not-disrupt": "true"}, started: started, want: false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := DoNotDisrupt(tc.annotations, tc.started, t0); got != tc.want {
				t.Errorf("DoNotDisrupt = %v, want %v", got, tc.want)
			}
		})
	}
}
