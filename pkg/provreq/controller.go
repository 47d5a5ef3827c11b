/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

// Package provreq serves ProvisioningRequests (autoscaling.x-k8s.io/v1) of the classes
// check-capacity.autoscaling.x-k8s.io and best-effort-atomic-scale-up.autoscaling.x-k8s.io, as Cluster Autoscaler
// documents them: each request's pods (its PodTemplates, count times) are virtual pods that get room all together
// or not at all — the room the cluster's nodes have (check-capacity), or nodes launched for them in all-or-nothing
// fleets (best-effort-atomic-scale-up). Once every pod has room on registered nodes the request is Provisioned and
// the room is booked: its virtual pods are warm pods, kept ahead of capacity buffers and never consolidated away,
// for BookingTime or until the pods that consume the request (annotation
// autoscaling.x-k8s.io/consume-provisioning-request) take it.
package provreq

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	autoscalingv1 "github.com/stevedore-dev/stevedore/pkg/apis/autoscaling/v1"
	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/generated/clientset/versioned"
	listers "github.com/stevedore-dev/stevedore/pkg/generated/listers/apis/v1"
	autoscalinglisters "github.com/stevedore-dev/stevedore/pkg/generated/listers/autoscaling/v1"
	"github.com/stevedore-dev/stevedore/pkg/provision"
	"github.com/stevedore-dev/stevedore/pkg/reconcile"
	"github.com/stevedore-dev/stevedore/pkg/solver/simulation"
)

// DefaultInterval separates passes.
const DefaultInterval = 5 * time.Second

// DefaultBookingTime is how long room found for a request is held for its pods (Cluster Autoscaler's).
const DefaultBookingTime = 10 * time.Minute

// UIDPrefix starts the UID of every virtual pod of a request.
const UIDPrefix = "provisioningrequest/"

// Condition reasons (Cluster Autoscaler's where it has one).
const (
	ReasonAccepted            = "Accepted"
	ReasonPodTemplateNotFound = "PodTemplateNotFound"
	// ReasonCapacityIsFound: the cluster's nodes have room for every pod.
	ReasonCapacityIsFound    = "CapacityIsFound"
	ReasonCapacityIsNotFound = "CapacityIsNotFound"
	// ReasonProvisioning: nodes are coming up for the pods (Provisioned is False until they are up).
	ReasonProvisioning = "Provisioning"
	// ReasonCapacityIsProvisioned: the nodes launched for the pods are up.
	ReasonCapacityIsProvisioned = "CapacityIsProvisioned"
	// ReasonBookingTimeExpired: the room was held for BookingTime.
	ReasonBookingTimeExpired = "CapacityReservationTimeExpired"
	// ReasonBookingConsumed: every pod of the request has come and is bound.
	ReasonBookingConsumed    = "CapacityBookingConsumed"
	ReasonValidUntilExceeded = "ValidUntilExceeded"
)

// Provisioner is what the controller uses of the provisioner: it books room for a request's pods, launching the
// nodes the cluster lacks.
type Provisioner interface {
	ProvisionBooking(ctx context.Context, sim *simulation.Simulator, b provision.Booking) (*provision.BookingPlan, error)
}

// Options configure the controller.
type Options struct {
	Kube       kubernetes.Interface
	Stevedore  versioned.Interface
	Requests   autoscalinglisters.ProvisioningRequestLister
	Templates  corelisters.PodTemplateLister
	Pods       corelisters.PodLister
	Nodes      corelisters.NodeLister
	NodeClaims listers.NodeClaimLister
	// Provisioner finds room and launches nodes.
	Provisioner Provisioner
	// Simulator answers where pods fit (the controller's own, not the live provisioning path's).
	Simulator *simulation.Simulator
	Recorder  events.EventRecorder
	// Interval separates passes. Default DefaultInterval.
	Interval time.Duration
	// BookingTime is how long room is held once a request is Provisioned. Default DefaultBookingTime.
	BookingTime time.Duration
	// Clock tells the time. Default the real clock.
	Clock clock.PassiveClock
}

// Controller serves ProvisioningRequests.
type Controller struct {
	opts Options

	mu   sync.Mutex
	pods []*corev1.Pod
	// holding are the requests ("namespace/name") whose room is held: booked, or nodes launching for them.
	holding map[string]bool
	// bound are the consumers seen bound, by request ("namespace/name"): a consumer that finished leaves the pod
	// cache (the scheduler's informer lists no terminated pod) but took its room.
	bound map[string]map[types.UID]bool
}

// New returns a controller. Its booked pods are warm pods: the caller gives Pods to the provisioner
// (SetWarmPods), ahead of any other source.
func New(opts Options) *Controller {
	if opts.Interval == 0 {
		opts.Interval = DefaultInterval
	}
	if opts.BookingTime == 0 {
		opts.BookingTime = DefaultBookingTime
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	return &Controller{opts: opts, bound: map[string]map[types.UID]bool{}}
}

// Register watches pods for consumers bound: one that finishes within a pass leaves the pod cache (the
// scheduler's informer lists no terminated pod) before a pass could see it bound.
func (c *Controller) Register(pods cache.SharedIndexInformer) error {
	_, err := pods.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.observe,
		UpdateFunc: func(_, obj any) { c.observe(obj) },
		DeleteFunc: c.observe,
	})
	return err
}

// observe records a consumer seen bound.
func (c *Controller) observe(obj any) {
	pod, ok := reconcile.Deleted[*corev1.Pod](obj)
	if !ok || pod.Spec.NodeName == "" {
		return
	}
	request := pod.Annotations[autoscalingv1.AnnotationConsume]
	if request == "" {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	k := pod.Namespace + "/" + request
	if c.bound[k] == nil {
		c.bound[k] = map[types.UID]bool{}
	}
	c.bound[k][pod.UID] = true
}

// Run reconciles every Interval until ctx ends.
func (c *Controller) Run(ctx context.Context) {
	reconcile.Every(ctx, "provisioningrequest", c.opts.Interval, "Serving ProvisioningRequests failed", c.Reconcile)
}

// Pods returns the virtual pods that hold room for requests (booked, or with nodes launching for them), as the
// last pass computed them: the provisioner's first warm pods.
func (c *Controller) Pods() []*corev1.Pod {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.pods
}

// Served reports whether Stevedore serves a provisioning class.
func Served(class string) bool {
	return class == autoscalingv1.ClassCheckCapacity || class == autoscalingv1.ClassBestEffortAtomicScaleUp
}

// requests returns the requests of the classes served, first come first served (creation time, then
// namespace/name).
func (c *Controller) requests() ([]*autoscalingv1.ProvisioningRequest, error) {
	list, err := c.opts.Requests.List(labels.Everything())
	if err != nil {
		return nil, err
	}
	out := list[:0]
	for _, pr := range list {
		if Served(pr.Spec.ProvisioningClassName) {
			out = append(out, pr)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
			return a.CreationTimestamp.Before(&b.CreationTimestamp)
		}
		if a.Namespace != b.Namespace {
			return a.Namespace < b.Namespace
		}
		return a.Name < b.Name
	})
	return out, nil
}

// Reconcile brings every request one step on and keeps room for those booked or being launched for.
func (c *Controller) Reconcile(ctx context.Context) error {
	list, err := c.requests()
	if err != nil {
		return err
	}
	var held []*corev1.Pod
	holding, active := map[string]bool{}, map[string]bool{}
	var firstErr error
	for _, pr := range list {
		active[key(pr)] = !finished(pr)
		pods, conds, err := c.step(ctx, pr, held)
		if err != nil {
			if firstErr == nil {
				firstErr = fmt.Errorf("ProvisioningRequest %s/%s: %w", pr.Namespace, pr.Name, err)
			}
			pods = c.keep(pr) // what it held before, until a pass can tell
		}
		held = append(held, pods...)
		if len(pods) > 0 {
			holding[key(pr)] = true
		}
		if len(conds) > 0 {
			if err := c.writeStatus(ctx, pr, conds); err != nil && firstErr == nil {
				firstErr = err
			}
		}
	}
	c.mu.Lock()
	c.pods, c.holding = held, holding
	for request := range c.bound {
		if !active[request] {
			delete(c.bound, request) // the request is gone or over: its consumers no longer count
		}
	}
	c.mu.Unlock()
	return firstErr
}

func key(pr *autoscalingv1.ProvisioningRequest) string { return pr.Namespace + "/" + pr.Name }

// Holds reports whether a request's ("namespace/name") room is held, as the last pass found: booked and not all
// its pods come, or nodes launching for it.
func (c *Controller) Holds(request string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.holding[request]
}

// keep returns the virtual pods a request held in the last pass.
func (c *Controller) keep(pr *autoscalingv1.ProvisioningRequest) []*corev1.Pod {
	prefix := uidPrefix(pr)
	var out []*corev1.Pod
	for _, pod := range c.Pods() {
		if len(pod.UID) >= len(prefix) && string(pod.UID[:len(prefix)]) == prefix {
			out = append(out, pod)
		}
	}
	return out
}

// step decides where a request is: the virtual pods that hold room for it now, and the conditions to set.
func (c *Controller) step(ctx context.Context, pr *autoscalingv1.ProvisioningRequest, held []*corev1.Pod) ([]*corev1.Pod, []metav1.Condition, error) {
	if finished(pr) {
		return nil, nil, nil // done: nothing held
	}
	pods, err := c.virtualPods(pr)
	if err != nil {
		return nil, []metav1.Condition{{Type: autoscalingv1.ConditionAccepted, Status: metav1.ConditionFalse,
			Reason: ReasonPodTemplateNotFound, Message: err.Error()}}, nil
	}
	accepted := metav1.Condition{Type: autoscalingv1.ConditionAccepted, Status: metav1.ConditionTrue, Reason: ReasonAccepted,
		Message: fmt.Sprintf("Stevedore serves %s: %d pods", pr.Spec.ProvisioningClassName, len(pods))}
	if p := meta.FindStatusCondition(pr.Status.Conditions, autoscalingv1.ConditionProvisioned); p != nil && p.Status == metav1.ConditionTrue {
		left, cond := c.booking(pr, pods, p.LastTransitionTime.Time)
		return left, append([]metav1.Condition{accepted}, cond...), nil
	}
	if pr.Spec.ProvisioningClassName == autoscalingv1.ClassBestEffortAtomicScaleUp {
		if until, ok := validUntil(pr); ok && !c.opts.Clock.Now().Before(until) {
			return nil, []metav1.Condition{accepted, {Type: autoscalingv1.ConditionFailed, Status: metav1.ConditionTrue,
				Reason: ReasonValidUntilExceeded, Message: fmt.Sprintf("no room for all %d pods by %s (parameter %s)",
					len(pods), until.UTC().Format(time.RFC3339), autoscalingv1.ParameterValidUntilSeconds)}}, nil
		}
	}
	held, cond, err := c.findRoom(ctx, pr, pods, held)
	if err != nil {
		return nil, nil, err
	}
	return held, []metav1.Condition{accepted, cond}, nil
}

// booking returns the virtual pods a Provisioned request (since provisioned) still holds, and the condition that
// ends its booking when it ends: every pod bound, or the booking time over.
func (c *Controller) booking(pr *autoscalingv1.ProvisioningRequest, pods []*corev1.Pod, provisioned time.Time) ([]*corev1.Pod, []metav1.Condition) {
	left, bound := c.unconsumed(pr, pods)
	if bound >= len(pods) {
		return nil, []metav1.Condition{{Type: autoscalingv1.ConditionBookingExpired, Status: metav1.ConditionTrue,
			Reason: ReasonBookingConsumed, Message: fmt.Sprintf("all %d pods are bound: the room is theirs", len(pods))}}
	}
	if until := provisioned.Add(c.opts.BookingTime); !c.opts.Clock.Now().Before(until) {
		return nil, []metav1.Condition{{Type: autoscalingv1.ConditionBookingExpired, Status: metav1.ConditionTrue,
			Reason: ReasonBookingTimeExpired, Message: fmt.Sprintf("the room was held for %s and is released (%d of %d pods bound)",
				c.opts.BookingTime, bound, len(pods))}}
	}
	return left, nil
}

// findRoom looks for room for every pod of a request not Provisioned yet — on the nodes up, and, for the atomic
// class, on nodes launched here — and returns the virtual pods that hold room now and the Provisioned condition.
func (c *Controller) findRoom(ctx context.Context, pr *autoscalingv1.ProvisioningRequest, pods, held []*corev1.Pod) ([]*corev1.Pod, metav1.Condition, error) {
	atomic := pr.Spec.ProvisioningClassName == autoscalingv1.ClassBestEffortAtomicScaleUp
	name := key(pr)
	plan, err := c.opts.Provisioner.ProvisionBooking(ctx, c.opts.Simulator, provision.Booking{Name: name, Pods: pods, Ahead: held,
		Launch: atomic, Annotations: map[string]string{stevedorev1.AnnotationProvisioningRequest: name}})
	if err != nil {
		return nil, metav1.Condition{}, err
	}
	if len(plan.Launched) > 0 {
		names := make([]string, len(plan.Launched))
		for i, cl := range plan.Launched {
			names[i] = cl.Name
		}
		klog.FromContext(ctx).Info("Launched nodes for a ProvisioningRequest, all or none", "provisioningRequest", klog.KObj(pr),
			"pods", len(pods), "nodeclaims", names)
	}
	cond := metav1.Condition{Type: autoscalingv1.ConditionProvisioned, Status: metav1.ConditionFalse, Reason: ReasonCapacityIsNotFound}
	if len(plan.Unschedulable) > 0 {
		cond.Message = fmt.Sprintf("no room for all %d pods at once: %s", len(pods), firstReason(plan.Unschedulable))
		if !atomic {
			cond.Message = fmt.Sprintf("the cluster's nodes have no room for all %d pods at once (a check launches no node)", len(pods))
			if pr.Spec.Parameters[autoscalingv1.ParameterNoRetry] == "true" {
				cond.Type, cond.Status = autoscalingv1.ConditionFailed, metav1.ConditionTrue
			}
		}
		return nil, cond, nil
	}
	waiting := 0
	for _, node := range plan.Nodes {
		if !c.registered(node) {
			waiting++
		}
	}
	switch {
	case waiting > 0 && !atomic:
		cond.Message = fmt.Sprintf("%d of %d pods have room only on nodes still coming up", waiting, len(pods))
		return nil, cond, nil
	case waiting > 0:
		cond.Reason, cond.Message = ReasonProvisioning, fmt.Sprintf("%d of %d pods have room on nodes still coming up", waiting, len(pods))
		return pods, cond, nil
	}
	cond.Status, cond.Reason = metav1.ConditionTrue, ReasonCapacityIsFound
	cond.Message = fmt.Sprintf("the cluster's nodes have room for all %d pods; held for %s", len(pods), c.opts.BookingTime)
	if launched := c.launchedFor(name); launched > 0 {
		cond.Reason = ReasonCapacityIsProvisioned
		cond.Message = fmt.Sprintf("the %d nodes launched have room for all %d pods; held for %s", launched, len(pods), c.opts.BookingTime)
	}
	return pods, cond, nil
}

// launchedFor counts the live NodeClaims launched for a request (namespace/name).
func (c *Controller) launchedFor(name string) int {
	claims, err := c.opts.NodeClaims.List(labels.Everything())
	if err != nil {
		return 0
	}
	n := 0
	for _, nc := range claims {
		if nc.DeletionTimestamp == nil && nc.Annotations[stevedorev1.AnnotationProvisioningRequest] == name {
			n++
		}
	}
	return n
}

// registered reports whether a node is registered and initialized (room on it is there now); "" is a node being
// launched.
func (c *Controller) registered(name string) bool {
	if name == "" {
		return false
	}
	node, err := c.opts.Nodes.Get(name)
	if err != nil {
		return false
	}
	if claim := node.Labels[stevedorev1.LabelNodeClaim]; claim != "" {
		nc, err := c.opts.NodeClaims.Get(claim)
		return err == nil && nc.IsInitialized()
	}
	for _, cond := range node.Status.Conditions {
		if cond.Type == corev1.NodeReady {
			return cond.Status == corev1.ConditionTrue
		}
	}
	return false
}

// unconsumed returns the virtual pods of a booked request that its consumers have not taken yet — one fewer for
// each pod of the request's namespace that names it, pending (it needs the room itself) or seen bound (it took
// it, even if it has finished since), taken from the last pod set backwards — and how many were seen bound.
func (c *Controller) unconsumed(pr *autoscalingv1.ProvisioningRequest, pods []*corev1.Pod) (left []*corev1.Pod, bound int) {
	list, err := c.opts.Pods.Pods(pr.Namespace).List(labels.Everything())
	if err != nil {
		return pods, 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	seen := c.bound[key(pr)]
	if seen == nil {
		seen = map[types.UID]bool{}
		c.bound[key(pr)] = seen
	}
	pending := 0
	for _, pod := range list {
		if pod.Annotations[autoscalingv1.AnnotationConsume] != pr.Name || seen[pod.UID] {
			continue
		}
		switch {
		case pod.Spec.NodeName != "":
			seen[pod.UID] = true
		case pod.DeletionTimestamp == nil:
			pending++
		}
	}
	return pods[:max(0, len(pods)-pending-len(seen))], len(seen)
}

// virtualPods returns the request's pods: each pod set's template, count times, in pod set order.
func (c *Controller) virtualPods(pr *autoscalingv1.ProvisioningRequest) ([]*corev1.Pod, error) {
	var out []*corev1.Pod
	for i, set := range pr.Spec.PodSets {
		pt, err := c.opts.Templates.PodTemplates(pr.Namespace).Get(set.PodTemplateRef.Name)
		if err != nil {
			return nil, fmt.Errorf("spec.podSets[%d].podTemplateRef: PodTemplate %s/%s: %w", i, pr.Namespace, set.PodTemplateRef.Name, err)
		}
		for j := range set.Count {
			pod := &corev1.Pod{ObjectMeta: *pt.Template.ObjectMeta.DeepCopy(), Spec: *pt.Template.Spec.DeepCopy()}
			pod.Name = fmt.Sprintf("%s-%d-%d", pr.Name, i, j)
			pod.Namespace = pr.Namespace
			pod.GenerateName = ""
			pod.UID = types.UID(uidPrefix(pr) + strconv.Itoa(i) + "/" + strconv.Itoa(int(j)))
			pod.Spec.NodeName = ""
			pod.Status = corev1.PodStatus{Phase: corev1.PodPending}
			out = append(out, pod)
		}
	}
	return out, nil
}

func uidPrefix(pr *autoscalingv1.ProvisioningRequest) string {
	return UIDPrefix + pr.Namespace + "/" + pr.Name + "/"
}

// validUntil is when an atomic request stops being tried: its creation plus ValidUntilSeconds.
func validUntil(pr *autoscalingv1.ProvisioningRequest) (time.Time, bool) {
	v, ok := pr.Spec.Parameters[autoscalingv1.ParameterValidUntilSeconds]
	if !ok {
		return time.Time{}, false
	}
	seconds, err := strconv.Atoi(string(v))
	if err != nil || seconds <= 0 {
		return time.Time{}, false
	}
	return pr.CreationTimestamp.Add(time.Duration(seconds) * time.Second), true
}

// finished reports whether a request is over: failed, its booking expired or revoked.
func finished(pr *autoscalingv1.ProvisioningRequest) bool {
	return isTrue(pr, autoscalingv1.ConditionFailed) || isTrue(pr, autoscalingv1.ConditionBookingExpired) ||
		isTrue(pr, autoscalingv1.ConditionCapacityRevoked)
}

func isTrue(pr *autoscalingv1.ProvisioningRequest, condition string) bool {
	return meta.IsStatusConditionTrue(pr.Status.Conditions, condition)
}

// firstReason returns the reason of the pod whose UID sorts first.
func firstReason(reasons map[types.UID]string) string {
	uids := make([]string, 0, len(reasons))
	for uid := range reasons {
		uids = append(uids, string(uid))
	}
	sort.Strings(uids)
	return reasons[types.UID(uids[0])]
}

// writeStatus sets conditions, writing only when one changes, and records an event for each that changes
// status or reason.
func (c *Controller) writeStatus(ctx context.Context, pr *autoscalingv1.ProvisioningRequest, conds []metav1.Condition) error {
	var changed []metav1.Condition
	for _, cond := range conds {
		cur := meta.FindStatusCondition(pr.Status.Conditions, cond.Type)
		if cur == nil || cur.Status != cond.Status || cur.Reason != cond.Reason || cur.Message != cond.Message {
			changed = append(changed, cond)
		}
	}
	if len(changed) == 0 {
		return nil
	}
	written, err := reconcile.UpdateStatus(ctx, c.opts.Stevedore.AutoscalingXV1().ProvisioningRequests(pr.Namespace), pr.Name,
		func(next *autoscalingv1.ProvisioningRequest) bool {
			for _, cond := range changed {
				cond.ObservedGeneration = next.Generation
				meta.SetStatusCondition(&next.Status.Conditions, cond)
			}
			return true
		})
	if err != nil {
		return fmt.Errorf("ProvisioningRequest %s/%s status: %w", pr.Namespace, pr.Name, err)
	}
	if !written {
		return nil // gone
	}
	for _, cond := range changed {
		c.report(ctx, pr, cond)
	}
	return nil
}

// report logs and records an event for a condition written, when its status or reason changed: a warning when the
// request failed or found no capacity.
func (c *Controller) report(ctx context.Context, pr *autoscalingv1.ProvisioningRequest, cond metav1.Condition) {
	warning := cond.Type == autoscalingv1.ConditionFailed || (cond.Type == autoscalingv1.ConditionProvisioned && cond.Reason == ReasonCapacityIsNotFound)
	reconcile.ReportCondition(ctx, c.opts.Recorder, pr, "ProvisioningRequest", cond.Type, meta.FindStatusCondition(pr.Status.Conditions, cond.Type),
		cond, warning)
}
