/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package foundation

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	"github.com/stevedore-dev/stevedore/pkg/provision"
	"github.com/stevedore-dev/stevedore/pkg/sandbox"
	"github.com/stevedore-dev/stevedore/test/integration/harness"
)

func TestStevedoreSchedulerBindsAPodThatFitsAnExistingNode(t *testing.T) {
	ctx := harness.Context(t)
	ns := harness.Namespace(t, sb)
	pod := harness.Pod(ns, "fits", "100m", "64Mi")
	pod.Spec.Tolerations = []corev1.Toleration{{Key: sandbox.CriticalAddonsOnly, Operator: corev1.TolerationOpExists}}
	if _, err := sb.Kube.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var nodeName string
	harness.Eventually(t, "the pod to be bound", func(ctx context.Context) (bool, error) {
		p, err := sb.Kube.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
		nodeName = p.Spec.NodeName
		return err == nil && nodeName != "", err
	})
	if nodeName != "bootstrap-1" && nodeName != "bootstrap-2" {
		t.Fatalf("pod bound to %q, want a bootstrap node", nodeName)
	}
	ev := waitForEvent(t, ns, pod.Name, "Scheduled")
	if ev.ReportingController != harness.StevedoreSchedulerName {
		t.Errorf("Scheduled event reported by %q, want the %q profile", ev.ReportingController, harness.StevedoreSchedulerName)
	}
}

func TestProvisionerRunsInPostFilterForAPodThatFitsNowhere(t *testing.T) {
	ctx := harness.Context(t)
	ns := harness.Namespace(t, sb)
	// No toleration for the bootstrap nodes' CriticalAddonsOnly taint: every node rejects it.
	pod := harness.Pod(ns, "fits-nowhere", "100m", "64Mi")
	if _, err := sb.Kube.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ev := waitForEvent(t, ns, pod.Name, provision.ReasonFailedProvision)
	if ev.ReportingController != harness.StevedoreSchedulerName {
		t.Errorf("%s event reported by %q, want %q", provision.ReasonFailedProvision, ev.ReportingController, harness.StevedoreSchedulerName)
	}
	p, err := sb.Kube.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if p.Spec.NodeName != "" {
		t.Fatalf("pod bound to %s, want it unbound", p.Spec.NodeName)
	}
}

func TestDefaultSchedulerPodsAreNotScheduledByStevedore(t *testing.T) {
	ctx := harness.Context(t)
	ns := harness.Namespace(t, sb)
	pod := harness.Pod(ns, "default-scheduled", "100m", "64Mi")
	pod.Spec.SchedulerName = corev1.DefaultSchedulerName
	pod.Spec.Tolerations = []corev1.Toleration{{Key: sandbox.CriticalAddonsOnly, Operator: corev1.TolerationOpExists}}
	if _, err := sb.Kube.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ev := waitForEvent(t, ns, pod.Name, "Scheduled")
	if ev.ReportingController != corev1.DefaultSchedulerName {
		t.Errorf("Scheduled event reported by %q, want %q", ev.ReportingController, corev1.DefaultSchedulerName)
	}
}

// waitForEvent waits for an event with reason about the named pod and returns it.
func waitForEvent(t *testing.T, ns, pod, reason string) eventsv1.Event {
	t.Helper()
	var found eventsv1.Event
	selector := fields.OneTermEqualSelector("regarding.name", pod).String()
	harness.Eventually(t, "event "+reason+" on pod "+pod, func(ctx context.Context) (bool, error) {
		list, err := sb.Kube.EventsV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: selector})
		if err != nil {
			return false, err
		}
		for _, ev := range list.Items {
			if ev.Reason == reason {
				found = ev
				return true, nil
			}
		}
		return false, nil
	})
	return found
}
