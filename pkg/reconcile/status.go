/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package reconcile

import (
	"context"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
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
