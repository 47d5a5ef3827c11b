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

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/metrics"
)

// SchedulingQueue is what the provisioner uses of kube-scheduler's scheduling queue (the framework's Handle
// implements it): Activate moves pods the provisioner held back to the active queue once what held them cleared
// (a pod the queue has in flight is retried when its cycle ends), and NominatedPodsForNode names the pods the
// scheduler itself counts on a node.
type SchedulingQueue interface {
	Activate(logger klog.Logger, pods map[string]*corev1.Pod)
	NominatedPodsForNode(nodeName string) []fwk.PodInfo
}

// Why pods are woken (the reason label of stevedore_pods_woken_total); the package documentation lists, for each
// refusal, which of these clears it.
const (
	// WakePlannedPodBound: a pod planned on the same node bound (or its reservation moved it elsewhere), so the
	// room kept for it is the scheduler's to count now.
	WakePlannedPodBound = "PlannedPodBound"
	// WakePlannedPodGone: a pod planned on the same node was deleted or planned elsewhere: its room is free.
	WakePlannedPodGone = "PlannedPodGone"
	// WakePlanDropped: the pod's NodeClaim went away (launch failed, deleted, never registered): plan it again.
	WakePlanDropped = "PlanDropped"
	// WakePlannedOnExistingNode: the pod was planned on a node that has already registered, so no Node event
	// will come for it.
	WakePlannedOnExistingNode = "PlannedOnExistingNode"
	// WakeNodeInitialized: the node planned for the pod finished initializing.
	WakeNodeInitialized = "NodeInitialized"
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
)

// wake puts pods back in the scheduler's active queue because what held them back cleared.
func (p *Provisioner) wake(ctx context.Context, reason string, pods []*corev1.Pod) {
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

// refusedOn records that a NodeClaim's node refused a pod in its last scheduling attempt (the room kept there for
// others, or, for a pod planned there, any plugin): the pods a change of that node's plan may help are these, and
// waking them only keeps a burst from retrying every pod planned on a node each time one of them binds.
func (p *Provisioner) refusedOn(claim string, pod *corev1.Pod, plugin, why string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.podClaim[pod.UID] == claim && planBreakers.Has(plugin) {
		now := p.opts.Clock.Now()
		p.refusedAt[pod.UID] = now
		if _, ok := p.refusedSince[pod.UID]; !ok {
			p.refusedSince[pod.UID] = now
		}
		p.refusedWhy[pod.UID] = plugin + ": " + why
	}
	set := p.refused[claim]
	if set == nil {
		set = map[types.UID]*corev1.Pod{}
		p.refused[claim] = set
	}
	set[pod.UID] = pod
}

// refusedNode records that the node of that name, one Stevedore launched, refused pod.
func (p *Provisioner) refusedNode(node string, pod *corev1.Pod, plugin, why string) {
	p.mu.Lock()
	claim, ours := p.claimOfNode[node]
	p.mu.Unlock()
	if ours {
		p.refusedOn(claim, pod, plugin, why)
	}
}

// planBreakers are the plugins whose refusal of a pod on the ready node planned for it says the plan no longer
// holds (its room, spread or affinity taken by pods put there in its stead), so that the pod is planned again if
// it lasts (reviewParked). A refusal for the node's state (a not-ready or unreachable taint, cordoning) is left to
// the node: it recovers, or repair and liveness replace it.
var planBreakers = sets.New(pluginnames.PodTopologySpread, pluginnames.InterPodAffinity, pluginnames.NodePorts, "Provisioner")

// takeRefused returns, and forgets, the pods a NodeClaim's node refused.
func (p *Provisioner) takeRefused(claim string) []*corev1.Pod {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.takeRefusedLocked(claim)
}

func (p *Provisioner) takeRefusedLocked(claim string) []*corev1.Pod {
	set := p.refused[claim]
	delete(p.refused, claim)
	out := make([]*corev1.Pod, 0, len(set))
	for _, pod := range set {
		out = append(out, pod)
	}
	return out
}

// PodDeleted drops the plan of a deleted pod and wakes the pods planned on the same node: the room kept for it is
// free.
func (p *Provisioner) PodDeleted(ctx context.Context, pod *corev1.Pod) {
	p.mu.Lock()
	p.setBindingLocked(pod.UID, nil)
	p.mu.Unlock()
	if claim := p.forgetPod(pod.UID); claim != "" {
		p.wake(ctx, WakePlannedPodGone, p.takeRefused(claim))
	}
}

// schedulerCounts returns the pods the scheduler adds to node when it evaluates pod there: those nominated to it
// with a priority at least pod's. Without a queue (unit tests), the pods this provisioner nominated there.
func (p *Provisioner) schedulerCounts(pod *corev1.Pod, node string) map[types.UID]bool {
	out := map[types.UID]bool{}
	if p.opts.Queue == nil {
		p.mu.Lock()
		defer p.mu.Unlock()
		for uid, n := range p.nominated {
			if n == node {
				out[uid] = true
			}
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
// scheduling queue (readyFirst) and wakes the pods it refused.
func (p *Provisioner) ClaimInitialized(ctx context.Context, claim string) {
	p.mu.Lock()
	if _, ok := p.readyAt[claim]; !ok {
		p.readyAt[claim] = p.opts.Clock.Now()
	}
	refused := p.takeRefusedLocked(claim)
	planned := make([]types.UID, 0, len(p.assigned[claim]))
	for uid := range p.assigned[claim] {
		planned = append(planned, uid)
	}
	p.mu.Unlock()
	p.readyFirst.add(planned)
	p.wake(ctx, WakeNodeInitialized, refused)
}

// readySince returns when a NodeClaim's node became ready for pods: when this process saw it initialize, else the
// Initialized condition's time; zero when it is not initialized.
func (p *Provisioner) readySince(claim string) time.Time {
	p.mu.Lock()
	at, ok := p.readyAt[claim]
	p.mu.Unlock()
	if ok {
		return at
	}
	c, err := p.opts.NodeClaims.Get(claim)
	if err != nil || !c.IsInitialized() {
		return time.Time{}
	}
	for _, cond := range c.Status.Conditions {
		if cond.Type == stevedorev1.ConditionInitialized {
			return cond.LastTransitionTime.Time
		}
	}
	return time.Time{}
}

// observeReadyWait records, for a pod bound to the node planned for it, how long it waited after that node was
// ready (or after it was planned there, when the node already was).
func (p *Provisioner) observeReadyWait(claim string, plannedAt time.Time, node string) {
	c, err := p.opts.NodeClaims.Get(claim)
	if err != nil || c.Status.NodeName != node {
		return
	}
	ready := p.readySince(claim)
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
	pod          *corev1.Pod
	claim        string
	plannedAt    time.Time
	refusedAt    time.Time
	refusedSince time.Time
	why          string
	wokenAt      time.Time
	wait         time.Duration
	stale        bool
}

// parkedOnReadyNodes returns the pods planned on ready nodes that are neither bound nor being bound.
func (p *Provisioner) parkedOnReadyNodes() []parkedPod {
	var all []parkedPod
	p.mu.Lock()
	for claim, pods := range p.assigned {
		for uid, pod := range pods {
			if _, binding := p.binding[uid]; !binding {
				all = append(all, parkedPod{pod: pod, claim: claim, plannedAt: p.plannedAt[uid], refusedAt: p.refusedAt[uid],
					refusedSince: p.refusedSince[uid], why: p.refusedWhy[uid], wokenAt: p.parkedWokenAt[uid]})
			}
		}
	}
	p.mu.Unlock()
	out := all[:0]
	for _, pp := range all {
		ready := p.readySince(pp.claim)
		if ready.IsZero() {
			continue
		}
		cur, err := p.opts.Pods.Pods(pp.pod.Namespace).Get(pp.pod.Name)
		if err != nil || cur.UID != pp.pod.UID || cur.Spec.NodeName != "" || cur.DeletionTimestamp != nil {
			continue
		}
		if pp.plannedAt.After(ready) {
			ready = pp.plannedAt
		}
		pp.wait = p.opts.Clock.Since(ready)
		pp.stale = pp.refusedAt.Sub(laterOf(ready, pp.refusedSince)) >= replanAfter
		out = append(out, pp)
	}
	return out
}

// reviewParked reports the pods parked on ready nodes (gauges); of those that waited longer than replanAfter, it
// plans again the ones their node refused after that, and retries the others.
func (p *Provisioner) reviewParked(ctx context.Context) {
	parked := p.parkedOnReadyNodes()
	oldest := time.Duration(0)
	var stale, retry []*corev1.Pod
	for _, pp := range parked {
		oldest = max(oldest, pp.wait)
		switch {
		case pp.stale:
			klog.FromContext(ctx).Info("The ready node planned for a pod still refuses it; planning it again", "pod", klog.KObj(pp.pod),
				"nodeclaim", pp.claim, "waited", pp.wait.Round(time.Second), "refusal", pp.why)
			p.forgetPod(pp.pod.UID)
			stale = append(stale, pp.pod)
		case pp.wait > replanAfter && p.opts.Clock.Since(pp.wokenAt) >= replanAfter:
			// at most once per replanAfter: a pod waiting its turn in a long queue is left to it
			retry = append(retry, pp.pod)
		}
	}
	now := p.opts.Clock.Now()
	p.mu.Lock()
	for _, pod := range retry {
		p.parkedWokenAt[pod.UID] = now
	}
	p.mu.Unlock()
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
