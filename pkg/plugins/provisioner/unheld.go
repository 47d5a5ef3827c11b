/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package provisioner

import (
	"context"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/stevedore-dev/stevedore/pkg/reconcile"
)

// unheldPods keeps the pending pods the plugin does not hold in PreEnqueue: the only pods a node registering or
// updating, or a pod binding, can help. A burst of thousands of pods waits in PreEnqueue for the nodes planned for
// it, and kube-scheduler's queue would otherwise weigh every one of them at each node event and each bind, a walk
// over the whole backlog for every pod that binds. The plugin wakes the pods it holds itself (Activate), so the
// queue need weigh only these (a PreQueueingHint; kube-scheduler's SchedulerPreQueueingHints gate).
//
// What may be in the set: every pod seen unbound that PreEnqueue did not hold last, of every profile and
// scheduler (a superset is safe: the queue skips names it does not park). What must be: every pod the queue
// parks for a reason other than this plugin's hold. Entries are by name, each with the UID that put it there, so
// that a pod deleted and created again under its name is not dropped by the old one's deletion.
type unheldPods struct {
	mu     sync.Mutex
	unheld map[types.NamespacedName]types.UID
	held   map[types.NamespacedName]types.UID
}

func newUnheldPods() *unheldPods {
	return &unheldPods{unheld: map[types.NamespacedName]types.UID{}, held: map[types.NamespacedName]types.UID{}}
}

func podName(pod *v1.Pod) types.NamespacedName {
	return types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name}
}

// Held records that PreEnqueue holds the pod.
func (u *unheldPods) Held(pod *v1.Pod) {
	u.mu.Lock()
	defer u.mu.Unlock()
	name := podName(pod)
	u.held[name] = pod.UID
	delete(u.unheld, name)
}

// Passed records that PreEnqueue let the pod into the queue.
func (u *unheldPods) Passed(pod *v1.Pod) {
	u.mu.Lock()
	defer u.mu.Unlock()
	name := podName(pod)
	delete(u.held, name)
	u.unheld[name] = pod.UID
}

// Seen records a pod as the informer has it now: unbound and not held, it is one to weigh; bound, it is none.
func (u *unheldPods) Seen(pod *v1.Pod) {
	u.mu.Lock()
	defer u.mu.Unlock()
	name := podName(pod)
	if pod.Spec.NodeName != "" {
		u.forget(name, pod.UID)
		return
	}
	if uid, ok := u.held[name]; ok && uid == pod.UID {
		return
	}
	u.unheld[name] = pod.UID
}

// Gone records that a pod was deleted.
func (u *unheldPods) Gone(pod *v1.Pod) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.forget(podName(pod), pod.UID)
}

// forget drops the pod's entries, unless they are another pod's of the same name.
func (u *unheldPods) forget(name types.NamespacedName, uid types.UID) {
	if u.unheld[name] == uid {
		delete(u.unheld, name)
	}
	if u.held[name] == uid {
		delete(u.held, name)
	}
}

// Pods returns the pods to weigh. The queue makes a set of them: their order decides nothing.
func (u *unheldPods) Pods() []types.NamespacedName {
	u.mu.Lock()
	defer u.mu.Unlock()
	names := make([]types.NamespacedName, 0, len(u.unheld))
	for name := range u.unheld {
		names = append(names, name)
	}
	return names
}

// PreQueueingHint narrows an event the queue would weigh every parked pod for to the pods not held.
func (u *unheldPods) PreQueueingHint(klog.Logger, any, any) (fwk.PreQueueingHintResult, error) {
	return fwk.PreQueueingHintResult{Pods: u.Pods()}, nil
}

// Handler keeps the set from the pod informer.
func (u *unheldPods) Handler() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if pod, ok := obj.(*v1.Pod); ok {
				u.Seen(pod)
			}
		},
		UpdateFunc: func(_, obj any) {
			if pod, ok := obj.(*v1.Pod); ok {
				u.Seen(pod)
			}
		},
		DeleteFunc: func(obj any) {
			if pod, ok := reconcile.Deleted[*v1.Pod](obj); ok {
				u.Gone(pod)
			}
		},
	}
}

// Sweep drops the entries of pods get no longer finds unbound under their UID: PreEnqueue may run for a pod after
// the informer told of its deletion.
func (u *unheldPods) Sweep(get func(types.NamespacedName) (*v1.Pod, error)) {
	u.mu.Lock()
	names := make(map[types.NamespacedName]types.UID, len(u.unheld)+len(u.held))
	for name, uid := range u.held {
		names[name] = uid
	}
	for name, uid := range u.unheld {
		names[name] = uid
	}
	u.mu.Unlock()
	for name, uid := range names {
		pod, err := get(name)
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			continue
		case pod.UID == uid && pod.Spec.NodeName == "":
			continue
		}
		u.mu.Lock()
		u.forget(name, uid)
		u.mu.Unlock()
	}
}

// sweepEvery runs Sweep until ctx ends.
func (u *unheldPods) sweepEvery(ctx context.Context, every time.Duration, get func(types.NamespacedName) (*v1.Pod, error)) {
	wait.UntilWithContext(ctx, func(context.Context) { u.Sweep(get) }, every)
}
