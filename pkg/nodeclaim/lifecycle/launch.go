/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/cloud"
	"github.com/stevedore-dev/stevedore/pkg/metrics"
	"github.com/stevedore-dev/stevedore/pkg/resources"
)

// launch creates the NodeClaim's instance, records it in the NodeClaim's status and nominates the pods planned
// on it to its node.
func (l *Lifecycle) launch(ctx context.Context, claim *stevedorev1.NodeClaim) (time.Duration, error) {
	inst, err := l.opts.Cloud.Create(ctx, claim)
	if err != nil {
		return 0, l.launchFailed(ctx, claim, err)
	}
	launched, err := l.recordLaunch(ctx, claim, inst)
	if err != nil {
		return 0, err
	}
	pods := l.opts.Provisioning.AssignedPods(claim.Name)
	podNames := make([]string, 0, len(pods))
	for _, pod := range pods {
		podNames = append(podNames, pod.Namespace+"/"+pod.Name)
	}
	sort.Strings(podNames)
	klog.FromContext(ctx).Info("Launched instance", "nodepool", claim.Labels[stevedorev1.LabelNodePool], "instance", inst.ID,
		"node", inst.NodeName, "type", inst.Type, "zone", inst.Zone, "capacityType", inst.CapacityType,
		"price", stevedorev1.FormatPrice(inst.Price), "pods", podNames)
	l.event(claim, corev1.EventTypeNormal, ReasonLaunched, "Launch", "launched %s: %s in %s, %s, $%s/h, node %s%s",
		inst.ID, inst.Type, inst.Zone, inst.CapacityType, stevedorev1.FormatPrice(inst.Price), inst.NodeName, forPods(podNames))
	l.releaseOverflow(ctx, launched)
	l.opts.Provisioning.NominateAssigned(ctx, launched)
	return l.opts.Args.RegistrationTimeout.Duration, nil
}

// launchedForMax is how many pods a Launched event names; the NodeClaim's planned-pods annotation names them all.
const launchedForMax = 20

// forPods names, for a Launched event, the pods planned on the NodeClaim ("" when none).
func forPods(names []string) string {
	switch n := len(names); {
	case n == 0:
		return ""
	case n > launchedForMax:
		return fmt.Sprintf(", for %d pods: %s and %d more", n, strings.Join(names[:launchedForMax], ", "), n-launchedForMax)
	default:
		return fmt.Sprintf(", for %d pods: %s", n, strings.Join(names, ", "))
	}
}

// launchFailed handles a failed launch; it returns the error to retry with, or nil when the NodeClaim is deleted.
func (l *Lifecycle) launchFailed(ctx context.Context, claim *stevedorev1.NodeClaim, err error) error {
	logger := klog.FromContext(ctx)
	prov := l.opts.Provisioning
	pool := claim.Labels[stevedorev1.LabelNodePool]
	var ice *cloud.InsufficientCapacityError
	var notReady *cloud.NodeClassNotReadyError
	var config *cloud.LaunchConfigurationError
	switch {
	case errors.As(err, &ice):
		logger.Info("No capacity for the NodeClaim in any offering; deleting it so its pods are provisioned again", "tried", ice.Tried)
		l.event(claim, corev1.EventTypeWarning, ReasonLaunchFailed, "Launch", "no capacity: %v", err)
		metrics.LaunchFailures.WithLabelValues(pool, "InsufficientCapacity").Inc()
		// the cloud marked the offerings it tried unavailable: plan the pods again on what is left, not on
		// the instance types cached before the launch
		prov.OfferingsChanged()
		return l.claims().Delete(ctx, claim.Name, metav1.DeleteOptions{})
	case errors.As(err, &notReady), errors.As(err, &config):
		l.event(claim, corev1.EventTypeWarning, ReasonLaunchFailed, "Launch", "%v", err)
		metrics.LaunchFailures.WithLabelValues(pool, "LaunchConfiguration").Inc()
		if uerr := l.setCondition(ctx, claim.Name, stevedorev1.ConditionLaunched, metav1.ConditionFalse, "LaunchFailed", err.Error()); uerr != nil {
			return uerr
		}
		if l.opts.Clock.Since(claim.CreationTimestamp.Time) > l.opts.Args.RegistrationTimeout.Duration {
			logger.Info("NodeClaim could not launch before the registration timeout; deleting it", "err", err)
			return l.claims().Delete(ctx, claim.Name, metav1.DeleteOptions{})
		}
		return err
	default:
		// throttling, 5xx, timeouts: the SDK retried already; the NodeClaim is tried again with backoff
		code := cloudErrorCode(err)
		logger.Info("Launch failed; retrying with backoff", "code", code, "err", err)
		l.event(claim, corev1.EventTypeWarning, ReasonLaunchFailed, "Launch", "launch failed (%s), retrying: %v", code, err)
		metrics.LaunchFailures.WithLabelValues(pool, code).Inc()
		return fmt.Errorf("launching: %w", err)
	}
}

// recordLaunch writes the launched instance into the NodeClaim's status (and a reservation's labels).
func (l *Lifecycle) recordLaunch(ctx context.Context, claim *stevedorev1.NodeClaim, inst *cloud.Instance) (*stevedorev1.NodeClaim, error) {
	its := l.opts.Provisioning.InstanceTypesOf(ctx, &stevedorev1.NodeClaim{ObjectMeta: claim.ObjectMeta, Status: stevedorev1.NodeClaimStatus{InstanceType: inst.Type}})
	var written *stevedorev1.NodeClaim
	cached := claim.DeepCopy() // the copy reconciled, from the cache; a conflict reads it again
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur := cached
		cached = nil
		if cur == nil {
			got, err := l.claims().Get(ctx, claim.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			cur = got
		}
		cur.Status.ProviderID, cur.Status.InstanceID, cur.Status.NodeName = inst.ProviderID, inst.ID, inst.NodeName
		cur.Status.InstanceType, cur.Status.Zone, cur.Status.ZoneID, cur.Status.CapacityType = inst.Type, inst.Zone, inst.ZoneID, inst.CapacityType
		cur.Status.ImageID, cur.Status.Price = inst.ImageID, stevedorev1.FormatPrice(inst.Price)
		if it, ok := its[inst.Type]; ok {
			cur.Status.Capacity = it.Capacity
			cur.Status.Allocatable = it.Allocatable()
		}
		meta.SetStatusCondition(&cur.Status.Conditions, metav1.Condition{Type: stevedorev1.ConditionLaunched, Status: metav1.ConditionTrue,
			Reason: "Launched", Message: fmt.Sprintf("instance %s (%s in %s, %s)", inst.ID, inst.Type, inst.Zone, inst.CapacityType),
			ObservedGeneration: cur.Generation})
		var err error
		written, err = l.claims().UpdateStatus(ctx, cur, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("recording the launch of %s: %w", inst.ID, err)
	}
	if labels := inst.LaunchLabels(); len(labels) > 0 {
		if err := l.labelLaunch(ctx, claim.Name, labels); err != nil {
			return nil, fmt.Errorf("labelling the launch of %s: %w", inst.ID, err)
		}
	}
	return written, nil
}

// releaseOverflow hands back to provisioning the pods planned on a NodeClaim that the instance type EC2 picked
// cannot hold (it picked a type other than the cheapest planned).
func (l *Lifecycle) releaseOverflow(ctx context.Context, claim *stevedorev1.NodeClaim) {
	alloc := claim.Status.Allocatable
	if len(alloc) == 0 {
		return
	}
	pods := l.opts.Provisioning.AssignedPods(claim.Name)
	sort.Slice(pods, func(i, j int) bool {
		return resources.Pod(pods[i]).Weight() < resources.Pod(pods[j]).Weight()
	})
	capacity := resources.List(alloc)
	used := resources.Requests{}
	for _, ds := range l.opts.Provisioning.DaemonSetPods(ctx, claim) {
		used = used.Add(resources.Pod(ds))
	}
	for _, pod := range pods {
		if next := used.Add(resources.Pod(pod)); next.Fits(capacity) {
			used = next
			continue
		}
		klog.FromContext(ctx).Info("Launched instance type cannot hold a planned pod; provisioning it again", "pod", klog.KObj(pod), "type", claim.Status.InstanceType)
		l.opts.Provisioning.Replan(ctx, pod)
	}
}

// cloudErrorCode is the cloud API's error code in err (RequestLimitExceeded, InternalError, ...), or CloudError
// when the call got no coded answer (a timeout, a refused connection).
func cloudErrorCode(err error) string {
	var coded interface{ ErrorCode() string }
	if errors.As(err, &coded) && coded.ErrorCode() != "" {
		return coded.ErrorCode()
	}
	return "CloudError"
}

// labelLaunch gives a NodeClaim the labels its launch decided (a reserved instance's reservation, as Karpenter
// labels reserved nodes); its node gets them when it registers.
func (l *Lifecycle) labelLaunch(ctx context.Context, name string, labels map[string]string) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := l.claims().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if cur.Labels == nil {
			cur.Labels = map[string]string{}
		}
		changed := false
		for k, v := range labels {
			if cur.Labels[k] != v {
				cur.Labels[k], changed = v, true
			}
		}
		if !changed {
			return nil
		}
		_, err = l.claims().Update(ctx, cur, metav1.UpdateOptions{})
		return err
	})
}
