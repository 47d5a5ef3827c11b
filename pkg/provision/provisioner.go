/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package provision

import (
	"context"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	appslisters "k8s.io/client-go/listers/apps/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	pluginnames "k8s.io/kubernetes/pkg/scheduler/framework/plugins/names"
	"k8s.io/utils/clock"

	"github.com/stevedore-dev/stevedore/pkg/apis/config"
	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/cloud"
	"github.com/stevedore-dev/stevedore/pkg/decision"
	"github.com/stevedore-dev/stevedore/pkg/gang"
	"github.com/stevedore-dev/stevedore/pkg/generated/clientset/versioned"
	listers "github.com/stevedore-dev/stevedore/pkg/generated/listers/apis/v1"
	autoscalinglisters "github.com/stevedore-dev/stevedore/pkg/generated/listers/autoscaling/v1beta1"
	"github.com/stevedore-dev/stevedore/pkg/metrics"
	"github.com/stevedore-dev/stevedore/pkg/provision/freeroom"
	"github.com/stevedore-dev/stevedore/pkg/provision/ledger"
	"github.com/stevedore-dev/stevedore/pkg/solver"
	"github.com/stevedore-dev/stevedore/pkg/solver/simulation"
	"github.com/stevedore-dev/stevedore/pkg/spotrisk"
)

// Event reasons Stevedore records.
const (
	ReasonNominated       = "Nominated"
	ReasonWaitingForNode  = "WaitingForNode"
	ReasonFailedProvision = "FailedProvisioning"
)

// createWorkers bounds the NodeClaim creates in flight.
const createWorkers = 16

// Options configure a Provisioner.
type Options struct {
	// Args are the plugin's arguments; provisioning reads, by their names: region, batchIdleDuration,
	// batchMaxDuration, solveTimeout and minValuesPolicy. New defaults what is unset, so the zero value is every
	// default.
	Args          config.ProvisionerArgs
	SchedulerName string

	Kube       kubernetes.Interface
	Stevedore  versioned.Interface
	Nodes      corelisters.NodeLister
	Pods       corelisters.PodLister
	DaemonSets appslisters.DaemonSetLister
	// Deployments and ReplicaSets still creating pods keep a batch their pods are tied to open; nil: not read.
	Deployments appslisters.DeploymentLister
	ReplicaSets appslisters.ReplicaSetLister
	NodeClaims  listers.NodeClaimLister
	NodePools   listers.NodePoolLister
	// Quotas lists the autoscaling.x-k8s.io CapacityQuotas every launch stays within; nil: none are read.
	Quotas autoscalinglisters.CapacityQuotaLister
	// Devices lists the ResourceClaims and DeviceClasses of pods that claim devices (Dynamic Resource Allocation).
	Devices DeviceObjects
	// SpotRisk is the history of Spot interruptions: recently interrupted pools are priced higher, and NodePools
	// with a fallback policy plan on-demand after repeated interruptions (nil: no history).
	SpotRisk *spotrisk.History
	// Commitments lists the Savings Plans and Reserved Instances whose room is filled first; nil: none are read.
	Commitments listers.CommitmentLister
	Cloud       cloud.Provider
	// NodeClassHash hashes a node class for drift detection (cloud specific); may be nil.
	NodeClassHash func(ctx context.Context, ref *stevedorev1.NodeClassReference) string
	Simulator     *simulation.Simulator
	Recorder      events.EventRecorder
	Clock         clock.WithDelayedExecution
	// Queue is the scheduler's scheduling queue: pods held back are put back in it when what held them clears.
	// Nil in unit tests that drive the provisioner alone.
	Queue SchedulingQueue
	// Gangs finds the coscheduling PodGroups of gangs, WorkloadGroups the Workload API's; each nil where the
	// cluster does not serve them.
	Gangs          gang.Groups
	WorkloadGroups gang.WorkloadGroups
}

// Provisioner decides which nodes to launch for pods no node fits. It is shared by every scheduler profile of the
// process and by the NodeClaim lifecycle controller. It owns the batch (Consider, Run); its other jobs are parts
// over the same base, each a type of its own: the door into the solver and the NodeClaims it launches (planner),
// the queue's gate and the room kept on nodes (admission), and adoption at start with the pods parked on ready
// nodes (wakeups).
type Provisioner struct {
	*base
	*planner
	*admission
	*wakeups
}

// New returns a Provisioner. Run starts its batch loop.
func New(opts Options) *Provisioner {
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	opts.Args = opts.Args.Defaults(nil)
	metrics.Register()
	b := &base{
		opts:          opts,
		batcher:       NewBatcher(opts.Args.BatchIdleDuration.Duration, opts.Args.BatchMaxDuration.Duration, opts.Clock),
		instanceTypes: newInstanceTypes(opts.Cloud, opts.NodePools, opts.Clock),
		daemonRoom:    newDaemonRoom(opts.DaemonSets),
		free:          freeroom.New(opts.Clock),
		plannedEvents: flowcontrol.NewTokenBucketRateLimiter(plannedEventsPerSecond, plannedEventsBurst),
		solving:       newPodSet(),
		refused:       newRefusals(opts.Clock),
	}
	b.plans = ledger.New(ledger.Options{Clock: opts.Clock, Pods: opts.Pods, NodeClaims: opts.NodeClaims, Wake: b.wake})
	w := newWakeups(b)
	return &Provisioner{
		base:      b,
		planner:   newPlanner(b, w),
		admission: newAdmission(b, w),
		wakeups:   w,
	}
}

// Register has the plans follow the informers (a NodeClaim deleted or marked for deletion drops its plan, a pod
// deleted its own: package ledger), and the free room of the nodes follow the nodes and their pods.
func (p *Provisioner) Register(ctx context.Context, claims, pods, nodes cache.SharedIndexInformer) error {
	if err := p.free.Register(nodes, pods); err != nil {
		return err
	}
	p.free.OnSpreadChange(func(ids []string) { p.spreadChanged(ctx, ids) })
	return p.plans.Register(ctx, claims, pods)
}

// Consider is called for a pod that fits no existing node: it keeps the pod on the node planned for it, puts it on a
// node being launched that has room, or adds it to the batch for the next solve. refusedBy, when given, names the
// plugin that refused a node to the pod in the cycle that failed, and why ("" when the node was not refused).
func (p *Provisioner) Consider(ctx context.Context, pod *corev1.Pod, refusedBy func(node string) (plugin, message string)) decision.Decision {
	p.free.Unsend(pod.UID)     // its attempt ended
	p.admission.tried(pod.UID) // the scheduler tried it: no node took it
	if d, ok := p.assignedDecision(ctx, pod, refusedBy); ok {
		return d
	}
	if reason, known := p.refused.reason(pod.UID); known {
		return decision.Decision{Kind: decision.Unprovisionable, Reason: reason}
	}
	if nn := pod.Status.NominatedNodeName; nn != "" {
		if claim := p.claimForNode(nn); claim != nil && claim.DeletionTimestamp == nil {
			p.plans.Plan(ctx, claim.Name, []*corev1.Pod{pod})
			p.plans.Nominate(claim.Name, nn, pod.UID)
			return decision.Decision{Kind: decision.Nominated, NodeName: nn, Claim: claim.Name}
		}
	}
	// A pod that fits a node being launched is found by the next solve, which fills in-flight nodes before it
	// plans new ones; PostFilter runs inside the scheduling cycle and must stay cheap.
	p.batcher.Add(pod)
	return decision.Decision{Kind: decision.Batched}
}

// assignedDecision returns the decision for a pod already planned on a live NodeClaim. A pod whose planned node
// is up and initialized but was refused to it for lack of room (other pods bound there first: a pod not nominated
// there has no room held for it) is planned again.
func (p *Provisioner) assignedDecision(ctx context.Context, pod *corev1.Pod, refusedBy func(node string) (plugin, message string)) (decision.Decision, bool) {
	name, ok := p.plans.ClaimOf(pod.UID)
	if p.solving.has(pod.UID) {
		return decision.Decision{Kind: decision.Batched}, true
	}
	if !ok {
		if p.batcher.Contains(pod.UID) {
			return decision.Decision{Kind: decision.Batched}, true
		}
		return decision.Decision{}, false
	}
	claim, err := p.opts.NodeClaims.Get(name)
	if err != nil {
		// Created but not in the cache yet: a NodeClaim that is really gone is forgotten when the informer sees it go.
		return decision.Decision{Kind: decision.Waiting, Claim: name}, true
	}
	if claim.DeletionTimestamp != nil {
		p.plans.Forget(pod.UID)
		return decision.Decision{}, false
	}
	refused, why := "", ""
	if refusedBy != nil && claim.Status.NodeName != "" {
		refused, why = refusedBy(claim.Status.NodeName)
	}
	if refused == pluginnames.NodeResourcesFit && claim.IsInitialized() {
		klog.FromContext(ctx).V(1).Info("Planned node has no room left for the pod; provisioning it again", "pod", klog.KObj(pod),
			"node", claim.Status.NodeName, "nodeclaim", claim.Name)
		// the room kept for it on that node is free: the pods planned there may take it
		p.plans.Drop(ctx, pod.UID)
		return decision.Decision{}, false
	}
	if refused != "" {
		p.refusedOn(claim.Name, pod, refused, why)
	}
	if claim.Status.NodeName != "" && p.plans.IsNominated(pod.UID, claim.Status.NodeName) {
		return decision.Decision{Kind: decision.Nominated, NodeName: claim.Status.NodeName, Claim: name}, true
	}
	return decision.Decision{Kind: decision.Waiting, Claim: name}, true
}

// claimForNode returns the in-flight NodeClaim whose node has this name.
func (p *Provisioner) claimForNode(nodeName string) *stevedorev1.NodeClaim {
	claims, _ := p.opts.NodeClaims.List(labels.Everything())
	for _, c := range claims {
		if c.Status.NodeName == nodeName && !c.IsInitialized() {
			return c
		}
	}
	return nil
}

// Replan drops a pod's plan and provisions it again (the instance launched for it cannot hold it).
func (p *Provisioner) Replan(ctx context.Context, pod *corev1.Pod) {
	p.plans.Forget(pod.UID)
	p.wake(ctx, WakePlanDropped, []*corev1.Pod{pod})
}

// PlannedClaim names the NodeClaim a pod is planned on ("" when none).
func (p *Provisioner) PlannedClaim(uid types.UID) string {
	claim, _ := p.plans.ClaimOf(uid)
	return claim
}

// AssignedPods returns the pods planned on a NodeClaim.
func (p *Provisioner) AssignedPods(claim string) []*corev1.Pod { return p.plans.Pods(claim) }

// PodReserved is called when the scheduler reserves a node for a pod (Reserve): until it is bound, the pod counts
// on that node rather than on the NodeClaim planned for it.
func (p *Provisioner) PodReserved(pod *corev1.Pod, node string) {
	p.plans.Reserved(pod, node)
	p.free.Reserve(pod, node)
}

// PodUnreserved is called when a reserved pod does not bind (Unreserve): it counts on its NodeClaim again, and no
// longer on the node Admit sent it to.
func (p *Provisioner) PodUnreserved(uid types.UID) {
	p.plans.Unreserved(uid)
	p.free.Unsend(uid)
	p.free.Unreserve(uid)
}

// PodBound is called when a pod is bound to node (PostBind): its planned slot on a NodeClaim is released, and the
// other pods planned there, which may have been refused for the room kept for it, are woken. A pod whose binding
// fails keeps its slot.
func (p *Provisioner) PodBound(ctx context.Context, uid types.UID, node string) {
	if claim, plannedAt := p.plans.Bound(ctx, uid); claim != "" {
		p.observeReadyWait(claim, plannedAt, node)
	}
}

// NodePoolsChanged forgets why pods were unprovisionable and wakes them, so they are tried again (a NodePool or
// its limits changed, or a NodeClaim went away and freed room under them).
func (p *Provisioner) NodePoolsChanged(ctx context.Context) {
	p.wake(ctx, WakeNodePoolsChanged, p.refused.takeAll())
}

// NodeClassesChanged drops the NodePools' cached instance types and wakes the pods found unprovisionable: a node
// class that changed or became ready may let a NodePool that failed to list its types (a failure kept for a
// second) launch now.
func (p *Provisioner) NodeClassesChanged(ctx context.Context) {
	p.OfferingsChanged()
	p.NodePoolsChanged(ctx)
}

// Run solves the batches as they close, until ctx ends.
func (p *Provisioner) Run(ctx context.Context) {
	logger := klog.FromContext(ctx)
	p.batcher.WaitFor(func(batch []*corev1.Pod) string {
		why := p.partnersComing(batch)
		if why != "" {
			logger.V(2).Info("Batch stays open: pods tied to it by a required pod affinity are still being created", "pods", len(batch),
				"workload", why)
		}
		return why
	})
	p.AdoptNominations(ctx)
	for {
		select {
		case <-ctx.Done():
			return
		case <-p.batcher.Ready():
			for batch := p.batcher.Next(); batch != nil && ctx.Err() == nil; batch = p.batcher.Next() {
				p.provisionBatch(ctx, batch)
			}
		}
	}
}

// provisionBatch solves a batch and launches its nodes; then the pods of the batch left with no plan (the solve
// failed, a NodeClaim could not be created, a gang was released) are woken to be batched again, and those planned
// on a node that is ready already go to the scheduler (nominate woke them).
func (p *Provisioner) provisionBatch(ctx context.Context, batch []*corev1.Pod) {
	if err := p.solveBatch(ctx, batch); err != nil && ctx.Err() == nil {
		klog.FromContext(ctx).Error(err, "Provisioning a batch failed; its pods will be retried", "pods", len(batch))
		for _, pod := range batch {
			p.plans.Forget(pod.UID)
		}
	}
	p.wakeUnplanned(ctx, batch)
}

// wakeUnplanned wakes the pods of a batch left with no plan and not refused (a refusal woke them), to be batched
// again.
func (p *Provisioner) wakeUnplanned(ctx context.Context, batch []*corev1.Pod) {
	var unplanned []*corev1.Pod
	for _, pod := range p.stillPending(batch) {
		if !p.refused.recent(pod.UID) && !p.batcher.Contains(pod.UID) {
			unplanned = append(unplanned, pod)
		}
	}
	p.wake(ctx, WakeNotPlanned, unplanned)
}

// solveBatch plans a batch, with the pods a required pod affinity ties to it, and creates its NodeClaims.
func (p *Provisioner) solveBatch(ctx context.Context, batch []*corev1.Pod) error {
	p.solving.set(batch, true)
	defer p.solving.set(batch, false)
	pods := p.sendUntried(ctx, p.stillPending(batch))
	if len(pods) == 0 {
		return nil
	}
	pending := len(pods)
	pods, memberOf := p.withPartners(ctx, pods)
	p.solving.set(pods[pending:], true)
	defer p.solving.set(pods[pending:], false)
	start := p.opts.Clock.Now()
	seen := p.refused.seen()
	gangs, refused := p.gangs(ctx, pods, memberOf)
	if len(refused) > 0 {
		kept := pods[:0:0]
		for _, pod := range pods {
			if _, out := refused[pod.UID]; !out {
				kept = append(kept, pod)
			}
		}
		p.refuse(ctx, pods, refused, seen)
		pods = kept
	}
	in, claimByNode, err := p.input(ctx, pods)
	if err != nil {
		return err
	}
	in.Gangs = gangs.solver
	res, err := p.Plan(ctx, Request{Input: in, Launch: &Launch{Reason: launchProvisioning,
		Select: func(plan *solver.Plan) []*solver.PlannedNode {
			p.reportSolve(ctx, plan, len(pods), start)
			// The scheduler keeps trying the batch's pods while they are solved: one that found a node meanwhile
			// (reserved or bound) needs no room, and a new node left with no pod is not launched.
			p.planInFlight(ctx, plan.InFlight, claimByNode)
			return p.stillNeeded(ctx, plan.NewNodes)
		},
		Annotations: func(nodes []*solver.PlannedNode) []map[string]string {
			out := make([]map[string]string, len(nodes))
			for i, group := range launchGroups(nodes, p.opts.Clock.Now(), memberOf) {
				if group != "" {
					out[i] = map[string]string{stevedorev1.AnnotationLaunchGroup: group}
					if key, ok := memberOf.sole(nodes[i].Pods); ok {
						out[i][stevedorev1.AnnotationGang] = key.String()
					}
				}
			}
			return out
		},
	}})
	if err != nil {
		return err
	}
	plan := res.Plan
	p.refuse(ctx, pods, plan.Unschedulable, seen)
	p.releaseShortGangs(ctx, gangs, plan.Unschedulable)
	return nil
}

// reportSolve counts and logs a batch's solve.
func (p *Provisioner) reportSolve(ctx context.Context, plan *solver.Plan, pods int, start time.Time) {
	metrics.BatchPods.Observe(float64(pods))
	metrics.SolveDuration.Observe(plan.Duration.Seconds())
	metrics.UnschedulablePods.Add(float64(len(plan.Unschedulable)))
	logger := klog.FromContext(ctx)
	if plan.Improvement.TimedOut {
		metrics.SolveTimeouts.Inc()
		logger.Info("The solver's improvement phase reached solveTimeout before its bound of moves; the plan is what it had then",
			"pods", pods, "solveTimeout", p.opts.Args.SolveTimeout.Duration, "moves", plan.Improvement.Moves)
	}
	logger.Info("Solved provisioning batch", "pods", pods, "newNodes", len(plan.NewNodes),
		"onNodesLaunching", countPods(plan.InFlight), "unschedulable", len(plan.Unschedulable),
		"hourlyCost", stevedorev1.FormatPrice(plan.Cost), "duration", plan.Duration, "attempts", plan.Attempts,
		"improvementMoves", plan.Improvement.Moves, "improvementDuration", plan.Improvement.Duration, "total", p.opts.Clock.Since(start))
}

// stillNeeded returns the planned new nodes to launch, each with its pods that still wait for a node: one whose
// pods all found a node while the batch was solved is not launched.
func (p *Provisioner) stillNeeded(ctx context.Context, nodes []*solver.PlannedNode) []*solver.PlannedNode {
	var launch []*solver.PlannedNode
	for _, pn := range nodes {
		if pending := p.stillPending(pn.Pods); len(pending) == len(pn.Pods) {
			launch = append(launch, pn)
		} else if len(pending) > 0 {
			cp := *pn
			cp.Pods = pending
			launch = append(launch, &cp)
		} else {
			klog.FromContext(ctx).V(1).Info("Planned node not launched: its pods found nodes while the batch was solved", "pods", len(pn.Pods))
		}
	}
	return launch
}

// planInFlight plans pods on the NodeClaims coming up that the solve put them on (by node name), records them in
// the NodeClaims' planned-pods annotations and tells them.
func (p *Provisioner) planInFlight(ctx context.Context, placed map[string][]*corev1.Pod, claimByNode map[string]*stevedorev1.NodeClaim) {
	nodes := make([]string, 0, len(placed))
	for node := range placed {
		if claimByNode[node] != nil {
			nodes = append(nodes, node)
		}
	}
	sort.Strings(nodes)
	pods := make([][]*corev1.Pod, len(nodes))
	for i, node := range nodes {
		claim := claimByNode[node]
		pods[i] = p.stillPending(placed[node])
		p.plans.Plan(ctx, claim.Name, pods[i])
		if claim.Status.NodeName != "" {
			p.nominate(ctx, claim, pods[i])
		}
		where := "a node being launched"
		if claim.Status.NodeName != "" {
			where = "node " + claim.Status.NodeName
		}
		p.notePlanned(claim.Name, where, pods[i])
	}
	workqueue.ParallelizeUntil(ctx, createWorkers, len(nodes), func(i int) {
		p.annotatePlanned(ctx, claimByNode[nodes[i]], pods[i])
	})
}

// refuse remembers why each pod of reasons could not be provisioned, says so in an event, and wakes the pods: the
// scheduler tries them (a pod planned without a scheduling cycle was never tried), records why they fail and may
// preempt for them. seen is what the refusals had seen when the solve read its input: a pod refused for what has
// changed since is left unplanned, to be batched again (provisionBatch).
func (p *Provisioner) refuse(ctx context.Context, pods []*corev1.Pod, reasons map[types.UID]string, seen uint64) {
	var refused []*corev1.Pod
	for _, pod := range pods {
		reason, ok := reasons[pod.UID]
		if !ok || !p.refused.add(pod, reason, seen) {
			continue
		}
		p.event(pod, corev1.EventTypeWarning, ReasonFailedProvision, "Provision", "no node can be launched for this pod: %s", reason)
		refused = append(refused, pod)
	}
	p.wake(ctx, WakeUnprovisionable, refused)
}

func countPods(m map[string][]*corev1.Pod) int {
	n := 0
	for _, ps := range m {
		n += len(ps)
	}
	return n
}
