/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

// Package buffer keeps warm capacity for CapacityBuffers, Stevedore's (stevedore.dev) and SIG Autoscaling's
// (autoscaling.x-k8s.io): each buffer's chunks are virtual pods (never created) that the provisioner keeps room
// for, launching nodes when the room on the cluster's nodes does not hold them. Real pods take that room first;
// the next pass launches again for the chunks left without room.
package buffer

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/events"
	resourcehelper "k8s.io/component-helpers/resource"
	"k8s.io/klog/v2"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/generated/clientset/versioned"
	listers "github.com/stevedore-dev/stevedore/pkg/generated/listers/apis/v1"
	autoscalinglisters "github.com/stevedore-dev/stevedore/pkg/generated/listers/autoscaling/v1beta1"
	"github.com/stevedore-dev/stevedore/pkg/metrics"
	"github.com/stevedore-dev/stevedore/pkg/provision"
	"github.com/stevedore-dev/stevedore/pkg/reconcile"
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

// Provisioner is what the buffers use of the provisioner: it plans the warm pods, after those ahead of them, and
// launches nodes for the room the cluster lacks.
type Provisioner interface {
	ProvisionWarm(ctx context.Context, sim *simulation.Simulator, ahead, pods []*corev1.Pod) (*provision.WarmPlan, error)
}

// Options configure the controller.
type Options struct {
	Kube      kubernetes.Interface
	Stevedore versioned.Interface
	Buffers   listers.CapacityBufferLister
	// Shared lists the autoscaling.x-k8s.io CapacityBuffers; nil where the cluster does not serve them or they are
	// left to another autoscaler.
	Shared      autoscalinglisters.CapacityBufferLister
	Provisioner Provisioner
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
	// series are the label values of the chunk metrics the last pass set, to delete those of buffers gone.
	series map[[3]string]bool
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
	reconcile.Every(ctx, "capacitybuffer", c.opts.Interval, "Keeping warm capacity failed", c.Reconcile)
}

// Pods returns the chunks of every buffer as virtual pods, as the last pass computed them (buffers in
// namespace/name order; those whose template cannot be read left out): the provisioner's warm pods.
func (c *Controller) Pods() []*corev1.Pod {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.pods
}

// buffer is one CapacityBuffer of either API, as a pass serves it.
type buffer struct {
	// group is the buffer's API group.
	group           string
	namespace, name string
	// podTemplate is spec.podTemplateRef's name; scalable spec.scalableRef (nil when unset).
	podTemplate string
	scalable    *scalable
	request     Request
	// write records a pass's result in the buffer's status.
	write func(ctx context.Context, r result) error
}

// scalable names a workload whose pods are a buffer's chunks.
type scalable struct{ group, kind, name string }

// newScalable is the workload a scalableRef of either API names; both read an empty apiGroup as apps.
func newScalable(group, kind, name string) *scalable {
	if group == "" {
		group = appsv1.GroupName
	}
	return &scalable{group: group, kind: kind, name: name}
}

// result is what a pass found for one buffer.
type result struct {
	chunks, placed, unschedulable int
	// why is the solver's reason for an unschedulable chunk.
	why string
	// err says why the template or workload could not be read.
	err error
	// templateGeneration is the generation of the buffer's PodTemplate (podTemplateRef only).
	templateGeneration *int64
}

// buffers returns the buffers of both APIs: Stevedore's first, each in namespace/name order.
func (c *Controller) buffers() []buffer {
	var out []buffer
	if own, err := c.opts.Buffers.List(labels.Everything()); err == nil {
		sortByKey(own)
		for _, b := range own {
			out = append(out, c.ownBuffer(b))
		}
	}
	if c.opts.Shared == nil {
		return out
	}
	if shared, err := c.opts.Shared.List(labels.Everything()); err == nil {
		sortByKey(shared)
		for _, b := range shared {
			if sb, ok := c.sharedBuffer(b); ok {
				out = append(out, sb)
			}
		}
	}
	return out
}

func sortByKey[T metav1.Object](list []T) {
	sort.Slice(list, func(i, j int) bool {
		if list[i].GetNamespace() != list[j].GetNamespace() {
			return list[i].GetNamespace() < list[j].GetNamespace()
		}
		return list[i].GetName() < list[j].GetName()
	})
}

// Reconcile keeps room for every buffer's chunks and reports each buffer's state.
func (c *Controller) Reconcile(ctx context.Context) error {
	logger := klog.FromContext(ctx)
	type state struct {
		b    buffer
		pods []*corev1.Pod
		r    result
	}
	var states []state
	var all []*corev1.Pod
	for _, b := range c.buffers() {
		pods, r := c.chunks(ctx, b)
		states = append(states, state{b: b, pods: pods, r: r})
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
	series := map[[3]string]bool{}
	for _, s := range states {
		for _, p := range s.pods {
			switch {
			case plan.Placed[string(p.UID)]:
				s.r.placed++
			case plan.Unschedulable[string(p.UID)] != "":
				s.r.unschedulable++
				s.r.why = plan.Unschedulable[string(p.UID)]
			}
		}
		key := [3]string{s.b.group, s.b.namespace, s.b.name}
		series[key] = true
		metrics.BufferChunks.WithLabelValues(s.b.group, s.b.namespace, s.b.name, "withRoom").Set(float64(s.r.placed))
		metrics.BufferChunks.WithLabelValues(s.b.group, s.b.namespace, s.b.name, "waiting").Set(float64(s.r.chunks - s.r.placed))
		if err := s.b.write(ctx, s.r); err != nil && firstErr == nil {
			firstErr = err
		}
	}
	for key := range c.series {
		if !series[key] {
			for _, state := range []string{"withRoom", "waiting"} {
				metrics.BufferChunks.DeleteLabelValues(key[0], key[1], key[2], state)
			}
		}
	}
	c.series = series
	return firstErr
}

// provisioned is the condition saying whether every chunk has room, of the given type: True/Provisioned, or
// False with Provisioning (nodes coming up), Unschedulable or, when the template cannot be read, invalid.
func (r result) provisioned(conditionType, invalid string) metav1.Condition {
	cond := metav1.Condition{Type: conditionType}
	switch {
	case r.err != nil:
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, invalid, r.err.Error()
	case r.unschedulable > 0:
		cond.Status, cond.Reason = metav1.ConditionFalse, ReasonUnschedulable
		cond.Message = fmt.Sprintf("%d of %d chunks fit no node Stevedore may launch: %s", r.unschedulable, r.chunks, r.why)
	case r.placed < r.chunks:
		cond.Status, cond.Reason = metav1.ConditionFalse, ReasonProvisioning
		cond.Message = fmt.Sprintf("%d of %d chunks have room; nodes are coming up for the others", r.placed, r.chunks)
	default:
		cond.Status, cond.Reason = metav1.ConditionTrue, ReasonProvisioned
		cond.Message = fmt.Sprintf("%d chunks have room", r.chunks)
	}
	return cond
}

// event logs and records an event on a buffer when a condition's status or reason changed: a warning unless it is
// True or Provisioning.
func (c *Controller) event(ctx context.Context, obj reconcile.Object, before *metav1.Condition, cond metav1.Condition) {
	reconcile.ReportCondition(ctx, c.opts.Recorder, obj, "CapacityBuffer", "Buffer", before, cond,
		cond.Status != metav1.ConditionTrue && cond.Reason != ReasonProvisioning)
}

// chunks returns the buffer's chunks as virtual pods: its template's pod, as many as the buffer asks.
func (c *Controller) chunks(ctx context.Context, b buffer) ([]*corev1.Pod, result) {
	tmpl, workloadReplicas, generation, err := c.template(ctx, b)
	if err != nil {
		return nil, result{err: err}
	}
	n := Count(b.request, resourcehelper.PodRequests(&corev1.Pod{Spec: tmpl.Spec}, resourcehelper.PodResourcesOptions{}), workloadReplicas)
	out := make([]*corev1.Pod, n)
	name, uid := b.name+"-chunk-", UIDPrefix+b.namespace+"/"+b.name+"/"
	if b.group != stevedorev1.GroupName {
		name, uid = "capacity-buffer-"+b.name+"-", UIDPrefix+b.group+"/"+b.namespace+"/"+b.name+"/"
	}
	for i := range out {
		pod := &corev1.Pod{ObjectMeta: *tmpl.ObjectMeta.DeepCopy(), Spec: *tmpl.Spec.DeepCopy()}
		pod.Name = name + strconv.Itoa(i)
		pod.Namespace = b.namespace
		pod.GenerateName = ""
		pod.UID = types.UID(uid + strconv.Itoa(i))
		pod.Spec.NodeName = ""
		pod.Status = corev1.PodStatus{Phase: corev1.PodPending}
		out[i] = pod
	}
	return out, result{chunks: n, templateGeneration: generation}
}

// template reads the pod template a buffer's chunks copy, the replicas of its workload (0 for a PodTemplate) and
// the PodTemplate's generation (nil for a workload).
func (c *Controller) template(ctx context.Context, b buffer) (corev1.PodTemplateSpec, int32, *int64, error) {
	ns := b.namespace
	if b.podTemplate != "" {
		pt, err := c.opts.Kube.CoreV1().PodTemplates(ns).Get(ctx, b.podTemplate, metav1.GetOptions{})
		if err != nil {
			return corev1.PodTemplateSpec{}, 0, nil, fmt.Errorf("spec.podTemplateRef: PodTemplate %s/%s: %w", ns, b.podTemplate, err)
		}
		return pt.Template, 0, &pt.Generation, nil
	}
	ref := b.scalable
	if ref == nil {
		return corev1.PodTemplateSpec{}, 0, nil, fmt.Errorf("spec: neither podTemplateRef nor scalableRef is set")
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
	switch {
	case ref.group != appsv1.GroupName:
		err = fmt.Errorf("apiGroup %q: only apps workloads (Deployment, StatefulSet, ReplicaSet) are read", ref.group)
	case ref.kind == "Deployment":
		var d *appsv1.Deployment
		if d, err = apps.Deployments(ns).Get(ctx, ref.name, metav1.GetOptions{}); err == nil {
			tmpl, n = d.Spec.Template, replicas(d.Spec.Replicas)
		}
	case ref.kind == "StatefulSet":
		var s *appsv1.StatefulSet
		if s, err = apps.StatefulSets(ns).Get(ctx, ref.name, metav1.GetOptions{}); err == nil {
			tmpl, n = s.Spec.Template, replicas(s.Spec.Replicas)
		}
	case ref.kind == "ReplicaSet":
		var r *appsv1.ReplicaSet
		if r, err = apps.ReplicaSets(ns).Get(ctx, ref.name, metav1.GetOptions{}); err == nil {
			tmpl, n = r.Spec.Template, replicas(r.Spec.Replicas)
		}
	default:
		err = fmt.Errorf("kind %q is not Deployment, StatefulSet or ReplicaSet", ref.kind)
	}
	if err != nil {
		return corev1.PodTemplateSpec{}, 0, nil, fmt.Errorf("spec.scalableRef: %s %s/%s: %w", ref.kind, ns, ref.name, err)
	}
	return tmpl, n, nil, nil
}
