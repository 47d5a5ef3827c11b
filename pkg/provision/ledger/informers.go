/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package ledger

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/reconcile"
)

// Register has the ledger follow the informers: a NodeClaim marked for deletion or deleted drops its plan (its
// pods are provisioned again) whatever deleted it, and a pod deleted drops its own plan and reservation.
func (l *Ledger) Register(ctx context.Context, claims, pods cache.SharedIndexInformer) error {
	if _, err := claims.AddEventHandler(l.claimEvents(ctx)); err != nil {
		return err
	}
	_, err := pods.AddEventHandler(l.podEvents(ctx))
	return err
}

// claimEvents drops the plan of a NodeClaim marked for deletion or deleted.
func (l *Ledger) claimEvents(ctx context.Context) cache.ResourceEventHandlerFuncs {
	return cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(_, obj any) {
			if c, ok := obj.(*stevedorev1.NodeClaim); ok && c.DeletionTimestamp != nil {
				l.ForgetClaim(ctx, c.Name)
			}
		},
		DeleteFunc: func(obj any) {
			if c, ok := reconcile.Deleted[*stevedorev1.NodeClaim](obj); ok {
				l.ForgetClaim(ctx, c.Name)
			}
		},
	}
}

// podEvents drops the plan and the reservation of a deleted pod.
func (l *Ledger) podEvents(ctx context.Context) cache.ResourceEventHandlerFuncs {
	return cache.ResourceEventHandlerFuncs{
		DeleteFunc: func(obj any) {
			if pod, ok := reconcile.Deleted[*corev1.Pod](obj); ok {
				l.Deleted(ctx, pod)
			}
		},
	}
}
