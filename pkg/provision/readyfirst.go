/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package provision

import (
	"sync"

	"k8s.io/apimachinery/pkg/types"
)

// readyFirst holds the pods planned on a node that finished initializing, until they bind or their plan goes: the
// scheduling queue takes them before pods of the same priority that it has not tried yet (NodeReadyFor). Without
// it, a pod that failed its first attempt re-enters the queue behind every pod of the burst not tried yet, and the
// nodes of a burst wait, ready and empty, until the scheduler has tried every pod once.
//
// Its lock guards the set and nothing else, and is held while calling nothing: the queue asks with its own lock
// held, and the provisioner calls the queue (Activate) from code that holds other locks.
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

// NodeReadyFor reports whether the pod is planned on a node Stevedore launched that finished initializing: the
// node waits for it.
func (p *Provisioner) NodeReadyFor(uid types.UID) bool { return p.readyFirst.has(uid) }
