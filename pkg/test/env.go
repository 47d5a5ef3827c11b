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

	"github.com/stevedore-dev/stevedore/pkg/cloud/fake"
)

// Env is what a controller's unit test starts from: a test cluster (fake clientsets and listers over the same
// objects), a context that logs through the test (a benchmark's logs go where klog's do), a fake clock, an event
// recorder and a fake cloud on that clock.
// A controller's harness embeds it and adds the controller:
//
//	env := test.NewEnv(t, t0, cloud, objs...)
//	h := &harness{Env: env, ctl: New(Options{Kube: env.Kube, Clock: env.Clock, Recorder: env.Recorder})}
type Env struct {
	*Cluster
	T        testing.TB
	Ctx      context.Context
	Clock    *clocktesting.FakeClock
	Recorder *events.FakeRecorder
	Cloud    *fake.Provider
}

// NewEnv returns an environment holding objs whose clock starts at start; the cloud (which may be nil) is put on
// that clock.
func NewEnv(t testing.TB, start time.Time, cloud *fake.Provider, objs ...runtime.Object) *Env {
	t.Helper()
	clock := clocktesting.NewFakeClock(start)
	if cloud != nil {
		cloud.SetClock(clock.Now)
	}
	logger := klog.Background()
	if _, ok := t.(*testing.T); ok {
		logger = ktesting.NewLogger(t, ktesting.NewConfig())
	}
	return &Env{Cluster: NewCluster(t, clock.Now, objs...), T: t, Clock: clock, Recorder: events.NewFakeRecorder(1000), Cloud: cloud,
		Ctx: klog.NewContext(t.Context(), logger)}
}

// FakeCloud is a fake cloud selling types in zones, failing the test when the catalog does not have them.
func FakeCloud(t testing.TB, zones []string, types ...string) *fake.Provider {
	t.Helper()
	cloud, err := fake.New(zones, types...)
	if err != nil {
		t.Fatal(err)
	}
	return cloud
}

// Events drains the events recorded so far.
func (e *Env) Events() []string { return Events(e.Recorder) }

// Evicted lists the pods evicted through the Eviction API so far, as namespace/name.
func (e *Env) Evicted() []string { return Evicted(e.Kube.Actions()) }
