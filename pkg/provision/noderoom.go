/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package provision

import (
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/stevedore-dev/stevedore/pkg/resources"
)

// RoomRefused says why the node ni cannot take pod because of the room kept for the pods planned on it (see
// KeptRoom), or "" when it can. roomChecked says NodesFor already weighed that room for the pod, planned nowhere,
// in this scheduling cycle: on the nodes it weighed (those of a NodeClaim it knows) only Stevedore's starting
// refusal is left to check.
func (p *admission) RoomRefused(pod *corev1.Pod, ni fwk.NodeInfo, roomChecked bool) string {
	if roomChecked && ni.Node() != nil {
		if _, weighed := p.plans.ClaimOfNode(ni.Node().Name); weighed {
			return p.wakeups.startingRefusal(pod, ni.Node())
		}
	}
	kept, names, refuse := p.KeptRoom(pod, ni)
	if refuse != "" {
		return refuse
	}
	if kept.Pods == 0 {
		return ""
	}
	if !resources.Pod(pod).Add(kept).Fits(resources.Free(ni)) {
		why := "room kept for pods planned on this node and not bound yet: " + strings.Join(names, ", ")
		p.refusedNode(ni.Node().Name, pod, "Provisioner", why)
		return why
	}
	return ""
}

// NodesFor returns the nodes the scheduler need consider for a pod, and false when that is every node. A pod
// planned on a NodeClaim may take only the node of that NodeClaim and the nodes Stevedore did not launch (KeptRoom
// refuses it every other node). A pod not planned skips the nodes Stevedore launched that are still initializing
// and those whose room, less what they keep for the pods planned on them, cannot hold it (ledger.NodesFor). The
// scheduler's PreFilter asks, so that in a burst the scheduling cycles do not run the filters, with each node's
// nominated pods added (a copy of each), on hundreds of nodes coming up for other pods or full of pods planned
// there.
//
// A planned pod's nodes come from the free-room index (the nodes Stevedore did not launch, kept from the informer),
// not from a walk over every node: in a burst, thousands of planned pods each take a cycle once their node is ready,
// and walking the thousands of nodes for each grew the scheduler's work with the square of the burst.
func (p *admission) NodesFor(pod *corev1.Pod, nodes []fwk.NodeInfo) (names sets.Set[string], restricted bool) {
	if claim, planned := p.plans.ClaimOf(pod.UID); planned {
		names = p.free.Foreign()
		if c, err := p.opts.NodeClaims.Get(claim); err == nil && c.Status.NodeName != "" {
			names.Insert(c.Status.NodeName)
		}
		return names, true
	}
	return p.plans.NodesFor(pod, nodes, func(ni fwk.NodeInfo) resources.Requests {
		dsCPU, dsMem, dsCount, _ := p.daemonRoom.unbound(ni)
		return resources.Requests{MilliCPU: dsCPU, Memory: dsMem, Pods: dsCount}
	})
}

// keptFor is the room a node keeps, when the scheduler considers pod for it, for the pods planned on its NodeClaim:
// those the scheduler does not add to the node itself as nominated there (it does for a priority at least pod's),
// also one this provisioner nominated whose nomination the scheduler has not seen yet; neither the pod itself, nor
// pods being bound (the scheduler counts them on the node it reserved, and their room here is free when that is
// another node), nor a planned pod that was deleted or bound meanwhile (evicted from a node being replaced, its
// room goes to the pod that replaces it).
func (p *admission) keptFor(pod *corev1.Pod, node, claim string) (resources.Requests, []string) {
	planned, reqs := p.plans.KeptPlanned(claim, pod.UID, p.schedulerCounts(pod, node))
	var kept resources.Requests
	var names []string
	for i, q := range planned {
		if cur, err := p.opts.Pods.Pods(q.Namespace).Get(q.Name); err != nil || cur.UID != q.UID || cur.DeletionTimestamp != nil || cur.Spec.NodeName != "" {
			continue
		}
		kept = kept.Add(reqs[i])
		names = append(names, q.Namespace+"/"+q.Name)
	}
	return kept, names
}

// KeptRoom is what a node Stevedore launched keeps for the pods planned on it, when the scheduler considers pod
// for it: the room (millicores, bytes, pods) of the pods planned there that are not bound yet (the DaemonSet pods
// the node will run, and the pods of the plan the scheduler does not already count as nominated there), with their
// names; and refuse, set when pod is planned on another node that is still coming: it waits for its own node
// rather than take room planned for others (the pods planned together, their affinity and spread, hold only if
// each lands where it was planned).
func (p *admission) KeptRoom(pod *corev1.Pod, ni fwk.NodeInfo) (kept resources.Requests, names []string, refuse string) {
	node := ni.Node()
	if node == nil {
		return resources.Requests{}, nil, ""
	}
	if refuse := p.wakeups.startingRefusal(pod, node); refuse != "" {
		return resources.Requests{}, nil, refuse
	}
	if claim, ours := p.plans.ClaimOfNode(node.Name); ours {
		// also once the pods planned here are all bound: the room left is not the pod's to take, its own node is
		// coming (a burst's pod of a hostname affinity target that bound on the first node up stranded its
		// followers); when its node comes up without room for it, the pod is provisioned again (assignedDecision)
		if own, planned := p.plans.ClaimOf(pod.UID); planned && own != claim {
			return resources.Requests{}, nil, fmt.Sprintf("the pod is planned on NodeClaim %s; this node was launched for other pods", own)
		}
		kept, names = p.keptFor(pod, node.Name, claim)
	}
	dsCPU, dsMem, dsCount, daemons := p.daemonRoom.unbound(ni)
	kept = kept.Add(resources.Requests{MilliCPU: dsCPU, Memory: dsMem, Pods: dsCount})
	sort.Strings(names)
	return kept, append(names, daemons...), refuse
}
