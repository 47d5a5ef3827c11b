/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

// Package quota reports on the CapacityQuotas (autoscaling.x-k8s.io) Stevedore's launches stay within: what the
// nodes each selects use (status.used and metrics), and whether it binds (condition LimitReached, events). The
// planner enforces them (package solver, given them by package provision).
package quota

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"

	autoscalingv1beta1 "github.com/stevedore-dev/stevedore/pkg/apis/autoscaling/v1beta1"
	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/generated/clientset/versioned"
	listers "github.com/stevedore-dev/stevedore/pkg/generated/listers/apis/v1"
	autoscalinglisters "github.com/stevedore-dev/stevedore/pkg/generated/listers/autoscaling/v1beta1"
	"github.com/stevedore-dev/stevedore/pkg/metrics"
	"github.com/stevedore-dev/stevedore/pkg/reconcile"
	"github.com/stevedore-dev/stevedore/pkg/state"
)

// DefaultInterval separates passes.
const DefaultInterval = 5 * time.Second

// ReachedFor is how long a quota that kept a node from launching stays LimitReached after the last time it did.
const ReachedFor = time.Minute

// Reasons of the LimitReached condition.
const (
	// ReasonLaunchLimited: the quota kept a node from launching within ReachedFor.
	ReasonLaunchLimited = "LaunchLimited"
	// ReasonAtLimit: the selected nodes use all of a limited resource.
	ReasonAtLimit = "AtLimit"
	// ReasonWithinLimits: neither.
	ReasonWithinLimits = "WithinLimits"
	// ReasonInvalidSelector: spec.selector does not parse; the quota is not enforced.
	ReasonInvalidSelector = "InvalidSelector"
)

// Options configure the controller.
type Options struct {
	Stevedore  versioned.Interface
	Quotas     autoscalinglisters.CapacityQuotaLister
	NodeClaims listers.NodeClaimLister
	Nodes      corelisters.NodeLister
	// Reached returns when each quota last kept a node from launching (Provisioner.QuotasReached).
	Reached func() map[string]state.QuotaReached
	// PlannedCapacity is the capacity a NodeClaim not launched yet is counted at (Provisioner.PlannedCapacity); nil:
	// its requests.
	PlannedCapacity func(*stevedorev1.NodeClaim) corev1.ResourceList
	Recorder        events.EventRecorder
	Clock           clock.PassiveClock
	// Interval separates passes. Default DefaultInterval.
	Interval time.Duration
}

// Controller writes each CapacityQuota's status.
type Controller struct {
	opts Options
	// quotas are the quota names the last pass set metrics for, to delete those of quotas gone.
	quotas map[string][]corev1.ResourceName
}

// New returns a controller.
func New(opts Options) *Controller {
	if opts.Interval == 0 {
		opts.Interval = DefaultInterval
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	return &Controller{opts: opts, quotas: map[string][]corev1.ResourceName{}}
}

// Run reconciles every Interval until ctx ends.
func (c *Controller) Run(ctx context.Context) {
	reconcile.Every(ctx, "capacityquota", c.opts.Interval, "Reporting capacity quotas failed", c.Reconcile)
}

// Reconcile writes the status of every quota and its metrics.
func (c *Controller) Reconcile(ctx context.Context) error {
	list, err := c.opts.Quotas.List(labels.Everything())
	if err != nil {
		return err
	}
	sort.Slice(list, func(i, j int) bool { return list[i].Name < list[j].Name })
	claims, err := c.opts.NodeClaims.List(labels.Everything())
	if err != nil {
		return err
	}
	nodes, err := c.opts.Nodes.List(labels.Everything())
	if err != nil {
		return err
	}
	var reached map[string]state.QuotaReached
	if c.opts.Reached != nil {
		reached = c.opts.Reached()
	}
	seen := map[string][]corev1.ResourceName{}
	var firstErr error
	for _, cq := range list {
		status := autoscalingv1beta1.CapacityQuotaStatus{ObservedGeneration: cq.Generation}
		sel, err := state.QuotaSelector(cq)
		if err != nil {
			status.Conditions = []metav1.Condition{{Type: autoscalingv1beta1.ConditionLimitReached, Status: metav1.ConditionUnknown,
				Reason: ReasonInvalidSelector, Message: err.Error() + ": the quota is not enforced"}}
		} else {
			used := state.QuotaUsage(cq, sel, claims, nodes, c.opts.PlannedCapacity)
			status.Used = &autoscalingv1beta1.CapacityQuotaUsage{Resources: used}
			status.Conditions = []metav1.Condition{condition(cq, used, reached[cq.Name], c.opts.Clock.Now())}
			seen[cq.Name] = c.setMetrics(cq, used)
		}
		if err := c.write(ctx, cq, status); err != nil && firstErr == nil {
			firstErr = err
		}
	}
	for name, resources := range c.quotas {
		kept := map[corev1.ResourceName]bool{}
		for _, r := range seen[name] {
			kept[r] = true
		}
		for _, r := range resources {
			if !kept[r] {
				metrics.QuotaUsage.DeleteLabelValues(name, string(r))
				metrics.QuotaLimit.DeleteLabelValues(name, string(r))
			}
		}
	}
	c.quotas = seen
	return firstErr
}

// setMetrics sets the quota's usage and limit gauges and returns the resources they are set for.
func (c *Controller) setMetrics(cq *autoscalingv1beta1.CapacityQuota, used corev1.ResourceList) []corev1.ResourceName {
	var names []corev1.ResourceName
	for name, limit := range cq.Spec.Limits.Resources {
		u := used[name]
		metrics.QuotaUsage.WithLabelValues(cq.Name, string(name)).Set(u.AsApproximateFloat64())
		metrics.QuotaLimit.WithLabelValues(cq.Name, string(name)).Set(limit.AsApproximateFloat64())
		names = append(names, name)
	}
	return names
}

// condition is the quota's LimitReached condition: True when it kept a node from launching within ReachedFor, or
// when the selected nodes use all of a resource; False otherwise.
func condition(cq *autoscalingv1beta1.CapacityQuota, used corev1.ResourceList, last state.QuotaReached, now time.Time) metav1.Condition {
	cond := metav1.Condition{Type: autoscalingv1beta1.ConditionLimitReached}
	var full []string
	for _, name := range sortedNames(cq.Spec.Limits.Resources) {
		limit, u := cq.Spec.Limits.Resources[name], used[name]
		if u.Cmp(limit) >= 0 {
			full = append(full, fmt.Sprintf("%s %s of %s", name, u.String(), limit.String()))
		}
	}
	switch {
	case !last.At.IsZero() && now.Sub(last.At) < ReachedFor:
		cond.Status, cond.Reason = metav1.ConditionTrue, ReasonLaunchLimited
		cond.Message = fmt.Sprintf("kept a node from launching: not enough %s left", last.Resource)
	case len(full) > 0:
		cond.Status, cond.Reason = metav1.ConditionTrue, ReasonAtLimit
		cond.Message = "the selected nodes use " + strings.Join(full, ", ")
	default:
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, ReasonWithinLimits, "room left in every limit"
	}
	return cond
}

func sortedNames(list corev1.ResourceList) []corev1.ResourceName {
	out := make([]corev1.ResourceName, 0, len(list))
	for name := range list {
		out = append(out, name)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// sameStatus reports whether a quota's status already says what want does (conditions without their times).
func sameStatus(have, want autoscalingv1beta1.CapacityQuotaStatus) bool {
	for _, w := range want.Conditions {
		h := meta.FindStatusCondition(have.Conditions, w.Type)
		if h == nil || h.Status != w.Status || h.Reason != w.Reason || h.Message != w.Message || h.ObservedGeneration != want.ObservedGeneration {
			return false
		}
	}
	have.Conditions, want.Conditions = nil, nil
	return equality.Semantic.DeepEqual(have, want)
}

// write updates the quota's status when it changed, keeping the conditions other writers set, and records an
// event when LimitReached changes reason.
func (c *Controller) write(ctx context.Context, cq *autoscalingv1beta1.CapacityQuota, want autoscalingv1beta1.CapacityQuotaStatus) error {
	if sameStatus(cq.Status, want) {
		return nil
	}
	before := meta.FindStatusCondition(cq.Status.Conditions, autoscalingv1beta1.ConditionLimitReached)
	written, err := reconcile.UpdateStatus(ctx, c.opts.Stevedore.AutoscalingXV1beta1().CapacityQuotas(), cq.Name,
		func(next *autoscalingv1beta1.CapacityQuota) bool {
			conditions := next.Status.Conditions
			for _, cond := range want.Conditions {
				cond.ObservedGeneration = want.ObservedGeneration
				meta.SetStatusCondition(&conditions, cond)
			}
			next.Status.Used, next.Status.ObservedGeneration, next.Status.Conditions = want.Used, want.ObservedGeneration, conditions
			return true
		})
	if err != nil || !written {
		return err // !written: gone
	}
	cond := want.Conditions[0]
	reconcile.ReportCondition(ctx, c.opts.Recorder, cq, "CapacityQuota", "Quota", before, cond, cond.Status != metav1.ConditionFalse)
	return nil
}
