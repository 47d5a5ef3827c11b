/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package provision

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
)

// WatchPending periodically hands to Consider the pods of ours the scheduler found unschedulable without
// PostFilter ever seeing them (a cluster with no node at all makes the scheduler skip PostFilter) or whose plan
// was lost (a NodeClaim deleted, a restart). Every forgetEvery sweeps it also forgets the plans of pods that are
// bound or gone (a backstop: their own events forget them first).
func (p *Provisioner) WatchPending(ctx context.Context, every time.Duration) {
	sweeps := 0
	wait.UntilWithContext(ctx, func(ctx context.Context) {
		listedAt := p.opts.Clock.Now()
		pods, err := p.opts.Pods.List(labels.Everything())
		if err != nil {
			return
		}
		p.sweepPending(ctx, pods)
		if sweeps%forgetEvery == 0 {
			p.forgetAllBut(p.livePending(pods), listedAt)
		}
		sweeps++
		p.retryUnprovisionable(ctx)
		p.reviewParked(ctx)
	}, every)
}

// forgetEvery is how many sweeps of the pending pods go by between two walks over every pod for the plans of pods
// bound or gone: with thousands of pods pending, that walk and the set it builds are most of a sweep.
const forgetEvery = 10

// sweepPending considers the pods of ours the scheduler tried and found no node for, that have no plan and are
// not nominated to a node that exists.
func (p *Provisioner) sweepPending(ctx context.Context, pods []*corev1.Pod) {
	for _, pod := range pods {
		if pod.Spec.NodeName != "" || !failedScheduling(pod) || !p.pendingOurs(pod) {
			continue
		}
		if _, ok := p.assignedDecision(ctx, pod, nil); ok {
			continue
		}
		if nn := pod.Status.NominatedNodeName; nn != "" {
			if _, err := p.opts.Nodes.Get(nn); err == nil {
				continue // the scheduler will use the node it nominated
			}
		}
		p.Consider(ctx, pod, nil)
	}
}

// pendingOurs reports whether a pod is of Stevedore's profile, not bound and not being deleted.
func (p *Provisioner) pendingOurs(pod *corev1.Pod) bool {
	return pod.Spec.SchedulerName == p.opts.SchedulerName && pod.Spec.NodeName == "" && pod.DeletionTimestamp == nil
}

// livePending returns the UIDs of the pods of ours that are not bound and not being deleted.
func (p *Provisioner) livePending(pods []*corev1.Pod) map[types.UID]bool {
	live := map[types.UID]bool{}
	for _, pod := range pods {
		if p.pendingOurs(pod) {
			live[pod.UID] = true
		}
	}
	return live
}

// retryUnprovisionable plans again the pods found unprovisionable unprovisionableFor ago: what kept them from a node
// may have passed without an event that says so (an offering available again, a CapacityQuota's usage down). Until
// then the scheduler keeps them, and preempts for them if it can.
func (p *Provisioner) retryUnprovisionable(ctx context.Context) {
	p.wake(ctx, WakeUnprovisionable, p.refused.take(unprovisionableFor))
}

// forgetAllBut drops the plans and the state kept for every pod not in live (bound or gone), the pods of ours the
// cache listed at listedAt (a pod planned since keeps its plan).
func (p *Provisioner) forgetAllBut(live map[types.UID]bool, listedAt time.Time) {
	p.plans.ForgetAllBut(live, listedAt)
	p.refused.forgetAllBut(live)
	p.admission.forgetAllBut(live)
}

// failedScheduling reports whether the scheduler tried the pod and found no node.
func failedScheduling(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			return true
		}
	}
	return false
}
