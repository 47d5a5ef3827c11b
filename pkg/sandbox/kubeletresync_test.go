/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package sandbox

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
)

func delayedReady(p *corev1.Pod, d string) *corev1.Pod {
	p.Annotations = map[string]string{AnnotationReadyAfter: d}
	return p
}

func TestStatusResyncTouchesOnlyPodsLeftBehindOnManagedReadyNodes(t *testing.T) {
	now := time.Date(2026, 12, 2, 8, 0, 0, 0, time.UTC)
	node := func(name string, managed, ready bool) *corev1.Node {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{}}}
		if managed {
			n.Annotations[KwokNodeAnnotation] = KwokNodeValue
		}
		status := corev1.ConditionFalse
		if ready {
			status = corev1.ConditionTrue
		}
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: status}}
		return n
	}
	pod := func(name, nodeName string, phase corev1.PodPhase, ready bool, changedAgo time.Duration) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name}, Spec: corev1.PodSpec{NodeName: nodeName}}
		p.Status.Phase = phase
		at := metav1.NewTime(now.Add(-changedAgo))
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: at}}
		if ready {
			p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionTrue,
				LastTransitionTime: at})
		}
		return p
	}
	objects := []runtime.Object{
		node("managed", true, true), node("not-ready", true, false), node("unmanaged", false, true),
		pod("left-behind", "managed", corev1.PodPending, false, time.Minute),
		pod("just-bound", "managed", corev1.PodPending, false, 2*time.Second),
		pod("running", "managed", corev1.PodRunning, true, time.Minute),
		pod("completed", "managed", corev1.PodSucceeded, false, time.Minute),
		pod("on-not-ready-node", "not-ready", corev1.PodPending, false, time.Minute),
		pod("on-unmanaged-node", "unmanaged", corev1.PodPending, false, time.Minute),
		pod("unbound", "", corev1.PodPending, false, time.Minute),
		delayedReady(pod("ready-after-its-delay", "managed", corev1.PodPending, false, 15*time.Second), "10s"),
		delayedReady(pod("not-ready-after-its-delay", "managed", corev1.PodPending, false, 25*time.Second), "10s"),
	}
	kube := fake.NewClientset(objects...)
	r := &statusResync{kube: kube, interval: time.Second, stuckAfter: 10 * time.Second, now: func() time.Time { return now }}
	ctx := context.Background()
	for round := 1; round <= 2; round++ {
		if err := r.once(ctx); err != nil {
			t.Fatal(err)
		}
		touched := map[string]string{}
		list, err := kube.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range list.Items {
			if v, ok := p.Annotations[statusResyncAnnotation]; ok {
				touched[p.Name] = v
			}
		}
		// each round writes a new value, so the pod changes and kwok sees an event
		want := map[string]string{"left-behind": map[int]string{1: "1", 2: "3"}[round], "not-ready-after-its-delay": map[int]string{1: "2", 2: "4"}[round]}
		if diff := cmp.Diff(want, touched); diff != "" {
			t.Errorf("round %d: touched pods (-want +got):\n%s", round, diff)
		}
	}
}
