/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package sandbox

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"

	"github.com/stevedore-dev/stevedore/pkg/sandbox/awsemu"
)

// BreakNode makes a node unhealthy as a real fault would. Ready (any status but True) stops its simulated
// kubelet: the node stops reporting and renewing its lease, its pods stop being looked after, and Ready turns
// to status (Unknown is what the node lifecycle controller reports for a silent kubelet). Any other condition
// type is reported by the node's problem detector with that status while the kubelet carries on (a kernel
// deadlock: KernelReady False). A reboot of the node's instance (RebootInstances) heals it.
func (s *Sandbox) BreakNode(ctx context.Context, name string, cond corev1.NodeConditionType, status corev1.ConditionStatus, reason string) error {
	if cond == corev1.NodeReady && status == corev1.ConditionTrue {
		return fmt.Errorf("breaking node %s: Ready True is healthy", name)
	}
	if cond == corev1.NodeReady {
		if err := setKubeletRunning(ctx, s.Kube, name, false); err != nil {
			return err
		}
	}
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		node, err := s.Kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		now := metav1.Now()
		c := corev1.NodeCondition{Type: cond, Status: status, Reason: reason, Message: "sandbox fault: " + reason,
			LastHeartbeatTime: now, LastTransitionTime: now}
		replaced := false
		for i := range node.Status.Conditions {
			if node.Status.Conditions[i].Type == cond {
				node.Status.Conditions[i], replaced = c, true
			}
		}
		if !replaced {
			node.Status.Conditions = append(node.Status.Conditions, c)
		}
		_, err = s.Kube.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{})
		return err
	})
}

// setKubeletRunning starts or stops the simulated kubelet of a node (kwok manages annotated nodes only).
func setKubeletRunning(ctx context.Context, kube kubernetes.Interface, name string, running bool) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		node, err := kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if (node.Annotations[KwokNodeAnnotation] == KwokNodeValue) == running {
			return nil
		}
		if running {
			if node.Annotations == nil {
				node.Annotations = map[string]string{}
			}
			node.Annotations[KwokNodeAnnotation] = KwokNodeValue
		} else {
			delete(node.Annotations, KwokNodeAnnotation)
		}
		_, err = kube.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{})
		return err
	})
}

// HealNode clears a node's faults as a reboot does: its kubelet runs and reports every condition healthy.
func (s *Sandbox) HealNode(ctx context.Context, name string) error {
	return healNode(ctx, s.Kube, name)
}

// instanceRebooted plays a reboot on the instance's node: the kubelet starts again and the problem detector's
// conditions clear (a fault a restart fixes).
func (r *nodeRegistrar) instanceRebooted(inst *awsemu.Instance) {
	go func() {
		if err := healNode(r.ctx, r.kube, inst.PrivateDNSName); err != nil {
			klog.FromContext(r.ctx).Error(err, "Restarting the emulated node after a reboot failed", "instance", inst.ID, "node", inst.PrivateDNSName)
		}
	}()
}

func healNode(ctx context.Context, kube kubernetes.Interface, name string) error {
	if err := setKubeletRunning(ctx, kube, name, true); err != nil {
		return err
	}
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		node, err := kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		now := metav1.Now()
		for i := range node.Status.Conditions {
			c := &node.Status.Conditions[i]
			healthy := corev1.ConditionFalse // the pressure conditions
			if strings.HasSuffix(string(c.Type), "Ready") {
				healthy = corev1.ConditionTrue
			}
			if c.Status != healthy {
				c.Status, c.Reason, c.Message, c.LastTransitionTime = healthy, "Rebooted", "the instance was rebooted", now
			}
			c.LastHeartbeatTime = now
		}
		_, err = kube.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{})
		return err
	})
}
