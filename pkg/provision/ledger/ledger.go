/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

// Package ledger keeps what provisioning planned where: for each pod, the NodeClaim it is planned on, when, with
// which requests, the node it is nominated to and the refusals its planned node gave it; for each NodeClaim, the
// pods planned on it and the room they keep (a running sum), the pods its node refused, when it was seen ready,
// and whether this process created it before the informer cache shows it; the pods the scheduler reserved a node
// for until the cache shows them bound; and the pods whose planned node is ready, for the queue's order.
//
// A plan comes in one way (Plan, Nominate) and goes out one way (Forget for a pod, ForgetClaim for a NodeClaim,
// ForgetAllBut for the pods gone), and Register has the ledger follow the informers itself: a NodeClaim deleted,
// or marked for deletion, drops its plan whatever deleted it; a pod deleted drops its own. Every change that frees
// room or drops a plan wakes, through the Waker it was given, the pods it may help (the wake-up table in package
// provision's documentation).
package ledger

import (
	"context"
	"sort"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/utils/clock"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	listers "github.com/stevedore-dev/stevedore/pkg/generated/listers/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/resources"
)

// Why pods are woken (the reason label of stevedore_pods_woken_total) for the changes the ledger makes.
const (
	// WakePlannedPodBound: a pod planned on the same node bound (or its reservation moved it elsewhere), so the
	// room kept for it is the scheduler's to count now.
	WakePlannedPodBound = "PlannedPodBound"
	// WakePlannedPodGone: a pod planned on the same node was deleted or planned elsewhere: its room is free.
	WakePlannedPodGone = "PlannedPodGone"
	// WakePlanDropped: the pod's NodeClaim went away (launch failed, deleted, never registered): plan it again.
	WakePlanDropped = "PlanDropped"
	// WakeNodeInitialized: the node planned for the pod finished initializing.
	WakeNodeInitialized = "NodeInitialized"
)

// Waker puts pods back in the scheduler's active queue, saying why.
type Waker func(ctx context.Context, reason string, pods []*corev1.Pod)

// Options are what a Ledger reads: the clock, the pods and NodeClaims as the informer caches have them, and the
// Waker it tells.
type Options struct {
	Clock      clock.PassiveClock
	Pods       corelisters.PodLister
	NodeClaims listers.NodeClaimLister
	// Wake is told the pods a change may help; nil wakes nothing (unit tests of the plan alone).
	Wake Waker
}

// Ledger is what provisioning planned where. It is safe for concurrent use.
type Ledger struct {
	opts Options

	mu sync.Mutex
	// book is the state mu guards.
	book

	// readyFirst has its own lock: the scheduling queue asks with its own lock held.
	readyFirst readyFirst
}

// book is what the ledger keeps, with the changes that keep its indexes true. Ledger.mu guards it: its methods
// (named ...Locked) expect it held.
type book struct {
	// pods holds the plan of each planned pod; claims what is kept for each NodeClaim.
	pods   map[types.UID]*podPlan
	claims map[string]*claimPlan
	// claimOfNode names the NodeClaim of each node pods were nominated to.
	claimOfNode map[string]string
	// nominatedOn holds, for each node, the plans of the pods nominated to it (podPlan.nominated, indexed): each
	// launch asks which pods its node has, and a walk over every plan made that grow with the square of a burst.
	nominatedOn map[string]map[types.UID]*podPlan
	// binding holds the pods the scheduler reserved a node for (Reserve), and the node, until the cache shows them
	// bound: meanwhile they count on that node and are not provisioned for. bindingPruned is when bound pods were
	// last dropped from it.
	binding       map[types.UID]bindingPod
	bindingPruned time.Time
}

// podPlan is one pod's plan.
type podPlan struct {
	pod   *corev1.Pod
	claim string
	// req holds the pod's requests, computed once: the scheduler's filters read them on every node of every cycle.
	req resources.Requests
	// plannedAt is when the pod was planned on its NodeClaim (its wait for a ready node is measured from the later
	// of this and the node being ready).
	plannedAt time.Time
	// nominated names the node the pod was nominated to ("" when none).
	nominated string
	// refusedAt is when the pod's own planned node last refused it for a reason that breaks the plan, refusedSince
	// when it first did, and refusedWhy why; wokenAt when the parked-pod review last retried it.
	refusedAt, refusedSince time.Time
	refusedWhy              string
	wokenAt                 time.Time
}

// claimPlan is what is kept for one NodeClaim.
type claimPlan struct {
	// pods are the pods planned on it.
	pods map[types.UID]*corev1.Pod
	// kept sums the requests of the pods planned on it that are not being bound: a burst's pod planned nowhere
	// weighs every node's kept room in PreFilter, and summing each node's planned pods on each try grew with the
	// square of the burst. Changed only through plan, unplan and setBinding.
	kept resources.Requests
	// refused holds the pods its node refused in their last scheduling attempt.
	refused map[types.UID]*corev1.Pod
	// readyAt is when this process saw its node initialize (zero until then).
	readyAt time.Time
	// created is set when this process created it and the informer cache may not show it yet: the next solve
	// counts it (room for pods, NodePool limits) and its pods are not planned twice.
	created *stevedorev1.NodeClaim
}

type bindingPod struct {
	pod     *corev1.Pod
	node    string
	boundAt time.Time // zero until PostBind
}

// New returns an empty Ledger.
func New(opts Options) *Ledger {
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	return &Ledger{opts: opts, book: book{
		pods:        map[types.UID]*podPlan{},
		claims:      map[string]*claimPlan{},
		claimOfNode: map[string]string{},
		nominatedOn: map[string]map[types.UID]*podPlan{},
		binding:     map[types.UID]bindingPod{},
	}}
}

func (l *Ledger) wake(ctx context.Context, reason string, pods []*corev1.Pod) {
	if l.opts.Wake != nil && len(pods) > 0 {
		l.opts.Wake(ctx, reason, pods)
	}
}

// claimLocked returns the entry of a NodeClaim, made if missing. Ledger.mu is held.
func (l *book) claimLocked(name string) *claimPlan {
	c := l.claims[name]
	if c == nil {
		c = &claimPlan{pods: map[types.UID]*corev1.Pod{}}
		l.claims[name] = c
	}
	return c
}

// Plan plans pods on a NodeClaim. A pod planned elsewhere before leaves its room there: the pods that node refused
// are woken (PlannedPodGone).
func (l *Ledger) Plan(ctx context.Context, claim string, pods []*corev1.Pod) {
	now := l.opts.Clock.Now()
	moved := map[string]bool{}
	l.mu.Lock()
	for _, pod := range pods {
		pp := l.pods[pod.UID]
		switch {
		case pp == nil:
			pp = &podPlan{req: resources.Pod(pod), plannedAt: now}
			l.pods[pod.UID] = pp
		case pp.claim != claim:
			l.unplanLocked(pod.UID, pp)
			moved[pp.claim] = true
			pp.plannedAt = now
		}
		l.planLocked(claim, pod, pp)
	}
	var waiting []*corev1.Pod
	for prev := range moved {
		waiting = append(waiting, l.takeRefusedLocked(prev)...)
	}
	l.mu.Unlock()
	l.wake(ctx, WakePlannedPodGone, waiting)
}

// planLocked puts a pod's plan on a NodeClaim (it is on no other). Ledger.mu is held.
func (l *book) planLocked(claim string, pod *corev1.Pod, pp *podPlan) {
	c := l.claimLocked(claim)
	if _, there := c.pods[pod.UID]; !there {
		if _, binding := l.binding[pod.UID]; !binding {
			c.kept = c.kept.Add(pp.req)
		}
	}
	c.pods[pod.UID] = pod
	pp.pod, pp.claim = pod, claim
}

// unplanLocked takes a pod's plan off its NodeClaim. Ledger.mu is held.
func (l *book) unplanLocked(uid types.UID, pp *podPlan) {
	c := l.claims[pp.claim]
	if c == nil {
		return
	}
	if _, there := c.pods[uid]; there {
		delete(c.pods, uid)
		if _, binding := l.binding[uid]; !binding {
			c.kept = c.kept.Sub(pp.req)
		}
	}
}

// Nominate records that the pods (by UID) were nominated to the node of a NodeClaim, and that node as the
// NodeClaim's (with no pod, only that).
func (l *Ledger) Nominate(claim, node string, uids ...types.UID) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.claimOfNode[node] = claim
	for _, uid := range uids {
		if pp := l.pods[uid]; pp != nil {
			l.setNominatedLocked(uid, pp, node)
		}
	}
}

// Forget drops a pod's plan and returns the NodeClaim it was planned on ("" if none). It wakes nobody.
func (l *Ledger) Forget(uid types.UID) string {
	l.mu.Lock()
	claim := l.forgetLocked(uid)
	l.mu.Unlock()
	l.readyFirst.remove(uid)
	return claim
}

func (l *book) forgetLocked(uid types.UID) string {
	pp := l.pods[uid]
	if pp == nil {
		return ""
	}
	l.unplanLocked(uid, pp)
	l.deletePlanLocked(uid, pp)
	return pp.claim
}

// deletePlanLocked drops a pod's plan from the ledger's maps. Ledger.mu is held.
func (l *book) deletePlanLocked(uid types.UID, pp *podPlan) {
	l.setNominatedLocked(uid, pp, "")
	delete(l.pods, uid)
}

// setNominatedLocked records the node a pod was nominated to ("" for none), in its plan and in nominatedOn. l.mu
// is held.
func (l *book) setNominatedLocked(uid types.UID, pp *podPlan, node string) {
	if pp.nominated == node {
		return
	}
	if on := l.nominatedOn[pp.nominated]; on != nil {
		delete(on, uid)
		if len(on) == 0 {
			delete(l.nominatedOn, pp.nominated)
		}
	}
	pp.nominated = node
	if node == "" {
		return
	}
	on := l.nominatedOn[node]
	if on == nil {
		on = map[types.UID]*podPlan{}
		l.nominatedOn[node] = on
	}
	on[uid] = pp
}

// Drop drops a pod's plan and wakes the pods its node refused (PlannedPodGone): the room kept for it is free. It
// returns the NodeClaim the pod was planned on ("" if none).
func (l *Ledger) Drop(ctx context.Context, uid types.UID) string {
	claim := l.Forget(uid)
	if claim != "" {
		l.wake(ctx, WakePlannedPodGone, l.TakeRefused(claim))
	}
	return claim
}

// Deleted drops a deleted pod's plan and its reservation, and wakes the pods its node refused (PlannedPodGone).
func (l *Ledger) Deleted(ctx context.Context, pod *corev1.Pod) {
	l.mu.Lock()
	l.setBindingLocked(pod.UID, nil)
	l.mu.Unlock()
	l.Drop(ctx, pod.UID)
}

// ForgetClaim drops the plan of a NodeClaim that is gone or going: its pods, and those its node refused, are
// woken to be provisioned again (PlanDropped).
func (l *Ledger) ForgetClaim(ctx context.Context, name string) {
	l.mu.Lock()
	for node, claim := range l.claimOfNode {
		if claim == name {
			delete(l.claimOfNode, node)
		}
	}
	c := l.claims[name]
	if c == nil {
		l.mu.Unlock()
		return
	}
	delete(l.claims, name)
	pods := make([]*corev1.Pod, 0, len(c.pods)+len(c.refused))
	for uid, pod := range c.pods {
		if pp := l.pods[uid]; pp != nil {
			l.deletePlanLocked(uid, pp)
		}
		pods = append(pods, pod)
	}
	for _, pod := range c.refused {
		pods = append(pods, pod)
	}
	l.mu.Unlock()
	for uid := range c.pods {
		l.readyFirst.remove(uid)
	}
	l.wake(ctx, WakePlanDropped, pods)
}

// ForgetAllBut drops the plans of every pod not in live (bound or gone), a set read from the cache at listedAt:
// a pod planned since was not in the cache then, so it keeps its plan. It wakes nobody.
func (l *Ledger) ForgetAllBut(live map[types.UID]bool, listedAt time.Time) {
	l.mu.Lock()
	var gone []types.UID
	for uid, pp := range l.pods {
		if !live[uid] && !pp.plannedAt.After(listedAt) {
			l.forgetLocked(uid)
			gone = append(gone, uid)
		}
	}
	l.mu.Unlock()
	for _, uid := range gone {
		l.readyFirst.remove(uid)
	}
}

// Created records a NodeClaim this process created, which the informer cache may not show yet.
func (l *Ledger) Created(claim *stevedorev1.NodeClaim) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.claimLocked(claim.Name).created = claim
}

// WithCreated returns listed, the NodeClaims the cache shows, with those created here that it does not show yet
// (one the cache never showed is let go five minutes after its creation: it was deleted before).
func (l *Ledger) WithCreated(listed []*stevedorev1.NodeClaim) []*stevedorev1.NodeClaim {
	seen := make(map[string]bool, len(listed))
	for _, c := range listed {
		seen[c.Name] = true
	}
	var unseen []*stevedorev1.NodeClaim
	l.mu.Lock()
	for name, c := range l.claims {
		switch {
		case c.created == nil:
		case seen[name], l.opts.Clock.Since(c.created.CreationTimestamp.Time) > 5*time.Minute:
			c.created = nil
		default:
			unseen = append(unseen, c.created)
		}
	}
	l.mu.Unlock()
	sort.Slice(unseen, func(i, j int) bool { return unseen[i].Name < unseen[j].Name })
	return append(listed, unseen...)
}
