/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package disruption

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/retry"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/generated/clientset/versioned"
)

// claimWriter writes what disruption records: NodeClaim conditions, status and annotations, and events on a
// candidate's NodeClaim and Node.
type claimWriter struct {
	client   versioned.Interface
	recorder events.EventRecorder
}

// setCondition sets a condition of a NodeClaim's status.
func (w *claimWriter) setCondition(ctx context.Context, claim, condType string, status metav1.ConditionStatus, reason, message string) error {
	return w.updateStatus(ctx, claim, func(st *stevedorev1.NodeClaimStatus) {
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: condType, Status: status, Reason: reason, Message: message})
	})
}

// updateStatus changes a NodeClaim's status, retrying on conflicts; a NodeClaim gone is not an error.
func (w *claimWriter) updateStatus(ctx context.Context, name string, mutate func(*stevedorev1.NodeClaimStatus)) error {
	claims := w.client.StevedoreV1().NodeClaims()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := claims.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		mutate(&cur.Status)
		_, err = claims.UpdateStatus(ctx, cur, metav1.UpdateOptions{})
		return err
	})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// annotate sets one annotation on a NodeClaim (a merge patch).
func (w *claimWriter) annotate(ctx context.Context, name, key, value string) error {
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, key, value)
	_, err := w.client.StevedoreV1().NodeClaims().Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	return err
}

// event records an event on the candidate's NodeClaim and Node.
func (w *claimWriter) event(cand *Candidate, eventType, reason, note string) {
	w.eventFor(cand, eventType, reason, "Disrupt", note)
}

// eventFor records an event with an action on the candidate's NodeClaim and Node. The recorder folds events of
// the same object, reason and action into one series that keeps its first note: events whose notes must all be
// read take distinct actions.
func (w *claimWriter) eventFor(cand *Candidate, eventType, reason, action, note string) {
	if w.recorder == nil {
		return
	}
	w.recorder.Eventf(cand.NodeClaim, nil, eventType, reason, action, "%s", note)
	w.recorder.Eventf(cand.Node, nil, eventType, reason, action, "%s", note)
}
