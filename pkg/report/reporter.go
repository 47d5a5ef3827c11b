/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

// Package report tells operators what Stevedore runs: it writes each NodePool's status (nodes, resources, hourly
// cost) and keeps the cluster-state metrics current (NodePool usage against limits and cost, utilisation of
// Stevedore's nodes, pending pods, the unavailable-offerings cache), and times pods from creation to Running.
package report

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/cloud"
	"github.com/stevedore-dev/stevedore/pkg/cost"
	"github.com/stevedore-dev/stevedore/pkg/generated/clientset/versioned"
	listers "github.com/stevedore-dev/stevedore/pkg/generated/listers/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/metrics"
	"github.com/stevedore-dev/stevedore/pkg/reconcile"
	"github.com/stevedore-dev/stevedore/pkg/state"
)

// Options configure a Reporter.
type Options struct {
	Stevedore  versioned.Interface
	NodePools  listers.NodePoolLister
	NodeClaims listers.NodeClaimLister
	// NodeClasses decide each NodePool's Ready condition (nil: not set).
	NodeClasses listers.EC2NodeClassLister
	Nodes       corelisters.NodeLister
	Pods        corelisters.PodLister
	// SchedulerName of Stevedore's profile: its pods are the ones counted pending and timed.
	SchedulerName string
	// UnavailableOfferings returns the size of the unavailable-offerings cache (nil: not reported).
	UnavailableOfferings func() int
	// Interval between refreshes. Default 10s.
	Interval time.Duration
	// CostInterval is the least time between two refreshes of the cost metrics (each prices every node and splits
	// it among every pod: an hourly figure that changes as nodes come and go). Default 30s.
	CostInterval time.Duration
	// Prices prices the nodes as billed for the cost metrics (the cloud provider with the NodeOverlays in force);
	// nil: no cost metrics.
	Prices cloud.Provider
	// CostTop is how many namespaces and workloads the cost metrics name; the rest are summed as "other".
	// Default 20.
	CostTop int
}

// Reporter refreshes NodePool status and the cluster-state metrics.
type Reporter struct {
	opts Options
	// pools are the NodePools that have gauge series, so that those of deleted NodePools are removed.
	pools map[string]bool
	// namespaces and workloads are the cost series set, so that those leaving the top are removed.
	namespaces map[string]bool
	workloads  map[cost.Line]bool
	// costAt is when Run last refreshed the cost metrics
	costAt time.Time
}

// New returns a Reporter.
func New(opts Options) *Reporter {
	if opts.Interval == 0 {
		opts.Interval = 10 * time.Second
	}
	if opts.CostInterval == 0 {
		opts.CostInterval = 30 * time.Second
	}
	if opts.CostTop <= 0 {
		opts.CostTop = 20
	}
	metrics.Register()
	return &Reporter{opts: opts, pools: map[string]bool{}, namespaces: map[string]bool{}, workloads: map[cost.Line]bool{}}
}

// RegisterPodStartup times the pods of Stevedore's profile from creation to their first Running status.
func (r *Reporter) RegisterPodStartup(pods cache.SharedIndexInformer) error {
	_, err := pods.AddEventHandler(cache.ResourceEventHandlerFuncs{UpdateFunc: func(old, cur any) {
		o, ok1 := old.(*corev1.Pod)
		n, ok2 := cur.(*corev1.Pod)
		if !ok1 || !ok2 || n.Spec.SchedulerName != r.opts.SchedulerName || o.Status.Phase == corev1.PodRunning ||
			n.Status.Phase != corev1.PodRunning {
			return
		}
		metrics.PodsStartupDuration.Observe(time.Since(n.CreationTimestamp.Time).Seconds())
	}})
	return err
}

// Run refreshes every Interval until ctx ends, the cost metrics every CostInterval.
func (r *Reporter) Run(ctx context.Context) {
	logger := klog.FromContext(ctx).WithName("report")
	ctx = klog.NewContext(ctx, logger)
	wait.UntilWithContext(ctx, func(ctx context.Context) {
		if err := r.refresh(ctx, r.costDue(time.Now())); err != nil {
			logger.V(1).Info("Refreshing NodePool status and metrics failed; retrying", "err", err)
		}
	}, r.opts.Interval)
}

// costDue reports whether the cost metrics are to be refreshed now (the first time, then every CostInterval), and
// if so counts them refreshed.
func (r *Reporter) costDue(now time.Time) bool {
	if !r.costAt.IsZero() && now.Sub(r.costAt) < r.opts.CostInterval {
		return false
	}
	r.costAt = now
	return true
}

// refresh writes every NodePool's status and sets the gauges, the cost metrics when withCost.
func (r *Reporter) refresh(ctx context.Context, withCost bool) error {
	pools, err := r.opts.NodePools.List(labels.Everything())
	if err != nil {
		return err
	}
	claims, err := r.opts.NodeClaims.List(labels.Everything())
	if err != nil {
		return err
	}
	usage := state.NodePoolUsage(claims)
	seen := map[string]bool{}
	var firstErr error
	for _, np := range pools {
		seen[np.Name] = true
		u := usage[np.Name]
		if u == nil {
			u = &state.Usage{Resources: corev1.ResourceList{}}
		}
		r.setPoolMetrics(np, u)
		if err := r.writeStatus(ctx, np, u); err != nil && firstErr == nil {
			firstErr = err
		}
	}
	for name := range r.pools {
		if !seen[name] {
			r.deletePoolMetrics(name)
		}
	}
	r.pools = seen
	if err := r.setClusterMetrics(); err != nil && firstErr == nil {
		firstErr = err
	}
	if withCost {
		if err := r.setCostMetrics(ctx, pools, claims); err != nil && firstErr == nil {
			firstErr = err
		}
	}
	if r.opts.UnavailableOfferings != nil {
		metrics.UnavailableOfferings.Set(float64(r.opts.UnavailableOfferings()))
	}
	return firstErr
}

// writeStatus updates the NodePool's status when it changed.
func (r *Reporter) writeStatus(ctx context.Context, np *stevedorev1.NodePool, u *state.Usage) error {
	want := stevedorev1.NodePoolStatus{Nodes: u.Nodes, ReadyNodes: u.ReadyNodes, HourlyCost: stevedorev1.FormatPrice(u.Cost), Resources: u.Resources.DeepCopy()}
	want.Resources[stevedorev1.ResourceNodes] = *resource.NewQuantity(u.Nodes, resource.DecimalSI)
	ready := r.readyCondition(np)
	cur := meta.FindStatusCondition(np.Status.Conditions, stevedorev1.ConditionReady)
	readySame := ready == nil || cur != nil && cur.Status == ready.Status && cur.Reason == ready.Reason && cur.Message == ready.Message
	if np.Status.Nodes == want.Nodes && np.Status.ReadyNodes == want.ReadyNodes && np.Status.HourlyCost == want.HourlyCost && apiequality.Semantic.DeepEqual(np.Status.Resources, want.Resources) &&
		readySame {
		return nil
	}
	_, err := reconcile.UpdateStatus(ctx, r.opts.Stevedore.StevedoreV1().NodePools(), np.Name, func(cur *stevedorev1.NodePool) bool {
		cur.Status.Nodes, cur.Status.ReadyNodes, cur.Status.HourlyCost, cur.Status.Resources = want.Nodes, want.ReadyNodes, want.HourlyCost, want.Resources
		if ready != nil {
			ready.ObservedGeneration = cur.Generation
			meta.SetStatusCondition(&cur.Status.Conditions, *ready)
		}
		return true
	})
	if err != nil {
		return fmt.Errorf("updating the status of NodePool %s: %w", np.Name, err)
	}
	return nil
}

// readyCondition is the NodePool's Ready condition: its EC2NodeClass exists and is Ready.
func (r *Reporter) readyCondition(np *stevedorev1.NodePool) *metav1.Condition {
	if r.opts.NodeClasses == nil {
		return nil
	}
	ref := np.Spec.Template.Spec.NodeClassRef
	if ref == nil || ref.Name == "" {
		return &metav1.Condition{Type: stevedorev1.ConditionReady, Status: metav1.ConditionFalse, Reason: "NodeClassMissing",
			Message: "spec.template.spec.nodeClassRef names no EC2NodeClass"}
	}
	nc, err := r.opts.NodeClasses.Get(ref.Name)
	if err != nil {
		return &metav1.Condition{Type: stevedorev1.ConditionReady, Status: metav1.ConditionFalse, Reason: "NodeClassNotFound",
			Message: "EC2NodeClass " + ref.Name + " does not exist"}
	}
	c := meta.FindStatusCondition(nc.Status.Conditions, stevedorev1.ConditionReady)
	if c == nil || c.Status != metav1.ConditionTrue {
		msg := "EC2NodeClass " + ref.Name + " is not ready"
		if c != nil && c.Message != "" {
			msg += ": " + c.Message
		}
		return &metav1.Condition{Type: stevedorev1.ConditionReady, Status: metav1.ConditionFalse, Reason: "NodeClassNotReady", Message: msg}
	}
	return &metav1.Condition{Type: stevedorev1.ConditionReady, Status: metav1.ConditionTrue, Reason: "Ready",
		Message: "EC2NodeClass " + ref.Name + " is ready"}
}

// gaugeValue converts a quantity to the unit its gauge uses: cores for cpu, bytes for memory, a count otherwise.
func gaugeValue(name corev1.ResourceName, q resource.Quantity) float64 {
	if name == corev1.ResourceCPU {
		return float64(q.MilliValue()) / 1000
	}
	return q.AsApproximateFloat64()
}

func (r *Reporter) setPoolMetrics(np *stevedorev1.NodePool, u *state.Usage) {
	metrics.NodePoolNodes.WithLabelValues(np.Name).Set(float64(u.Nodes))
	metrics.NodePoolHourlyCost.WithLabelValues(np.Name).Set(u.Cost)
	for _, res := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		metrics.NodePoolUsage.WithLabelValues(np.Name, string(res)).Set(gaugeValue(res, u.Resources[res]))
	}
	metrics.NodePoolUsage.WithLabelValues(np.Name, string(stevedorev1.ResourceNodes)).Set(float64(u.Nodes))
	for _, res := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, stevedorev1.ResourceNodes} {
		if q, ok := np.Spec.Limits[res]; ok {
			metrics.NodePoolLimit.WithLabelValues(np.Name, string(res)).Set(gaugeValue(res, q))
		} else {
			metrics.NodePoolLimit.DeleteLabelValues(np.Name, string(res))
		}
	}
}

func (r *Reporter) deletePoolMetrics(name string) {
	metrics.NodePoolNodes.DeleteLabelValues(name)
	metrics.NodePoolHourlyCost.DeleteLabelValues(name)
	for _, res := range []string{"cpu", "memory", "nodes"} {
		metrics.NodePoolUsage.DeleteLabelValues(name, res)
		metrics.NodePoolLimit.DeleteLabelValues(name, res)
	}
}

// setClusterMetrics sets the utilisation of Stevedore's nodes (requests of their pods over their allocatable) and
// the number of pending pods of Stevedore's profile.
func (r *Reporter) setClusterMetrics() error {
	nodes, err := r.opts.Nodes.List(labels.Everything())
	if err != nil {
		return err
	}
	ours := map[string]bool{}
	var allocCPU, allocMem float64
	for _, n := range nodes {
		if _, ok := n.Labels[stevedorev1.LabelNodePool]; !ok {
			continue
		}
		ours[n.Name] = true
		allocCPU += float64(n.Status.Allocatable.Cpu().MilliValue())
		allocMem += float64(n.Status.Allocatable.Memory().Value())
	}
	pods, err := r.opts.Pods.List(labels.Everything())
	if err != nil {
		return err
	}
	var reqCPU, reqMem float64
	pending := 0
	for _, p := range pods {
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		if p.Spec.NodeName == "" {
			if p.Spec.SchedulerName == r.opts.SchedulerName && p.DeletionTimestamp == nil {
				pending++
			}
			continue
		}
		if !ours[p.Spec.NodeName] {
			continue
		}
		for _, c := range p.Spec.Containers {
			reqCPU += float64(c.Resources.Requests.Cpu().MilliValue())
			reqMem += float64(c.Resources.Requests.Memory().Value())
		}
	}
	metrics.PendingPods.Set(float64(pending))
	if allocCPU > 0 {
		metrics.ClusterUtilization.WithLabelValues("cpu").Set(reqCPU / allocCPU)
	}
	if allocMem > 0 {
		metrics.ClusterUtilization.WithLabelValues("memory").Set(reqMem / allocMem)
	}
	return nil
}

// setCostMetrics splits the nodes' billed prices over their pods (package cost) and sets the cost gauges: the
// CostTop costliest namespaces and workloads, the rest as "other"; series that left the top are removed.
func (r *Reporter) setCostMetrics(ctx context.Context, pools []*stevedorev1.NodePool, claims []*stevedorev1.NodeClaim) error {
	if r.opts.Prices == nil {
		return nil
	}
	nodes, err := r.opts.Nodes.List(labels.Everything())
	if err != nil {
		return err
	}
	pods, err := r.opts.Pods.List(labels.Everything())
	if err != nil {
		return err
	}
	priced, _ := cost.Collect(ctx, cost.NewPriceBook(r.opts.Prices, pools), nodes, claims, pods)
	rep := cost.Attribute(priced)
	metrics.CostNodes.Set(rep.Total)
	metrics.CostUnattributed.WithLabelValues("daemonsets").Set(rep.DaemonSets)
	metrics.CostUnattributed.WithLabelValues("idle").Set(rep.Idle)
	namespaces := map[string]bool{}
	for _, l := range cost.Top(rep.Namespaces(), r.opts.CostTop) {
		namespaces[l.Namespace] = true
		metrics.CostNamespace.WithLabelValues(l.Namespace).Set(l.Hourly)
	}
	for ns := range r.namespaces {
		if !namespaces[ns] {
			metrics.CostNamespace.DeleteLabelValues(ns)
		}
	}
	r.namespaces = namespaces
	workloads := map[cost.Line]bool{}
	for _, l := range cost.Top(rep.Workloads(), r.opts.CostTop) {
		workloads[cost.Line{Namespace: l.Namespace, Kind: l.Kind, Name: l.Name}] = true
		metrics.CostWorkload.WithLabelValues(l.Namespace, l.Kind, l.Name).Set(l.Hourly)
	}
	for l := range r.workloads {
		if !workloads[l] {
			metrics.CostWorkload.DeleteLabelValues(l.Namespace, l.Kind, l.Name)
		}
	}
	r.workloads = workloads
	return nil
}
