/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package provision

import (
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
)

// Batcher collects pods for one solve. A batch opens with its first pod and closes when no pod arrived for the
// idle gap, or when the max window since its first pod passed: replicas created together are planned together,
// so that their spread and affinity constraints are solved as one. Adding a pod never waits for the solves: the
// scheduling queue adds pods with its own lock held (PreEnqueue), and the solves wake pods through that queue.
type Batcher struct {
	idle, max time.Duration
	clock     clock.WithDelayedExecution
	// ready signals that closed holds a batch
	ready chan struct{}
	// waitFor, when set, says why a batch whose idle gap passed stays open (pods tied to it are still being
	// created; "" when none): it then closes at the next idle gap without that reason, or at the max window.
	waitFor func(batch []*corev1.Pod) string

	mu sync.Mutex
	// closed are the batches closed and not taken yet, oldest first
	closed  [][]*corev1.Pod
	pods    map[types.UID]*corev1.Pod
	order   []types.UID
	opened  time.Time
	last    time.Time
	timer   clock.Timer
	version int
}

// NewBatcher returns a batcher; Ready signals closed batches, which Next hands out.
func NewBatcher(idle, maxWait time.Duration, clk clock.WithDelayedExecution) *Batcher {
	return &Batcher{idle: idle, max: maxWait, clock: clk, ready: make(chan struct{}, 1), pods: map[types.UID]*corev1.Pod{}}
}

// WaitFor sets what keeps a batch whose idle gap passed open: a non-empty reason from waitFor (nil: nothing).
func (b *Batcher) WaitFor(waitFor func(batch []*corev1.Pod) string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.waitFor = waitFor
}

// Ready receives once a batch closed; Next then hands out the batches closed, one at a time.
func (b *Batcher) Ready() <-chan struct{} { return b.ready }

// Next returns the oldest batch closed and not handed out yet, nil when there is none.
func (b *Batcher) Next() []*corev1.Pod {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.closed) == 0 {
		return nil
	}
	batch := b.closed[0]
	b.closed[0] = nil
	b.closed = b.closed[1:]
	return batch
}

// Add puts a pod in the open batch (or opens one); a pod already in it is refreshed.
func (b *Batcher) Add(pod *corev1.Pod) {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.clock.Now()
	if len(b.pods) == 0 {
		b.opened = now
	}
	if _, ok := b.pods[pod.UID]; !ok {
		b.order = append(b.order, pod.UID)
	}
	b.pods[pod.UID] = pod
	b.last = now
	b.schedule()
}

// Contains reports whether a pod waits in the open batch.
func (b *Batcher) Contains(uid types.UID) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	_, ok := b.pods[uid]
	return ok
}

// Len is the open batch's size.
func (b *Batcher) Len() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.pods)
}

// schedule arms the timer for the earlier of the idle gap and the max window. Caller holds b.mu.
func (b *Batcher) schedule() {
	if b.timer != nil {
		b.timer.Stop()
	}
	due := b.last.Add(b.idle)
	if deadline := b.opened.Add(b.max); deadline.Before(due) {
		due = deadline
	}
	b.version++
	v := b.version
	b.timer = b.clock.AfterFunc(max(due.Sub(b.clock.Now()), 0), func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		if v != b.version {
			return
		}
		b.timer = nil // fired: nothing to stop
		if b.waitFor != nil && due.Before(b.opened.Add(b.max)) {
			if why := b.waitFor(b.batch()); why != "" {
				// re-armed outside the clock's callback (a fake clock calls it holding its own lock)
				go b.rearm(v, due)
				return
			}
		}
		b.close()
	})
}

// rearm starts another idle gap at the time given, unless the batch changed since (an arrival re-armed it, or it
// closed).
func (b *Batcher) rearm(version int, at time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if version != b.version {
		return
	}
	b.last = at
	b.schedule()
}

// batch lists the open batch's pods in arrival order. Caller holds b.mu.
func (b *Batcher) batch() []*corev1.Pod {
	out := make([]*corev1.Pod, 0, len(b.order))
	for _, uid := range b.order {
		out = append(out, b.pods[uid])
	}
	return out
}

// close hands the batch over. Caller holds b.mu.
func (b *Batcher) close() {
	if len(b.pods) == 0 {
		return
	}
	if b.timer != nil {
		b.timer.Stop()
		b.timer = nil
	}
	b.version++
	batch := b.batch()
	b.pods = map[types.UID]*corev1.Pod{}
	b.order = nil
	b.closed = append(b.closed, batch)
	select {
	case b.ready <- struct{}{}:
	default: // signalled already
	}
}
