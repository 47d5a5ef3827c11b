/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package interruption

import (
	"context"
	"sort"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/cloud"
)

// CapacityBlocks tells when capacity reservations end (the cloud provider).
type CapacityBlocks interface {
	// CapacityBlockEnds returns the end of each of the reservations that is a Capacity Block.
	CapacityBlockEnds(ctx context.Context, reservationIDs []string) (map[string]time.Time, error)
}

// RunCapacityBlocks checks every BlockCheckInterval the Capacity Blocks that NodeClaims run in, and replaces and
// drains the nodes of blocks that end within cloud.CapacityBlockDrainLead, as an interruption notice would. Errors are
// logged and the check retried; they never stop it.
func (c *Controller) RunCapacityBlocks(ctx context.Context) {
	if c.opts.Reservations == nil {
		return
	}
	logger := klog.FromContext(ctx).WithName("capacity-blocks")
	ctx = klog.NewContext(ctx, logger)
	wait.UntilWithContext(ctx, func(ctx context.Context) {
		if err := c.checkCapacityBlocks(ctx); err != nil && ctx.Err() == nil {
			logger.Error(err, "Checking the Capacity Blocks of nodes failed; retrying")
		}
	}, c.opts.BlockCheckInterval)
}

// checkCapacityBlocks acts on the NodeClaims in Capacity Blocks that end within cloud.CapacityBlockDrainLead.
func (c *Controller) checkCapacityBlocks(ctx context.Context) error {
	claims, err := c.opts.NodeClaims.List(labels.SelectorFromSet(labels.Set{
		stevedorev1.LabelCapacityReservationType: stevedorev1.ReservationTypeCapacityBlock}))
	if err != nil || len(claims) == 0 {
		return err
	}
	sort.Slice(claims, func(i, j int) bool { return claims[i].Name < claims[j].Name })
	seen := map[string]bool{}
	var ids []string
	for _, cl := range claims {
		if id := cl.Labels[stevedorev1.LabelCapacityReservationID]; id != "" && !seen[id] {
			seen[id] = true
			ids = append(ids, id)
		}
	}
	ends, err := c.opts.Reservations.CapacityBlockEnds(ctx, ids)
	if err != nil {
		return err
	}
	now := c.opts.Clock.Now()
	for _, cl := range claims {
		end, ok := ends[cl.Labels[stevedorev1.LabelCapacityReservationID]]
		if !ok || cl.DeletionTimestamp != nil || now.Before(end.Add(-cloud.CapacityBlockDrainLead)) {
			continue
		}
		c.act(ctx, Message{Kind: KindCapacityBlockExpiring, Time: end}, cl)
	}
	return nil
}
