/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package provisioner

import (
	"context"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/stevedore-dev/stevedore/pkg/operator"
	"github.com/stevedore-dev/stevedore/pkg/provision"
)

// Shared is what every plugin instance of one process shares: the controllers (built by package operator with
// the first plugin instance, while the scheduler sets up, before its informers start, so every informer they need
// is registered in time) and the pods held in Permit.
type Shared struct {
	opts Options

	once sync.Once
	err  error

	prov *provision.Provisioner

	mu      sync.Mutex
	waiting map[types.UID]waitingPod
}

type waitingPod struct {
	node   string
	handle fwk.Handle
	since  time.Time
}

func (s *Shared) init(ctx context.Context, h fwk.Handle, args Args) error {
	s.once.Do(func() { s.err = s.build(ctx, h, args) })
	return s.err
}

func (s *Shared) build(ctx context.Context, h fwk.Handle, args Args) error {
	controllers, err := operator.New(ctx, operator.Host{KubeConfig: h.KubeConfig(), ClientSet: h.ClientSet(),
		Informers: h.SharedInformerFactory(), Recorder: h.EventRecorder(), SchedulerName: h.ProfileName(),
		Leadership: s.opts.Leadership, OnInitialized: s.allowWaiting, Queue: h}, args.operatorOptions(s.opts.Env))
	if err != nil {
		return err
	}
	s.prov = controllers.Provisioner
	go s.sweepWaiting(ctx, time.Second)
	return nil
}

// allowWaiting lets pods held in Permit bind to a node that finished initializing.
func (s *Shared) allowWaiting(nodeName string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for uid, w := range s.waiting {
		if w.node != nodeName {
			continue
		}
		if wp := w.handle.GetWaitingPod(uid); wp != nil {
			wp.Allow(Name)
			delete(s.waiting, uid)
		}
	}
}

// sweepWaiting is allowWaiting's backstop: a pod whose Permit ran on a stale view of its node, or whose node
// initialized between Permit and the framework registering the pod as waiting, is allowed on the next sweep; pods
// the framework no longer holds (timed out, deleted) are dropped.
func (s *Shared) sweepWaiting(ctx context.Context, every time.Duration) {
	wait.UntilWithContext(ctx, func(context.Context) {
		s.mu.Lock()
		defer s.mu.Unlock()
		for uid, w := range s.waiting {
			wp := w.handle.GetWaitingPod(uid)
			switch {
			case wp == nil && time.Since(w.since) > time.Minute:
				delete(s.waiting, uid)
			case wp != nil && !s.prov.IsNodeInitializing(w.node):
				wp.Allow(Name)
				delete(s.waiting, uid)
			}
		}
	}, every)
}
