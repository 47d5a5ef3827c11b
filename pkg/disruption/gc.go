/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package disruption

import (
	"context"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/klog/v2"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/cloud"
)

// orphanGracePeriod is how long an instance may run with no NodeClaim before it is terminated: long enough for a
// launch to record its instance on the NodeClaim, or for a restarted process to adopt it.
const orphanGracePeriod = 30 * time.Second

// runGC collects garbage every garbageCollectionInterval until ctx ends.
func (c *Controller) runGC(ctx context.Context) {
	for {
		if err := c.collectGarbage(ctx); err != nil && ctx.Err() == nil {
			klog.FromContext(ctx).Error(err, "Garbage collection failed; retrying")
		}
		select {
		case <-ctx.Done():
			return
		case <-c.opts.Clock.After(c.opts.Args.GarbageCollectionInterval.Duration):
		}
	}
}

// collectGarbage terminates instances tagged as this cluster's that no NodeClaim accounts for (a crash between a
// launch and its NodeClaim's update, a NodeClaim deleted around its launch), deletes NodeClaims whose instance is
// gone (terminated outside Stevedore), and has the cloud delete launch templates no launch uses any more.
func (c *Controller) collectGarbage(ctx context.Context) error {
	if c.opts.Cloud == nil {
		return nil
	}
	instances, err := c.opts.Cloud.List(ctx)
	if err != nil {
		return err
	}
	claims, err := c.opts.NodeClaims.List(labels.Everything())
	if err != nil {
		return err
	}
	live := c.terminateOrphans(ctx, instances, claims)
	for _, cl := range claims {
		if cl.DeletionTimestamp == nil && cl.Status.InstanceID != "" && !live[cl.Status.InstanceID] {
			c.deleteIfInstanceGone(ctx, cl)
		}
	}
	if lc, ok := c.opts.Cloud.(cloud.LaunchTemplateCollector); ok {
		n, err := lc.CollectLaunchTemplates(ctx)
		for range n {
			c.opts.Metrics.garbageCollected("launchtemplate")
		}
		if err != nil {
			return err
		}
	}
	if pc, ok := c.opts.Cloud.(cloud.PlacementGroupCollector); ok {
		n, err := pc.CollectPlacementGroups(ctx)
		for range n {
			c.opts.Metrics.garbageCollected("placementgroup")
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// terminateOrphans terminates the instances no NodeClaim accounts for once they are past orphanGracePeriod; it
// returns the ids of the instances alive.
func (c *Controller) terminateOrphans(ctx context.Context, instances []*cloud.Instance, claims []*stevedorev1.NodeClaim) map[string]bool {
	logger := klog.FromContext(ctx)
	byInstance := map[string]bool{}
	// launching: NodeClaims whose instance is not recorded yet; an instance tagged with one of them is its launch
	// in flight. An instance tagged with a NodeClaim that records another instance is a second launch: garbage.
	launching := map[string]bool{}
	for _, cl := range claims {
		if cl.Status.InstanceID != "" {
			byInstance[cl.Status.InstanceID] = true
		} else {
			launching[cl.Name] = true
		}
	}
	now := c.opts.Clock.Now()
	live := map[string]bool{}
	for _, inst := range instances {
		if gone(inst) {
			continue
		}
		live[inst.ID] = true
		if byInstance[inst.ID] || launching[inst.Tags[stevedorev1.LabelNodeClaim]] || now.Sub(inst.LaunchTime) < orphanGracePeriod {
			continue
		}
		if err := c.opts.Cloud.Delete(ctx, inst.ID); err != nil {
			logger.Error(err, "Terminating an orphaned instance failed", "instance", inst.ID)
			continue
		}
		logger.Info("Terminated orphaned instance: no NodeClaim accounts for it", "instance", inst.ID, "type", inst.Type,
			"zone", inst.Zone, "launched", inst.LaunchTime.UTC().Format(time.RFC3339), "nodeclaimTag", inst.Tags[stevedorev1.LabelNodeClaim])
		c.opts.Metrics.garbageCollected("instance")
	}
	return live
}

// gone reports whether an instance is terminated or on its way.
func gone(inst *cloud.Instance) bool {
	return inst.State == cloud.StateTerminated || inst.State == cloud.StateShuttingDown
}

// deleteIfInstanceGone deletes a NodeClaim whose instance the cloud's list did not show alive, once it launched
// orphanGracePeriod ago and the cloud confirms the instance is gone (the list may have raced with a launch).
func (c *Controller) deleteIfInstanceGone(ctx context.Context, cl *stevedorev1.NodeClaim) {
	launched := cl.CreationTimestamp.Time
	if cond := meta.FindStatusCondition(cl.Status.Conditions, stevedorev1.ConditionLaunched); cond != nil {
		launched = cond.LastTransitionTime.Time
	}
	if c.opts.Clock.Since(launched) < orphanGracePeriod {
		return
	}
	if inst, err := c.opts.Cloud.Get(ctx, cl.Status.InstanceID); err == nil && !gone(inst) {
		return
	}
	logger := klog.FromContext(ctx)
	err := c.opts.Stevedore.StevedoreV1().NodeClaims().Delete(ctx, cl.Name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		logger.Error(err, "Deleting a NodeClaim whose instance is gone failed", "nodeclaim", cl.Name)
		return
	}
	logger.Info("Deleted NodeClaim: its instance is gone", "nodeclaim", cl.Name, "instance", cl.Status.InstanceID,
		"node", cl.Status.NodeName, "nodepool", cl.Labels[stevedorev1.LabelNodePool])
	c.opts.Metrics.garbageCollected("nodeclaim")
}
