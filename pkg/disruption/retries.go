/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package disruption

import (
	"sync"
	"time"
)

// retries remembers the nodes whose consolidation did not go through (abandoned at validation, or failed), and
// when consolidation may try each again: after the poll interval, doubled at each further failure up to
// retryCap. Without it the same move, found first by every pass, would fail again and again and no other node
// would get its turn. A node drops out once it is no longer a candidate.
type retries struct {
	mu    sync.Mutex
	base  time.Duration
	nodes map[string]*failedMove
}

// retryCap bounds how long a node waits after repeated failures.
const retryCap = 10 * time.Minute

type failedMove struct {
	failures int
	after    time.Time
	why      string
}

func newRetries(base time.Duration) *retries {
	if base <= 0 {
		base = 10 * time.Second
	}
	return &retries{base: base, nodes: map[string]*failedMove{}}
}

// failed records that a command of nodes did not go through at now, for why.
func (r *retries) failed(nodes []string, now time.Time, why string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, name := range nodes {
		e := r.nodes[name]
		if e == nil {
			e = &failedMove{}
			r.nodes[name] = e
		}
		e.failures++
		wait := r.base
		for i := 1; i < e.failures && wait < retryCap; i++ {
			wait *= 2
		}
		e.after, e.why = now.Add(min(wait, retryCap)), why
	}
}

// waiting says, for a node whose last command failed and whose wait has not passed at now, until when and why.
func (r *retries) waiting(name string, now time.Time) (time.Time, string, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e := r.nodes[name]
	if e == nil || !now.Before(e.after) {
		return time.Time{}, "", false
	}
	return e.after, e.why, true
}

// keep forgets the nodes not in live.
func (r *retries) keep(live map[string]bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for name := range r.nodes {
		if !live[name] {
			delete(r.nodes, name)
		}
	}
}
