/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package lifecycle

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/metrics"
)

// awaitRegistration is called while a launched NodeClaim has no node: past the registration timeout the NodeClaim
// is deleted (termination ends its instance) and its pods go back to provisioning; before, it returns when to
// look again.
func (l *Lifecycle) awaitRegistration(ctx context.Context, claim *stevedorev1.NodeClaim) (time.Duration, error) {
	waited := l.opts.Clock.Since(launchTime(claim))
	if waited <= l.opts.Args.RegistrationTimeout.Duration {
		return l.opts.Args.RegistrationTimeout.Duration - waited + time.Second, nil
	}
	klog.FromContext(ctx).Info("Node did not register in time; deleting the NodeClaim and its instance",
		"instance", claim.Status.InstanceID, "waited", waited.Round(time.Second))
	l.event(claim, corev1.EventTypeWarning, ReasonRegistrationTimeout, "Register",
		"node %s did not register within %s", claim.Status.NodeName, l.opts.Args.RegistrationTimeout.Duration)
	metrics.LaunchFailures.WithLabelValues(claim.Labels[stevedorev1.LabelNodePool], "RegistrationTimeout").Inc()
	return 0, l.claims().Delete(ctx, claim.Name, metav1.DeleteOptions{})
}

// launchTime is when a NodeClaim's instance was launched (when it was created, before that).
func launchTime(claim *stevedorev1.NodeClaim) time.Time {
	if c := meta.FindStatusCondition(claim.Status.Conditions, stevedorev1.ConditionLaunched); c != nil {
		return c.LastTransitionTime.Time
	}
	return claim.CreationTimestamp.Time
}
