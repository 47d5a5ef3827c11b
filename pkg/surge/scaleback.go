/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package surge

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"

	"github.com/stevedore-dev/stevedore/pkg/deletioncost"
	"github.com/stevedore-dev/stevedore/pkg/podutil"
)

// scaleBackBackoff paces the attempts to scale an owner back (about 20 seconds in all); Recover retries after it.
func scaleBackBackoff() wait.Backoff {
	return wait.Backoff{Duration: 200 * time.Millisecond, Factor: 2, Cap: 5 * time.Second, Steps: 8}
}

// scaleBack returns the owner to the replicas it had, if they are still the surge's (someone else's change
// stands), and removes the surge's record.
func (s *Surger) scaleBack(ctx context.Context, sg *surging) error {
	err := wait.ExponentialBackoffWithContext(ctx, scaleBackBackoff(), func(ctx context.Context) (bool, error) {
		scale, err := s.getScale(ctx, sg.owner)
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		if err != nil {
			return false, nil
		}
		switch scale.Spec.Replicas {
		case sg.to:
		case sg.from:
			return true, nil // back already (an update whose answer was lost)
		default:
			klog.FromContext(ctx).Info("Not scaling back a surge: the replicas were changed meanwhile", "owner", sg.owner.String(),
				"replicas", scale.Spec.Replicas, "surge", sg.to)
			return true, nil
		}
		scale.Spec.Replicas = sg.from
		err = s.updateScale(ctx, sg.owner, scale)
		return err == nil, nil
	})
	if err != nil {
		return fmt.Errorf("scaling %s back to %d: %w", sg.owner, sg.from, err)
	}
	if err := s.annotate(ctx, sg.owner, ""); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("removing the surge's record from %s: %w", sg.owner, err)
	}
	return nil
}

// confirm waits for the ReplicaSet controller to delete the old pods; it says why not when it deleted others.
func (s *Surger) confirm(ctx context.Context, sg *surging) string {
	gone := func(pod *corev1.Pod) bool {
		cur, err := s.opts.Pods.Pods(pod.Namespace).Get(pod.Name)
		return err != nil || cur.UID != pod.UID || cur.DeletionTimestamp != nil
	}
	var left []string
	_ = wait.PollUntilContextTimeout(ctx, s.opts.Interval, 30*time.Second, true, func(context.Context) (bool, error) {
		left = left[:0]
		for _, pod := range sg.pods {
			if !gone(pod) {
				left = append(left, pod.Name)
			}
		}
		return len(left) == 0, nil
	})
	if len(left) > 0 {
		return fmt.Sprintf("its ReplicaSet did not delete %s after the scale-down", strings.Join(left, ", "))
	}
	return ""
}

// patchCost sets (nil: removes) a pod's deletion cost and Stevedore's record of it.
func (s *Surger) patchCost(ctx context.Context, pod *corev1.Pod, cost, managed *string) error {
	value := func(v *string) string {
		if v == nil {
			return "null"
		}
		return strconv.Quote(*v)
	}
	patch := []byte(fmt.Sprintf(`{"metadata":{"annotations":{%q:%s,%q:%s}}}`, deletioncost.AnnotationDeletionCost, value(cost),
		deletioncost.AnnotationManaged, value(managed)))
	_, err := s.opts.Kube.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.MergePatchType, patch, metav1.PatchOptions{})
	return err
}

// restoreCosts puts back the deletion costs of the pods of a surge that did not go through.
func (s *Surger) restoreCosts(ctx context.Context, sg *surging) {
	for _, pod := range sg.pods {
		old, ok := sg.oldCosts[podutil.Key(pod)]
		if !ok {
			continue
		}
		if err := s.patchCost(ctx, pod, old[0], old[1]); err != nil && !apierrors.IsNotFound(err) {
			klog.FromContext(ctx).Error(err, "Restoring a pod's deletion cost after a surge that did not go through", "pod", klog.KObj(pod))
		}
	}
}
