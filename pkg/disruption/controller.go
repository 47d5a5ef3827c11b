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

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/stevedore-dev/stevedore/pkg/apis/config"
	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/cloud"
	"github.com/stevedore-dev/stevedore/pkg/commitment"
	"github.com/stevedore-dev/stevedore/pkg/generated/clientset/versioned"
	listers "github.com/stevedore-dev/stevedore/pkg/generated/listers/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/provision"
	"github.com/stevedore-dev/stevedore/pkg/reconcile"
	"github.com/stevedore-dev/stevedore/pkg/solver"
	"github.com/stevedore-dev/stevedore/pkg/solver/simulation"
	"github.com/stevedore-dev/stevedore/pkg/surge"
)

// Provisioner is what disruption uses of the provisioner: the model of the cluster its moves are weighed on, whether
// warm pods keep room, the replacements of a static NodePool's node, and the creation of replacements.
type Provisioner interface {
	Cluster(ctx context.Context, sim *simulation.Simulator, pinned map[types.UID]string) (*provision.Cluster, error)
	HasWarmPods() bool
	PlanStaticNodes(ctx context.Context, np *stevedorev1.NodePool, n int, leaving ...string) ([]*solver.PlannedNode, error)
	CreateNodeClaims(ctx context.Context, nodes []*solver.PlannedNode, annotations map[string]string) []*stevedorev1.NodeClaim
}

// Options configure the disruption controller.
type Options struct {
	Kube        kubernetes.Interface
	Stevedore   versioned.Interface
	Nodes       corelisters.NodeLister
	Pods        corelisters.PodLister
	PDBs        pdbLister
	NodeClaims  listers.NodeClaimLister
	NodePools   listers.NodePoolLister
	Provisioner Provisioner
	Cloud       cloud.Provider
	// Simulator answers the "would these pods fit elsewhere" questions (disruption's own, not provisioning's).
	Simulator *simulation.Simulator
	Recorder  events.EventRecorder
	Clock     clock.Clock
	Metrics   *Metrics

	// Args are the plugin's arguments; disruption reads, by their names: disruptionPollInterval,
	// disruptionValidationDelay, registrationTimeout (how long replacements may take to become ready before a
	// command is rolled back), spotToSpotConsolidation, disableDisruption (emptiness, drift and consolidation off;
	// expiry and garbage collection always run), garbageCollectionInterval and nodeRepair. New defaults what is
	// unset, so the zero value is every default.
	Args config.ProvisionerArgs
	// OverlaidTypes returns a NodePool's instance types priced under the NodeOverlays in force, and false when no
	// overlay is in force. With overlays, a candidate's price is its offering's overlaid price (what a replacement
	// is compared by) rather than the price recorded at launch. Nil: recorded prices.
	OverlaidTypes func(ctx context.Context, np *stevedorev1.NodePool) ([]*cloud.InstanceType, bool)
	// Coverage is how the Commitments cover the cluster's on-demand nodes now: a covered node is priced at what
	// it costs beyond its commitment (nearly nothing), so it is never replaced for a cheaper list price. Nil: none.
	Coverage func(ctx context.Context) commitment.Coverage
	// Surge moves pods make-before-break, for the NodePools and pods whose replacement is Surge; nil: every pod is
	// evicted.
	Surge *surge.Surger
	// Booked reports whether the booking of a ProvisioningRequest ("namespace/name") holds: the nodes launched for
	// it are left alone. Nil: none does.
	Booked func(request string) bool
	// DryRun makes the controller write nothing (no Drifted condition): for DryRun's offline use.
	DryRun bool
}

// Controller is the disruption loop.
type Controller struct {
	opts Options
	// methods of a pass, in order; single is single-node consolidation (the dry run asks it for every node).
	methods []Method
	single  *singleNodeConsolidation

	activity *activity
	removals *removals
	// retries holds back the nodes whose consolidation did not go through, for a while.
	retries *retries
	w       *claimWriter
	// queue holds the commands under way, finishing those that wait for replacements in the background.
	queue *commandQueue

	mu sync.Mutex
	// reported is the verdict last reported for a node (event and condition), by node name.
	reported map[string]*verdict
}

// New returns a disruption controller.
func New(opts Options) *Controller {
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	opts.Args = opts.Args.Defaults(nil)
	if opts.Metrics == nil {
		opts.Metrics = NewMetrics()
	}
	queue := newCommandQueue()
	c := &Controller{opts: opts, activity: newActivity(opts.Clock), removals: &removals{provisioner: opts.Provisioner, sim: opts.Simulator, pins: queue.pins},
		retries: newRetries(opts.Args.DisruptionPollInterval.Duration), reported: map[string]*verdict{}, queue: queue,
		w: &claimWriter{client: opts.Stevedore, recorder: opts.Recorder}}
	static := &staticReplacement{provisioner: opts.Provisioner}
	if r := repairOptions(opts.Args.NodeRepair); r != nil {
		c.methods = append(c.methods, &repair{opts: r, removals: c.removals, cloud: opts.Cloud, w: c.w, clock: opts.Clock,
			blocked: map[string]bool{}})
	}
	c.methods = append(c.methods, &expiration{removals: c.removals, static: static})
	cons := &consolidation{removals: c.removals, activity: c.activity, retries: c.retries, spotToSpot: opts.Args.SpotToSpotConsolidation}
	c.single = &singleNodeConsolidation{cons}
	if !opts.Args.DisableDisruption {
		c.methods = append(c.methods,
			&emptiness{activity: c.activity, removals: c.removals, provisioner: opts.Provisioner},
			&drift{removals: c.removals, cloud: opts.Cloud, static: static, w: c.w, dryRun: opts.DryRun},
			&multiNodeConsolidation{consolidation: cons}, c.single)
	}
	return c
}

// Register watches pods to know when each node last saw a pod arrive or leave (consolidateAfter counts from it).
func (c *Controller) Register(pods cache.SharedIndexInformer) error {
	touch := func(obj any) {
		if pod, ok := reconcile.Deleted[*corev1.Pod](obj); ok && pod.Spec.NodeName != "" {
			c.activity.touch(pod.Spec.NodeName)
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
// disruptionPollInterval. A command waiting for its replacements finishes in the background (queue.go) while the passes go
// on. Garbage collection runs beside it. Disruption marks left by a process that stopped mid-command are cleared
// first.
func (c *Controller) Run(ctx context.Context) {
	logger := klog.FromContext(ctx).WithName("disruption")
	ctx = klog.NewContext(ctx, logger)
	c.activity.start()
	defer c.queue.wait()
	c.clearStaleMarks(ctx)
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
		case <-c.opts.Clock.After(c.opts.Args.DisruptionPollInterval.Duration):
		}
	}
}

// pass runs the methods in order and carries out the first command found. It reports whether it acted, and
// says why it left each node it looked at (report).
func (c *Controller) pass(ctx context.Context) (bool, error) {
	if c.opts.Surge != nil {
		// surges that no command runs: left by a process that stopped, or whose scale-back failed
		c.opts.Surge.Recover(ctx)
	}
	c.removals.reset()
	v, err := c.view(ctx)
	if err != nil {
		return false, err
	}
	c.retries.keep(v.candidateNames())
	cmd, m, err := c.evaluate(ctx, v)
	if !c.opts.Args.DisableDisruption {
		c.report(ctx, v, cmd.nodes())
	}
	if err != nil || cmd == nil {
		return false, err
	}
	if m.Validated() {
		ok, err := c.validate(ctx, cmd, m)
		if err == nil && !ok && !cmd.Forceful {
			c.retries.failed(sortedNames(cmd.Candidates), c.opts.Clock.Now(), "it no longer held at validation")
		}
		if err != nil || !ok {
			return false, err
		}
	}
	s, err := c.begin(ctx, cmd)
	if err != nil {
		return true, err
	}
	if s.wait > 0 || s.surge {
		c.queue.finishLater(ctx, cmd, func(ctx context.Context) error { return c.finish(ctx, s) })
		return true, nil
	}
	return true, c.finish(ctx, s)
}

// evaluate is find, logging at -v=4 what the pass judged, the removals it simulated and its time.
func (c *Controller) evaluate(ctx context.Context, v *clusterView) (*Command, Method, error) {
	start, simulated := c.opts.Clock.Now(), c.removals.simulations()
	cmd, m, err := c.find(ctx, v)
	if logger := klog.FromContext(ctx).V(4); logger.Enabled() {
		var nodes []string
		if cmd != nil {
			nodes = sortedNames(cmd.Candidates)
		}
		logger.Info("Disruption pass evaluated", "candidates", len(v.candidates), "judged", len(v.verdicts),
			"simulations", c.removals.simulations()-simulated, "duration", c.opts.Clock.Since(start), "command", nodes)
	}
	return cmd, m, err
}

// find runs the methods in order over the view and returns the first command found, with its method.
func (c *Controller) find(ctx context.Context, v *clusterView) (*Command, Method, error) {
	for _, m := range c.methods {
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
