/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package state

import "testing"

func TestLeadershipIsElectedOnceLeadIsCalled(t *testing.T) {
	l := NewLeadership()
	if l.IsLeader() {
		t.Fatal("a new Leadership must not lead")
	}
	l.Lead()
	l.Lead() // a second call must not panic on a closed channel
	if !l.IsLeader() {
		t.Fatal("Lead must make IsLeader true")
	}
	select {
	case <-l.Elected():
	default:
		t.Fatal("Elected must be closed after Lead")
	}
}
