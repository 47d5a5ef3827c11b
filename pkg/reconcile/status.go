/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package reconcile

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"
)

// StatusClient is what a status write uses of a typed client (T is the object's pointer type).
type StatusClient[T any] interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (T, error)
	UpdateStatus(ctx context.Context, obj T, opts metav1.UpdateOptions) (T, error)
}

// UpdateStatus writes an object's status: it reads the object from the API server (a controller's cache may not
// show its own last write yet), applies mutate, and writes the status back, reading again on a conflict. mutate
// reports whether it changed anything; nothing is written when it did not. An object that is gone is no error:
// written is then false.
func UpdateStatus[T any](ctx context.Context, client StatusClient[T], name string, mutate func(T) bool) (written bool, err error) {
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		written = false
		cur, err := client.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if !mutate(cur) {
			return nil
		}
		if _, err := client.UpdateStatus(ctx, cur, metav1.UpdateOptions{}); err != nil {
			return err
		}
		written = true
		return nil
	})
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	return written, err
}

// Object is a Kubernetes object whose metadata can be read.
type Object interface {
	runtime.Object
	metav1.Object
}

// ReportCondition tells a user that a condition written on obj (of kind, for the log) changed: when its status or
// reason differs from before (nil: the condition is new), it logs the change and records an event on obj whose
// reason is the condition's, whose action is action and whose note is its message, a warning when warning says so;
// recorder may be nil. A change of message alone is not reported.
func ReportCondition(ctx context.Context, recorder events.EventRecorder, obj Object, kind, action string, before *metav1.Condition,
	cond metav1.Condition, warning bool) {
	if before != nil && before.Status == cond.Status && before.Reason == cond.Reason {
		return
	}
	klog.FromContext(ctx).Info(kind+" condition changed", "object", klog.KObj(obj), "condition", cond.Type, "status", cond.Status,
		"reason", cond.Reason, "message", cond.Message)
	if recorder == nil {
		return
	}
	eventType := corev1.EventTypeNormal
	if warning {
		eventType = corev1.EventTypeWarning
	}
	recorder.Eventf(obj, nil, eventType, cond.Reason, action, "%s", cond.Message)
}
