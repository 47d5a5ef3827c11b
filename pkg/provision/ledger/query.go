/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package ledger

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/stevedore-dev/stevedore/pkg/resources"
)

// ClaimOf names the NodeClaim a pod is planned on, and whether it is planned at all.
func (l *Ledger) ClaimOf(uid types.UID) (string, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if pp := l.pods[uid]; pp != nil {
		return pp.claim, true
	}
	return "", false
}

// Held reports whether a pod is planned on a NodeClaim or being bound: either way it needs no provisioning.
func (l *Ledger) Held(uid types.UID) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	_, planned := l.pods[uid]
	_, binding := l.binding[uid]
	return planned || binding
}

// Pods returns the pods planned on a NodeClaim.
func (l *Ledger) Pods(claim string) []*corev1.Pod {
	l.mu.Lock()
	defer l.mu.Unlock()
	c := l.claims[claim]
	if c == nil {
		return nil
	}
	out := make([]*corev1.Pod, 0, len(c.pods))
	for _, pod := range c.pods {
		out = append(out, pod)
	}
	return out
}

// ClaimOfNode names the NodeClaim of a node pods were nominated to, and whether the ledger knows one.
func (l *Ledger) ClaimOfNode(node string) (string, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	claim, ok := l.claimOfNode[node]
	return claim, ok
}

// IsNominated reports whether the pod was nominated to this node.
func (l *Ledger) IsNominated(uid types.UID, node string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	pp := l.pods[uid]
	return pp != nil && pp.nominated == node
}

// NominatedTo returns the planned pods nominated to a node.
func (l *Ledger) NominatedTo(node string) []*corev1.Pod {
	l.mu.Lock()
	defer l.mu.Unlock()
	on := l.nominatedOn[node]
	out := make([]*corev1.Pod, 0, len(on))
	for _, pp := range on {
		out = append(out, pp.pod)
	}
	return out
}

// KeptPlanned returns the pods planned on a NodeClaim that are neither being bound, nor the pod except, nor
// counted (the scheduler adds those to the node itself), with their requests.
func (l *Ledger) KeptPlanned(claim string, except types.UID, counted map[types.UID]bool) ([]*corev1.Pod, []resources.Requests) {
	l.mu.Lock()
	defer l.mu.Unlock()
	c := l.claims[claim]
	if c == nil {
		return nil, nil
	}
	var pods []*corev1.Pod
	var reqs []resources.Requests
	for uid, pod := range c.pods {
		if _, binding := l.binding[uid]; binding || uid == except || counted[uid] {
			continue
		}
		pods = append(pods, pod)
		reqs = append(reqs, l.pods[uid].req)
	}
	return pods, reqs
}

// NodesFor returns the nodes the scheduler need consider for a pod, and false when that is every node. A pod
// planned on a NodeClaim may take only the node of that NodeClaim and the nodes of no NodeClaim the ledger knows. A
// pod not planned skips the nodes of NodeClaims still initializing (their room is planned: the pods planned there
// are nominated to them, and the room left over is what the next solve fills) and those whose free room, less what
// they keep for the pods planned on them and for the DaemonSet pods not bound yet (daemons), cannot hold it.
func (l *Ledger) NodesFor(pod *corev1.Pod, nodes []fwk.NodeInfo, daemons func(fwk.NodeInfo) resources.Requests) (names sets.Set[string], restricted bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var own string
	pp, planned := l.pods[pod.UID]
	var need resources.Requests
	if planned {
		own = pp.claim
	} else {
		need = resources.Pod(pod)
	}
	takes := func(ni fwk.NodeInfo) bool {
		claim, ours := l.claimOfNode[ni.Node().Name]
		switch {
		case !ours, planned && claim == own:
			return true
		case planned:
			return false // launched for other pods
		case l.initializingLocked(claim):
			return false
		}
		free := resources.Free(ni)
		if !need.Fits(free) {
			return false // full: in a burst, most nodes are
		}
		var kept resources.Requests
		if c := l.claims[claim]; c != nil {
			kept = c.kept
		}
		return need.Add(kept).Add(daemons(ni)).Fits(free)
	}
	// a planned pod takes few nodes (its own and those Stevedore did not launch): no room for every name
	var taken []string
	for _, ni := range nodes {
		if ni.Node() == nil {
			continue
		}
		if takes(ni) {
			taken = append(taken, ni.Node().Name)
		} else {
			restricted = true
		}
	}
	// in a steady cluster every node may take every pod: no set then
	if !restricted {
		return nil, false
	}
	return sets.New(taken...), true
}

// KeptOn is what a node keeps for the pods planned on it that are not being bound, and whether it takes a pod
// planned on no NodeClaim at all: not while the node of its NodeClaim is initializing (its room is planned for
// others). A node of no NodeClaim the ledger knows keeps nothing.
func (l *Ledger) KeptOn(node string) (kept resources.Requests, takes bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	claim, ok := l.claimOfNode[node]
	if !ok {
		return resources.Requests{}, true
	}
	if l.initializingLocked(claim) {
		return resources.Requests{}, false
	}
	if c := l.claims[claim]; c != nil {
		kept = c.kept
	}
	return kept, true
}
