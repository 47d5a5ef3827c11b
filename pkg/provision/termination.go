/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package provision

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/cloud"
	typedv1 "github.com/stevedore-dev/stevedore/pkg/generated/clientset/versioned/typed/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/metrics"
	"github.com/stevedore-dev/stevedore/pkg/podutil"
)

// Event reasons of termination.
const (
	ReasonNotOwned   = "NotOwned"
	ReasonDraining   = "Draining"
	ReasonTerminated = "Terminated"
	ReasonEvicted    = "Evicted"
)

func client(p *Provisioner) typedv1.NodeClaimInterface {
	return p.opts.Stevedore.StevedoreV1().NodeClaims()
}

// terminateClaim finishes a deleted NodeClaim: its Node is deleted (and drained by processNode), its instance
// terminated, then its finalizer removed.
func (l *Lifecycle) terminateClaim(ctx context.Context, claim *stevedorev1.NodeClaim) (time.Duration, error) {
	p := l.prov
	p.ForgetClaim(ctx, claim.Name)
	if !stevedorev1.HasTerminationFinalizer(claim.Finalizers) {
		return 0, nil
	}
	if node := l.nodeOf(claim); node != nil {
		if node.DeletionTimestamp == nil {
			if err := p.opts.Kube.CoreV1().Nodes().Delete(ctx, node.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				return 0, err
			}
		}
		if stevedorev1.HasTerminationFinalizer(node.Finalizers) {
			return 2 * time.Second, nil // the node's drain finishes first
		}
	}
	if claim.Status.NodeName != "" {
		p.ForgetDaemons(claim.Status.NodeName) // the node is gone: the room kept for its DaemonSet pods goes too
	}
	if claim.Status.InstanceID != "" {
		err := p.opts.Cloud.Delete(ctx, claim.Status.InstanceID)
		switch {
		case errors.Is(err, cloud.ErrNotOwned):
			// a NodeClaim naming an instance this cluster did not launch: never terminate it, let the NodeClaim go
			klog.FromContext(ctx).Info("Not terminating an instance this cluster does not own; releasing the NodeClaim",
				"instance", claim.Status.InstanceID, "err", err)
			p.claimEvent(claim, corev1.EventTypeWarning, ReasonNotOwned, "Terminate",
				"instance %s lacks this cluster's ownership tag: left running", claim.Status.InstanceID)
			return 0, l.releaseClaim(ctx, claim.Name)
		case err != nil && !errors.Is(err, cloud.ErrNotFound):
			return 0, fmt.Errorf("terminating %s: %w", claim.Status.InstanceID, err)
		}
		pool, reason := claim.Labels[stevedorev1.LabelNodePool], disruptionReason(claim)
		klog.FromContext(ctx).Info("Terminated instance", "instance", claim.Status.InstanceID, "node", claim.Status.NodeName,
			"nodepool", pool, "type", claim.Status.InstanceType, "zone", claim.Status.Zone, "capacityType", claim.Status.CapacityType,
			"price", claim.Status.Price, "reason", reason, "age", p.opts.Clock.Since(claim.CreationTimestamp.Time).Round(time.Second))
		metrics.NodesTerminated.WithLabelValues(pool, claim.Status.Zone, claim.Status.CapacityType, reason).Inc()
		p.claimEvent(claim, corev1.EventTypeNormal, ReasonTerminated, "Terminate", "terminated instance %s", claim.Status.InstanceID)
	}
	return 0, l.releaseClaim(ctx, claim.Name)
}

// releaseClaim removes the termination finalizer from a deleted NodeClaim, letting it go.
func (l *Lifecycle) releaseClaim(ctx context.Context, name string) error {
	p := l.prov
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := client(p).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		cur.Finalizers = removeString(cur.Finalizers, stevedorev1.TerminationFinalizer)
		_, err = client(p).Update(ctx, cur, metav1.UpdateOptions{})
		return err
	})
}

func disruptionReason(c *stevedorev1.NodeClaim) string {
	if c.Status.DisruptionReason != "" {
		return c.Status.DisruptionReason
	}
	return "Deleted"
}

func removeString(list []string, s string) []string {
	out := list[:0:0]
	for _, x := range list {
		if x != s {
			out = append(out, x)
		}
	}
	return out
}

func (l *Lifecycle) processNode(ctx context.Context) {
	for {
		name, quit := l.nodes.Get()
		if quit {
			return
		}
		done, err := l.drainNode(ctx, name)
		switch {
		case err != nil:
			klog.FromContext(ctx).V(2).Info("Draining the node failed; retrying", "node", name, "err", err)
			l.nodes.AddRateLimited(name)
		case !done:
			l.nodes.AddAfter(name, time.Second)
		default:
			l.nodes.Forget(name)
		}
		l.nodes.Done(name)
	}
}

// drainNode drains a deleted node of Stevedore's: it is tainted so nothing new lands, its pods are evicted through
// the Eviction API in tiers (regular pods, then critical ones, DaemonSet pods last; a PodDisruptionBudget's 429 is
// retried), bounded by the NodePool's terminationGracePeriod after which remaining pods are deleted; then the
// instance is terminated and the finalizer removed. It reports whether the node is done.
func (l *Lifecycle) drainNode(ctx context.Context, name string) (bool, error) {
	p := l.prov
	node, err := p.opts.Kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return true, nil
	}
	if err != nil {
		return false, err
	}
	if node.DeletionTimestamp == nil || !stevedorev1.HasTerminationFinalizer(node.Finalizers) {
		return true, nil
	}
	logger := klog.FromContext(ctx).WithValues("node", name)
	if err := l.taintDisrupted(ctx, node); err != nil {
		return false, err
	}
	var claim *stevedorev1.NodeClaim
	if c, err := p.opts.NodeClaims.Get(node.Labels[stevedorev1.LabelNodeClaim]); err == nil {
		claim = c
	}
	var grace *time.Duration
	if claim != nil && claim.Spec.TerminationGracePeriod != nil {
		d := claim.Spec.TerminationGracePeriod.Duration
		grace = &d
	}
	expired := grace != nil && p.opts.Clock.Since(node.DeletionTimestamp.Time) > *grace
	if claim != nil {
		if deadline, err := time.Parse(time.RFC3339, claim.Annotations[stevedorev1.AnnotationDrainDeadline]); err == nil && !p.opts.Clock.Now().Before(deadline) {
			expired = true
		}
	}
	remaining, err := l.evictTier(ctx, node, expired)
	if err != nil {
		return false, err
	}
	if remaining > 0 {
		return false, nil
	}
	logger.Info("Node drained")
	if claim != nil {
		if claim.DeletionTimestamp == nil {
			if err := client(p).Delete(ctx, claim.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				return false, err
			}
		}
		if claim.Status.InstanceID != "" {
			if err := p.opts.Cloud.Delete(ctx, claim.Status.InstanceID); err != nil && !errors.Is(err, cloud.ErrNotFound) {
				return false, err
			}
		}
	}
	return true, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := p.opts.Kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		cur.Finalizers = removeString(cur.Finalizers, stevedorev1.TerminationFinalizer)
		_, err = p.opts.Kube.CoreV1().Nodes().Update(ctx, cur, metav1.UpdateOptions{})
		return err
	})
}

func (l *Lifecycle) taintDisrupted(ctx context.Context, node *corev1.Node) error {
	taint := stevedorev1.DisruptedTaint()
	if hasTaint(node.Spec.Taints, taint) {
		return nil
	}
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := l.prov.opts.Kube.CoreV1().Nodes().Get(ctx, node.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if hasTaint(cur.Spec.Taints, taint) {
			return nil
		}
		cur.Spec.Taints = append(cur.Spec.Taints, taint)
		_, err = l.prov.opts.Kube.CoreV1().Nodes().Update(ctx, cur, metav1.UpdateOptions{})
		return err
	})
}

// drainTier orders pods for eviction.
func drainTier(pod *corev1.Pod) int {
	if podutil.IsDaemonSetPod(pod) {
		return 2
	}
	if isCritical(pod) {
		return 1
	}
	return 0
}

func isCritical(pod *corev1.Pod) bool {
	if pod.Spec.PriorityClassName == "system-cluster-critical" || pod.Spec.PriorityClassName == "system-node-critical" {
		return true
	}
	return pod.Spec.Priority != nil && *pod.Spec.Priority >= 2000000000
}

// PodsOnNode lists the live pods bound to a node.
func (p *Provisioner) PodsOnNode(name string) []*corev1.Pod {
	pods, _ := p.opts.Pods.List(labels.Everything())
	var out []*corev1.Pod
	for _, pod := range pods {
		if pod.Spec.NodeName == name && pod.Status.Phase != corev1.PodSucceeded && pod.Status.Phase != corev1.PodFailed {
			out = append(out, pod)
		}
	}
	return out
}

// evictTier evicts the pods of the lowest tier still on the node and returns how many pods remain to go. Once
// the grace period is over, remaining pods are deleted instead.
func (l *Lifecycle) evictTier(ctx context.Context, node *corev1.Node, expired bool) (int, error) {
	p := l.prov
	var pods []*corev1.Pod
	lowest := 3
	held := map[types.UID]bool{}
	disrupted := []corev1.Taint{stevedorev1.DisruptedTaint()}
	for _, pod := range p.PodsOnNode(node.Name) {
		// A pod that tolerates the disrupted taint would be scheduled right back (DaemonSet pods that tolerate
		// everything, for instance); it goes with the node.
		if tolerates(pod, disrupted) && !expired {
			continue
		}
		if podutil.IsMirrorPod(pod) || pod.DeletionTimestamp != nil && !expired {
			if !podutil.IsMirrorPod(pod) {
				// still terminating: wait for it, and let no later tier go before it is gone
				pods = append(pods, pod)
				lowest = min(lowest, drainTier(pod))
			}
			continue
		}
		started := pod.CreationTimestamp.Time
		if pod.Status.StartTime != nil {
			started = pod.Status.StartTime.Time
		}
		if !expired && podutil.DoNotDisrupt(pod.Annotations, started, p.opts.Clock.Now()) {
			// not evicted: it leaves when it finishes, or when the termination grace period is over
			pods = append(pods, pod)
			held[pod.UID] = true
			continue
		}
		pods = append(pods, pod)
		if t := drainTier(pod); t < lowest {
			lowest = t
		}
	}
	if len(pods) == 0 {
		return 0, nil
	}
	var blocked []string
	for _, pod := range pods {
		if pod.DeletionTimestamp != nil && !expired || held[pod.UID] {
			continue
		}
		if drainTier(pod) != lowest && !expired {
			continue
		}
		if expired {
			zero := int64(0)
			err := p.opts.Kube.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
			if err != nil && !apierrors.IsNotFound(err) {
				return 0, err
			}
			if err == nil {
				metrics.PodsEvicted.Inc()
			}
			continue
		}
		err := p.opts.Kube.PolicyV1().Evictions(pod.Namespace).Evict(ctx, &policyv1.Eviction{
			ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace}})
		switch {
		case err == nil:
			metrics.PodsEvicted.Inc()
			p.event(pod, corev1.EventTypeNormal, ReasonEvicted, "Evict", "evicted: node %s is being terminated", node.Name)
		case apierrors.IsNotFound(err):
		case apierrors.IsTooManyRequests(err):
			blocked = append(blocked, pod.Namespace+"/"+pod.Name)
		default:
			return 0, fmt.Errorf("evicting %s/%s: %w", pod.Namespace, pod.Name, err)
		}
	}
	if len(blocked) > 0 {
		klog.FromContext(ctx).V(2).Info("Evictions blocked by PodDisruptionBudgets; retrying", "node", node.Name, "pods", strings.Join(blocked, ","))
	}
	return len(pods), nil
}
