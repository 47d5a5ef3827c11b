/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

// Package status keeps each Commitment's status (its kind, size, what the cluster's on-demand nodes use of it, the
// nodes it covers, and whether it applies) and the commitment metrics.
package status

import (
	"context"
	"errors"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/commitment"
	"github.com/stevedore-dev/stevedore/pkg/generated/clientset/versioned"
	informers "github.com/stevedore-dev/stevedore/pkg/generated/informers/externalversions/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/metrics"
	"github.com/stevedore-dev/stevedore/pkg/reconcile"
)

// Controller writes each Commitment's status when it differs from what the cluster's nodes give, on a change of
// the Commitments and every Resync (nodes come and go between).
type Controller struct {
	client   versioned.Interface
	informer informers.CommitmentInformer
	coverage func(context.Context) commitment.Coverage
	queue    workqueue.TypedRateLimitingInterface[string]
}

// Resync is how often the statuses are worked out again without a change of the Commitments.
const Resync = 30 * time.Second

// allCommitments is the queue's only key: the commitments share the nodes out among themselves.
const allCommitments = "all"

// NewController returns the controller; coverage is how the commitments cover the cluster's nodes now.
func NewController(client versioned.Interface, informer informers.CommitmentInformer, coverage func(context.Context) commitment.Coverage) *Controller {
	c := &Controller{client: client, informer: informer, coverage: coverage,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "commitment-status"})}
	add := func(any) { c.queue.Add(allCommitments) }
	_, _ = informer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: add, DeleteFunc: add,
		UpdateFunc: func(old, obj any) {
			if old.(*stevedorev1.Commitment).Generation != obj.(*stevedorev1.Commitment).Generation {
				add(obj)
			}
		},
	})
	return c
}

// Run reconciles until ctx ends.
func (c *Controller) Run(ctx context.Context) {
	defer c.queue.ShutDown()
	go wait.UntilWithContext(ctx, func(context.Context) { c.queue.Add(allCommitments) }, Resync)
	wait.UntilWithContext(ctx, func(ctx context.Context) {
		reconcile.Process(ctx, c.queue, "Commitment status", reconcile.Errors(func(ctx context.Context, _ string) error { return c.reconcile(ctx) }))
	}, time.Second)
}

func (c *Controller) reconcile(ctx context.Context) error {
	list, err := c.informer.Lister().List(labels.Everything())
	if err != nil {
		return err
	}
	_, problems := commitment.CompileAll(list)
	cov := c.coverage(ctx)
	used := map[string]commitment.Used{}
	for _, u := range cov.Commitments {
		used[u.Name] = u
	}
	metrics.CommitmentCapacity.Reset()
	metrics.CommitmentUsed.Reset()
	metrics.CommitmentCoverage.Set(cov.Ratio())
	metrics.CommitmentBill.Set(cov.Bill())
	var errs []error
	for _, obj := range list {
		if obj.DeletionTimestamp != nil {
			continue
		}
		var status stevedorev1.CommitmentStatus
		cond := metav1.Condition{Type: stevedorev1.ConditionReady, Status: metav1.ConditionTrue, Reason: "Applied",
			Message: "its room is filled before other capacity is bought", ObservedGeneration: obj.Generation}
		if err, ok := problems[obj.Name]; ok {
			cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, "Invalid", err.Error()
		} else if u, ok := used[obj.Name]; ok {
			status.Kind, status.Capacity, status.Used = u.Kind(), commitment.FormatAmount(u.Capacity()), commitment.FormatAmount(u.Used)
			status.CoveredNodes = int32(min(u.Nodes, 1<<30)) //nolint:gosec // bounded just above
			if u.Capacity() > 0 {
				status.Utilization = fmt.Sprintf("%.0f%%", 100*u.Used/u.Capacity())
			}
			metrics.CommitmentCapacity.WithLabelValues(u.Name, u.Kind(), u.Unit()).Set(u.Capacity())
			metrics.CommitmentUsed.WithLabelValues(u.Name, u.Kind(), u.Unit()).Set(u.Used)
		}
		if err := c.setStatus(ctx, obj.Name, status, cond); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// setStatus writes the status and its Ready condition when they differ from the stored ones (the condition's
// transition time is kept while its status is unchanged).
func (c *Controller) setStatus(ctx context.Context, name string, status stevedorev1.CommitmentStatus, cond metav1.Condition) error {
	_, err := reconcile.UpdateStatus(ctx, c.client.StevedoreV1().Commitments(), name, func(cur *stevedorev1.Commitment) bool {
		next := status.DeepCopy()
		next.Conditions = cur.Status.DeepCopy().Conditions
		meta.SetStatusCondition(&next.Conditions, cond)
		if equality.Semantic.DeepEqual(&cur.Status, next) {
			return false
		}
		cur.Status = *next
		return true
	})
	return err
}
