/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package provision

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/stevedore-dev/stevedore/pkg/test"
)

func batchPod(name string) *corev1.Pod { return test.Pod(name).Pending().Obj() }

// closedBatch waits up to wait for a batch to close (the fake clock runs the timers' functions on goroutines of
// their own) and returns it, nil when none closed.
func closedBatch(b *Batcher, timeout time.Duration) []*corev1.Pod {
	var batch []*corev1.Pod
	_ = wait.PollUntilContextTimeout(context.Background(), time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		batch = b.Next()
		return batch != nil, nil
	})
	return batch
}

func TestBatcherWindows(t *testing.T) {
	tests := []struct {
		name string
		// arrivals are the offsets at which pods arrive.
		arrivals []time.Duration
		// closeAt is when the batch must be closed; it must still be open just before.
		closeAt time.Duration
		size    int
	}{
		{name: "one pod closes after the idle gap", arrivals: []time.Duration{0}, closeAt: time.Second, size: 1},
		{name: "each arrival restarts the idle gap", arrivals: []time.Duration{0, 800 * time.Millisecond, 1600 * time.Millisecond},
			closeAt: 2600 * time.Millisecond, size: 3},
		{name: "a steady stream closes at the max window", arrivals: func() []time.Duration {
			var out []time.Duration
			for at := time.Duration(0); at < 10*time.Second; at += 500 * time.Millisecond {
				out = append(out, at)
			}
			return out
		}(), closeAt: 10 * time.Second, size: 20},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
			clk := clocktesting.NewFakeClock(start)
			b := NewBatcher(time.Second, 10*time.Second, clk)
			for i, at := range tc.arrivals {
				clk.SetTime(start.Add(at))
				b.Add(batchPod(string(rune('a'+i%26)) + string(rune('a'+i/26))))
				if batch := b.Next(); batch != nil {
					t.Fatalf("batch of %d closed at %s, before %s", len(batch), at, tc.closeAt)
				}
			}
			clk.SetTime(start.Add(tc.closeAt - time.Millisecond))
			if batch := b.Next(); batch != nil {
				t.Fatalf("batch of %d closed before %s", len(batch), tc.closeAt)
			}
			clk.SetTime(start.Add(tc.closeAt))
			batch := closedBatch(b, 10*time.Second)
			if batch == nil {
				t.Fatalf("batch not closed at %s", tc.closeAt)
			}
			if len(batch) != tc.size {
				t.Errorf("batch has %d pods, want %d", len(batch), tc.size)
			}
			if b.Len() != 0 {
				t.Errorf("batcher still holds %d pods after closing", b.Len())
			}
		})
	}
}

func TestBatcherRefreshesAPodAlreadyInTheBatch(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	b := NewBatcher(time.Second, 10*time.Second, clk)
	b.Add(batchPod("a"))
	b.Add(batchPod("a"))
	if uid := batchPod("a").UID; !b.Contains(uid) || b.Len() != 1 {
		t.Fatalf("Len = %d, Contains(%s) = %v; want one pod a", b.Len(), uid, b.Contains(uid))
	}
}

// TestABatchStaysOpenWhileItWaitsForPartners: a batch whose idle gap passes while waitFor gives a reason stays
// open, idle gap after idle gap; it closes at the first idle gap without one, and at the max window whatever
// waitFor says.
func TestABatchStaysOpenWhileItWaitsForPartners(t *testing.T) {
	for _, tc := range []struct {
		name string
		// waits is how many idle gaps waitFor gives a reason for.
		waits   int
		closeAt time.Duration
	}{
		{name: "the partners arrive", waits: 2, closeAt: 3 * time.Second},
		{name: "the partners never arrive", waits: 100, closeAt: 10 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
			clk := clocktesting.NewFakeClock(start)
			b := NewBatcher(time.Second, 10*time.Second, clk)
			calls := 0
			b.WaitFor(func(batch []*corev1.Pod) string {
				if len(batch) != 1 {
					t.Errorf("waitFor sees %d pods, want 1", len(batch))
				}
				if calls++; calls <= tc.waits {
					return "Deployment default/web"
				}
				return ""
			})
			b.Add(batchPod("a"))
			// an idle gap that passes with a reason re-arms the timer from another goroutine: wait for it
			closed := func() bool {
				var done bool
				err := wait.PollUntilContextTimeout(context.Background(), time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
					if b.Next() != nil {
						done = true
						return true, nil
					}
					return clk.HasWaiters(), nil
				})
				if err != nil {
					t.Fatalf("at %s the batch neither closed nor waits for its next idle gap", clk.Since(start))
				}
				return done
			}
			for at := time.Second; at < tc.closeAt; at += time.Second {
				clk.SetTime(start.Add(at))
				if closed() {
					t.Fatalf("closed at %s, want at %s", at, tc.closeAt)
				}
			}
			clk.SetTime(start.Add(tc.closeAt))
			if !closed() {
				t.Fatalf("not closed at %s", tc.closeAt)
			}
		})
	}
}
