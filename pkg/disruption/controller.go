/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

// Package disruption removes or replaces the nodes Stevedore launched when that saves money or keeps the fleet
// current: empty nodes, drifted nodes, expired nodes, and nodes whose pods fit elsewhere more cheaply. Decisions
// are answered by the provisioning solver over the scheduler's own Filter plugins, so the scheduler never
// contradicts them; replacements are launched and ready before a node is drained.
package disruption

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/cloud"
	"github.com/stevedore-dev/stevedore/pkg/generated/clientset/versioned"
	listers "github.com/stevedore-dev/stevedore/pkg/generated/listers/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/provision"
	"github.com/stevedore-dev/stevedore/pkg/solver/simulation"
)

// Options configure the disruption controller.
type Options struct {
	Kube        kubernetes.Interface
	Stevedore   versioned.Interface
	Nodes       corelisters.NodeLister
	Pods        corelisters.PodLister
	PDBs        pdbLister
	NodeClaims  listers.NodeClaimLister
	NodePools   listers.NodePoolLister
	Provisioner *provision.Provisioner
	Cloud       cloud.Provider
	// Simulator answers the "would these pods fit elsewhere" questions (disruption's own, not provisioning's).
	Simulator *simulation.Simulator
	Recorder  events.EventRecorder
	Clock     clock.Clock
	Metrics   *Metrics

	// PollInterval separates passes that found nothing to do. Default DefaultPollInterval.
	PollInterval time.Duration
	// ValidationDelay is how long a consolidation or emptiness decision waits before it is checked again and
	// carried out (pods move in the meantime). Default 15s.
	ValidationDelay time.Duration
	// ReplacementTimeout bounds how long a replacement may take to become ready before the command is rolled
	// back. Default 15m.
	ReplacementTimeout time.Duration
	// SpotToSpot allows consolidation to replace a spot node by a cheaper spot node (with at least
	// minSpotToSpotTypes cheaper types to choose from). Default off, as in Karpenter.
	SpotToSpot bool
	// Voluntary turns on emptiness, drift and consolidation; expiry and garbage collection always run.
	Voluntary bool
	// GCInterval separates garbage collection runs. Default 1m.
	GCInterval time.Duration
	// Repair turns node auto-repair on (nil: off).
	Repair *RepairOptions
	// OverlaidTypes returns a NodePool's instance types priced under the NodeOverlays in force, and false when no
	// overlay is in force. With overlays, a candidate's price is its offering's overlaid price (what a replacement
	// is compared by) rather than the price recorded at launch. Nil: recorded prices.
	OverlaidTypes func(ctx context.Context, np *stevedorev1.NodePool) ([]*cloud.InstanceType, bool)
	// DryRun makes the controller write nothing (no Drifted condition): for DryRun's offline use.
	DryRun bool
}

// Controller is the disruption loop.
type Controller struct {
	opts Options

	mu sync.Mutex
	// lastPodEvent is when a pod last arrived on or left a node, by node name.
	lastPodEvent map[string]time.Time
	// protected holds replacements launched by a command until they got their pods, by NodeClaim name.
	protected map[string]time.Time
	// reported is the verdict last reported for a node (event and condition), by node name.
	reported map[string]*verdict
	// repairBlocked is whether repair last waited for a NodePool with too many unhealthy nodes, by name.
	repairBlocked map[string]bool
	started       time.Time

	// simMu serialises simulations; model is the current pass's cluster model (nil until first needed).
	simMu sync.Mutex
	model *provision.Cluster
}

// Defaults of Options, used by New for unset fields and by the plugin's arguments.
const (
	DefaultPollInterval       = 10 * time.Second
	DefaultValidationDelay    = 15 * time.Second
	DefaultReplacementTimeout = 15 * time.Minute
	DefaultGCInterval         = time.Minute
)

// New returns a disruption controller.
func New(opts Options) *Controller {
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.PollInterval == 0 {
		opts.PollInterval = DefaultPollInterval
	}
	if opts.ValidationDelay == 0 {
		opts.ValidationDelay = DefaultValidationDelay
	}
	if opts.ReplacementTimeout == 0 {
		opts.ReplacementTimeout = DefaultReplacementTimeout
	}
	if opts.GCInterval == 0 {
		opts.GCInterval = DefaultGCInterval
	}
	if opts.Metrics == nil {
		opts.Metrics = NewMetrics()
	}
	if opts.Repair != nil {
		r := *opts.Repair
		r.defaults()
		opts.Repair = &r
	}
	return &Controller{opts: opts, lastPodEvent: map[string]time.Time{}, protected: map[string]time.Time{},
		reported: map[string]*verdict{}, repairBlocked: map[string]bool{}}
}

// Register watches pods to know when each node last saw a pod arrive or leave (consolidateAfter counts from it).
func (c *Controller) Register(pods cache.SharedIndexInformer) error {
	touch := func(obj any) {
		if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = tomb.Obj
		}
		if pod, ok := obj.(*corev1.Pod); ok && pod.Spec.NodeName != "" {
			c.mu.Lock()
			c.lastPodEvent[pod.Spec.NodeName] = c.opts.Clock.Now()
			c.mu.Unlock()
		}
	}
	_, err := pods.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: touch,
		UpdateFunc: func(old, cur any) {
			o, ok1 := old.(*corev1.Pod)
			n, ok2 := cur.(*corev1.Pod)
			if ok1 && ok2 && (o.Spec.NodeName != n.Spec.NodeName || (o.DeletionTimestamp == nil) != (n.DeletionTimestamp == nil)) {
				touch(cur)
			}
		},
		DeleteFunc: touch,
	})
	return err
}

// Run runs passes until ctx ends: one command per pass, the next pass at once after a command, else after
// PollInterval. Garbage collection runs beside it.
func (c *Controller) Run(ctx context.Context) {
	logger := klog.FromContext(ctx).WithName("disruption")
	ctx = klog.NewContext(ctx, logger)
	c.mu.Lock()
	c.started = c.opts.Clock.Now()
	c.mu.Unlock()
	go c.runGC(ctx)
	for ctx.Err() == nil {
		acted, err := c.pass(ctx)
		if err != nil && ctx.Err() == nil {
			logger.Error(err, "Disruption pass failed")
		}
		if acted {
			continue
		}
		select {
		case <-ctx.Done():
		case <-c.opts.Clock.After(c.opts.PollInterval):
		}
	}
}

// pass runs the methods in order and carries out the first command found. It reports whether it acted, and
// says why it left each node it looked at (report).
func (c *Controller) pass(ctx context.Context) (bool, error) {
	c.resetModel()
	v, err := c.view(ctx)
	if err != nil {
		return false, err
	}
	cmd, m, err := c.find(ctx, v)
	if c.opts.Voluntary {
		c.report(ctx, v, cmd.nodes())
	}
	if err != nil || cmd == nil {
		return false, err
	}
	if m.Validated() {
		ok, err := c.validate(ctx, cmd, m)
		if err != nil || !ok {
			return false, err
		}
	}
	return true, c.execute(ctx, cmd)
}

// find runs the methods in order over the view and returns the first command found, with its method.
func (c *Controller) find(ctx context.Context, v *clusterView) (*Command, Method, error) {
	for _, m := range c.methods() {
		start := c.opts.Clock.Now()
		cmd, err := m.Find(ctx, v)
		c.opts.Metrics.observeEvaluation(m.Name(), c.opts.Clock.Since(start))
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", m.Name(), err)
		}
		if cmd == nil {
			continue
		}
		cmd.Method = m.Name()
		cmd.evaluated = c.opts.Clock.Since(start)
		return cmd, m, nil
	}
	return nil, nil, nil
}

// resetModel drops the cluster model, so the next simulation reads the caches again.
func (c *Controller) resetModel() {
	c.simMu.Lock()
	defer c.simMu.Unlock()
	c.model = nil
}

// protect keeps replacement NodeClaims from being seen as empty nodes until they got their pods.
func (c *Controller) protect(names []string, until time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, n := range names {
		c.protected[n] = until
	}
}

func (c *Controller) isProtected(claim string, empty bool, now time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	until, ok := c.protected[claim]
	if !ok {
		return false
	}
	if !empty || now.After(until) {
		delete(c.protected, claim)
		return false
	}
	return true
}

// consolidatable reports whether consolidateAfter has passed since the node last saw a pod arrive or leave (and
// since it initialized, and since this controller started watching). A static NodePool's nodes never are.
func (c *Controller) consolidatable(cand *Candidate, now time.Time) bool {
	if isStatic(cand) {
		return false
	}
	after := cand.NodePool.Spec.Disruption.ConsolidateAfter
	if after == nil || after.IsNever() {
		return false
	}
	c.mu.Lock()
	last := c.lastPodEvent[cand.Node.Name]
	started := c.started
	c.mu.Unlock()
	for _, cond := range cand.Claim.Status.Conditions {
		if cond.Type == stevedorev1.ConditionInitialized && cond.LastTransitionTime.After(last) {
			last = cond.LastTransitionTime.Time
		}
	}
	if started.After(last) {
		last = started
	}
	return !now.Before(last.Add(*after.Duration))
}
