/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package provision

import (
	"maps"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/utils/clock"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/provision/freeroom"
	"github.com/stevedore-dev/stevedore/pkg/provision/ledger"
)

// base is what the provisioner's parts share: its options, the plans (what is planned where), the free room of the
// nodes, the batch being filled and the pods being solved, the pods found unprovisionable, the NodePools' instance
// types and the room kept for DaemonSet pods. Each part (the batch: Provisioner; the door into the solver: planner;
// the queue's gate and the room kept on nodes: admission; adoption and the pods parked on ready nodes: wakeups)
// embeds it.
type base struct {
	opts Options
	// plans is what is planned where: the pods planned on each NodeClaim, their nominations, the room kept for
	// them, the pods being bound.
	plans *ledger.Ledger
	// free is the free room of the cluster's nodes, which Admit screens a pod entering the queue against.
	free    *freeroom.Index
	batcher *Batcher
	// solving holds the pods of the batch being solved: until their NodeClaims exist they are neither in the
	// batch nor planned, and must not be batched again.
	solving *podSet
	// refused remembers why a pod could not be provisioned, until NodePools or NodeClaims change or
	// unprovisionableFor passes.
	refused *refusals
	// plannedEvents bounds the Nominated events on pods (notePlanned).
	plannedEvents flowcontrol.RateLimiter

	// instanceTypes caches the NodePools' instance types (InstanceTypes, InstanceTypesOf, OfferingsChanged).
	*instanceTypes
	// daemonRoom keeps room for the DaemonSet pods of the nodes Stevedore launched until they are bound
	// (ExpectDaemons, ForgetDaemons).
	*daemonRoom
}

// NodeClaims lists the NodeClaims in the cache plus those created here that the cache does not show yet, so that a
// controller counting them right after a launch does not launch again.
func (p *base) NodeClaims() ([]*stevedorev1.NodeClaim, error) {
	claims, err := p.opts.NodeClaims.List(labels.Everything())
	if err != nil {
		return nil, err
	}
	return p.plans.WithCreated(claims), nil
}

// stillPending keeps the batch's pods that still wait for a node, as the cache has them now.
func (p *base) stillPending(batch []*corev1.Pod) []*corev1.Pod {
	var out []*corev1.Pod
	for _, b := range batch {
		pod, err := p.opts.Pods.Pods(b.Namespace).Get(b.Name)
		if err != nil || pod.UID != b.UID || pod.Spec.NodeName != "" || pod.DeletionTimestamp != nil {
			continue
		}
		if p.plans.Held(pod.UID) {
			continue
		}
		out = append(out, pod)
	}
	return out
}

func (p *base) event(obj *corev1.Pod, eventType, reason, action, note string, args ...any) {
	if p.opts.Recorder == nil {
		return
	}
	p.opts.Recorder.Eventf(obj, nil, eventType, reason, action, note, args...)
}

// podSet is a set of pods safe for concurrent use.
type podSet struct {
	mu   sync.Mutex
	uids map[types.UID]bool
}

func newPodSet() *podSet { return &podSet{uids: map[types.UID]bool{}} }

// set adds the pods to the set (in true) or takes them out.
func (s *podSet) set(pods []*corev1.Pod, in bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, pod := range pods {
		if in {
			s.uids[pod.UID] = true
		} else {
			delete(s.uids, pod.UID)
		}
	}
}

// has reports whether a pod is in the set.
func (s *podSet) has(uid types.UID) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.uids[uid]
}

// unprovisionableFor is how long a pod found unprovisionable is taken as such without a solve (unless NodePools or
// NodeClaims change first).
const unprovisionableFor = time.Minute

type unprovisionable struct {
	pod    *corev1.Pod
	reason string
	at     time.Time
}

// refusals remembers, by pod, why no node could be launched for it and when.
type refusals struct {
	clock clock.PassiveClock
	mu    sync.Mutex
	byPod map[types.UID]unprovisionable
	// changes counts the changes that cleared every refusal (takeAll): a solve that read its input before the
	// last one may refuse a pod for what is no longer so, and its refusals are not kept (add).
	changes uint64
}

func newRefusals(clk clock.PassiveClock) *refusals {
	return &refusals{clock: clk, byPod: map[types.UID]unprovisionable{}}
}

// seen returns the count of changes that cleared every refusal, to be given to add by a solve reading its input now.
func (r *refusals) seen() uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.changes
}

// add remembers why a pod could not be provisioned, found by a solve that read its input when seen changes had
// cleared the refusals. It keeps nothing and returns false when one more has since (a NodePool or its
// EC2NodeClass changed while the solve ran): the pod is to be planned again.
func (r *refusals) add(pod *corev1.Pod, reason string, seen uint64) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.changes != seen {
		return false
	}
	r.byPod[pod.UID] = unprovisionable{pod: pod, reason: reason, at: r.clock.Now()}
	return true
}

// reason returns why a pod was found unprovisionable less than unprovisionableFor ago; an older refusal is forgotten.
func (r *refusals) reason(uid types.UID) (string, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	u, known := r.byPod[uid]
	if known && r.clock.Since(u.at) > unprovisionableFor {
		delete(r.byPod, uid)
		return "", false
	}
	return u.reason, known
}

// recent reports whether a pod was found unprovisionable less than unprovisionableFor ago: the scheduler tries it,
// says why it fails (FailedScheduling) and may preempt for it.
func (r *refusals) recent(uid types.UID) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	u, known := r.byPod[uid]
	return known && r.clock.Since(u.at) <= unprovisionableFor
}

// takeAll forgets and returns every pod refused, for a change that may let any of them have a node: the refusals
// of a solve under way are not kept either.
func (r *refusals) takeAll() []*corev1.Pod {
	r.mu.Lock()
	r.changes++
	r.mu.Unlock()
	return r.take(0)
}

// take forgets and returns the pods refused at least olderThan ago (every pod for 0).
func (r *refusals) take(olderThan time.Duration) []*corev1.Pod {
	r.mu.Lock()
	defer r.mu.Unlock()
	var pods []*corev1.Pod
	for uid, u := range r.byPod {
		if olderThan == 0 || r.clock.Since(u.at) > olderThan {
			delete(r.byPod, uid)
			pods = append(pods, u.pod)
		}
	}
	return pods
}

// forgetAllBut forgets the pods not in live.
func (r *refusals) forgetAllBut(live map[types.UID]bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	maps.DeleteFunc(r.byPod, func(uid types.UID, _ unprovisionable) bool { return !live[uid] })
}
