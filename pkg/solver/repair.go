/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package solver

import (
	"context"
	"hash/fnv"
	"maps"
	"math"
	"math/rand/v2"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/stevedore-dev/stevedore/pkg/resources"
)

// maxRepairRounds bounds how many times a solve is started over with the pods greedy placement stranded first;
// a batch of at most smallBatch pods that still strands a pod (or breaks a constraint) is then tried in other
// orders, drawn from a seed the batch's pods decide, the last three quarters also with random choices of node.
// How many restarts depends on how much work one is: up to smallBatchRestarts while a restart visits at most
// restartWork/smallBatchRestarts (pod, node) pairs, fewer on a large cluster, so that a batch whose pods cannot
// all be placed together (a spread whose domains cannot all be reached) does not hold every other pending pod of
// the cluster for hundreds of full solves. The count depends only on the input, so the plan stays the same run to
// run; restartTimeCap stops the restarts whatever the count, a guard for a slow machine.
const (
	maxRepairRounds    = 3
	smallBatch         = 24
	smallBatchRestarts = 256
	minRestarts        = 8
	restartWork        = 1 << 16
	restartTimeCap     = 2 * time.Second
)

// restartsFor is how many restarts a batch of pods gets when the snapshot already holds nodes nodes: restartWork
// (pod, node) visits shared out, at least minRestarts and at most smallBatchRestarts.
func restartsFor(pods, nodes int) int {
	perRestart := max(pods*(nodes+pods), 1)
	return min(max(restartWork/perRestart, minRestarts), smallBatchRestarts)
}

// attempt is one way to run the greedy placement: an order, and companions (see repairOrder).
type attempt struct {
	order      []*corev1.Pod
	companions map[types.UID]*corev1.Pod
	// seed, when not 0, makes the attempt pick among the ways to place each pod at random.
	seed uint64
}

func sameAttempt(a, b attempt) bool {
	if len(a.order) != len(b.order) || len(a.companions) != len(b.companions) || a.seed != b.seed {
		return false
	}
	for i := range a.order {
		if a.order[i] != b.order[i] {
			return false
		}
	}
	for k, v := range a.companions {
		if b.companions[k] != v {
			return false
		}
	}
	return true
}

// attemptScore rates an attempt: pods left unschedulable plus pods whose placement the Filter plugins refuse with
// the others in place (checked for small batches), then the price.
type attemptScore struct {
	bad  int
	cost float64
}

func (a attemptScore) better(b attemptScore) bool {
	return a.bad < b.bad || (a.bad == b.bad && a.cost < b.cost-1e-9)
}

// batchSeed derives the restarts' seed from the batch's pods, so the same batch is always tried the same way.
func batchSeed(pods []*corev1.Pod) uint64 {
	h := fnv.New64a()
	for _, p := range pods {
		_, _ = h.Write([]byte(p.Namespace + "/" + p.Name + "/" + string(p.UID) + ";")) // a hash.Hash's Write never returns an error
	}
	return h.Sum64()
}

// score rates the attempt (see attemptScore) and returns its bad pods: those unschedulable and, when verify is
// set, those the Filter plugins refuse where they are with every other planned pod in place.
func (st *solve) score(verify bool) (attemptScore, map[types.UID]string) {
	bad := maps.Clone(st.plan.Unschedulable)
	if verify {
		// The phantoms stay: a zone (or capacity type) a NodePool can launch into is a spread domain even with no
		// node there yet, since nodes whose pods do not care where they run are launched wherever EC2 finds
		// capacity (Karpenter counts domains the same way).
		check := func(node string, p *corev1.Pod) {
			if err := st.snap.RemovePod(node, p); err != nil {
				return
			}
			if err := st.sim.Fits(st.ctx, p, node); err != nil {
				bad[p.UID] = err.Error()
			}
			_ = st.snap.AddPod(node, p)
		}
		for _, n := range st.open {
			for _, p := range n.pods {
				check(n.name, p)
			}
		}
		for node, pods := range st.plan.InFlight {
			for _, p := range pods {
				check(node, p)
			}
		}
	}
	return attemptScore{bad: len(bad), cost: st.cost()}, bad
}

// cost is the hourly price of the open nodes as they stand.
func (st *solve) cost() float64 {
	total := 0.0
	for _, n := range st.open {
		if n.removed || len(n.pods) == 0 {
			continue
		}
		if p, _, _ := n.current(); !math.IsInf(p, 1) {
			total += p
		}
	}
	return total
}

// undo takes an attempt's virtual nodes out of the snapshot and its pods off the in-flight nodes.
func (st *solve) undo() {
	names := make([]string, 0, len(st.open))
	for _, n := range st.open {
		names = append(names, n.name)
	}
	st.snap.RemoveNodes(names...)
	for node, pods := range st.plan.InFlight {
		for _, p := range pods {
			_ = st.snap.RemovePod(node, p)
		}
	}
}

// hasRequiredPodAffinity reports whether a pod requires other pods near it.
func hasRequiredPodAffinity(p *corev1.Pod) bool {
	a := p.Spec.Affinity
	return a != nil && a.PodAffinity != nil && len(a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution) > 0
}

// repairOrder returns the order of a repair round: the pods stranded last time first, each part in its previous
// order; a stranded pod whose required pod affinity names other pods goes right after the first of them (its
// companion), which is placed where the stranded pod can follow it.
//
//nolint:gocyclo // the stranded pods, their affinity companions and the rest are ordered in one pass so the order is read in one place
func repairOrder(order []*corev1.Pod, unschedulable map[types.UID]string) ([]*corev1.Pod, map[types.UID]*corev1.Pod) {
	companions := map[types.UID]*corev1.Pod{}
	follows := map[types.UID]*corev1.Pod{} // stranded pod -> the pod it follows
	for _, p := range order {
		if _, ok := unschedulable[p.UID]; !ok || companions[p.UID] != nil {
			continue // placed, or already another's companion
		}
		a := p.Spec.Affinity
		if a == nil || a.PodAffinity == nil || len(a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution) == 0 {
			continue
		}
		sels := affinitySelectors(&corev1.Pod{ObjectMeta: p.ObjectMeta, Spec: corev1.PodSpec{Affinity: &corev1.Affinity{
			PodAffinity: &corev1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution[:1]}}}})
		if len(sels) == 0 {
			continue
		}
		// the smallest pod the term matches: the two must share a node (or domain)
		var companion *corev1.Pod
		for _, q := range order {
			if q.UID == p.UID || companions[q.UID] != nil || follows[q.UID] != nil || !sels[0].matches(q) {
				continue
			}
			if companion == nil || resources.Pod(q).Weight() < resources.Pod(companion).Weight() {
				companion = q
			}
		}
		if companion != nil {
			companions[companion.UID] = p
			follows[p.UID] = companion
		}
	}
	out := make([]*corev1.Pod, 0, len(order))
	emitted := map[types.UID]bool{}
	emit := func(p *corev1.Pod) {
		if !emitted[p.UID] {
			emitted[p.UID] = true
			out = append(out, p)
		}
	}
	for _, p := range order {
		if _, ok := unschedulable[p.UID]; !ok || companions[p.UID] != nil {
			continue
		}
		if q, ok := follows[p.UID]; ok {
			emit(q)
		}
		emit(p)
	}
	for _, p := range order {
		if q, ok := follows[p.UID]; ok {
			emit(q)
		}
		emit(p)
	}
	return out, companions
}

// restart tries a small batch in other orders, then also with other choices of node at random (a randomised
// greedy): a small batch costs milliseconds per attempt, and a hard combination of constraints may need a node
// greedy never picks. try runs an attempt and reports whether it beat the best so far; done reports whether no
// attempt can do better. The restarts stop as the constants above say.
func restart(ctx context.Context, pods, order []*corev1.Pod, nodes int, done func() bool, try func(attempt) (bool, error)) error {
	rng := rand.New(rand.NewPCG(batchSeed(pods), 0)) //nolint:gosec // G404: a seeded, reproducible search order, not a secret
	deadline := time.Now().Add(restartTimeCap)
	restarts := restartsFor(len(pods), nodes)
	for i := 0; i < restarts && !done(); i++ {
		if time.Now().After(deadline) {
			klog.FromContext(ctx).V(2).Info("Solver restarts stopped by their time cap", "pods", len(pods), "restarts", i)
			return nil
		}
		shuffled := append([]*corev1.Pod(nil), order...)
		rng.Shuffle(len(shuffled), func(a, b int) { shuffled[a], shuffled[b] = shuffled[b], shuffled[a] })
		a := attempt{order: shuffled}
		if i >= restarts/4 {
			a.seed = rng.Uint64()
		}
		if _, err := try(a); err != nil {
			return err
		}
	}
	return nil
}
