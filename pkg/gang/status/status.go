/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

// Package status keeps the status of each coscheduling PodGroup: its phase and how many of its pods run, succeeded
// and failed, as `kubectl get podgroups` shows them.
package status

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"

	schedv1alpha1 "github.com/stevedore-dev/stevedore/pkg/apis/scheduling/v1alpha1"
	"github.com/stevedore-dev/stevedore/pkg/gang"
	"github.com/stevedore-dev/stevedore/pkg/generated/clientset/versioned"
	schedlisters "github.com/stevedore-dev/stevedore/pkg/generated/listers/scheduling/v1alpha1"
	"github.com/stevedore-dev/stevedore/pkg/reconcile"
)

// Options are the controller's clients and listers.
type Options struct {
	Client    versioned.Interface
	PodGroups schedlisters.PodGroupLister
	Pods      corelisters.PodLister
	Clock     clock.Clock
}

// Controller writes each PodGroup's status from its pods. Unchanged pods make no write.
type Controller struct {
	opts  Options
	queue workqueue.TypedRateLimitingInterface[string]
}

// New returns the controller, fed by the PodGroup and pod informers.
func New(opts Options, podGroups, pods cache.SharedIndexInformer) (*Controller, error) {
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	c := &Controller{opts: opts, queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: "podgroup-status"})}
	if _, err := podGroups.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.enqueueGroup,
		UpdateFunc: func(_, obj any) { c.enqueueGroup(obj) },
	}); err != nil {
		return nil, err
	}
	_, err := pods.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.enqueuePod,
		UpdateFunc: func(_, obj any) { c.enqueuePod(obj) },
		DeleteFunc: c.enqueuePod,
	})
	return c, err
}

func (c *Controller) enqueueGroup(obj any) {
	if pg, ok := obj.(*schedv1alpha1.PodGroup); ok {
		c.queue.Add(pg.Namespace + "/" + pg.Name)
	}
}

func (c *Controller) enqueuePod(obj any) {
	if pod, ok := reconcile.Deleted[*corev1.Pod](obj); ok {
		if key, ok := gang.CoschedulingOf(pod); ok {
			c.queue.Add(key.String())
		}
	}
}

// Run reconciles until ctx ends.
func (c *Controller) Run(ctx context.Context) {
	defer c.queue.ShutDown()
	wait.UntilWithContext(ctx, func(ctx context.Context) {
		reconcile.Process(ctx, c.queue, "PodGroup status", reconcile.Errors(c.Reconcile))
	}, time.Second)
}

// Reconcile writes the status of PodGroup key (namespace/name) if its pods changed it.
func (c *Controller) Reconcile(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return err
	}
	pg, err := c.opts.PodGroups.PodGroups(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	pods, err := c.opts.Pods.Pods(ns).List(gang.Selector(gang.Key{Namespace: ns, Name: name}))
	if err != nil {
		return err
	}
	status := Compute(pg, pods, c.opts.Clock.Now())
	if equality.Semantic.DeepEqual(status, pg.Status) {
		return nil
	}
	updated := pg.DeepCopy()
	updated.Status = status
	_, err = c.opts.Client.CoschedulingV1alpha1().PodGroups(ns).UpdateStatus(ctx, updated, metav1.UpdateOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// Compute is a PodGroup's status given its pods:
//   - Finished when at least minMember pods succeeded;
//   - Failed when a pod failed and fewer than minMember run or succeeded;
//   - Running when at least minMember run or succeeded;
//   - Scheduling when at least minMember pods exist, not finished, and some are not running yet;
//   - Pending otherwise (too few pods).
//
// scheduleStartTime is set when the phase first leaves Pending and kept after; occupiedBy names the owner (kind/name)
// of the group's pods when they all have the same one.
func Compute(pg *schedv1alpha1.PodGroup, pods []*corev1.Pod, now time.Time) schedv1alpha1.PodGroupStatus {
	var running, succeeded, failed, live int32
	owners := map[string]bool{}
	for _, p := range pods {
		switch p.Status.Phase {
		case corev1.PodRunning:
			running++
		case corev1.PodSucceeded:
			succeeded++
		case corev1.PodFailed:
			failed++
		}
		if gang.Live(p) {
			live++
		}
		if ref := metav1.GetControllerOf(p); ref != nil {
			owners[ref.Kind+"/"+ref.Name] = true
		} else {
			owners[""] = true
		}
	}
	minMember := int32(gang.MinMember(pg)) //nolint:gosec // G115: MinMember is spec.minMember (an int32) or 1
	status := schedv1alpha1.PodGroupStatus{Running: running, Succeeded: succeeded, Failed: failed,
		ScheduleStartTime: pg.Status.ScheduleStartTime, Phase: phase(minMember, live, running, succeeded, failed)}
	if status.Phase != schedv1alpha1.PodGroupPending && status.ScheduleStartTime.IsZero() {
		status.ScheduleStartTime = metav1.NewTime(now.Truncate(time.Second))
	}
	if len(owners) == 1 {
		for o := range owners {
			status.OccupiedBy = o
		}
	}
	return status
}

// phase is the phase of a gang of minMember with so many pods live, running, succeeded and failed (Compute).
func phase(minMember, live, running, succeeded, failed int32) schedv1alpha1.PodGroupPhase {
	switch {
	case succeeded >= minMember:
		return schedv1alpha1.PodGroupFinished
	case failed > 0 && running+succeeded < minMember:
		return schedv1alpha1.PodGroupFailed
	case running+succeeded >= minMember:
		return schedv1alpha1.PodGroupRunning
	case live >= minMember:
		return schedv1alpha1.PodGroupScheduling
	default:
		return schedv1alpha1.PodGroupPending
	}
}
