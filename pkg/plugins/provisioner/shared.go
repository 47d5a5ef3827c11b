/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package provisioner

import (
	"context"
	"fmt"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/features"

	"github.com/stevedore-dev/stevedore/pkg/apis/config"
)

// Shared is what every plugin instance of one process shares: the backend (built with the first plugin
// instance) and the pods held in Permit.
type Shared struct {
	opts Options

	once sync.Once
	err  error

	prov Backend
	// unheld narrows the events the scheduling queue weighs every parked pod for (nil: the gate is off).
	unheld *unheldPods

	mu      sync.Mutex
	waiting map[types.UID]waitingPod
}

type waitingPod struct {
	node   string
	handle fwk.Handle
	since  time.Time
}

func (s *Shared) init(ctx context.Context, h fwk.Handle, args config.ProvisionerArgs) error {
	s.once.Do(func() { s.err = s.build(ctx, h, args) })
	return s.err
}

func (s *Shared) build(ctx context.Context, h fwk.Handle, args config.ProvisionerArgs) error {
	if s.opts.Build == nil {
		return fmt.Errorf("the host gave the plugin no backend to build")
	}
	prov, err := s.opts.Build(ctx, h, args, s.allowWaiting)
	if err != nil {
		return err
	}
	s.prov = prov
	go s.sweepWaiting(ctx, time.Second)
	if utilfeature.DefaultFeatureGate.Enabled(features.SchedulerPreQueueingHints) {
		pods := h.SharedInformerFactory().Core().V1().Pods()
		s.unheld = newUnheldPods()
		if _, err := pods.Informer().AddEventHandler(s.unheld.Handler()); err != nil {
			return fmt.Errorf("watching pods: %w", err)
		}
		get := func(name types.NamespacedName) (*v1.Pod, error) {
			return pods.Lister().Pods(name.Namespace).Get(name.Name)
		}
		go s.unheld.sweepEvery(ctx, time.Minute, get)
	}
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
