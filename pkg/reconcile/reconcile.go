/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

// Package reconcile runs a controller's work queue: one worker loop taking keys, calling the controller's
// reconcile, and putting the key back as the answer says (with backoff on error, after a delay, or not at all).
package reconcile

import (
	"context"
	"errors"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
)

// ErrWaiting marks a reconcile error as an expected wait (the object's status already says why): the key is retried
// with backoff like any failed key, without a log line.
var ErrWaiting = errors.New("waiting")

// Func reconciles one key; it returns when to look at the key again (0: not unless something changes) or an
// error, after which the key is retried with the queue's backoff.
type Func func(ctx context.Context, key string) (requeueAfter time.Duration, err error)

// Process takes keys from queue and reconciles them until the queue shuts down. A failed key is logged at V(2)
// (what names the kind of key, as "NodeClaim"; not for ErrWaiting) and retried with backoff; a key asking to be looked at again is
// added after that delay with its backoff reset; any other key is forgotten.
func Process(ctx context.Context, queue workqueue.TypedRateLimitingInterface[string], what string, reconcile Func) {
	for {
		key, quit := queue.Get()
		if quit {
			return
		}
		after, err := reconcile(ctx, key)
		switch {
		case err != nil:
			if !errors.Is(err, ErrWaiting) {
				klog.FromContext(ctx).V(2).Info("Reconcile failed; retrying", "kind", what, "key", key, "err", err)
			}
			queue.AddRateLimited(key)
		case after > 0:
			queue.Forget(key)
			queue.AddAfter(key, after)
		default:
			queue.Forget(key)
		}
		queue.Done(key)
	}
}

// Errors adapts a reconcile that only fails or succeeds.
func Errors(reconcile func(ctx context.Context, key string) error) Func {
	return func(ctx context.Context, key string) (time.Duration, error) { return 0, reconcile(ctx, key) }
}

// Every runs pass every interval until ctx ends, with the context's logger named name. A failed pass is logged
// with failed as the message and tried again at the next interval.
func Every(ctx context.Context, name string, interval time.Duration, failed string, pass func(ctx context.Context) error) {
	logger := klog.FromContext(ctx).WithName(name)
	ctx = klog.NewContext(ctx, logger)
	wait.UntilWithContext(ctx, func(ctx context.Context) {
		if err := pass(ctx); err != nil && ctx.Err() == nil {
			logger.Error(err, failed)
		}
	}, interval)
}
