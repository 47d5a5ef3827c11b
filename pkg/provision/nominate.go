/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package provision

import (
	"context"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
)

// nominate records the node of a NodeClaim as the one launched for the pods planned on it, and wakes them if it is
// ready for pods already: they wait before the scheduling queue until it is (Admit), so no write on the pods says
// it. A pod's plan is read from its NodeClaim (the planned-pods annotation and its events) and from the Nominated
// event the pod gets when it is planned (notePlanned).
//
// The scheduler evaluates a pod against a node as if the node's other nominated pods were already there, but sees
// no nominated pod on any other node. For a hard topology spread constraint that means: with more than maxSkew pods
// of one spread group nominated to the same node, each of them sees the group already over the skew there and none
// can bind. A pod that fails its attempt on its planned node is nominated there by the scheduler (PostFilter's
// answer), so the pods beyond maxSkew stay planned on the NodeClaim (their room is kept) without being counted as
// nominated; the scheduler places them by its ordinary rules once the first ones are bound.
func (p *base) nominate(ctx context.Context, claim *stevedorev1.NodeClaim, pods []*corev1.Pod) {
	node := claim.Status.NodeName
	p.plans.Nominate(claim.Name, node)
	counts := p.nominatedSpreadCounts(node)
	for _, pod := range pods {
		if takeSpreadRoom(counts, pod) {
			p.plans.Nominate(claim.Name, node, pod.UID)
		}
	}
	// a node that is ready already brings no event for these pods: wake them (those not nominated too: they were
	// planned there, and the scheduler places them by its own rules); the others are woken when it is
	// (ClaimInitialized)
	if !claim.IsInitialized() && p.plans.ReadySince(claim.Name).IsZero() {
		return
	}
	uids := make([]types.UID, 0, len(pods))
	for _, pod := range pods {
		uids = append(uids, pod.UID)
	}
	p.plans.ReadyFirstAll(uids)
	p.wake(ctx, WakePlannedOnExistingNode, pods)
}

// NominateAssigned nominates a NodeClaim's planned pods to its node once it has a name.
func (p *base) NominateAssigned(ctx context.Context, claim *stevedorev1.NodeClaim) {
	var pending []*corev1.Pod
	for _, pod := range p.plans.Pods(claim.Name) {
		if cur, err := p.opts.Pods.Pods(pod.Namespace).Get(pod.Name); err == nil && cur.UID == pod.UID && cur.Spec.NodeName == "" {
			pending = append(pending, cur)
		}
	}
	p.nominate(ctx, claim, pending)
}

// nominatedSpreadCounts counts, per hard spread constraint, the pods already nominated to a node.
func (p *base) nominatedSpreadCounts(node string) map[string]int {
	counts := map[string]int{}
	for _, pod := range p.plans.NominatedTo(node) {
		for _, key := range spreadKeys(pod) {
			counts[key.id]++
		}
	}
	return counts
}

// takeSpreadRoom reports whether one more pod may be nominated to the node under every hard spread constraint of
// the pod, and counts it if so.
func takeSpreadRoom(counts map[string]int, pod *corev1.Pod) bool {
	keys := spreadKeys(pod)
	for _, k := range keys {
		if counts[k.id]+1 > k.maxSkew {
			return false
		}
	}
	for _, k := range keys {
		counts[k.id]++
	}
	return true
}

type spreadKey struct {
	id      string
	maxSkew int
}

// spreadKeys identifies the pod's hard topology spread constraints that select the pod itself (the pods of one
// spread group share them).
func spreadKeys(pod *corev1.Pod) []spreadKey {
	var out []spreadKey
	for _, c := range pod.Spec.TopologySpreadConstraints {
		if c.WhenUnsatisfiable != corev1.DoNotSchedule || c.LabelSelector == nil {
			continue
		}
		sel, err := metav1.LabelSelectorAsSelector(c.LabelSelector)
		if err != nil || !sel.Matches(labels.Set(pod.Labels)) {
			continue
		}
		parts := []string{pod.Namespace, c.TopologyKey, sel.String()}
		for _, k := range c.MatchLabelKeys {
			parts = append(parts, k+"="+pod.Labels[k])
		}
		id := strings.Join(parts, "|")
		out = append(out, spreadKey{id: id, maxSkew: int(c.MaxSkew)})
	}
	return out
}

// plannedEventsPerSecond and plannedEventsBurst bound the Nominated events of the whole process: a pod planned
// alone, or among the first of a burst, is told where it goes in an event of its own; the pods of a large burst are
// named in their NodeClaims' planned-pods annotation and Launched event instead, one write for many pods.
const (
	plannedEventsPerSecond = 5
	plannedEventsBurst     = 10
)

// notePlanned tells pods planned on a NodeClaim where they go (where describes the node), in a Nominated event on
// each, as far as the process's budget of such events allows.
func (p *base) notePlanned(claim, where string, pods []*corev1.Pod) {
	for _, pod := range pods {
		if !p.plannedEvents.TryAccept() {
			return
		}
		p.event(pod, corev1.EventTypeNormal, ReasonNominated, "Nominate", "planned on %s (NodeClaim %s); the pod waits until it is ready",
			where, claim)
	}
}

// annotatePlanned adds pods to a NodeClaim's planned-pods annotation (pods planned on it after it was created):
// a restarted provisioner adopts them from there, and a user finds there the NodeClaim a pod waits for.
func (p *base) annotatePlanned(ctx context.Context, claim *stevedorev1.NodeClaim, pods []*corev1.Pod) {
	keys := map[string]bool{}
	for _, key := range strings.Split(claim.Annotations[stevedorev1.AnnotationPlannedPods], ",") {
		if key != "" {
			keys[key] = true
		}
	}
	added := false
	for _, pod := range pods {
		if key := pod.Namespace + "/" + pod.Name; !keys[key] {
			keys[key], added = true, true
		}
	}
	if !added {
		return
	}
	list := make([]string, 0, len(keys))
	for key := range keys {
		list = append(list, key)
	}
	sort.Strings(list)
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, stevedorev1.AnnotationPlannedPods, strings.Join(list, ","))
	if _, err := p.opts.Stevedore.StevedoreV1().NodeClaims().Patch(ctx, claim.Name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil &&
		!apierrors.IsNotFound(err) {
		klog.FromContext(ctx).V(2).Info("Recording the pods planned on a NodeClaim failed", "nodeclaim", claim.Name, "err", err)
	}
}
