/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package disruption

import (
	"sync"
	"time"

	"k8s.io/utils/clock"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
)

// activity knows when each node last saw a pod arrive or leave (consolidateAfter counts from it) and which
// replacement NodeClaims are protected from emptiness until they got their pods.
type activity struct {
	clock clock.Clock

	mu sync.Mutex
	// lastPodEvent is when a pod last arrived on or left a node, by node name.
	lastPodEvent map[string]time.Time
	// protected holds replacements launched by a command until they got their pods, by NodeClaim name.
	protected map[string]time.Time
	// started is when the controller began watching pods.
	started time.Time
}

func newActivity(clk clock.Clock) *activity {
	return &activity{clock: clk, lastPodEvent: map[string]time.Time{}, protected: map[string]time.Time{}}
}

// touch records that a pod arrived on or left the node now.
func (a *activity) touch(node string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.lastPodEvent[node] = a.clock.Now()
}

// start records that the controller began watching pods now.
func (a *activity) start() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.started = a.clock.Now()
}

// protect keeps replacement NodeClaims from being seen as empty nodes until they got their pods, or until.
func (a *activity) protect(names []string, until time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, n := range names {
		a.protected[n] = until
	}
}

// isProtected reports whether the NodeClaim is a protected replacement, dropping the protection once the node got
// pods or it lapsed.
func (a *activity) isProtected(claim string, empty bool, now time.Time) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	until, ok := a.protected[claim]
	if !ok {
		return false
	}
	if !empty || now.After(until) {
		delete(a.protected, claim)
		return false
	}
	return true
}

// quiet reports whether consolidateAfter has passed since the node last saw a pod arrive or leave (and since it
// initialized, and since the controller started watching). A static NodePool's nodes never are.
func (a *activity) quiet(cand *Candidate, now time.Time) bool {
	if isStatic(cand) {
		return false
	}
	after := cand.NodePool.Spec.Disruption.ConsolidateAfter
	if after == nil || after.IsNever() {
		return false
	}
	a.mu.Lock()
	last := a.lastPodEvent[cand.Node.Name]
	started := a.started
	a.mu.Unlock()
	for _, cond := range cand.NodeClaim.Status.Conditions {
		if cond.Type == stevedorev1.ConditionInitialized && cond.LastTransitionTime.After(last) {
			last = cond.LastTransitionTime.Time
		}
	}
	if started.After(last) {
		last = started
	}
	return !now.Before(last.Add(*after.Duration))
}

// isStatic reports whether the candidate belongs to a static NodePool (spec.replicas set).
func isStatic(cand *Candidate) bool { return cand.NodePool.Spec.Replicas != nil }
