/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package foundation

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

	"github.com/stevedore-dev/stevedore/test/integration/harness"
)

// The node-lifecycle controller turns a running pod's Ready condition off when its node's heartbeat is late; a
// real kubelet reports it ready again on its next status sync, and so must the simulated one, or a loaded test
// machine leaves pods (a DaemonSet's, say) unready for ever.
func TestASimulatedKubeletReportsAPodReadyAgainAfterItWasMarkedNotReady(t *testing.T) {
	ctx := harness.Context(t)
	ns := harness.Namespace(t, sb)
	pod := harness.Pod(ns, "marked", "100m", "64Mi")
	pod.Spec.NodeName = "bootstrap-1"
	if _, err := sb.Kube.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitReady := func(what string, want corev1.ConditionStatus) {
		harness.Eventually(t, what, func(ctx context.Context) (bool, error) {
			p, err := sb.Kube.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			return p.Status.Phase == corev1.PodRunning && podReady(p) == want, nil
		})
	}
	waitReady("the pod to run ready", corev1.ConditionTrue)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		p, err := sb.Kube.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for i := range p.Status.Conditions {
			if p.Status.Conditions[i].Type == corev1.PodReady {
				p.Status.Conditions[i].Status = corev1.ConditionFalse
				p.Status.Conditions[i].Reason = "NodeNotReady" // what node-lifecycle writes
			}
		}
		_, err = sb.Kube.CoreV1().Pods(ns).UpdateStatus(ctx, p, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	waitReady("the simulated kubelet to report the pod ready again", corev1.ConditionTrue)
}

func podReady(p *corev1.Pod) corev1.ConditionStatus {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status
		}
	}
	return corev1.ConditionUnknown
}
