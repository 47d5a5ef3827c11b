/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

// Package status keeps the Ready condition of each NodeOverlay: whether it is applied, or why not.
package status

import (
	"context"
	"errors"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/cloud/overlay"
	"github.com/stevedore-dev/stevedore/pkg/generated/clientset/versioned"
	informers "github.com/stevedore-dev/stevedore/pkg/generated/informers/externalversions/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/reconcile"
)

// Controller keeps each NodeOverlay's Ready condition (True when applied; False with reason Invalid or Conflict
// when not) and calls Changed when the overlays change, so that cached instance types are built again and pods
// that no NodePool could take are tried again.
type Controller struct {
	client   versioned.Interface
	informer informers.NodeOverlayInformer
	changed  func(context.Context)
	queue    workqueue.TypedRateLimitingInterface[string]
}

// allOverlays is the queue's only key: a change of one overlay can change whether another conflicts.
const allOverlays = "all"

// NewController returns the controller; changed may be nil.
func NewController(client versioned.Interface, informer informers.NodeOverlayInformer, changed func(context.Context)) *Controller {
	c := &Controller{client: client, informer: informer, changed: changed,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "nodeoverlay-status"})}
	add := func(any) { c.queue.Add(allOverlays) }
	_, _ = informer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: add, DeleteFunc: add,
		// a change of the spec, not the controller's own status writes
		UpdateFunc: func(old, obj any) {
			if old.(*stevedorev1.NodeOverlay).Generation != obj.(*stevedorev1.NodeOverlay).Generation {
				add(obj)
			}
		},
	})
	return c
}

// Run reconciles until ctx ends.
func (c *Controller) Run(ctx context.Context) {
	defer c.queue.ShutDown()
	wait.UntilWithContext(ctx, func(ctx context.Context) {
		reconcile.Process(ctx, c.queue, "NodeOverlay status", reconcile.Errors(func(ctx context.Context, _ string) error { return c.reconcile(ctx) }))
	}, time.Second)
}

func (c *Controller) reconcile(ctx context.Context) error {
	list, err := c.informer.Lister().List(labels.Everything())
	if err != nil {
		return err
	}
	set := overlay.NewSet(list)
	if c.changed != nil {
		c.changed(ctx)
	}
	var errs []error
	for _, no := range list {
		if no.DeletionTimestamp != nil {
			continue
		}
		cond := metav1.Condition{Type: stevedorev1.ConditionReady, Status: metav1.ConditionTrue, Reason: "Applied",
			Message: "applied to the offerings its requirements select", ObservedGeneration: no.Generation}
		if why, ok := set.Problems[no.Name]; ok {
			cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, "Invalid", why
			if _, err := overlay.Compile(no); err == nil {
				cond.Reason = "Conflict"
			}
		}
		if err := c.setCondition(ctx, no.Name, cond); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// setCondition writes the Ready condition when it differs from the stored one.
func (c *Controller) setCondition(ctx context.Context, name string, cond metav1.Condition) error {
	_, err := reconcile.UpdateStatus(ctx, c.client.StevedoreV1().NodeOverlays(), name, func(cur *stevedorev1.NodeOverlay) bool {
		status := cur.Status.DeepCopy()
		meta.SetStatusCondition(&status.Conditions, cond)
		if equality.Semantic.DeepEqual(&cur.Status, status) {
			return false
		}
		cur.Status = *status
		return true
	})
	return err
}
