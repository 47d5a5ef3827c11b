/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package provision

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/solver"
	"github.com/stevedore-dev/stevedore/pkg/solver/simulation"
	"github.com/stevedore-dev/stevedore/pkg/state"
)

// labelStaticPlaceholder marks the pods that stand for the nodes of a static NodePool while they are planned.
const labelStaticPlaceholder = "stevedore.dev/static-node"

// PlanStaticNodes plans n new nodes of a static NodePool: the cheapest types its requirements and its DaemonSets
// allow, one node per placeholder pod that asks for nothing and tolerates every taint, spread over the zones
// together with the NodePool's nodes that stay (all but those being deleted and those named in leaving), with the
// NodePool's limits.nodes and the CapacityQuotas selecting its nodes holding. The planned nodes carry no pod. Fewer than n come back when the limits or the
// offerings stop them; the error then says why.
func (p *planner) PlanStaticNodes(ctx context.Context, np *stevedorev1.NodePool, n int, leaving ...string) ([]*solver.PlannedNode, error) {
	if n <= 0 {
		return nil, nil
	}
	its, err := p.InstanceTypes(ctx, np)
	if err != nil {
		return nil, fmt.Errorf("NodePool %s: %w", np.Name, err)
	}
	daemonSets := p.daemonSetPods()
	claims, err := p.NodeClaims()
	if err != nil {
		return nil, err
	}
	usage := state.NodePoolUsage(claims)
	opt, err := solver.NewNodePoolOption(np, its, solver.RemainingLimits(np, usage[np.Name].List()), daemonSets, p.opts.Args.Region)
	if err != nil {
		return nil, fmt.Errorf("NodePool %s: %w", np.Name, err)
	}
	quotas, err := p.quotas(ctx, claims)
	if err != nil {
		return nil, err
	}
	options := []solver.NodePoolOption{opt}
	solver.AttachQuotas(options, quotas)
	placeholders := make([]*corev1.Pod, n)
	for i := range placeholders {
		placeholders[i] = staticPlaceholder(np.Name, i)
	}
	snap := stayingStaticNodes(np.Name, claims, leaving)
	res, err := p.Plan(ctx, Request{Input: solver.Input{Pods: placeholders, NodePools: options, Snapshot: snap,
		Region: p.opts.Args.Region}})
	if err != nil {
		return nil, err
	}
	plan := res.Plan
	for _, pn := range plan.NewNodes {
		pn.Pods = nil
	}
	for _, ph := range placeholders { // the first placeholder left out says why
		if why, ok := plan.Unschedulable[ph.UID]; ok {
			return plan.NewNodes, fmt.Errorf("%d of %d nodes of NodePool %s cannot be planned: %s", len(plan.Unschedulable), n, np.Name, why)
		}
	}
	return plan.NewNodes, nil
}

// stayingStaticNodes is a snapshot of the NodePool's nodes that stay, each held by a placeholder, so that the new
// ones even out the zones: those of NodeClaims launched in a zone, not being deleted and not named in leaving.
func stayingStaticNodes(pool string, claims []*stevedorev1.NodeClaim, leaving []string) *simulation.Snapshot {
	snap := simulation.NewSnapshot()
	gone := map[string]bool{}
	for _, name := range leaving {
		gone[name] = true
	}
	for _, cl := range claims {
		if cl.Labels[stevedorev1.LabelNodePool] != pool || cl.DeletionTimestamp != nil || cl.Status.Zone == "" ||
			cl.Status.NodeName != "" && gone[cl.Status.NodeName] {
			continue
		}
		name := "static-" + cl.Name
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
			corev1.LabelTopologyZone: cl.Status.Zone, corev1.LabelHostname: name, stevedorev1.LabelNodePool: pool}}}
		held := staticPlaceholder(pool, 0)
		held.Name, held.UID, held.Spec.NodeName = name, types.UID("static/"+name), name
		snap.AddNode(node, held)
	}
	return snap
}

// staticPlaceholder is the i-th pod standing for a node of a static NodePool: no requests, every taint tolerated,
// only the NodePool's nodes, one placeholder per node, spread evenly over zones.
func staticPlaceholder(pool string, i int) *corev1.Pod {
	name := fmt.Sprintf("%s-%d", pool, i)
	sel := map[string]string{labelStaticPlaceholder: pool}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "stevedore-static", UID: types.UID("static/" + name), Labels: sel},
		Spec: corev1.PodSpec{
			NodeSelector: map[string]string{stevedorev1.LabelNodePool: pool},
			Tolerations:  []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
			Affinity: &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
				RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
					LabelSelector: &metav1.LabelSelector{MatchLabels: sel}, TopologyKey: corev1.LabelHostname}},
			}},
			// spread over the NodePool's zones
			TopologySpreadConstraints: []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: corev1.LabelTopologyZone,
				WhenUnsatisfiable: corev1.DoNotSchedule, LabelSelector: &metav1.LabelSelector{MatchLabels: sel}}},
			Containers: []corev1.Container{{Name: "node", Image: "placeholder"}},
		},
	}
}
