/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package provision

import (
	"context"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	pluginnames "k8s.io/kubernetes/pkg/scheduler/framework/plugins/names"

	"github.com/stevedore-dev/stevedore/pkg/metrics"
	"github.com/stevedore-dev/stevedore/pkg/provision/ledger"
)

// SchedulingQueue is what the provisioner uses of kube-scheduler's scheduling queue (the framework's Handle
// implements it): Activate moves pods the provisioner held back to the active queue once what held them cleared
// (a pod the queue has in flight is retried when its cycle ends), and NominatedPodsForNode names the pods the
// scheduler itself counts on a node.
type SchedulingQueue interface {
	Activate(logger klog.Logger, pods map[string]*corev1.Pod)
	NominatedPodsForNode(nodeName string) []fwk.PodInfo
}

// Why pods are woken (the reason label of stevedore_pods_woken_total), besides the reasons of the plans' own
// changes (package ledger: PlannedPodBound, PlannedPodGone, PlanDropped, NodeInitialized); the package
// documentation lists, for each refusal, which of these clears it.
const (
	// WakePlanDropped: the launched instance cannot hold the pod (Replan): plan it again.
	WakePlanDropped = ledger.WakePlanDropped
	// WakePlannedOnExistingNode: the pod was planned on a node that has already registered, so no Node event
	// will come for it.
	WakePlannedOnExistingNode = "PlannedOnExistingNode"
	// WakeNodePoolsChanged: a NodePool changed or a NodeClaim went away, so a pod no NodePool could take may fit.
	WakeNodePoolsChanged = "NodePoolsChanged"
	// WakeStarted: the provisioner adopted the previous leader's plan, so the nodes still coming up may be used.
	WakeStarted = "Started"
	// WakeStalePlan: the ready node planned for the pod still refused it replanAfter after it was ready: the pod is
	// planned again.
	WakeStalePlan = "StalePlan"
	// WakeParked: the pod has waited replanAfter on the ready node planned for it: it is retried (a backstop for a
	// wake-up this table does not foresee; a pod already waiting its turn in the queue is left there).
	WakeParked = "Parked"
	// WakeNotPlanned: the pod's batch was solved and left it with no plan (the solve or a NodeClaim's creation
	// failed): it is batched again.
	WakeNotPlanned = "NotPlanned"
	// WakeRoomFound: the pod, batched before the scheduler tried it, has a node with room by the time its batch is
	// solved: the scheduler places it there instead.
	WakeRoomFound = "RoomFound"
	// WakeSpreadChanged: a pod of the spread group a pod was held for bound or left: binding the held pod may keep
	// its spread now.
	WakeSpreadChanged = "SpreadChanged"
	// WakeUnprovisionable: no node can be launched for the pod: the scheduler tries it, says why it fails and may
	// preempt for it; and a minute later, it is planned again.
	WakeUnprovisionable = "Unprovisionable"
)

// wake puts pods back in the scheduler's active queue because what held them back cleared.
func (p *base) wake(ctx context.Context, reason string, pods []*corev1.Pod) {
	if p.opts.Queue == nil || len(pods) == 0 {
		return
	}
	byKey := make(map[string]*corev1.Pod, len(pods))
	for _, pod := range pods {
		byKey[pod.Namespace+"/"+pod.Name] = pod
	}
	logger := klog.FromContext(ctx)
	if loggerV := logger.V(4); loggerV.Enabled() {
		keys := make([]string, 0, len(byKey))
		for k := range byKey {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		loggerV.Info("Waking pods", "reason", reason, "pods", keys)
	}
	p.opts.Queue.Activate(logger, byKey)
	metrics.PodsWoken.WithLabelValues(reason).Add(float64(len(byKey)))
}

// refusedOn records that a NodeClaim's node refused a pod in its last scheduling attempt, and by which plugin
// (ledger.Refused): a refusal by one of planBreakers, of a pod planned there, counts towards planning it again.
func (p *base) refusedOn(claim string, pod *corev1.Pod, plugin, why string) {
	p.plans.Refused(claim, pod, planBreakers.Has(plugin), plugin+": "+why)
}

// refusedNode records that the node of that name, one Stevedore launched, refused pod.
func (p *base) refusedNode(node string, pod *corev1.Pod, plugin, why string) {
	p.plans.RefusedByNode(node, pod, planBreakers.Has(plugin), plugin+": "+why)
}

// planBreakers are the plugins whose refusal of a pod on the ready node planned for it says the plan no longer
// holds (its room, spread or affinity taken by pods put there in its stead), so that the pod is planned again if
// it lasts (reviewParked). A refusal for the node's state (a not-ready or unreachable taint, cordoning) is left to
// the node: it recovers, or repair and liveness replace it.
var planBreakers = sets.New(pluginnames.PodTopologySpread, pluginnames.InterPodAffinity, pluginnames.NodePorts, "Provisioner")

// schedulerCounts returns the pods the scheduler adds to node when it evaluates pod there: those nominated to it
// with a priority at least pod's. Without a queue (unit tests), the pods this provisioner nominated there.
func (p *base) schedulerCounts(pod *corev1.Pod, node string) map[types.UID]bool {
	out := map[types.UID]bool{}
	if p.opts.Queue == nil {
		for _, q := range p.plans.NominatedTo(node) {
			out[q.UID] = true
		}
		return out
	}
	prio := corev1helpers.PodPriority(pod)
	for _, pi := range p.opts.Queue.NominatedPodsForNode(node) {
		if q := pi.GetPod(); corev1helpers.PodPriority(q) >= prio {
			out[q.UID] = true
		}
	}
	return out
}

// ClaimInitialized records that a NodeClaim's node finished initializing, puts the pods planned there first in the
// scheduling queue and wakes the pods it refused (ledger.Initialized).
func (p *wakeups) ClaimInitialized(ctx context.Context, claim string) {
	p.plans.Initialized(ctx, claim)
}

// NodeReadyFor reports whether the pod is planned on a node Stevedore launched that finished initializing: the
// node waits for it.
func (p *wakeups) NodeReadyFor(uid types.UID) bool { return p.plans.ReadyFirst(uid) }

// observeReadyWait records, for a pod bound to the node planned for it, how long it waited after that node was
// ready (or after it was planned there, when the node already was).
func (p *wakeups) observeReadyWait(claim string, plannedAt time.Time, node string) {
	c, err := p.opts.NodeClaims.Get(claim)
	if err != nil || c.Status.NodeName != node {
		return
	}
	ready := p.plans.ReadySince(claim)
	if ready.IsZero() {
		return
	}
	if plannedAt.After(ready) {
		ready = plannedAt
	}
	metrics.PodsReadyNodeWait.Observe(p.opts.Clock.Since(ready).Seconds())
}

// replanAfter is how long a pod may wait on the ready node planned for it before it is retried, and planned again
// if that node still refuses it then, replanAfter after it first refused it: the node can take it no more (its
// room or its spread taken by pods put there in its stead) or never will for a reason the plan did not see. A pod
// the node can take binds within moments of its being ready, unless the scheduler is busy: a pod still waiting its
// turn is retried, not planned again. Counting from the first refusal, not from the node being ready, keeps a pod
// that a busy queue tries late from being planned again for a refusal that passes: a zone spread its siblings
// planned in the other zones have not balanced yet, which they do as they bind.
const replanAfter = 30 * time.Second

// parkedPod is a pod planned on a ready node that is neither bound nor being bound, how long it has waited since
// the later of the node being ready and the plan, and whether its planned node refused it replanAfter or more
// after the later of the node being ready and its first refusal.
type parkedPod struct {
	ledger.Parked
	wait  time.Duration
	stale bool
}

// parkedOnReadyNodes returns the pods planned on ready nodes that are neither bound nor being bound.
func (p *wakeups) parkedOnReadyNodes() []parkedPod {
	var out []parkedPod
	for _, pp := range p.plans.UnboundOnReadyNodes() {
		ready := pp.ReadyAt
		cur, err := p.opts.Pods.Pods(pp.Pod.Namespace).Get(pp.Pod.Name)
		if err != nil || cur.UID != pp.Pod.UID || cur.Spec.NodeName != "" || cur.DeletionTimestamp != nil {
			continue
		}
		if pp.PlannedAt.After(ready) {
			ready = pp.PlannedAt
		}
		out = append(out, parkedPod{Parked: pp, wait: p.opts.Clock.Since(ready),
			stale: pp.RefusedAt.Sub(laterOf(ready, pp.RefusedSince)) >= replanAfter})
	}
	return out
}

// reviewParked reports the pods parked on ready nodes (gauges); of those that waited longer than replanAfter, it
// plans again the ones their node refused after that, and retries the others.
func (p *wakeups) reviewParked(ctx context.Context) {
	parked := p.parkedOnReadyNodes()
	oldest := time.Duration(0)
	var stale, retry []*corev1.Pod
	for _, pp := range parked {
		oldest = max(oldest, pp.wait)
		switch {
		case pp.stale:
			klog.FromContext(ctx).Info("The ready node planned for a pod still refuses it; planning it again", "pod", klog.KObj(pp.Pod),
				"nodeclaim", pp.Claim, "waited", pp.wait.Round(time.Second), "refusal", pp.Why)
			p.plans.Forget(pp.Pod.UID)
			stale = append(stale, pp.Pod)
		case pp.wait > replanAfter && p.opts.Clock.Since(pp.WokenAt) >= replanAfter:
			// at most once per replanAfter: a pod waiting its turn in a long queue is left to it
			retry = append(retry, pp.Pod)
		}
	}
	p.plans.Woken(retry, p.opts.Clock.Now())
	metrics.PodsParkedOnReadyNode.Set(float64(len(parked) - len(stale)))
	metrics.PodsParkedOnReadyNodeOldest.Set(oldest.Seconds())
	p.wake(ctx, WakeStalePlan, stale)
	p.wake(ctx, WakeParked, retry)
}

// laterOf returns the later of two times.
func laterOf(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
