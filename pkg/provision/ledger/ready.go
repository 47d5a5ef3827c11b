/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package ledger

import (
	"context"
	"sort"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
)

// Initialized records that a NodeClaim's node finished initializing: the pods planned there go first in the
// scheduling queue (ReadyFirst), and they and the pods it refused are woken (NodeInitialized): the pods planned
// there wait for it before the queue.
func (l *Ledger) Initialized(ctx context.Context, claim string) {
	l.mu.Lock()
	c := l.claimLocked(claim)
	if c.readyAt.IsZero() {
		c.readyAt = l.opts.Clock.Now()
	}
	woken := l.takeRefusedLocked(claim)
	planned := make([]types.UID, 0, len(c.pods))
	for uid, pod := range c.pods {
		planned = append(planned, uid)
		if _, binding := l.binding[uid]; !binding {
			woken = append(woken, pod)
		}
	}
	l.mu.Unlock()
	l.readyFirst.add(planned)
	l.wake(ctx, WakeNodeInitialized, woken)
}

// ReadyFirstAll puts pods first in the scheduling queue: the node planned for them is ready.
func (l *Ledger) ReadyFirstAll(uids []types.UID) { l.readyFirst.add(uids) }

// ReadyFirst reports whether the pod is planned on a node that finished initializing: the scheduling queue takes
// it before pods of the same priority it has not tried yet. Without that, a pod that failed its first attempt
// re-enters the queue behind every pod of the burst not tried yet, and the nodes of a burst wait, ready and empty,
// until the scheduler has tried every pod once.
func (l *Ledger) ReadyFirst(uid types.UID) bool { return l.readyFirst.has(uid) }

// ReadySince returns when a NodeClaim's node became ready for pods: when this process saw it initialize, else the
// Initialized condition's time; zero when it is not initialized.
func (l *Ledger) ReadySince(claim string) time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.readySinceLocked(claim)
}

// readySinceLocked is ReadySince. Ledger.mu is held.
func (l *Ledger) readySinceLocked(claim string) time.Time {
	if c := l.claims[claim]; c != nil && !c.readyAt.IsZero() {
		return c.readyAt
	}
	c, err := l.opts.NodeClaims.Get(claim)
	if err != nil || !c.IsInitialized() {
		return time.Time{}
	}
	for _, cond := range c.Status.Conditions {
		if cond.Type == stevedorev1.ConditionInitialized {
			return cond.LastTransitionTime.Time
		}
	}
	return time.Time{}
}

// initializingLocked reports whether a NodeClaim's node is not initialized yet (a NodeClaim not in the cache is
// taken as initialized: nothing is skipped on a guess). Ledger.mu is held.
func (l *Ledger) initializingLocked(claim string) bool {
	if c := l.claims[claim]; c != nil && !c.readyAt.IsZero() {
		return false
	}
	c, err := l.opts.NodeClaims.Get(claim)
	return err == nil && !c.IsInitialized()
}

// Parked is a pod planned on a NodeClaim that is neither bound nor being bound, with its plan's times: when it was
// planned, when its planned node last refused it for a reason that breaks the plan and when it first did (and
// why), and when the parked-pod review last retried it.
type Parked struct {
	Pod          *corev1.Pod
	Claim        string
	PlannedAt    time.Time
	RefusedAt    time.Time
	RefusedSince time.Time
	Why          string
	WokenAt      time.Time
	// ReadyAt is when its node became ready (ReadySince).
	ReadyAt time.Time
}

// UnboundOnReadyNodes returns the pods planned on a NodeClaim whose node is ready that are neither bound nor being
// bound, by namespace and name. In a burst most planned pods wait for nodes still coming: each NodeClaim's
// readiness is looked up once, and only the pods of ready ones are listed.
func (l *Ledger) UnboundOnReadyNodes() []Parked {
	l.mu.Lock()
	defer l.mu.Unlock()
	readyAt := map[string]time.Time{}
	var out []Parked
	for uid, pp := range l.pods {
		if _, binding := l.binding[uid]; binding {
			continue
		}
		at, known := readyAt[pp.claim]
		if !known {
			at = l.readySinceLocked(pp.claim)
			readyAt[pp.claim] = at
		}
		if at.IsZero() {
			continue
		}
		out = append(out, Parked{Pod: pp.pod, Claim: pp.claim, PlannedAt: pp.plannedAt, RefusedAt: pp.refusedAt,
			RefusedSince: pp.refusedSince, Why: pp.refusedWhy, WokenAt: pp.wokenAt, ReadyAt: at})
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i].Pod, out[j].Pod
		return a.Namespace < b.Namespace || a.Namespace == b.Namespace && a.Name < b.Name
	})
	return out
}

// Woken records that the parked-pod review retried these pods at a time.
func (l *Ledger) Woken(pods []*corev1.Pod, at time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, pod := range pods {
		if pp := l.pods[pod.UID]; pp != nil {
			pp.wokenAt = at
		}
	}
}

// readyFirst holds the pods planned on a node that finished initializing, until they bind or their plan goes. Its
// lock guards the set and nothing else, and is held while calling nothing: the queue asks with its own lock held,
// and the provisioner calls the queue (Activate) from code that holds other locks.
type readyFirst struct {
	mu   sync.Mutex
	uids map[types.UID]struct{}
}

func (r *readyFirst) add(uids []types.UID) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.uids == nil {
		r.uids = map[types.UID]struct{}{}
	}
	for _, uid := range uids {
		r.uids[uid] = struct{}{}
	}
}

func (r *readyFirst) remove(uid types.UID) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.uids, uid)
}

func (r *readyFirst) has(uid types.UID) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.uids[uid]
	return ok
}
