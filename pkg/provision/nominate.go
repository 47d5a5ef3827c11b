/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package provision

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
)

// nominate records on the pods the node being launched for them, so that the scheduler holds its capacity for
// them when it registers and tries it first.
//
// The scheduler evaluates a pod against a node as if the node's other nominated pods were already there, but sees
// no nominated pod on any other node. For a hard topology spread constraint that means: with more than maxSkew pods
// of one spread group nominated to the same node, each of them sees the group already over the skew there and none
// can bind. Such pods beyond maxSkew stay planned on the NodeClaim (their room is kept) without a nomination; the
// scheduler places them by its ordinary rules once the first ones are bound.
func (p *Provisioner) nominate(ctx context.Context, claim *stevedorev1.NodeClaim, pods []*corev1.Pod) {
	node := claim.Status.NodeName
	p.plans.Nominate(claim.Name, node)
	counts := p.nominatedSpreadCounts(node)
	for _, pod := range pods {
		if !takeSpreadRoom(counts, pod) {
			continue
		}
		p.plans.Nominate(claim.Name, node, pod.UID)
		if pod.Status.NominatedNodeName == node {
			continue
		}
		patch := []byte(fmt.Sprintf(`{"status":{"nominatedNodeName":%q}}`, node))
		_, err := p.opts.Kube.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.MergePatchType, patch, metav1.PatchOptions{}, "status")
		if err != nil && !apierrors.IsNotFound(err) {
			klog.FromContext(ctx).V(2).Info("Nominating a pod failed; the scheduler will still find the node", "pod", klog.KObj(pod), "err", err)
			continue
		}
		p.event(pod, corev1.EventTypeNormal, ReasonNominated, "Nominate", "nominated to node %s, launched for it as %s",
			node, claimString(claim))
	}
	// a node that has registered already brings no Node event for these pods: wake them (those not nominated
	// too: they were planned there, and the scheduler places them by its own rules)
	if _, err := p.opts.Nodes.Get(node); err == nil {
		if claim.IsInitialized() {
			uids := make([]types.UID, 0, len(pods))
			for _, pod := range pods {
				uids = append(uids, pod.UID)
			}
			p.plans.ReadyFirstAll(uids)
		}
		p.wake(ctx, WakePlannedOnExistingNode, pods)
	}
}

// NominateAssigned nominates a NodeClaim's planned pods to its node once it has a name.
func (p *Provisioner) NominateAssigned(ctx context.Context, claim *stevedorev1.NodeClaim) {
	var pending []*corev1.Pod
	for _, pod := range p.AssignedPods(claim.Name) {
		if cur, err := p.opts.Pods.Pods(pod.Namespace).Get(pod.Name); err == nil && cur.UID == pod.UID && cur.Spec.NodeName == "" {
			pending = append(pending, cur)
		}
	}
	p.nominate(ctx, claim, pending)
}

// nominatedSpreadCounts counts, per hard spread constraint, the pods already nominated to a node.
func (p *Provisioner) nominatedSpreadCounts(node string) map[string]int {
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
