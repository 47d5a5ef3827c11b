/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package state

import "sync"

// Leadership tells the background loops when this process holds the scheduler's leader lease. The loops run
// only on the leader; the scheduling plugins run wherever the scheduler schedules, which is also only the
// leader.
type Leadership struct {
	once    sync.Once
	elected chan struct{}
}

// NewLeadership returns a Leadership not yet elected.
func NewLeadership() *Leadership {
	return &Leadership{elected: make(chan struct{})}
}

// Elected is closed once this process leads.
func (l *Leadership) Elected() <-chan struct{} { return l.elected }

// Lead marks this process as the leader. Leadership is never given back inside a process: the scheduler exits
// when it loses its lease.
func (l *Leadership) Lead() { l.once.Do(func() { close(l.elected) }) }

// IsLeader reports whether Lead was called.
func (l *Leadership) IsLeader() bool {
	select {
	case <-l.elected:
		return true
	default:
		return false
	}
}
