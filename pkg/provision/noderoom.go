package provision

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/stevedore-dev/stevedore/pkg/solver"
	"github.com/stevedore-dev/stevedore/pkg/solver/simulation"
)

// daemonRoom keeps, for each node Stevedore launched, the DaemonSet pods planned on it, so that the scheduler
// leaves their room free until they are bound: DaemonSet pods are scheduled by the cluster's default scheduler,
// and without this the first pods of Stevedore's profile to bind could take the room the plan kept for them,
// leaving a DaemonSet pod Pending on a node launched with room for it.
type daemonRoom struct {
	mu sync.Mutex
	// byNode holds the DaemonSet pods expected on a node, by node name.
	byNode map[string][]*corev1.Pod
	// sim decides which DaemonSets run on a node (its own simulator: a solve may hold the provisioner's for a
	// while, and registration must not wait for it).
	simOnce sync.Once
	sim     *simulation.Simulator
	simErr  error
	simMu   sync.Mutex
}

// simulator returns the daemon room's own simulator.
func (r *daemonRoom) simulator(ctx context.Context) (*simulation.Simulator, error) {
	r.simOnce.Do(func() { r.sim, r.simErr = simulation.New(ctx, simulation.NewSnapshot(), simulation.Options{}) })
	return r.sim, r.simErr
}

// daemonsOn returns the DaemonSet pods the Filter plugins put on node, from the cluster's DaemonSets.
func (p *Provisioner) daemonsOn(ctx context.Context, node *corev1.Node) []*corev1.Pod {
	dss, err := p.opts.DaemonSets.List(labels.Everything())
	if err != nil || len(dss) == 0 {
		return nil
	}
	sort.Slice(dss, func(i, j int) bool { return dss[i].Namespace+"/"+dss[i].Name < dss[j].Namespace+"/"+dss[j].Name })
	pods := make([]*corev1.Pod, 0, len(dss))
	for _, ds := range dss {
		pods = append(pods, solver.DaemonSetPod(ds))
	}
	sim, err := p.daemons.simulator(ctx)
	if err != nil {
		klog.FromContext(ctx).Error(err, "Cannot decide which DaemonSets run on a node")
		return nil
	}
	p.daemons.simMu.Lock()
	defer p.daemons.simMu.Unlock()
	return solver.DaemonSetsOn(ctx, sim, pods, node)
}

// ExpectDaemons records the DaemonSet pods that will run on a node Stevedore launched.
func (p *Provisioner) ExpectDaemons(node string, pods []*corev1.Pod) {
	p.daemons.mu.Lock()
	defer p.daemons.mu.Unlock()
	if p.daemons.byNode == nil {
		p.daemons.byNode = map[string][]*corev1.Pod{}
	}
	p.daemons.byNode[node] = pods
}

// ForgetDaemons drops a node's expected DaemonSet pods (the node is gone).
func (p *Provisioner) ForgetDaemons(node string) {
	p.daemons.mu.Lock()
	defer p.daemons.mu.Unlock()
	delete(p.daemons.byNode, node)
}

// RoomRefused says why the node ni cannot take pod because of the room kept for the pods planned on it (see
// KeptRoom), or "" when it can.
func (p *Provisioner) RoomRefused(pod *corev1.Pod, ni fwk.NodeInfo) string {
	kept, names, refuse := p.KeptRoom(pod, ni)
	if refuse != "" {
		return refuse
	}
	if kept.Pods == 0 {
		return ""
	}
	if !solver.PodRequests(pod).Add(kept).Fits(solver.FreeRoom(ni)) {
		return "room kept for pods planned on this node and not bound yet: " + strings.Join(names, ", ")
	}
	return ""
}

// NodesFor returns the nodes the scheduler need consider for a pod, and false when that is every node. A pod
// planned on a NodeClaim may take only the node of that NodeClaim and the nodes Stevedore did not launch (KeptRoom
// refuses it every other node). A pod not planned skips the nodes Stevedore launched that are still initializing:
// their room is planned (the pods planned there are nominated to them), and the room left over is what the next
// solve fills with pods like this one, planning them there. The scheduler's PreFilter asks, so that in a burst the
// scheduling cycles do not run the filters, with each node's nominated pods added (a copy of each), on hundreds of
// nodes coming up for other pods.
func (p *Provisioner) NodesFor(pod *corev1.Pod, nodes []fwk.NodeInfo) (names sets.Set[string], restricted bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	own, planned := p.podClaim[pod.UID]
	takes := func(node *corev1.Node) bool {
		claim, ours := p.claimOfNode[node.Name]
		switch {
		case !ours, planned && claim == own:
			return true
		case planned:
			return false // launched for other pods
		default:
			return !p.initializing(claim)
		}
	}
	// the set is built only when some node is left out: in a steady cluster every node may take every pod
	i := slices.IndexFunc(nodes, func(ni fwk.NodeInfo) bool { return ni.Node() != nil && !takes(ni.Node()) })
	if i < 0 {
		return nil, false
	}
	names = sets.New[string]()
	for _, ni := range nodes {
		if node := ni.Node(); node != nil && takes(node) {
			names.Insert(node.Name)
		}
	}
	return names, true
}

// initializing reports whether a NodeClaim's node is not initialized yet (a NodeClaim not in the cache is taken as
// initialized: nothing is skipped on a guess).
func (p *Provisioner) initializing(claim string) bool {
	c, err := p.opts.NodeClaims.Get(claim)
	return err == nil && !IsInitialized(c)
}

// KeptRoom is what a node Stevedore launched keeps for the pods planned on it, when the scheduler considers pod
// for it: the room (millicores, bytes, pods) of the pods planned there that are not bound yet (the DaemonSet pods
// the node will run, and the pods of the plan the scheduler does not already count as nominated there), with their
// names; and refuse, set when pod is planned on another node that is still coming: it waits for its own node
// rather than take room planned for others (the pods planned together, their affinity and spread, hold only if
// each lands where it was planned).
func (p *Provisioner) KeptRoom(pod *corev1.Pod, ni fwk.NodeInfo) (kept solver.Requests, names []string, refuse string) {
	node := ni.Node()
	if node == nil {
		return solver.Requests{}, nil, ""
	}
	if refuse := p.startingRefusal(pod, node); refuse != "" {
		return solver.Requests{}, nil, refuse
	}
	var planned []*corev1.Pod
	p.mu.Lock()
	claim, ours := p.claimOfNode[node.Name]
	if ours {
		// also once the pods planned here are all bound: the room left is not the pod's to take, its own node is
		// coming (a burst's pod of a hostname affinity target that bound on the first node up stranded its
		// followers); when its node comes up without room for it, the pod is provisioned again (assignedDecision)
		if own, planned := p.podClaim[pod.UID]; planned && own != claim {
			refuse = fmt.Sprintf("the pod is planned on NodeClaim %s; this node was launched for other pods", own)
			p.mu.Unlock()
			return solver.Requests{}, nil, refuse
		}
		// the pod itself, and pods being bound (the scheduler counts them on the node it reserved, and their room
		// here is free when that is another node), are not kept for
		planned = p.waitingOnLocked(claim, pod.UID)
	}
	p.mu.Unlock()
	var counted map[types.UID]bool
	if len(planned) > 0 {
		// nominated pods the scheduler adds to the node itself; any other is kept for here, also one this
		// provisioner nominated whose nomination the scheduler has not seen yet
		counted = p.schedulerCounts(pod, node.Name)
	}
	for _, q := range planned {
		if counted[q.UID] {
			continue
		}
		// a planned pod that was deleted (evicted from a node being replaced) leaves its room to the pod that
		// replaces it
		if cur, err := p.opts.Pods.Pods(q.Namespace).Get(q.Name); err != nil || cur.UID != q.UID || cur.DeletionTimestamp != nil || cur.Spec.NodeName != "" {
			continue
		}
		kept = kept.Add(solver.PodRequests(q))
		names = append(names, q.Namespace+"/"+q.Name)
	}
	dsCPU, dsMem, dsCount, daemons := p.unboundDaemons(ni)
	kept = kept.Add(solver.Requests{MilliCPU: dsCPU, Memory: dsMem, Pods: dsCount})
	sort.Strings(names)
	return kept, append(names, daemons...), refuse
}

// unboundDaemons returns the room (millicores, bytes, pods) of the DaemonSet pods expected on the node that are not
// on it yet, and their DaemonSets' names.
func (p *Provisioner) unboundDaemons(ni fwk.NodeInfo) (int64, int64, int64, []string) {
	node := ni.Node()
	p.daemons.mu.Lock()
	expected := p.daemons.byNode[node.Name]
	p.daemons.mu.Unlock()
	if len(expected) == 0 {
		return 0, 0, 0, nil
	}
	present := map[types.UID]bool{}
	for _, pi := range ni.GetPods() {
		for _, o := range pi.GetPod().OwnerReferences {
			if o.Kind == "DaemonSet" {
				present[o.UID] = true
			}
		}
	}
	var cpu, mem, count int64
	var names []string
	for _, d := range expected {
		if present[d.OwnerReferences[0].UID] {
			continue
		}
		r := solver.PodRequests(d)
		cpu, mem, count = cpu+r.MilliCPU, mem+r.Memory, count+1
		names = append(names, "DaemonSet "+d.Namespace+"/"+d.OwnerReferences[0].Name)
	}
	return cpu, mem, count, names
}
