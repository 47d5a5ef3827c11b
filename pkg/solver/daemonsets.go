/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package solver

import (
	"context"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/stevedore-dev/stevedore/pkg/cloud"
	"github.com/stevedore-dev/stevedore/pkg/scheduling"
	"github.com/stevedore-dev/stevedore/pkg/solver/simulation"
)

// daemonSetsOnNode are the DaemonSet pods that run on a node, with a signature naming the set.
type daemonSetsOnNode struct {
	pods      []*corev1.Pod
	signature string
}

// probeNodeName names the node DaemonSets are tried on.
const probeNodeName = "stevedore-daemonset-probe"

// DaemonSetsOn returns the DaemonSet pods (one per DaemonSet, as DaemonSetPod builds them) that would run on node:
// those kube-scheduler's Filter plugins accept on it, its labels and taints as they are, its room unlimited (a
// daemon pod the node has no room for still belongs to it: it would stay Pending there). The simulator's snapshot
// is restored before returning.
func DaemonSetsOn(ctx context.Context, sim *simulation.Simulator, daemons []*corev1.Pod, node *corev1.Node) []*corev1.Pod {
	if len(daemons) == 0 {
		return nil
	}
	probe := node.DeepCopy()
	probe.Name = probeNodeName
	unlimited := corev1.ResourceList{
		corev1.ResourceCPU:              *resource.NewQuantity(1<<20, resource.DecimalSI),
		corev1.ResourceMemory:           *resource.NewQuantity(1<<60, resource.BinarySI),
		corev1.ResourcePods:             *resource.NewQuantity(1<<20, resource.DecimalSI),
		corev1.ResourceEphemeralStorage: *resource.NewQuantity(1<<60, resource.BinarySI),
	}
	for _, d := range daemons {
		for _, c := range append(append([]corev1.Container(nil), d.Spec.InitContainers...), d.Spec.Containers...) {
			for name := range c.Resources.Requests {
				if _, ok := unlimited[name]; !ok {
					unlimited[name] = *resource.NewQuantity(1<<40, resource.DecimalSI)
				}
			}
		}
	}
	probe.Status.Allocatable, probe.Status.Capacity = unlimited, unlimited
	snap := simulation.NewSnapshot()
	snap.AddNode(probe)
	previous := sim.Snapshot()
	sim.Use(snap)
	defer sim.Use(previous)
	var out []*corev1.Pod
	for _, d := range daemons {
		if sim.Fits(ctx, d, probe.Name) == nil {
			out = append(out, d)
		}
	}
	return out
}

// daemonsFor returns the DaemonSet pods that would run on a node of pool with instance type it in zone with
// capacity type ct, its NodePool-defined labels taken from reqs, and a signature of that set. Results are cached
// by the node's values of the keys the DaemonSets select on.
func (st *solve) daemonsFor(pool *NodePoolOption, reqs scheduling.Requirements, it *cloud.InstanceType, zone, ct string) ([]*corev1.Pod, string) {
	if len(pool.DaemonSetPods) == 0 {
		return nil, ""
	}
	labels := NodeLabels(pool.NodePool, pool.Requirements, reqs, it.Labels(), zone, pool.zoneIDs.ID(zone), ct, st.in.Region)
	var key strings.Builder
	for _, k := range pool.daemonKeys {
		v, ok := labels[k]
		key.WriteString(k)
		if ok {
			key.WriteString("=" + v)
		}
		key.WriteString(";")
	}
	if got, ok := pool.daemons[key.String()]; ok {
		return got.pods, got.signature
	}
	node := &corev1.Node{Spec: corev1.NodeSpec{Taints: pool.NodePool.Spec.Template.Spec.Taints}}
	node.Labels = labels
	pods := DaemonSetsOn(st.ctx, st.sim, pool.DaemonSetPods, node)
	var sig strings.Builder
	for _, p := range pods {
		sig.WriteString(p.Namespace + "/" + p.Name + ",")
	}
	if pool.daemons == nil {
		pool.daemons = map[string]daemonSetsOnNode{}
	}
	pool.daemons[key.String()] = daemonSetsOnNode{pods: pods, signature: sig.String()}
	return pods, sig.String()
}
