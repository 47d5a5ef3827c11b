/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package provision

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	appslisters "k8s.io/client-go/listers/apps/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	pluginnames "k8s.io/kubernetes/pkg/scheduler/framework/plugins/names"
	"k8s.io/utils/clock"

	"github.com/stevedore-dev/stevedore/pkg/apis/config"
	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/cloud"
	"github.com/stevedore-dev/stevedore/pkg/decision"
	"github.com/stevedore-dev/stevedore/pkg/generated/clientset/versioned"
	listers "github.com/stevedore-dev/stevedore/pkg/generated/listers/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/metrics"
	"github.com/stevedore-dev/stevedore/pkg/solver"
	"github.com/stevedore-dev/stevedore/pkg/solver/simulation"
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
	NodeClaims listers.NodeClaimLister
	NodePools  listers.NodePoolLister
	Cloud      cloud.Provider
	// NodeClassHash hashes a node class for drift detection (cloud specific); may be nil.
	NodeClassHash func(ctx context.Context, ref *stevedorev1.NodeClassReference) string
	Simulator     *simulation.Simulator
	Recorder      events.EventRecorder
	Clock         clock.WithDelayedExecution
	// Queue is the scheduler's scheduling queue: pods held back are put back in it when what held them clears.
	// Nil in unit tests that drive the provisioner alone.
	Queue SchedulingQueue
}

// Provisioner decides which nodes to launch for pods no node fits. It is shared by every scheduler profile of the
// process and by the NodeClaim lifecycle controller.
type Provisioner struct {
	opts    Options
	batcher *Batcher

	simMu sync.Mutex // the simulator is not safe for concurrent use
	// readyFirst: the pods whose planned node is ready, for the scheduling queue's order (a lock of its own).
	readyFirst readyFirst
	// warm returns the warm pods (capacity buffers); guarded by mu.
	warm func() []*corev1.Pod

	mu sync.Mutex
	// assigned maps a NodeClaim to the pods planned on it, podClaim the reverse.
	assigned map[string]map[types.UID]*corev1.Pod
	podClaim map[types.UID]string
	// unprovisionable remembers why a pod could not be provisioned, until NodePools or NodeClaims change or a
	// minute passes.
	unprovisionable map[types.UID]unprovisionable
	// created holds the NodeClaims this process created that the informer cache may not show yet, so that the
	// next solve counts them (room for pods, NodePool limits) and their pods are not planned twice.
	created map[string]*stevedorev1.NodeClaim
	// solving holds the pods of the batch being solved: until their NodeClaims exist they are neither in the
	// batch nor planned, and must not be batched again.
	solving map[types.UID]bool
	// binding holds the pods the scheduler reserved a node for (Reserve), and the node, until the cache shows them
	// bound: meanwhile they count on that node and are not provisioned for.
	binding map[types.UID]bindingPod
	// bindingPruned is when bound pods were last dropped from binding.
	bindingPruned time.Time
	// nominated holds the pods nominated to the node of the NodeClaim planned for them, and the node.
	nominated map[types.UID]string
	// claimOfNode names the NodeClaim of each node pods were nominated to.
	claimOfNode map[string]string
	// plannedAt is when each planned pod was planned on its NodeClaim; readyAt when this process saw a NodeClaim's
	// node initialize (the pods' wait for a ready node is measured from the later of the two).
	plannedAt map[types.UID]time.Time
	readyAt   map[string]time.Time
	// refused holds, by NodeClaim, the pods its node refused in their last scheduling attempt (refusedOn);
	// refusedAt when a pod's own planned node last refused it, refusedSince when it first did.
	refused      map[string]map[types.UID]*corev1.Pod
	refusedAt    map[types.UID]time.Time
	refusedSince map[types.UID]time.Time
	// refusedWhy says why a pod's own planned node last refused it; parkedWokenAt when reviewParked last retried it.
	refusedWhy    map[types.UID]string
	parkedWokenAt map[types.UID]time.Time
	// plannedReq holds the requests of each planned pod (computed once: the scheduler's filters read them on every
	// node of every cycle).
	plannedReq map[types.UID]solver.Requests
	// keptSum holds, for each NodeClaim, the requests of the pods planned on it that are not being bound (what
	// keptLocked sums with no exception), kept as pods are planned, forgotten, reserved and unreserved: a burst's
	// pod planned nowhere weighs every node's kept room in PreFilter, and summing each node's planned pods on each
	// try grew with the square of the burst. Changed only through planLocked, unplanLocked and setBindingLocked.
	keptSum map[string]solver.Requests
	// started is set once the plan of a previous leader has been adopted (AdoptNominations); until then the nodes
	// Stevedore is bringing up are refused to every pod (heldAtStart), which is woken once it is set.
	started     atomic.Bool
	heldAtStart map[types.UID]*corev1.Pod

	// instanceTypes caches the NodePools' instance types (InstanceTypes, InstanceTypesOf, OfferingsChanged).
	*instanceTypes

	// daemonRoom keeps room for the DaemonSet pods of the nodes Stevedore launched until they are bound
	// (ExpectDaemons, ForgetDaemons).
	*daemonRoom
}

// New returns a Provisioner. Run starts its batch loop.
func New(opts Options) *Provisioner {
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	opts.Args = opts.Args.Defaults(nil)
	metrics.Register()
	return &Provisioner{
		opts:            opts,
		batcher:         NewBatcher(opts.Args.BatchIdleDuration.Duration, opts.Args.BatchMaxDuration.Duration, opts.Clock),
		instanceTypes:   newInstanceTypes(opts.Cloud, opts.NodePools, opts.Clock),
		daemonRoom:      newDaemonRoom(opts.DaemonSets),
		assigned:        map[string]map[types.UID]*corev1.Pod{},
		podClaim:        map[types.UID]string{},
		unprovisionable: map[types.UID]unprovisionable{},
		created:         map[string]*stevedorev1.NodeClaim{},
		solving:         map[types.UID]bool{},
		binding:         map[types.UID]bindingPod{},
		keptSum:         map[string]solver.Requests{},
		nominated:       map[types.UID]string{},
		claimOfNode:     map[string]string{},
		plannedAt:       map[types.UID]time.Time{},
		readyAt:         map[string]time.Time{},
		heldAtStart:     map[types.UID]*corev1.Pod{},
		plannedReq:      map[types.UID]solver.Requests{},
		refused:         map[string]map[types.UID]*corev1.Pod{},
		refusedAt:       map[types.UID]time.Time{},
		refusedSince:    map[types.UID]time.Time{},
		refusedWhy:      map[types.UID]string{},
		parkedWokenAt:   map[types.UID]time.Time{},
	}
}

// Consider is called for a pod that fits no existing node: it keeps the pod on the node planned for it, puts it on a
// node being launched that has room, or adds it to the batch for the next solve. refusedBy, when given, names the
// plugin that refused a node to the pod in the cycle that failed, and why ("" when the node was not refused).
func (p *Provisioner) Consider(ctx context.Context, pod *corev1.Pod, refusedBy func(node string) (plugin, message string)) decision.Decision {
	if d, ok := p.assignedDecision(ctx, pod, refusedBy); ok {
		return d
	}
	p.mu.Lock()
	u, known := p.unprovisionable[pod.UID]
	if known && p.opts.Clock.Since(u.at) > time.Minute {
		delete(p.unprovisionable, pod.UID)
		known = false
	}
	p.mu.Unlock()
	if known {
		return decision.Decision{Kind: decision.Unprovisionable, Reason: u.reason}
	}
	if nn := pod.Status.NominatedNodeName; nn != "" {
		if claim := p.claimForNode(nn); claim != nil && claim.DeletionTimestamp == nil {
			p.assign(ctx, claim.Name, []*corev1.Pod{pod})
			p.mu.Lock()
			p.nominated[pod.UID] = nn
			p.mu.Unlock()
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
	p.mu.Lock()
	name, ok := p.podClaim[pod.UID]
	solving := p.solving[pod.UID]
	p.mu.Unlock()
	if solving {
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
		// Created but not in the cache yet: a NodeClaim that is really gone is forgotten by ForgetClaim.
		return decision.Decision{Kind: decision.Waiting, Claim: name}, true
	}
	if claim.DeletionTimestamp != nil {
		p.forgetPod(pod.UID)
		return decision.Decision{}, false
	}
	refused, why := "", ""
	if refusedBy != nil && claim.Status.NodeName != "" {
		refused, why = refusedBy(claim.Status.NodeName)
	}
	if refused == pluginnames.NodeResourcesFit && claim.IsInitialized() {
		klog.FromContext(ctx).V(1).Info("Planned node has no room left for the pod; provisioning it again", "pod", klog.KObj(pod),
			"node", claim.Status.NodeName, "nodeclaim", claim.Name)
		p.forgetPod(pod.UID)
		// the room kept for it on that node is free: the pods planned there may take it
		p.wake(ctx, WakePlannedPodGone, p.takeRefused(claim.Name))
		return decision.Decision{}, false
	}
	if refused != "" {
		p.refusedOn(claim.Name, pod, refused, why)
	}
	if claim.Status.NodeName != "" && p.isNominated(pod.UID, claim.Status.NodeName) {
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

// assign plans pods on a NodeClaim. A pod planned elsewhere before leaves its room there to the pods planned there.
func (p *Provisioner) assign(ctx context.Context, claim string, pods []*corev1.Pod) {
	now := p.opts.Clock.Now()
	moved := map[string]bool{}
	p.mu.Lock()
	for _, pod := range pods {
		prev, ok := p.podClaim[pod.UID]
		if ok && prev != claim {
			p.unplanLocked(prev, pod.UID)
			moved[prev] = true
		}
		if !ok || prev != claim {
			p.plannedAt[pod.UID] = now
		}
		if _, known := p.plannedReq[pod.UID]; !known {
			p.plannedReq[pod.UID] = solver.PodRequests(pod)
		}
		p.planLocked(claim, pod)
	}
	var waiting []*corev1.Pod
	for prev := range moved {
		waiting = append(waiting, p.takeRefusedLocked(prev)...)
	}
	p.mu.Unlock()
	p.wake(ctx, WakePlannedPodGone, waiting)
}

// forgetPod drops a pod's plan and returns the NodeClaim it was planned on ("" if none).
func (p *Provisioner) forgetPod(uid types.UID) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	claim, ok := p.podClaim[uid]
	if ok {
		p.unplanLocked(claim, uid)
	}
	delete(p.nominated, uid)
	delete(p.plannedAt, uid)
	delete(p.plannedReq, uid)
	delete(p.refusedAt, uid)
	delete(p.refusedSince, uid)
	delete(p.refusedWhy, uid)
	delete(p.parkedWokenAt, uid)
	p.readyFirst.remove(uid)
	return claim
}

// Replan drops a pod's plan and provisions it again (the instance launched for it cannot hold it).
func (p *Provisioner) Replan(ctx context.Context, pod *corev1.Pod) {
	p.forgetPod(pod.UID)
	p.wake(ctx, WakePlanDropped, []*corev1.Pod{pod})
}

// ForgetClaim drops the plan of a NodeClaim that is gone: its pods are provisioned again, at once.
func (p *Provisioner) ForgetClaim(ctx context.Context, name string) {
	p.mu.Lock()
	delete(p.created, name)
	delete(p.readyAt, name)
	var pods []*corev1.Pod
	for uid, pod := range p.assigned[name] {
		delete(p.podClaim, uid)
		delete(p.nominated, uid)
		delete(p.plannedAt, uid)
		delete(p.plannedReq, uid)
		delete(p.refusedAt, uid)
		delete(p.refusedWhy, uid)
		delete(p.parkedWokenAt, uid)
		pods = append(pods, pod)
	}
	delete(p.assigned, name)
	delete(p.keptSum, name)
	for node, claim := range p.claimOfNode {
		if claim == name {
			delete(p.claimOfNode, node)
		}
	}
	pods = append(pods, p.takeRefusedLocked(name)...)
	p.mu.Unlock()
	p.wake(ctx, WakePlanDropped, pods)
}

// PlannedClaim names the NodeClaim a pod is planned on ("" when none).
func (p *Provisioner) PlannedClaim(uid types.UID) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.podClaim[uid]
}

// NodeMayHelp reports whether a change to a node Stevedore launched may let pod schedule: the pod is planned
// nowhere (any node may take it, or the next solve plan it there), the node is the one launched for the pod's
// NodeClaim, or that NodeClaim has no node yet. Another pod's node registering or initializing cannot: its room is
// planned for others, and the pod's own node comes with its own event.
func (p *Provisioner) NodeMayHelp(pod *corev1.Pod, node string) bool {
	p.mu.Lock()
	claim, planned := p.podClaim[pod.UID]
	of, known := p.claimOfNode[node]
	p.mu.Unlock()
	switch {
	case !planned:
		return true
	case known:
		return of == claim
	}
	c, err := p.opts.NodeClaims.Get(claim)
	return err != nil || c.Status.NodeName == "" || c.Status.NodeName == node
}

// AssignedPods returns the pods planned on a NodeClaim.
func (p *Provisioner) AssignedPods(claim string) []*corev1.Pod {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]*corev1.Pod, 0, len(p.assigned[claim]))
	for _, pod := range p.assigned[claim] {
		out = append(out, pod)
	}
	return out
}

type bindingPod struct {
	pod     *corev1.Pod
	node    string
	boundAt time.Time // zero until PostBind
}

// PodReserved is called when the scheduler reserves a node for a pod (Reserve): until it is bound, the pod counts
// on that node rather than on the NodeClaim planned for it.
func (p *Provisioner) PodReserved(pod *corev1.Pod, node string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.setBindingLocked(pod.UID, &bindingPod{pod: pod, node: node})
}

// PodUnreserved is called when a reserved pod does not bind (Unreserve): it counts on its NodeClaim again.
func (p *Provisioner) PodUnreserved(uid types.UID) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.setBindingLocked(uid, nil)
}

// planLocked plans pod on a NodeClaim (it is planned nowhere else). p.mu is held.
func (p *Provisioner) planLocked(claim string, pod *corev1.Pod) {
	set := p.assigned[claim]
	if set == nil {
		set = map[types.UID]*corev1.Pod{}
		p.assigned[claim] = set
	}
	if _, there := set[pod.UID]; !there {
		if _, binding := p.binding[pod.UID]; !binding {
			p.keptSum[claim] = p.keptSum[claim].Add(p.plannedReq[pod.UID])
		}
	}
	set[pod.UID] = pod
	p.podClaim[pod.UID] = claim
}

// unplanLocked drops a pod's plan on a NodeClaim. p.mu is held.
func (p *Provisioner) unplanLocked(claim string, uid types.UID) {
	if _, there := p.assigned[claim][uid]; there {
		delete(p.assigned[claim], uid)
		if _, binding := p.binding[uid]; !binding {
			p.keptSum[claim] = p.keptSum[claim].Sub(p.plannedReq[uid])
		}
	}
	if p.podClaim[uid] == claim {
		delete(p.podClaim, uid)
	}
}

// setBindingLocked records a pod being bound (b), or no longer (nil). p.mu is held.
func (p *Provisioner) setBindingLocked(uid types.UID, b *bindingPod) {
	_, was := p.binding[uid]
	if b != nil {
		p.binding[uid] = *b
	} else {
		delete(p.binding, uid)
	}
	if is := b != nil; is != was {
		if claim, planned := p.podClaim[uid]; planned {
			if _, there := p.assigned[claim][uid]; there {
				if is {
					p.keptSum[claim] = p.keptSum[claim].Sub(p.plannedReq[uid])
				} else {
					p.keptSum[claim] = p.keptSum[claim].Add(p.plannedReq[uid])
				}
			}
		}
	}
}

// PodBound is called when a pod is bound to node (PostBind): its planned slot on a NodeClaim is released, and the
// other pods planned there, which may have been refused for the room kept for it, are woken. A pod whose binding
// fails keeps its slot. The pod keeps counting on its node until the cache shows it bound, so that neither the
// node's room nor the pod is counted twice meanwhile.
func (p *Provisioner) PodBound(ctx context.Context, uid types.UID, node string) {
	now := p.opts.Clock.Now()
	p.mu.Lock()
	plannedAt := p.plannedAt[uid]
	if b, ok := p.binding[uid]; ok {
		b.boundAt = now
		p.binding[uid] = b
	}
	if now.Sub(p.bindingPruned) > 30*time.Second {
		// Pods bound while nothing was solved are never looked at by bindingPods: drop them here.
		p.bindingPruned = now
		for id, b := range p.binding {
			if !b.boundAt.IsZero() && now.Sub(b.boundAt) > time.Minute {
				p.setBindingLocked(id, nil)
			}
		}
	}
	p.mu.Unlock()
	claim := p.forgetPod(uid)
	if claim == "" {
		return
	}
	p.observeReadyWait(claim, plannedAt, node)
	p.wake(ctx, WakePlannedPodBound, p.takeRefused(claim))
}

func (p *Provisioner) isBinding(uid types.UID) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	_, ok := p.binding[uid]
	return ok
}

// bindingPods returns the pods being bound, by node, leaving out those the cache already shows bound.
func (p *Provisioner) bindingPods() map[string][]*corev1.Pod {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := map[string][]*corev1.Pod{}
	for uid, b := range p.binding {
		cur, err := p.opts.Pods.Pods(b.pod.Namespace).Get(b.pod.Name)
		shown := err == nil && cur.UID == uid && cur.Spec.NodeName != ""
		gone := (err != nil || cur.UID != uid) && !b.boundAt.IsZero()
		if shown || gone || (!b.boundAt.IsZero() && p.opts.Clock.Since(b.boundAt) > time.Minute) {
			if !b.boundAt.IsZero() {
				p.setBindingLocked(uid, nil)
			}
			continue
		}
		out[b.node] = append(out[b.node], b.pod)
	}
	return out
}

type unprovisionable struct {
	pod    *corev1.Pod
	reason string
	at     time.Time
}

// NodePoolsChanged forgets why pods were unprovisionable and wakes them, so they are tried again (a NodePool or
// its limits changed, or a NodeClaim went away and freed room under them).
func (p *Provisioner) NodePoolsChanged(ctx context.Context) {
	p.mu.Lock()
	pods := make([]*corev1.Pod, 0, len(p.unprovisionable))
	for _, u := range p.unprovisionable {
		pods = append(pods, u.pod)
	}
	p.unprovisionable = map[types.UID]unprovisionable{}
	p.mu.Unlock()
	p.wake(ctx, WakeNodePoolsChanged, pods)
}

// Run solves the batches as they close, until ctx ends.
func (p *Provisioner) Run(ctx context.Context) {
	logger := klog.FromContext(ctx)
	p.AdoptNominations(ctx)
	for {
		select {
		case <-ctx.Done():
			return
		case batch := <-p.batcher.Closed():
			if err := p.solveBatch(ctx, batch); err != nil && ctx.Err() == nil {
				logger.Error(err, "Provisioning a batch failed; its pods will be retried", "pods", len(batch))
				for _, pod := range batch {
					p.forgetPod(pod.UID)
				}
			}
		}
	}
}

// solveBatch plans a batch, with the pods a required pod affinity ties to it, and creates its NodeClaims.
func (p *Provisioner) solveBatch(ctx context.Context, batch []*corev1.Pod) error {
	logger := klog.FromContext(ctx)
	p.setSolving(batch, true)
	defer p.setSolving(batch, false)
	pods := p.stillPending(batch)
	if len(pods) == 0 {
		return nil
	}
	pending := len(pods)
	pods = p.withAffinityPartners(ctx, pods)
	p.setSolving(pods[pending:], true)
	defer p.setSolving(pods[pending:], false)
	start := p.opts.Clock.Now()
	in, claimByNode, err := p.input(ctx, pods)
	if err != nil {
		return err
	}
	p.simMu.Lock()
	plan, err := solver.NewSolver(p.opts.Simulator).Solve(ctx, in)
	p.simMu.Unlock()
	if err != nil {
		return err
	}
	metrics.BatchPods.Observe(float64(len(pods)))
	metrics.SolveDuration.Observe(plan.Duration.Seconds())
	metrics.UnschedulablePods.Add(float64(len(plan.Unschedulable)))
	if plan.Improvement.TimedOut {
		metrics.SolveTimeouts.Inc()
		logger.Info("The solver's improvement phase reached solveTimeout before its bound of moves; the plan is what it had then",
			"pods", len(pods), "solveTimeout", p.opts.Args.SolveTimeout.Duration, "moves", plan.Improvement.Moves)
	}
	logger.Info("Solved provisioning batch", "pods", len(pods), "newNodes", len(plan.NewNodes),
		"onNodesLaunching", countPods(plan.InFlight), "unschedulable", len(plan.Unschedulable),
		"hourlyCost", stevedorev1.FormatPrice(plan.Cost), "duration", plan.Duration, "attempts", plan.Attempts,
		"improvementMoves", plan.Improvement.Moves, "improvementDuration", plan.Improvement.Duration, "total", p.opts.Clock.Since(start))
	// The scheduler keeps trying the batch's pods while they are solved: one that found a node meanwhile
	// (reserved or bound) needs no room, and a new node left with no pod is not launched.
	for node, placed := range plan.InFlight {
		claim := claimByNode[node]
		if claim == nil {
			continue
		}
		placed = p.stillPending(placed)
		p.assign(ctx, claim.Name, placed)
		if claim.Status.NodeName != "" {
			p.nominate(ctx, claim, placed)
		}
	}
	var launch []*solver.PlannedNode
	for _, pn := range plan.NewNodes {
		if pending := p.stillPending(pn.Pods); len(pending) == len(pn.Pods) {
			launch = append(launch, pn)
		} else if len(pending) > 0 {
			cp := *pn
			cp.Pods = pending
			launch = append(launch, &cp)
		} else {
			logger.V(1).Info("Planned node not launched: its pods found nodes while the batch was solved", "pods", len(pn.Pods))
		}
	}
	p.CreateNodeClaims(ctx, launch, nil)
	for _, pod := range pods {
		reason, ok := plan.Unschedulable[pod.UID]
		if !ok {
			continue
		}
		p.mu.Lock()
		p.unprovisionable[pod.UID] = unprovisionable{pod: pod, reason: reason, at: p.opts.Clock.Now()}
		p.mu.Unlock()
		p.event(pod, corev1.EventTypeWarning, ReasonFailedProvision, "Provision", "no node can be launched for this pod: %s", reason)
	}
	return nil
}

// CreateNodeClaims creates a NodeClaim for each planned node, in parallel (a burst plans hundreds and each create
// is an API round trip), with extra annotations, and plans each node's pods on it. It returns the NodeClaims
// created; a failed create is logged and its pods are provisioned again.
func (p *Provisioner) CreateNodeClaims(ctx context.Context, nodes []*solver.PlannedNode, annotations map[string]string) []*stevedorev1.NodeClaim {
	logger := klog.FromContext(ctx)
	created := make([]*stevedorev1.NodeClaim, len(nodes))
	workqueue.ParallelizeUntil(ctx, createWorkers, len(nodes), func(i int) {
		pn := nodes[i]
		hash := ""
		if p.opts.NodeClassHash != nil {
			hash = p.opts.NodeClassHash(ctx, pn.NodePool.Spec.Template.Spec.NodeClassRef)
		}
		nc := NewNodeClaim(pn, hash)
		for k, v := range annotations {
			nc.Annotations[k] = v
		}
		claim, err := p.opts.Stevedore.StevedoreV1().NodeClaims().Create(ctx, nc, metav1.CreateOptions{})
		if err != nil {
			logger.Error(err, "Creating a NodeClaim failed; its pods will be provisioned again", "nodepool", pn.NodePool.Name)
			return
		}
		p.mu.Lock()
		p.created[claim.Name] = claim
		p.mu.Unlock()
		p.assign(ctx, claim.Name, pn.Pods)
		created[i] = claim
		reason := "provisioning"
		if len(annotations) > 0 {
			reason = "replacement"
		}
		metrics.NodeClaimsCreated.WithLabelValues(pn.NodePool.Name, pn.Offering.CapacityType, reason).Inc()
		logger.Info("Created NodeClaim", "nodeclaim", klog.KObj(claim), "nodepool", pn.NodePool.Name,
			"instanceTypes", len(pn.InstanceTypes), "cheapest", pn.InstanceType.Name, "zone", pn.Offering.Zone,
			"capacityType", pn.Offering.CapacityType, "price", stevedorev1.FormatPrice(pn.Offering.Price), "pods", len(pn.Pods))
	})
	out := created[:0]
	for _, c := range created {
		if c != nil {
			out = append(out, c)
		}
	}
	return out
}

func countPods(m map[string][]*corev1.Pod) int {
	n := 0
	for _, ps := range m {
		n += len(ps)
	}
	return n
}

// setSolving marks pods as being solved (or no longer).
func (p *Provisioner) setSolving(pods []*corev1.Pod, solving bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, pod := range pods {
		if solving {
			p.solving[pod.UID] = true
		} else {
			delete(p.solving, pod.UID)
		}
	}
}

// stillPending keeps the batch's pods that still wait for a node, as the cache has them now.
func (p *Provisioner) stillPending(batch []*corev1.Pod) []*corev1.Pod {
	var out []*corev1.Pod
	for _, b := range batch {
		pod, err := p.opts.Pods.Pods(b.Namespace).Get(b.Name)
		if err != nil || pod.UID != b.UID || pod.Spec.NodeName != "" || pod.DeletionTimestamp != nil {
			continue
		}
		p.mu.Lock()
		_, planned := p.podClaim[pod.UID]
		_, binding := p.binding[pod.UID]
		p.mu.Unlock()
		if planned || binding {
			continue
		}
		out = append(out, pod)
	}
	return out
}

func (p *Provisioner) event(obj *corev1.Pod, eventType, reason, action, note string, args ...any) {
	if p.opts.Recorder == nil {
		return
	}
	p.opts.Recorder.Eventf(obj, nil, eventType, reason, action, note, args...)
}
