/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

// Package buffer keeps warm capacity for CapacityBuffers: each buffer's chunks are virtual pods (never created)
// that the provisioner keeps room for, launching nodes when the room on the cluster's nodes does not hold them.
// Real pods take that room first; the next pass launches again for the chunks left without room.
package buffer

import (
	"context"
	"fmt"
	"math"
	"sort"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/retry"
	resourcehelper "k8s.io/component-helpers/resource"
	"k8s.io/klog/v2"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/generated/clientset/versioned"
	listers "github.com/stevedore-dev/stevedore/pkg/generated/listers/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/metrics"
	"github.com/stevedore-dev/stevedore/pkg/provision"
	"github.com/stevedore-dev/stevedore/pkg/solver/simulation"
)

// DefaultInterval separates passes.
const DefaultInterval = 5 * time.Second

// Condition reasons of a buffer's Ready condition.
const (
	ReasonProvisioned   = "Provisioned"
	ReasonProvisioning  = "Provisioning"
	ReasonUnschedulable = "Unschedulable"
	ReasonInvalid       = "InvalidReference"
)

// UIDPrefix starts the UID of every chunk (virtual pod) of a buffer.
const UIDPrefix = "capacitybuffer/"

// Options configure the controller.
type Options struct {
	Kube        kubernetes.Interface
	Stevedore   versioned.Interface
	Buffers     listers.CapacityBufferLister
	Provisioner *provision.Provisioner
	// Simulator answers where chunks fit (the buffer's own, not the live provisioning path's).
	Simulator *simulation.Simulator
	Recorder  events.EventRecorder
	// Ahead returns the warm pods that take room before the buffers' chunks (the bookings of ProvisioningRequests);
	// nil for none.
	Ahead func() []*corev1.Pod
	// Interval separates passes. Default DefaultInterval.
	Interval time.Duration
}

// Controller keeps room for the chunks of every CapacityBuffer.
type Controller struct {
	opts Options

	mu   sync.Mutex
	pods []*corev1.Pod
}

// New returns a controller. Its chunks are warm pods: the caller gives Pods to the provisioner (SetWarmPods).
func New(opts Options) *Controller {
	if opts.Interval == 0 {
		opts.Interval = DefaultInterval
	}
	return &Controller{opts: opts}
}

// Run reconciles every Interval until ctx ends.
func (c *Controller) Run(ctx context.Context) {
	logger := klog.FromContext(ctx).WithName("capacitybuffer")
	ctx = klog.NewContext(ctx, logger)
	wait.UntilWithContext(ctx, func(ctx context.Context) {
		if err := c.Reconcile(ctx); err != nil && ctx.Err() == nil {
			logger.Error(err, "Keeping warm capacity failed")
		}
	}, c.opts.Interval)
}

// Pods returns the chunks of every buffer as virtual pods, as the last pass computed them (buffers in
// namespace/name order; those whose template cannot be read left out): the provisioner's warm pods.
func (c *Controller) Pods() []*corev1.Pod {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.pods
}

func (c *Controller) buffers() []*stevedorev1.CapacityBuffer {
	list, err := c.opts.Buffers.List(labels.Everything())
	if err != nil {
		return nil
	}
	sort.Slice(list, func(i, j int) bool {
		if list[i].Namespace != list[j].Namespace {
			return list[i].Namespace < list[j].Namespace
		}
		return list[i].Name < list[j].Name
	})
	return list
}

// Reconcile keeps room for every buffer's chunks and reports each buffer's state.
func (c *Controller) Reconcile(ctx context.Context) error {
	logger := klog.FromContext(ctx)
	type state struct {
		b    *stevedorev1.CapacityBuffer
		pods []*corev1.Pod
		err  error
	}
	var states []state
	var all []*corev1.Pod
	for _, b := range c.buffers() {
		pods, err := c.chunks(ctx, b)
		states = append(states, state{b: b, pods: pods, err: err})
		all = append(all, pods...)
	}
	c.mu.Lock()
	c.pods = all
	c.mu.Unlock()
	var ahead []*corev1.Pod
	if c.opts.Ahead != nil {
		ahead = c.opts.Ahead()
	}
	plan, err := c.opts.Provisioner.ProvisionWarm(ctx, c.opts.Simulator, ahead, all)
	if err != nil {
		return err
	}
	if len(plan.Launched) > 0 {
		names := make([]string, len(plan.Launched))
		for i, cl := range plan.Launched {
			names[i] = cl.Name
		}
		logger.Info("Launched nodes for warm capacity", "chunks", len(all), "withRoom", len(plan.Placed), "nodeclaims", names)
	}
	var firstErr error
	for _, s := range states {
		cond := metav1.Condition{Type: stevedorev1.ConditionReady}
		placed, unschedulable, why := 0, 0, ""
		for _, p := range s.pods {
			switch {
			case plan.Placed[string(p.UID)]:
				placed++
			case plan.Unschedulable[string(p.UID)] != "":
				unschedulable++
				why = plan.Unschedulable[string(p.UID)]
			}
		}
		switch {
		case s.err != nil:
			cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, ReasonInvalid, s.err.Error()
		case unschedulable > 0:
			cond.Status, cond.Reason = metav1.ConditionFalse, ReasonUnschedulable
			cond.Message = fmt.Sprintf("%d of %d chunks fit no node Stevedore may launch: %s", unschedulable, len(s.pods), why)
		case placed < len(s.pods):
			cond.Status, cond.Reason = metav1.ConditionFalse, ReasonProvisioning
			cond.Message = fmt.Sprintf("%d of %d chunks have room; nodes are coming up for the others", placed, len(s.pods))
		default:
			cond.Status, cond.Reason = metav1.ConditionTrue, ReasonProvisioned
			cond.Message = fmt.Sprintf("%d chunks have room", len(s.pods))
		}
		metrics.BufferChunks.WithLabelValues(s.b.Namespace, s.b.Name, "withRoom").Set(float64(placed))
		metrics.BufferChunks.WithLabelValues(s.b.Namespace, s.b.Name, "waiting").Set(float64(len(s.pods) - placed))
		if err := c.writeStatus(ctx, s.b, int32(min(len(s.pods), math.MaxInt32)), cond); err != nil && firstErr == nil {
			firstErr = err
		}
	}
	return firstErr
}

func (c *Controller) writeStatus(ctx context.Context, b *stevedorev1.CapacityBuffer, replicas int32, cond metav1.Condition) error {
	cur := meta.FindStatusCondition(b.Status.Conditions, cond.Type)
	if b.Status.Replicas == replicas && cur != nil && cur.Status == cond.Status && cur.Reason == cond.Reason && cur.Message == cond.Message {
		return nil
	}
	client := c.opts.Stevedore.StevedoreV1().CapacityBuffers(b.Namespace)
	// the cache may not show this controller's last write yet: on a conflict, read the buffer again
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		next, err := client.Get(ctx, b.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		next.Status.Replicas = replicas
		cond.ObservedGeneration = next.Generation
		meta.SetStatusCondition(&next.Status.Conditions, cond)
		_, err = client.UpdateStatus(ctx, next, metav1.UpdateOptions{})
		return err
	})
	if apierrors.IsNotFound(err) {
		return nil // gone
	}
	if err == nil && (cur == nil || cur.Reason != cond.Reason) && c.opts.Recorder != nil {
		eventType := corev1.EventTypeNormal
		if cond.Status != metav1.ConditionTrue {
			eventType = corev1.EventTypeWarning
			if cond.Reason == ReasonProvisioning {
				eventType = corev1.EventTypeNormal
			}
		}
		c.opts.Recorder.Eventf(b, nil, eventType, cond.Reason, "Buffer", "%s", cond.Message)
	}
	return err
}

// chunks returns the buffer's chunks as virtual pods: its template's pod, as many as the buffer asks.
func (c *Controller) chunks(ctx context.Context, b *stevedorev1.CapacityBuffer) ([]*corev1.Pod, error) {
	tmpl, workloadReplicas, err := c.template(ctx, b)
	if err != nil {
		return nil, err
	}
	n := Count(b.Spec, resourcehelper.PodRequests(&corev1.Pod{Spec: tmpl.Spec}, resourcehelper.PodResourcesOptions{}), workloadReplicas)
	out := make([]*corev1.Pod, n)
	for i := range out {
		pod := &corev1.Pod{ObjectMeta: *tmpl.ObjectMeta.DeepCopy(), Spec: *tmpl.Spec.DeepCopy()}
		pod.Name = fmt.Sprintf("%s-chunk-%d", b.Name, i)
		pod.Namespace = b.Namespace
		pod.GenerateName = ""
		pod.UID = types.UID(fmt.Sprintf("%s%s/%s/%d", UIDPrefix, b.Namespace, b.Name, i))
		pod.Spec.NodeName = ""
		pod.Status = corev1.PodStatus{Phase: corev1.PodPending}
		out[i] = pod
	}
	return out, nil
}

// template reads the pod template a buffer's chunks copy, and the replicas of its workload (0 for a PodTemplate).
func (c *Controller) template(ctx context.Context, b *stevedorev1.CapacityBuffer) (corev1.PodTemplateSpec, int32, error) {
	ns := b.Namespace
	if ref := b.Spec.PodTemplateRef; ref != nil {
		pt, err := c.opts.Kube.CoreV1().PodTemplates(ns).Get(ctx, ref.Name, metav1.GetOptions{})
		if err != nil {
			return corev1.PodTemplateSpec{}, 0, fmt.Errorf("spec.podTemplateRef: PodTemplate %s/%s: %w", ns, ref.Name, err)
		}
		return pt.Template, 0, nil
	}
	ref := b.Spec.ScalableRef
	if ref == nil {
		return corev1.PodTemplateSpec{}, 0, fmt.Errorf("spec: neither podTemplateRef nor scalableRef is set")
	}
	replicas := func(r *int32) int32 {
		if r == nil {
			return 1
		}
		return *r
	}
	apps := c.opts.Kube.AppsV1()
	var (
		tmpl corev1.PodTemplateSpec
		n    int32
		err  error
	)
	switch ref.Kind {
	case "Deployment":
		var d *appsv1.Deployment
		if d, err = apps.Deployments(ns).Get(ctx, ref.Name, metav1.GetOptions{}); err == nil {
			tmpl, n = d.Spec.Template, replicas(d.Spec.Replicas)
		}
	case "StatefulSet":
		var s *appsv1.StatefulSet
		if s, err = apps.StatefulSets(ns).Get(ctx, ref.Name, metav1.GetOptions{}); err == nil {
			tmpl, n = s.Spec.Template, replicas(s.Spec.Replicas)
		}
	case "ReplicaSet":
		var r *appsv1.ReplicaSet
		if r, err = apps.ReplicaSets(ns).Get(ctx, ref.Name, metav1.GetOptions{}); err == nil {
			tmpl, n = r.Spec.Template, replicas(r.Spec.Replicas)
		}
	default:
		err = fmt.Errorf("kind %q is not Deployment, StatefulSet or ReplicaSet", ref.Kind)
	}
	if err != nil {
		return corev1.PodTemplateSpec{}, 0, fmt.Errorf("spec.scalableRef: %s %s/%s: %w", ref.Kind, ns, ref.Name, err)
	}
	return tmpl, n, nil
}

// MaxChunks is the most chunks a buffer keeps, whatever its percentage or limits allow: the bound spec.replicas has.
// Each chunk is a pod in every solve, so a limit far above one chunk's requests must not become millions of pods.
const MaxChunks = 10000

// Count is how many chunks a buffer keeps: replicas, the percentage of the workload's replicas (rounded up, at
// least one when the workload has replicas), the smaller of the two when both are set, and no more than fit in
// the limits given one chunk's requests (limits alone: as many as fit); at most MaxChunks.
func Count(spec stevedorev1.CapacityBufferSpec, chunk corev1.ResourceList, workloadReplicas int32) int {
	n := -1 // unbounded so far
	if spec.Replicas != nil {
		n = int(*spec.Replicas)
	}
	if spec.Percentage != nil {
		p := int(math.Ceil(float64(*spec.Percentage) * float64(workloadReplicas) / 100))
		if workloadReplicas > 0 && *spec.Percentage > 0 {
			p = max(p, 1)
		}
		if n < 0 || p < n {
			n = p
		}
	}
	for name, limit := range spec.Limits {
		req, ok := chunk[name]
		if !ok || req.IsZero() {
			continue
		}
		fit := math.Floor(limit.AsApproximateFloat64() / req.AsApproximateFloat64())
		if n < 0 || fit < float64(n) {
			n = int(min(fit, MaxChunks))
		}
	}
	return min(max(n, 0), MaxChunks)
}
