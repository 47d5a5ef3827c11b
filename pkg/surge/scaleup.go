/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package surge

import (
	"context"
	"fmt"
	"strconv"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"

	"github.com/stevedore-dev/stevedore/pkg/deletioncost"
	"github.com/stevedore-dev/stevedore/pkg/podutil"
)

// start ranks the owner's moving pods first for deletion, records the surge on the owner, expects its successors
// on the nodes targets plans for them, and scales it up.
func (s *Surger) start(ctx context.Context, sg *surging, targets map[types.UID]string) error {
	for _, pod := range sg.pods {
		sg.oldCosts[podutil.Key(pod)] = [2]*string{annotation(pod, deletioncost.AnnotationDeletionCost), annotation(pod, deletioncost.AnnotationManaged)}
		cost := strconv.Itoa(deletioncost.LeavingCost)
		if err := s.patchCost(ctx, pod, &cost, &cost); err != nil {
			return fmt.Errorf("ranking pod %s/%s first for deletion: %w", pod.Namespace, pod.Name, err)
		}
	}
	scale, err := s.getScale(ctx, sg.owner)
	if err != nil {
		return err
	}
	sg.from = scale.Spec.Replicas
	sg.to = sg.from + int32(len(sg.pods)) //nolint:gosec // G115: the pods of a few nodes
	if err := s.annotate(ctx, sg.owner, fmt.Sprintf("%d:%d", sg.from, sg.to)); err != nil {
		return fmt.Errorf("recording the surge on %s: %w", sg.owner, err)
	}
	for _, pod := range sg.pods {
		if node := targets[pod.UID]; node != "" {
			sg.nodes = append(sg.nodes, node)
		}
	}
	s.opts.Nominations.Expect(sg.owner.ReplicaSet, sg.nodes)
	// the resourceVersion read is the precondition: a conflict (the owner's status written meanwhile) reads again,
	// and the replicas must still be those recorded, or the surge's when an update whose answer was lost went through
	sent := false
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		scale, err := s.getScale(ctx, sg.owner)
		if err != nil {
			return err
		}
		switch {
		case sent && scale.Spec.Replicas == sg.to:
			return nil
		case scale.Spec.Replicas != sg.from:
			return fmt.Errorf("its replicas changed to %d meanwhile", scale.Spec.Replicas)
		}
		scale.Spec.Replicas = sg.to
		sent = true
		return s.updateScale(ctx, sg.owner, scale)
	})
	if err != nil {
		s.opts.Nominations.Forget(sg.owner.ReplicaSet)
		// the scale-up may have gone through unanswered: the owner goes back to its replicas (a failure here is
		// retried by Recover, as the record stays)
		if sent {
			if berr := s.scaleBack(ctx, sg); berr != nil {
				klog.FromContext(ctx).Error(berr, "Scaling back a surge that did not start; Recover retries it", "owner", sg.owner.String())
			}
		} else {
			_ = s.annotate(ctx, sg.owner, "")
		}
		return fmt.Errorf("scaling %s to %d: %w", sg.owner, sg.to, err)
	}
	return nil
}

// successorsReady reports whether every pod of the owner's ReplicaSet is Ready and there are as many as the
// surge asked for (the ReplicaSet controller then deletes the lowest-cost pods, the old ones); or why the surge
// stops (someone else changed the owner's scale).
func (s *Surger) successorsReady(sg *surging) (bool, string) {
	want, ok := s.currentReplicas(sg.owner)
	if !ok {
		return false, "it was deleted"
	}
	switch want {
	case sg.to:
	case sg.from:
		return false, "" // the cache has not seen the scale-up yet (or it was undone: the timeout ends the wait)
	default:
		return false, fmt.Sprintf("its replicas were changed to %d while it surged", want)
	}
	ready, live, err := s.podsOf(sg.owner.ReplicaSet)
	return err == nil && ready == live && ready >= sg.to, ""
}

// currentReplicas is the owner's spec.replicas as the informers see it.
func (s *Surger) currentReplicas(o Owner) (int32, bool) {
	if o.Kind == kindDeployment {
		d, err := s.opts.Deployments.Deployments(o.Namespace).Get(o.Name)
		if err != nil {
			return 0, false
		}
		return ptrValue(d.Spec.Replicas), true
	}
	rs, err := s.opts.ReplicaSets.ReplicaSets(o.Namespace).Get(o.Name)
	if err != nil {
		return 0, false
	}
	return ptrValue(rs.Spec.Replicas), true
}
