/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package provision

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
)

// LifecycleOptions configure the NodeClaim lifecycle controller.
type LifecycleOptions struct {
	RegistrationTimeout time.Duration
	// LaunchWorkers bounds concurrent launches (identical launches share a CreateFleet call).
	LaunchWorkers int
	// OnInitialized is called with a node's name when its NodeClaim becomes initialized (Permit lets pods bind).
	OnInitialized func(nodeName string)
	// Terminator finishes deleted NodeClaims and drains their nodes (run on its own). Required.
	Terminator Terminator
}

// Terminator is what the lifecycle hands deleted NodeClaims and their nodes to (pkg/nodeclaim/termination).
type Terminator interface {
	// TerminateClaim takes a deleted NodeClaim a step towards its end; it returns when to look again.
	TerminateClaim(ctx context.Context, claim *stevedorev1.NodeClaim) (time.Duration, error)
	// EnqueueNode asks for a deleted node to be drained.
	EnqueueNode(name string)
}

// Lifecycle drives NodeClaims from launch to initialization and through termination: launch through the cloud,
// registration of the Node (labels, taints, finalizer, owner), initialization (Ready, startup taints gone), and
// liveness (a node that never registers is deleted with its instance).
type Lifecycle struct {
	prov  *Provisioner
	opts  LifecycleOptions
	queue workqueue.TypedRateLimitingInterface[string]
}

// NewLifecycle returns the controller; Register wires it to informers and Run starts it.
func NewLifecycle(prov *Provisioner, opts LifecycleOptions) *Lifecycle {
	if opts.LaunchWorkers == 0 {
		opts.LaunchWorkers = 16
	}
	limiter := workqueue.NewTypedItemExponentialFailureRateLimiter[string](time.Second, 5*time.Minute)
	return &Lifecycle{
		prov:  prov,
		opts:  opts,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(limiter, workqueue.TypedRateLimitingQueueConfig[string]{Name: "nodeclaims"}),
	}
}

// Register adds event handlers: NodeClaim changes and the Nodes of NodeClaims enqueue the NodeClaim; deleted
// Stevedore nodes enqueue their termination; a deleted NodeClaim's pods, and a deleted pod's room, go back to
// provisioning.
func (l *Lifecycle) Register(ctx context.Context, claims, nodes, pods cache.SharedIndexInformer) error {
	if _, err := claims.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { l.enqueueClaim(obj) },
		UpdateFunc: func(_, obj any) { l.enqueueClaim(obj) },
		DeleteFunc: func(obj any) {
			if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tomb.Obj
			}
			if c, ok := obj.(*stevedorev1.NodeClaim); ok {
				l.prov.ForgetClaim(ctx, c.Name)
				l.prov.NodePoolsChanged(ctx) // room under a NodePool's limits
			}
		},
	}); err != nil {
		return err
	}
	if _, err := pods.AddEventHandler(cache.ResourceEventHandlerFuncs{
		DeleteFunc: func(obj any) {
			if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tomb.Obj
			}
			if pod, ok := obj.(*corev1.Pod); ok {
				l.prov.PodDeleted(ctx, pod)
			}
		},
	}); err != nil {
		return err
	}
	_, err := nodes.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { l.enqueueNode(obj) },
		UpdateFunc: func(_, obj any) { l.enqueueNode(obj) },
	})
	return err
}

func (l *Lifecycle) enqueueClaim(obj any) {
	if c, ok := obj.(*stevedorev1.NodeClaim); ok {
		l.queue.Add(c.Name)
	}
}

func (l *Lifecycle) enqueueNode(obj any) {
	n, ok := obj.(*corev1.Node)
	if !ok {
		return
	}
	if name := n.Labels[stevedorev1.LabelNodeClaim]; name != "" {
		l.queue.Add(name)
	} else if c := l.claimByProviderID(n.Spec.ProviderID); c != nil {
		l.queue.Add(c.Name)
	}
	if n.DeletionTimestamp != nil && stevedorev1.HasTerminationFinalizer(n.Finalizers) {
		l.opts.Terminator.EnqueueNode(n.Name)
	}
}

func (l *Lifecycle) claimByProviderID(id string) *stevedorev1.NodeClaim {
	if id == "" {
		return nil
	}
	claims, _ := l.prov.opts.NodeClaims.List(labels.Everything())
	for _, c := range claims {
		if c.Status.ProviderID == id {
			return c
		}
	}
	return nil
}

// Run processes NodeClaims until ctx ends; every NodeClaim is also looked at every 30s. (The terminator runs on
// its own.)
func (l *Lifecycle) Run(ctx context.Context) {
	defer l.queue.ShutDown()
	for i := 0; i < l.opts.LaunchWorkers; i++ {
		go wait.UntilWithContext(ctx, func(ctx context.Context) { l.process(ctx) }, time.Second)
	}
	wait.UntilWithContext(ctx, func(context.Context) {
		claims, _ := l.prov.opts.NodeClaims.List(labels.Everything())
		for _, c := range claims {
			l.queue.Add(c.Name)
		}
	}, 30*time.Second)
}

func (l *Lifecycle) process(ctx context.Context) {
	for {
		name, quit := l.queue.Get()
		if quit {
			return
		}
		after, err := l.reconcile(ctx, name)
		switch {
		case err != nil:
			klog.FromContext(ctx).V(2).Info("NodeClaim reconcile failed; retrying", "nodeclaim", name, "err", err)
			l.queue.AddRateLimited(name)
		case after > 0:
			l.queue.Forget(name)
			l.queue.AddAfter(name, after)
		default:
			l.queue.Forget(name)
		}
		l.queue.Done(name)
	}
}

// reconcile moves one NodeClaim a step along; it returns when to look again.
func (l *Lifecycle) reconcile(ctx context.Context, name string) (time.Duration, error) {
	claim, err := l.prov.opts.NodeClaims.Get(name)
	if apierrors.IsNotFound(err) {
		l.prov.ForgetClaim(ctx, name)
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	logger := klog.FromContext(ctx).WithValues("nodeclaim", name)
	ctx = klog.NewContext(ctx, logger)
	switch {
	case claim.DeletionTimestamp != nil:
		return l.opts.Terminator.TerminateClaim(ctx, claim)
	case !conditionTrue(claim.Status.Conditions, stevedorev1.ConditionLaunched):
		return l.launch(ctx, claim)
	case !conditionTrue(claim.Status.Conditions, stevedorev1.ConditionRegistered):
		return l.register(ctx, claim)
	case !claim.IsInitialized():
		return l.initialize(ctx, claim)
	}
	return 0, nil
}

func (l *Lifecycle) setCondition(ctx context.Context, name, condType string, status metav1.ConditionStatus, reason, message string) error {
	_, err := l.setConditions(ctx, name, metav1.Condition{Type: condType, Status: status, Reason: reason, Message: message})
	return err
}

// setConditions sets conditions on a NodeClaim's status in one update; it reports whether any changed.
func (l *Lifecycle) setConditions(ctx context.Context, name string, conds ...metav1.Condition) (bool, error) {
	changed := false
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := l.prov.claims().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		changed = false
		for _, c := range conds {
			c.Message = truncate(c.Message, 1000)
			c.ObservedGeneration = cur.Generation
			changed = meta.SetStatusCondition(&cur.Status.Conditions, c) || changed
		}
		if !changed {
			return nil
		}
		_, err = l.prov.claims().UpdateStatus(ctx, cur, metav1.UpdateOptions{})
		return err
	})
	return changed, err
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}

func (p *Provisioner) claimEvent(claim *stevedorev1.NodeClaim, eventType, reason, action, note string, args ...any) {
	if p.opts.Recorder == nil {
		return
	}
	p.opts.Recorder.Eventf(claim, nil, eventType, reason, action, note, args...)
}
