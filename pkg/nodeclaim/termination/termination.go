/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

// Package termination finishes what a NodeClaim's deletion starts, whatever deleted it (disruption, a user, a
// NodePool going): the Node is tainted, drained through the Eviction API in tiers within the NodePool's
// terminationGracePeriod, the instance terminated, and the finalizers removed.
package termination

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
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/retry"
	"k8s.io/client-go/util/workqueue"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/cloud"
	"github.com/stevedore-dev/stevedore/pkg/generated/clientset/versioned"
	typedv1 "github.com/stevedore-dev/stevedore/pkg/generated/clientset/versioned/typed/apis/v1"
	listers "github.com/stevedore-dev/stevedore/pkg/generated/listers/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/metrics"
	"github.com/stevedore-dev/stevedore/pkg/nodeclaim"
	"github.com/stevedore-dev/stevedore/pkg/podutil"
	"github.com/stevedore-dev/stevedore/pkg/reconcile"
)

// Event reasons of termination.
const (
	ReasonNotOwned   = "NotOwned"
	ReasonDraining   = "Draining"
	ReasonTerminated = "Terminated"
	ReasonEvicted    = "Evicted"
)

// Provisioning is what termination tells the provisioner: a node is gone (the room kept on it for DaemonSet pods
// goes too). The pods planned on a deleted NodeClaim go back to provisioning without being told: its plans follow
// the NodeClaims' deletions.
type Provisioning interface {
	ForgetDaemons(node string)
}

// Options are termination's clients, listers and collaborators.
type Options struct {
	Kube       kubernetes.Interface
	Stevedore  versioned.Interface
	Cloud      cloud.Provider
	Nodes      corelisters.NodeLister
	Pods       corelisters.PodLister
	NodeClaims listers.NodeClaimLister
	Recorder   events.EventRecorder
	Clock      clock.Clock
	// Provisioning is told what is gone. Required.
	Provisioning Provisioning
}

// Terminator drains and terminates deleted NodeClaims' nodes.
type Terminator struct {
	opts  Options
	nodes workqueue.TypedRateLimitingInterface[string]
}

// New returns a terminator; EnqueueNode hands it deleted nodes, Run drains them.
func New(opts Options) *Terminator {
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	return &Terminator{opts: opts, nodes: workqueue.NewTypedRateLimitingQueueWithConfig(
		workqueue.NewTypedItemExponentialFailureRateLimiter[string](time.Second, time.Minute),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: "node-termination"})}
}

// EnqueueNode asks for a deleted node of Stevedore's to be drained.
func (t *Terminator) EnqueueNode(name string) { t.nodes.Add(name) }

// drainWorkers bounds the nodes drained at once.
const drainWorkers = 4

// Run drains enqueued nodes until ctx ends.
func (t *Terminator) Run(ctx context.Context) {
	defer t.nodes.ShutDown()
	for range drainWorkers {
		go wait.UntilWithContext(ctx, func(ctx context.Context) { reconcile.Process(ctx, t.nodes, "Node", t.drainStep) }, time.Second)
	}
	<-ctx.Done()
}

func (t *Terminator) claims() typedv1.NodeClaimInterface {
	return t.opts.Stevedore.StevedoreV1().NodeClaims()
}

func (t *Terminator) claimEvent(claim *stevedorev1.NodeClaim, eventType, reason, action, note string, args ...any) {
	if t.opts.Recorder != nil {
		t.opts.Recorder.Eventf(claim, nil, eventType, reason, action, note, args...)
	}
}

func (t *Terminator) podEvent(pod *corev1.Pod, eventType, reason, action, note string, args ...any) {
	if t.opts.Recorder != nil {
		t.opts.Recorder.Eventf(pod, nil, eventType, reason, action, note, args...)
	}
}

// TerminateClaim finishes a deleted NodeClaim: its Node is deleted (and drained by Run), its instance
// terminated, then its finalizer removed.
func (t *Terminator) TerminateClaim(ctx context.Context, claim *stevedorev1.NodeClaim) (time.Duration, error) {
	if !stevedorev1.HasTerminationFinalizer(claim.Finalizers) {
		return 0, nil
	}
	if node := nodeclaim.NodeOf(t.opts.Nodes, claim); node != nil {
		if node.DeletionTimestamp == nil {
			if err := t.opts.Kube.CoreV1().Nodes().Delete(ctx, node.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				return 0, err
			}
		}
		if stevedorev1.HasTerminationFinalizer(node.Finalizers) {
			return 2 * time.Second, nil // the node's drain finishes first
		}
	}
	if claim.Status.NodeName != "" {
		t.opts.Provisioning.ForgetDaemons(claim.Status.NodeName) // the node is gone: the room kept for its DaemonSet pods goes too
	}
	if claim.Status.InstanceID != "" {
		err := t.opts.Cloud.Delete(ctx, claim.Status.InstanceID)
		switch {
		case errors.Is(err, cloud.ErrNotOwned):
			// a NodeClaim naming an instance this cluster did not launch: never terminate it, let the NodeClaim go
			klog.FromContext(ctx).Info("Not terminating an instance this cluster does not own; releasing the NodeClaim",
				"instance", claim.Status.InstanceID, "err", err)
			t.claimEvent(claim, corev1.EventTypeWarning, ReasonNotOwned, "Terminate",
				"instance %s lacks this cluster's ownership tag: left running", claim.Status.InstanceID)
			return 0, t.releaseClaim(ctx, claim.Name)
		case err != nil && !errors.Is(err, cloud.ErrNotFound):
			return 0, fmt.Errorf("terminating %s: %w", claim.Status.InstanceID, err)
		}
		pool, reason := claim.Labels[stevedorev1.LabelNodePool], disruptionReason(claim)
		klog.FromContext(ctx).Info("Terminated instance", "instance", claim.Status.InstanceID, "node", claim.Status.NodeName,
			"nodepool", pool, "type", claim.Status.InstanceType, "zone", claim.Status.Zone, "capacityType", claim.Status.CapacityType,
			"price", claim.Status.Price, "reason", reason, "age", t.opts.Clock.Since(claim.CreationTimestamp.Time).Round(time.Second))
		metrics.NodesTerminated.WithLabelValues(pool, claim.Status.Zone, claim.Status.CapacityType, reason).Inc()
		t.claimEvent(claim, corev1.EventTypeNormal, ReasonTerminated, "Terminate", "terminated instance %s", claim.Status.InstanceID)
	}
	return 0, t.releaseClaim(ctx, claim.Name)
}

// releaseClaim removes the termination finalizer from a deleted NodeClaim, letting it go.
func (t *Terminator) releaseClaim(ctx context.Context, name string) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := t.claims().Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		cur.Finalizers = removeString(cur.Finalizers, stevedorev1.TerminationFinalizer)
		_, err = t.claims().Update(ctx, cur, metav1.UpdateOptions{})
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

// drainStep drains a node a step; it asks to look again in a second until the drain is done.
func (t *Terminator) drainStep(ctx context.Context, name string) (time.Duration, error) {
	done, err := t.DrainNode(ctx, name)
	if err != nil || done {
		return 0, err
	}
	return time.Second, nil
}

// DrainNode takes one step of draining a deleted node of Stevedore's (Run calls it until done): it is tainted so nothing new lands, its pods are evicted through
// the Eviction API in tiers (regular pods, then critical ones, DaemonSet pods last; a PodDisruptionBudget's 429 is
// retried), bounded by the NodePool's terminationGracePeriod after which remaining pods are deleted; then the
// instance is terminated and the finalizer removed. It reports whether the node is done.
func (t *Terminator) DrainNode(ctx context.Context, name string) (bool, error) {
	node, err := t.opts.Kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
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
	if err := t.taintDisrupted(ctx, node); err != nil {
		return false, err
	}
	var claim *stevedorev1.NodeClaim
	if c, err := t.opts.NodeClaims.Get(node.Labels[stevedorev1.LabelNodeClaim]); err == nil {
		claim = c
	}
	remaining, err := t.evictTier(ctx, node, t.graceOver(node, claim))
	if err != nil {
		return false, err
	}
	if remaining > 0 {
		return false, nil
	}
	logger.Info("Node drained")
	if err := t.endClaim(ctx, claim); err != nil {
		return false, err
	}
	return true, t.releaseNode(ctx, name)
}

// graceOver reports whether a node being drained has run out of time: its NodeClaim's terminationGracePeriod since
// the node's deletion, or the drain deadline a disruption command set.
func (t *Terminator) graceOver(node *corev1.Node, claim *stevedorev1.NodeClaim) bool {
	if claim == nil {
		return false
	}
	if g := claim.Spec.TerminationGracePeriod; g != nil && t.opts.Clock.Since(node.DeletionTimestamp.Time) > g.Duration {
		return true
	}
	deadline, err := time.Parse(time.RFC3339, claim.Annotations[stevedorev1.AnnotationDrainDeadline])
	return err == nil && !t.opts.Clock.Now().Before(deadline)
}

// endClaim deletes a drained node's NodeClaim (nil: none) and terminates its instance.
func (t *Terminator) endClaim(ctx context.Context, claim *stevedorev1.NodeClaim) error {
	if claim == nil {
		return nil
	}
	if claim.DeletionTimestamp == nil {
		if err := t.claims().Delete(ctx, claim.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	if claim.Status.InstanceID != "" {
		if err := t.opts.Cloud.Delete(ctx, claim.Status.InstanceID); err != nil && !errors.Is(err, cloud.ErrNotFound) {
			return err
		}
	}
	return nil
}

// releaseNode removes the termination finalizer from a drained node, which lets it go.
func (t *Terminator) releaseNode(ctx context.Context, name string) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := t.opts.Kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		cur.Finalizers = removeString(cur.Finalizers, stevedorev1.TerminationFinalizer)
		_, err = t.opts.Kube.CoreV1().Nodes().Update(ctx, cur, metav1.UpdateOptions{})
		return err
	})
}

func (t *Terminator) taintDisrupted(ctx context.Context, node *corev1.Node) error {
	taint := stevedorev1.DisruptedTaint()
	if stevedorev1.IsDisrupted(node) {
		return nil
	}
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := t.opts.Kube.CoreV1().Nodes().Get(ctx, node.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if stevedorev1.IsDisrupted(cur) {
			return nil
		}
		cur.Spec.Taints = append(cur.Spec.Taints, taint)
		_, err = t.opts.Kube.CoreV1().Nodes().Update(ctx, cur, metav1.UpdateOptions{})
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

// podsOnNode lists the live pods bound to a node.
func (t *Terminator) podsOnNode(name string) []*corev1.Pod {
	pods, _ := t.opts.Pods.List(labels.Everything())
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
func (t *Terminator) evictTier(ctx context.Context, node *corev1.Node, expired bool) (int, error) {
	d := t.drainable(ctx, node.Name, expired)
	if len(d.pods) == 0 {
		return 0, nil
	}
	var blocked []string
	for _, pod := range d.pods {
		if pod.DeletionTimestamp != nil && !expired || d.held[pod.UID] {
			continue
		}
		if expired {
			if err := t.deleteNow(ctx, pod); err != nil {
				return 0, err
			}
			continue
		}
		if drainTier(pod) != d.lowest {
			continue
		}
		err := t.opts.Kube.PolicyV1().Evictions(pod.Namespace).Evict(ctx, &policyv1.Eviction{
			ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace}})
		switch {
		case err == nil:
			metrics.PodsEvicted.Inc()
			t.podEvent(pod, corev1.EventTypeNormal, ReasonEvicted, "Evict", "evicted: node %s is being terminated", node.Name)
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
	return len(d.pods), nil
}

// drainSet is what is left to drain on a node: the pods that must go before it does, the lowest drain tier among
// them, and those held (do-not-disrupt) rather than evicted.
type drainSet struct {
	pods   []*corev1.Pod
	lowest int
	held   map[types.UID]bool
}

// drainable lists the pods that must leave a node before it goes. Mirror pods go with the node, and so, until the
// grace period is over, do pods that tolerate the disrupted taint (they would be scheduled right back: DaemonSet
// pods that tolerate everything, for instance). A pod still terminating is waited for, and no later tier goes
// before it is gone; a do-not-disrupt pod is held, not evicted.
func (t *Terminator) drainable(ctx context.Context, node string, expired bool) drainSet {
	d := drainSet{lowest: 3, held: map[types.UID]bool{}}
	disrupted := stevedorev1.DisruptedTaint()
	for _, pod := range t.podsOnNode(node) {
		if podutil.IsMirrorPod(pod) {
			continue
		}
		if !expired && corev1helpers.TolerationsTolerateTaint(klog.FromContext(ctx), pod.Spec.Tolerations, &disrupted, false) {
			continue
		}
		d.pods = append(d.pods, pod)
		if pod.DeletionTimestamp == nil && !expired && podutil.DoNotDisrupt(pod.Annotations, startedAt(pod), t.opts.Clock.Now()) {
			// not evicted: it leaves when it finishes, or when the termination grace period is over
			d.held[pod.UID] = true
			continue
		}
		d.lowest = min(d.lowest, drainTier(pod))
	}
	return d
}

// startedAt is when a pod started (when it was created, before that).
func startedAt(pod *corev1.Pod) time.Time {
	if pod.Status.StartTime != nil {
		return pod.Status.StartTime.Time
	}
	return pod.CreationTimestamp.Time
}

// deleteNow deletes a pod without a grace period (the node's grace period is over).
func (t *Terminator) deleteNow(ctx context.Context, pod *corev1.Pod) error {
	zero := int64(0)
	err := t.opts.Kube.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	if err == nil {
		metrics.PodsEvicted.Inc()
	}
	return nil
}
