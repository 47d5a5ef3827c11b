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
// was lost (a NodeClaim deleted, a restart). It also forgets plans of pods that are bound or gone.
func (p *Provisioner) WatchPending(ctx context.Context, every time.Duration) {
	wait.UntilWithContext(ctx, p.sweepPending, every)
}

func (p *Provisioner) sweepPending(ctx context.Context) {
	pods, err := p.opts.Pods.List(labels.Everything())
	if err != nil {
		return
	}
	live := map[types.UID]bool{}
	for _, pod := range pods {
		if pod.Spec.SchedulerName != p.opts.SchedulerName || pod.Spec.NodeName != "" || pod.DeletionTimestamp != nil {
			continue
		}
		live[pod.UID] = true
		if !failedScheduling(pod) {
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
	p.forgetAllBut(live)
	p.retryUnprovisionable(ctx)
	p.reviewParked(ctx)
}

// retryUnprovisionable plans again the pods found unprovisionable unprovisionableFor ago: what kept them from a node
// may have passed without an event that says so (an offering available again, a CapacityQuota's usage down). Until
// then the scheduler keeps them, and preempts for them if it can.
func (p *Provisioner) retryUnprovisionable(ctx context.Context) {
	p.mu.Lock()
	var pods []*corev1.Pod
	for uid, u := range p.unprovisionable {
		if p.opts.Clock.Since(u.at) > unprovisionableFor {
			delete(p.unprovisionable, uid)
			pods = append(pods, u.pod)
		}
	}
	p.mu.Unlock()
	p.wake(ctx, WakeUnprovisionable, pods)
}

// forgetAllBut drops the plans and the state kept for every pod not in live (bound or gone).
func (p *Provisioner) forgetAllBut(live map[types.UID]bool) {
	p.plans.ForgetAllBut(live)
	p.mu.Lock()
	defer p.mu.Unlock()
	for uid := range p.unprovisionable {
		if !live[uid] {
			delete(p.unprovisionable, uid)
		}
	}
	for uid := range p.untried {
		if !live[uid] {
			delete(p.untried, uid)
		}
	}
	for uid := range p.spreadHeldOn {
		if !live[uid] {
			p.unholdLocked(uid)
		}
	}
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
