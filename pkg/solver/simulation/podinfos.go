/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package simulation

import (
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/kubernetes/pkg/scheduler/framework"
)

// PodInfos keeps the scheduler's PodInfo of each pod object across snapshots, as kube-scheduler's own cache keeps
// its NodeInfos' PodInfos: a PodInfo parses the pod's affinity terms and caches its requests once. Every snapshot of
// the cluster a provisioning batch builds adds every bound pod; made anew each time, their PodInfos and requests were
// most of what a burst of thousands of pods allocated. A pod the informer updates is a new object, with a PodInfo of
// its own. PodInfos are shared, read-only, as the scheduler's are. Safe for concurrent use.
type PodInfos struct {
	mu sync.Mutex
	// cur holds the PodInfos asked for since the last Rotate, prev those asked for before it.
	cur, prev map[*v1.Pod]*framework.PodInfo
}

// NewPodInfos returns an empty PodInfos.
func NewPodInfos() *PodInfos {
	return &PodInfos{cur: map[*v1.Pod]*framework.PodInfo{}, prev: map[*v1.Pod]*framework.PodInfo{}}
}

// Get returns the PodInfo of the pod object, made the first time it is asked for.
func (c *PodInfos) Get(pod *v1.Pod) *framework.PodInfo {
	c.mu.Lock()
	defer c.mu.Unlock()
	if pi := c.cur[pod]; pi != nil {
		return pi
	}
	pi := c.prev[pod]
	if pi == nil {
		pi = newPodInfo(pod)
		// the requests are cached in the PodInfo on first use: fill that cache before it is shared
		pi.CalculateResource()
	}
	c.cur[pod] = pi
	return pi
}

// Rotate forgets the PodInfos not asked for since the Rotate before: called once per snapshot, it keeps those of
// the pods the last snapshot had.
func (c *PodInfos) Rotate() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.prev, c.cur = c.cur, make(map[*v1.Pod]*framework.PodInfo, len(c.cur))
}

// Len returns how many PodInfos are kept.
func (c *PodInfos) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.cur) + len(c.prev)
}

// newPodInfo makes a pod's PodInfo.
func newPodInfo(pod *v1.Pod) *framework.PodInfo {
	pi, err := framework.NewPodInfo(pod)
	if err != nil {
		// NewPodInfo fails only on unparsable affinity terms, which the API server refuses; keep the resources.
		pi = &framework.PodInfo{Pod: pod}
	}
	return pi
}
