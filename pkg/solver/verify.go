/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package solver

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stevedore-dev/stevedore/pkg/poolcap"
	"github.com/stevedore-dev/stevedore/pkg/solver/simulation"
)

// NodeForPlan renders a planned node as the Node its instance would register as: the planned instance type's
// labels and allocatable, the priced offering's zone and capacity type, the NodePool's labels and taints.
func NodeForPlan(name, region string, n *PlannedNode) *corev1.Node {
	labels := NodeLabels(n.NodePool, n.PoolRequirements, n.Requirements, n.InstanceType.Labels(), n.Offering.Zone, n.Offering.ZoneID, n.Offering.CapacityType, region)
	labels[corev1.LabelHostname] = name
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec:       corev1.NodeSpec{Taints: n.NodePool.Spec.Template.Spec.Taints},
		Status:     corev1.NodeStatus{Allocatable: n.InstanceType.Allocatable(), Capacity: n.InstanceType.Capacity},
	}
}

// Verify builds the cluster a plan leads to on top of base (the existing nodes and pods, may be empty) and checks,
// with the scheduler's PreFilter and Filter plugins, that every pod the plan places could be scheduled on its
// node with all the other pods in place. Each new node also gets the DaemonSet pods (of daemons) the Filter
// plugins put on it, decided afresh on its final labels, and each of those must fit too. It returns one message
// per violation; none means no rule is broken.
func Verify(ctx context.Context, sim *simulation.Simulator, base *simulation.Snapshot, region string, plan *Plan, daemons []*corev1.Pod) []string {
	snap := base
	if snap == nil {
		snap = simulation.NewSnapshot()
	}
	sim.Use(snap)
	type placed struct {
		node string
		pod  *corev1.Pod
	}
	var all []placed
	var names []string
	for i, n := range plan.NewNodes {
		name := fmt.Sprintf("planned-%d", i+1)
		names = append(names, name)
		node := NodeForPlan(name, region, n)
		ds := DaemonSetsOn(ctx, sim, daemons, node)
		sim.Use(snap)
		snap.AddNode(node, append(append([]*corev1.Pod(nil), ds...), n.Pods...)...)
		for _, p := range append(append([]*corev1.Pod(nil), ds...), n.Pods...) {
			all = append(all, placed{name, p})
		}
	}
	for node, pods := range plan.InFlight {
		for _, p := range pods {
			if err := snap.AddPod(node, p); err == nil {
				all = append(all, placed{node, p})
			}
		}
	}
	violations := poolCapViolations(snap)
	for _, pl := range all {
		if err := snap.RemovePod(pl.node, pl.pod); err != nil {
			violations = append(violations, fmt.Sprintf("%s/%s: %v", pl.pod.Namespace, pl.pod.Name, err))
			continue
		}
		if err := sim.Fits(ctx, pl.pod, pl.node); err != nil {
			violations = append(violations, fmt.Sprintf("%s/%s on %s: %v", pl.pod.Namespace, pl.pod.Name, pl.node, err))
		}
		_ = snap.AddPod(pl.node, pl.pod)
	}
	for _, name := range names {
		snap.RemoveNode(name)
	}
	for node, pods := range plan.InFlight {
		for _, p := range pods {
			_ = snap.RemovePod(node, p)
		}
	}
	return violations
}

// poolCapViolations returns one message per Spot pool holding more of a workload's pods than the cap per Spot pool
// one of them carries (package poolcap), and per capped pod on a node whose pool is not decided.
func poolCapViolations(snap *simulation.Snapshot) []string {
	type slot struct {
		key  poolcap.Key
		pool string
	}
	counts := map[slot]int{}
	caps := map[slot]int{}
	var order []slot
	var out []string
	nodes, _ := snap.List()
	for _, ni := range nodes {
		pool, kind := poolcap.PoolOf(ni.Node())
		for _, pi := range ni.GetPods() {
			pod := pi.GetPod()
			c, ok, _ := poolcap.Of(pod)
			if !ok || kind == poolcap.NotSpot {
				continue
			}
			if kind == poolcap.Undecided {
				out = append(out, fmt.Sprintf("%s/%s on %s: %s caps it per Spot pool, and the node's is not decided", pod.Namespace, pod.Name, ni.Node().Name, poolcap.Annotation))
				continue
			}
			key, _ := poolcap.KeyOf(pod)
			s := slot{key, pool}
			if _, seen := counts[s]; !seen {
				order = append(order, s)
			}
			counts[s]++
			if cur, ok := caps[s]; !ok || c < cur {
				caps[s] = c
			}
		}
	}
	for _, s := range order {
		if counts[s] > caps[s] {
			out = append(out, fmt.Sprintf("%s %s/%s: %d pods in Spot pool %s, over its %s of %d", s.key.Kind, s.key.Namespace, s.key.Name, counts[s], s.pool, poolcap.Annotation, caps[s]))
		}
	}
	return out
}
