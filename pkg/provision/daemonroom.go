/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package provision

import (
	"context"
	"sort"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	appslisters "k8s.io/client-go/listers/apps/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/nodeclaim"
	"github.com/stevedore-dev/stevedore/pkg/podutil"
	"github.com/stevedore-dev/stevedore/pkg/resources"
	"github.com/stevedore-dev/stevedore/pkg/solver"
	"github.com/stevedore-dev/stevedore/pkg/solver/simulation"
)

// daemonRoom keeps, for each node Stevedore launched, the DaemonSet pods planned on it, so that the scheduler
// leaves their room free until they are bound: DaemonSet pods are scheduled by the cluster's default scheduler,
// and without this the first pods of Stevedore's profile to bind could take the room the plan kept for them,
// leaving a DaemonSet pod Pending on a node launched with room for it.
type daemonRoom struct {
	daemonSets appslisters.DaemonSetLister

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

func newDaemonRoom(daemonSets appslisters.DaemonSetLister) *daemonRoom {
	return &daemonRoom{daemonSets: daemonSets, byNode: map[string][]*corev1.Pod{}}
}

// simulator returns the daemon room's own simulator.
func (r *daemonRoom) simulator(ctx context.Context) (*simulation.Simulator, error) {
	r.simOnce.Do(func() { r.sim, r.simErr = simulation.New(ctx, simulation.NewSnapshot(), simulation.Options{}) })
	return r.sim, r.simErr
}

// on returns the DaemonSet pods the Filter plugins put on node, from the cluster's DaemonSets.
func (r *daemonRoom) on(ctx context.Context, node *corev1.Node) []*corev1.Pod {
	dss, err := r.daemonSets.List(labels.Everything())
	if err != nil || len(dss) == 0 {
		return nil
	}
	sort.Slice(dss, func(i, j int) bool { return dss[i].Namespace+"/"+dss[i].Name < dss[j].Namespace+"/"+dss[j].Name })
	pods := make([]*corev1.Pod, 0, len(dss))
	for _, ds := range dss {
		pods = append(pods, solver.DaemonSetPod(ds))
	}
	sim, err := r.simulator(ctx)
	if err != nil {
		klog.FromContext(ctx).Error(err, "Cannot decide which DaemonSets run on a node")
		return nil
	}
	r.simMu.Lock()
	defer r.simMu.Unlock()
	return solver.DaemonSetsOn(ctx, sim, pods, node)
}

// DaemonSetPods returns the DaemonSet pods the Filter plugins put on the node a NodeClaim becomes.
func (p *Provisioner) DaemonSetPods(ctx context.Context, claim *stevedorev1.NodeClaim) []*corev1.Pod {
	return p.daemonRoom.on(ctx, nodeclaim.Node(claim, p.InstanceTypesOf(ctx, claim), p.opts.Args.Region))
}

// ExpectDaemons records the DaemonSet pods that will run on a node Stevedore launched.
func (r *daemonRoom) ExpectDaemons(node string, pods []*corev1.Pod) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.byNode[node] = pods
}

// ForgetDaemons drops a node's expected DaemonSet pods (the node is gone).
func (r *daemonRoom) ForgetDaemons(node string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.byNode, node)
}

// unbound returns the room (millicores, bytes, pods) of the DaemonSet pods expected on the node that are not
// on it yet, and their DaemonSets' names.
func (r *daemonRoom) unbound(ni fwk.NodeInfo) (int64, int64, int64, []string) {
	node := ni.Node()
	r.mu.Lock()
	expected := r.byNode[node.Name]
	r.mu.Unlock()
	if len(expected) == 0 {
		return 0, 0, 0, nil
	}
	present := map[types.UID]bool{}
	for _, pi := range ni.GetPods() {
		if owner := podutil.DaemonSetOwner(pi.GetPod()); owner != nil {
			present[owner.UID] = true
		}
	}
	var cpu, mem, count int64
	var names []string
	for _, d := range expected {
		if present[d.OwnerReferences[0].UID] {
			continue
		}
		r := resources.Pod(d)
		cpu, mem, count = cpu+r.MilliCPU, mem+r.Memory, count+1
		names = append(names, "DaemonSet "+d.Namespace+"/"+d.OwnerReferences[0].Name)
	}
	return cpu, mem, count, names
}

// missing is unbound for the queue's screen (Admit), which has no NodeInfo: the room of the DaemonSet pods
// expected on the node whose DaemonSet has no pod there yet.
func (r *daemonRoom) missing(node string, has func(owner types.UID) bool) resources.Requests {
	r.mu.Lock()
	expected := r.byNode[node]
	r.mu.Unlock()
	var out resources.Requests
	for _, d := range expected {
		if !has(d.OwnerReferences[0].UID) {
			out = out.Add(resources.Pod(d))
		}
	}
	return out
}
