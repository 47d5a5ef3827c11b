/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package provision

import (
	"context"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/klog/v2"

	"github.com/stevedore-dev/stevedore/pkg/cost"
	"github.com/stevedore-dev/stevedore/pkg/floor"
	"github.com/stevedore-dev/stevedore/pkg/nodeclaim"
	"github.com/stevedore-dev/stevedore/pkg/poolcap"
	"github.com/stevedore-dev/stevedore/pkg/solver/simulation"
)

// ReasonInvalidFloor is the event on a pod whose on-demand floor annotation is not one.
const ReasonInvalidFloor = "InvalidOnDemandFloor"

// ReasonInvalidPoolCap is the event on a pod whose cap per Spot pool annotation is not one.
const ReasonInvalidPoolCap = "InvalidSpotPoolCap"

// checkPoolCaps says, with an event on the pod (live solves only), that a pod's cap per Spot pool is not one: the
// solver places it as if it had none (package poolcap).
func (p *planner) checkPoolCaps(ctx context.Context, pods []*corev1.Pod, live bool) {
	for _, pod := range pods {
		if _, _, err := poolcap.Of(pod); err != nil {
			klog.FromContext(ctx).V(2).Info("Cap per Spot pool ignored", "pod", klog.KObj(pod), "err", err)
			if live {
				p.event(pod, corev1.EventTypeWarning, ReasonInvalidPoolCap, "Provision", "%v", err)
			}
		}
	}
}

// withFloors returns the pods a solve places as the solver sees them: those that must go on on-demand capacity
// for their workload's on-demand floor to hold, once every pod is placed, over the pods the snapshot holds (bound,
// and planned on the nodes coming up), require it (package floor). A pod whose annotation is not a floor is placed
// as if it had none, with an event saying why (live solves only).
func (p *planner) withFloors(ctx context.Context, pods []*corev1.Pod, snap *simulation.Snapshot, live bool) []*corev1.Pod {
	if !slices.ContainsFunc(pods, func(pod *corev1.Pod) bool { _, ok := pod.Annotations[floor.Annotation]; return ok }) {
		return pods // most solves: no pod has a floor, and the snapshot need not be counted
	}
	placed := floor.Tallies{}
	infos, _ := snap.List()
	for _, ni := range infos {
		for _, pi := range ni.GetPods() {
			placed.Add(pi.GetPod(), ni.Node())
		}
	}
	pinned, problems := floor.Pin(pods, placed)
	for _, err := range problems {
		klog.FromContext(ctx).V(2).Info("On-demand floor ignored", "err", err)
	}
	if live && len(problems) > 0 {
		for _, pod := range pods {
			if _, ok, err := floor.Of(pod); !ok && err != nil {
				p.event(pod, corev1.EventTypeWarning, ReasonInvalidFloor, "Provision", "%v", err)
			}
		}
	}
	return floor.Apply(pods, pinned)
}

// SpotRefused says why the scheduler may not put a pod on a spot node ("" when it may): the on-demand floor of
// its workload over the pods it has placed, bound to a node that stays or planned on a NodeClaim, would not hold
// (package floor).
func (p *Provisioner) SpotRefused(pod *corev1.Pod) string {
	if _, ok := pod.Annotations[floor.Annotation]; !ok {
		return ""
	}
	siblings, err := p.opts.Pods.Pods(pod.Namespace).List(labels.Everything())
	if err != nil {
		return ""
	}
	workload := cost.WorkloadOf(pod)
	placed := floor.Tallies{}
	for _, q := range siblings {
		if q.UID == pod.UID || cost.WorkloadOf(q) != workload {
			continue
		}
		if q.Spec.NodeName != "" {
			// a pod on a node going away is being replaced (its successor is the pod weighed, or will be)
			if node, err := p.opts.Nodes.Get(q.Spec.NodeName); err == nil && !leaving(node) {
				placed.Add(q, node)
			}
			continue
		}
		if name := p.PlannedClaim(q.UID); name != "" {
			if claim, err := p.opts.NodeClaims.Get(name); err == nil {
				placed.AddOn(q, floor.OnDemandCapacity(nodeclaim.CapacityType(claim)))
			}
		}
	}
	t := floor.Tally{}
	if placed[workload] != nil {
		t = *placed[workload]
	}
	return floor.SpotRefused(pod, t)
}
