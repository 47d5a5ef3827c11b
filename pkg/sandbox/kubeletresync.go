/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package sandbox

import (
	"context"
	"fmt"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
)

// statusResyncAnnotation is what the sandbox's status resync writes on a pod the simulated kubelet left behind.
const statusResyncAnnotation = "sandbox.stevedore.dev/status-resync"

// statusResync stands in for a kubelet's periodic pod sync, which kwok's simulated kubelets lack. kwok drops the
// event of a pod bound to a node whose Lease it has just created but its own cache does not show yet, and a bound
// pod sends no other event: the pod would stay Pending for ever on a Ready node. Every interval, a pod not
// Ready for longer than stuckAfter (plus its AnnotationReadyAfter delay) on a Ready node that kwok manages is
// touched (an annotation), which gives kwok the event again.
type statusResync struct {
	kube       kubernetes.Interface
	interval   time.Duration
	stuckAfter time.Duration
	now        func() time.Time
	// touched counts the annotations written, so each write changes the pod
	touched int
}

func (r *statusResync) run(ctx context.Context) {
	wait.UntilWithContext(ctx, func(ctx context.Context) {
		if err := r.once(ctx); err != nil && ctx.Err() == nil {
			klog.FromContext(ctx).V(2).Info("Status resync failed", "err", err)
		}
	}, r.interval)
}

// once touches the pods stuck now.
func (r *statusResync) once(ctx context.Context) error {
	pods, err := r.kube.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{
		FieldSelector: "spec.nodeName!=,status.phase!=Succeeded,status.phase!=Failed"})
	if err != nil {
		return err
	}
	var stuck []*corev1.Pod
	for i := range pods.Items {
		if r.stuck(&pods.Items[i]) {
			stuck = append(stuck, &pods.Items[i])
		}
	}
	if len(stuck) == 0 {
		return nil
	}
	managed := map[string]bool{}
	nodes, err := r.kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	for i := range nodes.Items {
		n := &nodes.Items[i]
		managed[n.Name] = n.Annotations[KwokNodeAnnotation] == KwokNodeValue && n.DeletionTimestamp == nil && nodeReady(n)
	}
	for _, pod := range stuck {
		if !managed[pod.Spec.NodeName] {
			continue
		}
		r.touched++
		patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, statusResyncAnnotation, strconv.Itoa(r.touched))
		if _, err := r.kube.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.MergePatchType, []byte(patch),
			metav1.PatchOptions{}); err != nil {
			klog.FromContext(ctx).V(2).Info("Status resync could not touch a pod", "pod", klog.KObj(pod), "err", err)
			continue
		}
		klog.FromContext(ctx).V(2).Info("Status resync touched a pod the simulated kubelet left behind", "pod", klog.KObj(pod),
			"node", pod.Spec.NodeName, "phase", pod.Status.Phase)
	}
	return nil
}

// stuck reports whether a bound pod, not being deleted, has not been Ready, and its conditions have not changed,
// for longer than stuckAfter.
func (r *statusResync) stuck(pod *corev1.Pod) bool {
	if pod.DeletionTimestamp != nil || pod.Spec.NodeName == "" || pod.Status.Phase == corev1.PodSucceeded ||
		pod.Status.Phase == corev1.PodFailed {
		return false
	}
	var last time.Time
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
			return false
		}
		if c.LastTransitionTime.After(last) {
			last = c.LastTransitionTime.Time
		}
	}
	// a pod whose readiness is delayed on purpose is not stuck during its delay: a touch would start kwok's delay
	// again, and the pod would never become Ready
	after := r.stuckAfter
	if d, err := time.ParseDuration(pod.Annotations[AnnotationReadyAfter]); err == nil && d > 0 {
		after += d
	}
	return !last.IsZero() && r.now().Sub(last) > after
}

func nodeReady(node *corev1.Node) bool {
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
