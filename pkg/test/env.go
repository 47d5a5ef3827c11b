/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package test

import (
	"context"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
	clocktesting "k8s.io/utils/clock/testing"
)

// Env is what a controller's unit test starts from: a test cluster (fake clientsets and listers over the same
// objects), a context that logs through the test (a benchmark's logs go where klog's do), a fake clock and an event
// recorder. A controller's harness embeds it and adds the controller (and a fake cloud on the clock, pkg/cloud/fake,
// where the controller needs one):
//
//	env := test.NewEnv(t, t0, objs...)
//	h := &harness{Env: env, ctl: New(Options{Kube: env.Kube, Clock: env.Clock, Recorder: env.Recorder})}
type Env struct {
	*Cluster
	T        testing.TB
	Ctx      context.Context
	Clock    *clocktesting.FakeClock
	Recorder *events.FakeRecorder
}

// NewEnv returns an environment holding objs whose clock starts at start.
func NewEnv(t testing.TB, start time.Time, objs ...runtime.Object) *Env {
	t.Helper()
	clock := clocktesting.NewFakeClock(start)
	logger := klog.Background()
	if _, ok := t.(*testing.T); ok {
		logger = ktesting.NewLogger(t, ktesting.NewConfig())
	}
	return &Env{Cluster: NewCluster(t, clock.Now, objs...), T: t, Clock: clock, Recorder: events.NewFakeRecorder(1000),
		Ctx: klog.NewContext(t.Context(), logger)}
}

// Events drains the events recorded so far.
func (e *Env) Events() []string { return Events(e.Recorder) }

// Evicted lists the pods evicted through the Eviction API so far, as namespace/name.
func (e *Env) Evicted() []string { return Evicted(e.Kube.Actions()) }
