/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

// Package staticpool keeps each static NodePool (spec.replicas set) at its size: it creates NodeClaims when the
// NodePool has fewer live ones than replicas (limits.nodes permitting) and deletes the surplus when it has more.
// Pods never make a static NodePool grow, and consolidation leaves its nodes alone; drift and expiry replace them
// through the disruption loop, one at a time.
package staticpool

import (
	"context"
	"fmt"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/generated/clientset/versioned"
	listers "github.com/stevedore-dev/stevedore/pkg/generated/listers/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/podutil"
	"github.com/stevedore-dev/stevedore/pkg/reconcile"
	"github.com/stevedore-dev/stevedore/pkg/solver"
)

// Event reasons.
const (
	ReasonStaticScaledUp       = "StaticScaledUp"
	ReasonStaticScaledDown     = "StaticScaledDown"
	ReasonStaticScaleUpLimited = "StaticScaleUpLimited"
)

// DefaultInterval separates the controller's passes.
const DefaultInterval = 5 * time.Second

// Provisioner is what the controller uses of the provisioner: the NodeClaims including those just created, the
// nodes a static NodePool's missing replicas are planned as, and their creation.
type Provisioner interface {
	NodeClaims() ([]*stevedorev1.NodeClaim, error)
	PlanStaticNodes(ctx context.Context, np *stevedorev1.NodePool, n int, leaving ...string) ([]*solver.PlannedNode, error)
	CreateNodeClaims(ctx context.Context, nodes []*solver.PlannedNode, annotations map[string]string) []*stevedorev1.NodeClaim
}

// Options configure the controller.
type Options struct {
	Stevedore   versioned.Interface
	NodePools   listers.NodePoolLister
	Pods        corelisters.PodLister
	Provisioner Provisioner
	Recorder    events.EventRecorder
	// Interval separates passes. Default DefaultInterval.
	Interval time.Duration
}

// Controller keeps static NodePools at their size.
type Controller struct {
	opts Options
	// limited is the last StaticScaleUpLimited message reported, by NodePool (reported once per change).
	limited map[string]string
}

// New returns a controller.
func New(opts Options) *Controller {
	if opts.Interval == 0 {
		opts.Interval = DefaultInterval
	}
	return &Controller{opts: opts, limited: map[string]string{}}
}

// Run reconciles every Interval until ctx ends.
func (c *Controller) Run(ctx context.Context) {
	reconcile.Every(ctx, "staticpool", c.opts.Interval, "Keeping static NodePools at their size failed", c.Reconcile)
}

// Reconcile brings every static NodePool to its replicas, in name order.
func (c *Controller) Reconcile(ctx context.Context) error {
	pools, err := c.opts.NodePools.List(labels.Everything())
	if err != nil {
		return err
	}
	sort.Slice(pools, func(i, j int) bool { return pools[i].Name < pools[j].Name })
	claims, err := c.opts.Provisioner.NodeClaims() // with those just created that the cache does not show yet
	if err != nil {
		return err
	}
	byPool := map[string][]*stevedorev1.NodeClaim{}
	for _, cl := range claims {
		byPool[cl.Labels[stevedorev1.LabelNodePool]] = append(byPool[cl.Labels[stevedorev1.LabelNodePool]], cl)
	}
	var firstErr error
	for _, np := range pools {
		if np.Spec.Replicas == nil || np.DeletionTimestamp != nil {
			continue
		}
		if err := c.reconcilePool(ctx, np, byPool[np.Name]); err != nil && firstErr == nil {
			firstErr = fmt.Errorf("NodePool %s: %w", np.Name, err)
		}
	}
	return firstErr
}

// reconcilePool creates the missing NodeClaims of a static NodePool, or deletes its surplus once no disruption is
// replacing one of its nodes (a replacement briefly makes one too many).
func (c *Controller) reconcilePool(ctx context.Context, np *stevedorev1.NodePool, claims []*stevedorev1.NodeClaim) error {
	logger := klog.FromContext(ctx).WithValues("nodepool", np.Name)
	want := int(*np.Spec.Replicas)
	var live []*stevedorev1.NodeClaim
	settled := true
	for _, cl := range claims {
		if cl.DeletionTimestamp != nil {
			continue
		}
		live = append(live, cl)
		if cl.Status.DisruptionReason != "" {
			settled = false
		}
	}
	switch {
	case len(live) < want:
		missing := want - len(live)
		planned, err := c.opts.Provisioner.PlanStaticNodes(ctx, np, missing)
		if err != nil {
			c.reportLimited(np, err.Error())
			logger.V(1).Info("Static NodePool cannot reach its size", "replicas", want, "nodeclaims", len(live), "err", err)
		} else {
			c.reportLimited(np, "")
		}
		if len(planned) == 0 {
			return nil
		}
		created := c.opts.Provisioner.CreateNodeClaims(ctx, planned, nil)
		n := 0
		for _, cl := range created {
			if cl != nil {
				n++
			}
		}
		logger.Info("Static NodePool scaled up", "replicas", want, "nodeclaims", len(live)+n, "created", n)
		c.event(np, corev1.EventTypeNormal, ReasonStaticScaledUp, fmt.Sprintf("created %d NodeClaims to keep %d nodes", n, want))
		return nil
	case len(live) > want && settled:
		surplus := c.surplus(live, len(live)-want)
		for _, cl := range surplus {
			if err := c.opts.Stevedore.StevedoreV1().NodeClaims().Delete(ctx, cl.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				return fmt.Errorf("deleting NodeClaim %s: %w", cl.Name, err)
			}
		}
		names := make([]string, len(surplus))
		for i, cl := range surplus {
			names[i] = cl.Name
		}
		logger.Info("Static NodePool scaled down", "replicas", want, "deleted", names)
		c.event(np, corev1.EventTypeNormal, ReasonStaticScaledDown, fmt.Sprintf("deleted %d NodeClaims to keep %d nodes: %v", len(surplus), want, names))
	}
	return nil
}

// surplus chooses the n NodeClaims to delete: those whose node is not up yet first, then those running the
// fewest pods, then the newest; ties by name.
func (c *Controller) surplus(live []*stevedorev1.NodeClaim, n int) []*stevedorev1.NodeClaim {
	pods := map[string]int{}
	if c.opts.Pods != nil {
		if all, err := c.opts.Pods.List(labels.Everything()); err == nil {
			for _, p := range all {
				if p.Spec.NodeName != "" && podutil.Reschedulable(p) {
					pods[p.Spec.NodeName]++
				}
			}
		}
	}
	out := append([]*stevedorev1.NodeClaim(nil), live...)
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if ia, ib := a.IsInitialized(), b.IsInitialized(); ia != ib {
			return !ia
		}
		if pa, pb := pods[a.Status.NodeName], pods[b.Status.NodeName]; pa != pb {
			return pa < pb
		}
		if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
			return a.CreationTimestamp.After(b.CreationTimestamp.Time)
		}
		return a.Name < b.Name
	})
	return out[:n]
}

// reportLimited records a StaticScaleUpLimited event when the reason the NodePool cannot reach its size changes
// ("" clears it).
func (c *Controller) reportLimited(np *stevedorev1.NodePool, why string) {
	if c.limited[np.Name] == why {
		return
	}
	c.limited[np.Name] = why
	if why != "" {
		c.event(np, corev1.EventTypeWarning, ReasonStaticScaleUpLimited, why)
	}
}

func (c *Controller) event(np *stevedorev1.NodePool, eventType, reason, note string) {
	if c.opts.Recorder != nil {
		c.opts.Recorder.Eventf(np, nil, eventType, reason, "Scale", "%s", note)
	}
}
