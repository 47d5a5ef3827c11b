/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package ledger

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Refused records that a NodeClaim's node refused a pod in its last scheduling attempt (the room kept there for
// others, or, for a pod planned there, any plugin): the pods a change of that node's plan may help are these, and
// waking them only keeps a burst from retrying every pod planned on a node each time one of them binds. breaksPlan
// says the refusal, of a pod planned on that NodeClaim, says its plan may no longer hold (why says what it was): the
// parked-pod review plans it again if it lasts.
func (l *Ledger) Refused(claim string, pod *corev1.Pod, breaksPlan bool, why string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.refusedLocked(claim, pod, breaksPlan, why)
}

func (l *Ledger) refusedLocked(claim string, pod *corev1.Pod, breaksPlan bool, why string) {
	if pp := l.pods[pod.UID]; pp != nil && pp.claim == claim && breaksPlan {
		now := l.opts.Clock.Now()
		pp.refusedAt = now
		if pp.refusedSince.IsZero() {
			pp.refusedSince = now
		}
		pp.refusedWhy = why
	}
	c := l.claimLocked(claim)
	if c.refused == nil {
		c.refused = map[types.UID]*corev1.Pod{}
	}
	c.refused[pod.UID] = pod
}

// RefusedByNode records that a node refused a pod (see Refused), when it is the node of a NodeClaim pods were
// nominated to.
func (l *Ledger) RefusedByNode(node string, pod *corev1.Pod, breaksPlan bool, why string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if claim, ours := l.claimOfNode[node]; ours {
		l.refusedLocked(claim, pod, breaksPlan, why)
	}
}

// TakeRefused returns, and forgets, the pods a NodeClaim's node refused.
func (l *Ledger) TakeRefused(claim string) []*corev1.Pod {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.takeRefusedLocked(claim)
}

func (l *book) takeRefusedLocked(claim string) []*corev1.Pod {
	c := l.claims[claim]
	if c == nil {
		return nil
	}
	out := make([]*corev1.Pod, 0, len(c.refused))
	for _, pod := range c.refused {
		out = append(out, pod)
	}
	c.refused = nil
	return out
}
