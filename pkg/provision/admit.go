/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package provision

import (
	"context"
	"fmt"
	"maps"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	pluginnames "k8s.io/kubernetes/pkg/scheduler/framework/plugins/names"

	"github.com/stevedore-dev/stevedore/pkg/gang"
	"github.com/stevedore-dev/stevedore/pkg/metrics"
	"github.com/stevedore-dev/stevedore/pkg/podutil"
	"github.com/stevedore-dev/stevedore/pkg/resources"
)

// Why a pod waits before the scheduling queue (Admit); formats take the NodeClaim and node named.
const (
	WaitPlanning     = "Stevedore is planning a node for this pod"
	waitLaunch       = "waiting for NodeClaim %s to launch a node for this pod"
	waitInitializing = "waiting for node %s, launched for this pod (NodeClaim %s), to be ready"
)

// admission is the gate before the scheduling queue (Admit) and the room kept on the nodes Stevedore launched for
// the pods planned on them (KeptRoom, RoomRefused, NodesFor).
type admission struct {
	*base
	// wakeups refuses the nodes coming up until the previous leader's plan is adopted.
	wakeups *wakeups

	mu sync.Mutex
	// untried are the pods Admit batched before any scheduling cycle: a node may have room for them by the time
	// their batch is solved (sendUntried).
	untried map[types.UID]bool
	// spreadHeld holds, by spread group, the pods whose planned node is ready but whose topology spread keeps them
	// waiting (holdForSpread); spreadHeldOn their groups, by pod.
	spreadHeld   map[string]map[types.UID]*corev1.Pod
	spreadHeldOn map[types.UID]heldSpread
}

func newAdmission(b *base, w *wakeups) *admission {
	return &admission{base: b, wakeups: w, untried: map[types.UID]bool{},
		spreadHeld: map[string]map[types.UID]*corev1.Pod{}, spreadHeldOn: map[types.UID]heldSpread{}}
}

// tried records that the scheduler tried a pod (a cycle ended with no node for it).
func (p *admission) tried(uid types.UID) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.untried, uid)
}

// forgetAllBut forgets what is kept for the pods not in live.
func (p *admission) forgetAllBut(live map[types.UID]bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	maps.DeleteFunc(p.untried, func(uid types.UID, _ bool) bool { return !live[uid] })
	for uid := range p.spreadHeldOn {
		if !live[uid] {
			p.unholdLocked(uid)
		}
	}
}

// Admit decides, as a pod of this scheduler enters the scheduling queue (the plugin's PreEnqueue), whether it goes
// to a scheduling cycle now ("") or waits, and says why. A pod some node may take goes now (freeroom.Index screens
// the nodes); a pod no node has room for is batched for the next solve at once, rather than after a failed
// scheduling cycle (a status write and an event each, through a busy API server, for every pod of a burst), and
// waits; a pod planned on a NodeClaim waits until that node is ready, and then goes for the one cycle that binds
// it. The queue calls it with its own lock held: it takes only the provisioner's locks and never calls the queue.
// Once what a pod waits for clears, the pod is woken (Activate, the wake-up table in the package documentation),
// and the queue asks again.
func (p *admission) Admit(ctx context.Context, pod *corev1.Pod) string {
	if p.opts.Queue == nil || !p.wakeups.started.Load() || pod.Spec.NodeName != "" || pod.DeletionTimestamp != nil ||
		podutil.IsDaemonSetPod(pod) {
		return ""
	}
	if claim, planned := p.plans.ClaimOf(pod.UID); planned {
		node, why, waits := p.waitForClaim(pod, claim)
		switch {
		case waits:
			return why
		case why == "":
			return p.holdForSpread(pod, claim, node)
		}
		// the NodeClaim is going: the pod is planned again
	}
	switch {
	case p.plans.IsBinding(pod.UID), p.refused.recent(pod.UID), p.preempting(pod):
		// the scheduler's own answer: a binding retried, FailedScheduling and preemption (a pod the solve still
		// running refused is woken before that solve ends)
		return ""
	case p.solving.has(pod.UID), p.batcher.Contains(pod.UID):
		return WaitPlanning
	}
	if node := p.free.Send(klog.FromContext(ctx), pod, resources.Pod(pod), p.keptOn); node != "" {
		metrics.PodsAdmitted.WithLabelValues(metrics.AdmittedToSchedule).Inc()
		return ""
	}
	p.mu.Lock()
	p.untried[pod.UID] = true
	p.mu.Unlock()
	p.batcher.Add(pod)
	metrics.PodsAdmitted.WithLabelValues(metrics.AdmittedToPlan).Inc()
	return WaitPlanning
}

// sendUntried takes out of a batch about to be solved the pods the scheduler has not tried (batched by Admit) that
// some node may take now (a node became ready, a pod left, since they were batched), and wakes them: the
// scheduler places them there rather than the solve buying nodes for them. A pod of a gang stays (its gang is planned
// whole). It returns the pods left to solve.
func (p *admission) sendUntried(ctx context.Context, pods []*corev1.Pod) []*corev1.Pod {
	logger := klog.FromContext(ctx)
	kept := pods[:0:0]
	var sent []*corev1.Pod
	for _, pod := range pods {
		p.mu.Lock()
		untried := p.untried[pod.UID]
		delete(p.untried, pod.UID)
		p.mu.Unlock()
		if _, inGang := gang.Of(pod); untried && !inGang && p.free.Send(logger, pod, resources.Pod(pod), p.keptOn) != "" {
			sent = append(sent, pod)
			continue
		}
		kept = append(kept, pod)
	}
	p.solving.set(sent, false)
	p.wake(ctx, WakeRoomFound, sent)
	return kept
}

// waitForClaim says why a pod planned on a NodeClaim waits (waits true), or that it may go now to node (waits
// false, why ""), or that its NodeClaim is going and it is to be planned again (waits false, why set; the plan is
// dropped).
func (p *admission) waitForClaim(pod *corev1.Pod, name string) (node, why string, waits bool) {
	claim, err := p.opts.NodeClaims.Get(name)
	switch {
	case err != nil:
		return "", fmt.Sprintf(waitLaunch, name), true // created, not in the cache yet; one deleted is forgotten when the cache sees it go
	case claim.DeletionTimestamp != nil:
		p.plans.Forget(pod.UID)
		return "", "its NodeClaim is being deleted", false
	case !p.plans.ReadySince(name).IsZero():
		return claim.Status.NodeName, "", false
	case claim.Status.NodeName == "":
		return "", fmt.Sprintf(waitLaunch, name), true
	}
	return "", fmt.Sprintf(waitInitializing, claim.Status.NodeName, name), true
}

// holdForSpread says why a pod whose planned node is ready still waits (or "" when it goes): binding it there now
// would break one of its hard topology spread constraints, as the pods of its group bound so far stand (the pods
// planned in the other domains are not all bound yet). Released, the scheduler would refuse it, at the cost of a
// status write and an event, and try it again at every binding of its group. It is woken when a pod of its group
// binds or leaves (spreadChanged); one still held replanAfter after its node was ready is planned again
// (reviewParked: the hold counts as its planned node's refusal).
func (p *admission) holdForSpread(pod *corev1.Pod, claim, node string) string {
	groups, why := p.free.SpreadAllows(pod, node)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.unholdLocked(pod.UID)
	if why == "" {
		return ""
	}
	for _, id := range groups {
		if p.spreadHeld[id] == nil {
			p.spreadHeld[id] = map[types.UID]*corev1.Pod{}
		}
		p.spreadHeld[id][pod.UID] = pod
	}
	p.spreadHeldOn[pod.UID] = heldSpread{groups: groups, node: node}
	p.plans.Refused(claim, pod, true, pluginnames.PodTopologySpread+": "+why)
	return why
}

// heldSpread is why a pod is held for its spread: the groups that hold it, on its planned node.
type heldSpread struct {
	groups []string
	node   string
}

// unholdLocked forgets that a pod is held for its spread. p.mu is held.
func (p *admission) unholdLocked(uid types.UID) {
	for _, id := range p.spreadHeldOn[uid].groups {
		if delete(p.spreadHeld[id], uid); len(p.spreadHeld[id]) == 0 {
			delete(p.spreadHeld, id)
		}
	}
	delete(p.spreadHeldOn, uid)
}

// spreadChanged wakes the pods held for the spread groups whose counts changed (freeroom.Index.OnSpreadChange) that
// binding would no longer break: in a burst, each pod of a group binding changes its counts, and most held pods wait
// for another domain to fill.
func (p *admission) spreadChanged(ctx context.Context, ids []string) {
	p.mu.Lock()
	held := map[types.UID]*corev1.Pod{}
	nodes := map[types.UID]string{}
	for _, id := range ids {
		for uid, pod := range p.spreadHeld[id] {
			held[uid], nodes[uid] = pod, p.spreadHeldOn[uid].node
		}
	}
	p.mu.Unlock()
	var pods []*corev1.Pod
	for uid, pod := range held {
		if p.free.SpreadMayAllow(pod, nodes[uid]) {
			pods = append(pods, pod)
		}
	}
	p.wake(ctx, WakeSpreadChanged, pods)
}

// keptOn is what a node keeps, for the queue's screen, for the pods planned on it and the DaemonSet pods expected
// there, and whether it takes pods planned elsewhere: not while its NodeClaim is initializing (the index passes by
// the nodes whose label says they are coming up before it asks).
func (p *admission) keptOn(node *corev1.Node, hasDaemon func(owner types.UID) bool) (resources.Requests, bool) {
	kept, takes := p.plans.KeptOn(node.Name)
	if !takes {
		return kept, false
	}
	return kept.Add(p.daemonRoom.missing(node.Name, hasDaemon)), true
}

// preempting reports whether the scheduler nominated the pod to a node that is not one Stevedore is bringing up
// (preemption made room there): the scheduler uses that node.
func (p *admission) preempting(pod *corev1.Pod) bool {
	nn := pod.Status.NominatedNodeName
	if nn == "" {
		return false
	}
	_, ours := p.plans.ClaimOfNode(nn)
	return !ours
}

// AwaitsNode reports whether a pod waits for a plan (batched, or in the batch being solved) or for the node planned
// for it to be ready: room freed on another node does not help it.
func (p *admission) AwaitsNode(pod *corev1.Pod) bool {
	if claim, planned := p.plans.ClaimOf(pod.UID); planned {
		return p.plans.ReadySince(claim).IsZero()
	}
	return p.solving.has(pod.UID) || p.batcher.Contains(pod.UID)
}
