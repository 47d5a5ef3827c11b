/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package ledger

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Reserved records that the scheduler reserved a node for a pod (Reserve): until it is bound, the pod counts on
// that node rather than on the NodeClaim planned for it.
func (l *Ledger) Reserved(pod *corev1.Pod, node string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.setBindingLocked(pod.UID, &bindingPod{pod: pod, node: node})
}

// Unreserved records that a reserved pod did not bind (Unreserve): it counts on its NodeClaim again.
func (l *Ledger) Unreserved(uid types.UID) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.setBindingLocked(uid, nil)
}

// setBindingLocked records a pod being bound (b), or no longer (nil), and moves its requests out of (into) the
// room its NodeClaim keeps. Ledger.mu is held.
func (l *book) setBindingLocked(uid types.UID, b *bindingPod) {
	_, was := l.binding[uid]
	if b != nil {
		l.binding[uid] = *b
	} else {
		delete(l.binding, uid)
	}
	is := b != nil
	pp := l.pods[uid]
	if is == was || pp == nil {
		return
	}
	c := l.claims[pp.claim]
	if c == nil {
		return
	}
	if _, there := c.pods[uid]; !there {
		return
	}
	if is {
		c.kept = c.kept.Sub(pp.req)
	} else {
		c.kept = c.kept.Add(pp.req)
	}
}

// Bound records that a pod was bound to a node (PostBind): its plan goes, and the pods its planned node refused,
// which may have been refused for the room kept for it, are woken (PlannedPodBound). The pod keeps counting on its
// node until the cache shows it bound, so that neither the node's room nor the pod is counted twice meanwhile. It
// returns the NodeClaim the pod was planned on ("" if none) and when it was planned there.
func (l *Ledger) Bound(ctx context.Context, uid types.UID) (claim string, plannedAt time.Time) {
	now := l.opts.Clock.Now()
	l.mu.Lock()
	if pp := l.pods[uid]; pp != nil {
		plannedAt = pp.plannedAt
	}
	if b, ok := l.binding[uid]; ok {
		b.boundAt = now
		l.binding[uid] = b
	}
	if now.Sub(l.bindingPruned) > 30*time.Second {
		// pods bound while nothing was solved are never looked at by Binding: drop them here
		l.bindingPruned = now
		for id, b := range l.binding {
			if !b.boundAt.IsZero() && now.Sub(b.boundAt) > time.Minute {
				l.setBindingLocked(id, nil)
			}
		}
	}
	l.mu.Unlock()
	claim = l.Forget(uid)
	if claim != "" {
		l.wake(ctx, WakePlannedPodBound, l.TakeRefused(claim))
	}
	return claim, plannedAt
}

// IsBinding reports whether the scheduler reserved a node for the pod and the cache does not show it bound yet.
func (l *Ledger) IsBinding(uid types.UID) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	_, ok := l.binding[uid]
	return ok
}

// Binding returns the pods being bound, by node, leaving out (and forgetting) those the cache already shows bound
// and those bound a minute ago or gone since.
func (l *Ledger) Binding() map[string][]*corev1.Pod {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[string][]*corev1.Pod{}
	for uid, b := range l.binding {
		cur, err := l.opts.Pods.Pods(b.pod.Namespace).Get(b.pod.Name)
		shown := err == nil && cur.UID == uid && cur.Spec.NodeName != ""
		bound := !b.boundAt.IsZero()
		gone := (err != nil || cur.UID != uid) && bound
		if shown || gone || (bound && l.opts.Clock.Since(b.boundAt) > time.Minute) {
			if bound {
				l.setBindingLocked(uid, nil)
			}
			continue
		}
		out[b.node] = append(out[b.node], b.pod)
	}
	return out
}
