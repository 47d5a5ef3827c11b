/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package reconcile

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
)

// countingLimiter records the keys the queue backs off and forgets.
type countingLimiter struct {
	backedOff, forgotten map[string]int
}

func (l *countingLimiter) When(key string) time.Duration { l.backedOff[key]++; return time.Hour }
func (l *countingLimiter) Forget(key string)             { l.forgotten[key]++ }
func (l *countingLimiter) NumRequeues(key string) int    { return l.backedOff[key] }

func TestProcess(t *testing.T) {
	tests := []struct {
		name          string
		after         time.Duration
		err           error
		wantBackoff   int
		wantForgotten int
		wantRequeued  bool // added again after a delay
	}{
		{name: "done: forgotten", wantForgotten: 1},
		{name: "failed: backed off", err: errors.New("conflict"), wantBackoff: 1},
		{name: "look again later: backoff reset and added after the delay", after: time.Millisecond, wantForgotten: 1, wantRequeued: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			limiter := &countingLimiter{backedOff: map[string]int{}, forgotten: map[string]int{}}
			q := workqueue.NewTypedRateLimitingQueue[string](limiter)
			q.Add("k")
			calls := 0
			done := make(chan struct{})
			go func() {
				defer close(done)
				Process(t.Context(), q, "thing", func(_ context.Context, key string) (time.Duration, error) {
					calls++
					if calls > 1 || !tc.wantRequeued {
						defer q.ShutDown() // the worker returns once this key is handled
					}
					if calls > 1 {
						return 0, nil
					}
					return tc.after, tc.err
				})
			}()
			<-done
			if limiter.backedOff["k"] != tc.wantBackoff {
				t.Errorf("backed off %d times, want %d", limiter.backedOff["k"], tc.wantBackoff)
			}
			if got := limiter.forgotten["k"]; got < tc.wantForgotten {
				t.Errorf("forgotten %d times, want at least %d", got, tc.wantForgotten)
			}
			if requeued := calls > 1; requeued != tc.wantRequeued {
				t.Errorf("reconciled %d times; want requeued %v", calls, tc.wantRequeued)
			}
		})
	}
}

// TestProcessLogsFailuresButNotWaits: a failure is logged at V(2) with the kind and key; an expected wait is not.
func TestProcessLogsFailuresButNotWaits(t *testing.T) {
	for _, tc := range []struct {
		err     error
		wantLog bool
	}{
		{err: errors.New("conflict"), wantLog: true},
		{err: fmt.Errorf("not resolved: %w", ErrWaiting), wantLog: false},
	} {
		logger := ktesting.NewLogger(t, ktesting.NewConfig(ktesting.Verbosity(2), ktesting.BufferLogs(true)))
		ctx := klog.NewContext(t.Context(), logger)
		q := workqueue.NewTypedRateLimitingQueue[string](workqueue.DefaultTypedControllerRateLimiter[string]())
		q.Add("k")
		Process(ctx, q, "Thing", func(context.Context, string) (time.Duration, error) {
			defer q.ShutDown()
			return 0, tc.err
		})
		logged := logger.GetSink().(ktesting.Underlier).GetBuffer().String()
		if got := strings.Contains(logged, `Reconcile failed; retrying kind="Thing" key="k"`); got != tc.wantLog {
			t.Errorf("error %v: logged %v, want %v: %q", tc.err, got, tc.wantLog, logged)
		}
	}
}

func TestDeletedUnwrapsTombstones(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}}
	for _, tc := range []struct {
		name   string
		obj    any
		wantOK bool
	}{
		{name: "the object", obj: pod, wantOK: true},
		{name: "a tombstone", obj: cache.DeletedFinalStateUnknown{Key: "default/p", Obj: pod}, wantOK: true},
		{name: "another type", obj: &corev1.Node{}},
		{name: "a tombstone of another type", obj: cache.DeletedFinalStateUnknown{Key: "n", Obj: &corev1.Node{}}},
		{name: "nil", obj: nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := Deleted[*corev1.Pod](tc.obj)
			if ok != tc.wantOK || (ok && got != pod) {
				t.Errorf("Deleted = %v, %v; want the pod: %v", got, ok, tc.wantOK)
			}
		})
	}
}
