/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package karpenter

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/manifest"
	"github.com/stevedore-dev/stevedore/pkg/podutil"
)

// Pricer prices an offering (instance type, zone, capacity type) per hour; 0 when it does not know it.
type Pricer func(instanceType, zone, capacityType string) float64

// ReplacedNode is one of Karpenter's nodes a preview plans the pods of anew.
type ReplacedNode struct {
	Name, NodePool, InstanceType, Zone, CapacityType string
	Price                                            float64
	Pods                                             int
}

// Preview is a dump of a cluster Karpenter runs, made into the input of Stevedore's plan: what Stevedore would
// launch for the pods on Karpenter's nodes, were its NodePools (Karpenter's, read as Stevedore's) in charge.
type Preview struct {
	// Objects are the plan's input: Karpenter's NodePools, EC2NodeClasses and NodeOverlays as Stevedore's (without
	// what Stevedore refuses), the nodes neither launched and the pods on them, and the pods of Karpenter's nodes
	// unbound (DaemonSet and mirror pods aside: the DaemonSets themselves count on every new node).
	Objects []runtime.Object
	// Replaced are Karpenter's nodes, priced: the cost now, beside the plan's.
	Replaced []ReplacedNode
	// Problems are what Stevedore refuses in Karpenter's objects, one line each; the preview leaves those
	// requirements and labels out.
	Problems []string
}

// NewPreview reads objs (a dump of the cluster, Karpenter's objects decoded by package manifest) for a preview.
func NewPreview(objs []runtime.Object, price Pricer) (*Preview, error) {
	p := &Preview{}
	replaced := map[string]*ReplacedNode{}
	for _, obj := range objs {
		if n, ok := obj.(*corev1.Node); ok && isKarpenterNode(n) {
			zone, ct, it := n.Labels[corev1.LabelTopologyZone], n.Labels[stevedorev1.LabelCapacityType], n.Labels[corev1.LabelInstanceTypeStable]
			replaced[n.Name] = &ReplacedNode{Name: n.Name, NodePool: n.Labels[LabelNodePool], InstanceType: it, Zone: zone, CapacityType: ct,
				Price: price(it, zone, ct)}
		}
	}
	for _, obj := range objs {
		if obj, keep := p.read(obj, replaced); keep {
			p.Objects = append(p.Objects, obj)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(replaced)) {
		p.Replaced = append(p.Replaced, *replaced[name])
	}
	return p, nil
}

// read makes one object of the dump into the plan's input (keep false: left out): Karpenter's nodes and
// NodeClaims are left out, the pods on those nodes unbound (counted on their node) unless they stay with it,
// Karpenter's NodePools lose what Stevedore refuses (recorded in Problems).
func (p *Preview) read(obj runtime.Object, replaced map[string]*ReplacedNode) (out runtime.Object, keep bool) {
	switch o := obj.(type) {
	case *corev1.Node:
		return obj, replaced[o.Name] == nil
	case *corev1.Pod:
		r := replaced[o.Spec.NodeName]
		if r == nil {
			return obj, true
		}
		if !podutil.Reschedulable(o) { // a pod on one of Karpenter's nodes is planned anew
			return nil, false
		}
		r.Pods++
		return unbound(o), true
	case *stevedorev1.NodeClaim:
		return obj, !manifest.IsKarpenter(o) // a Karpenter NodeClaim's node is replaced
	case *stevedorev1.NodePool:
		if manifest.IsKarpenter(o) {
			p.Problems = append(p.Problems, Problems(o)...)
			return withoutRefused(o), true
		}
	default:
		if manifest.IsKarpenter(obj) {
			p.Problems = append(p.Problems, Problems(obj)...)
		}
	}
	return obj, true
}

// unbound is a copy of a pod as it was before it was scheduled: no node, pending.
func unbound(pod *corev1.Pod) *corev1.Pod {
	out := pod.DeepCopy()
	out.Spec.NodeName = ""
	out.Status = corev1.PodStatus{Phase: corev1.PodPending}
	return out
}

// withoutRefused is a copy of a NodePool without the requirements and labels Stevedore refuses.
func withoutRefused(np *stevedorev1.NodePool) *stevedorev1.NodePool {
	out := np.DeepCopy()
	out.Spec.Template.Spec.Requirements = slices.DeleteFunc(out.Spec.Template.Spec.Requirements, func(r stevedorev1.NodeSelectorRequirementWithMinValues) bool {
		return stevedorev1.UnsupportedRequirement(r) != ""
	})
	for k, v := range out.Spec.Template.ObjectMeta.Labels {
		if stevedorev1.UnsupportedTemplateLabel(k, v) != "" {
			delete(out.Spec.Template.ObjectMeta.Labels, k)
		}
	}
	return out
}

// AsStevedore returns objs with Karpenter's NodeClaims and nodes as nodes Stevedore manages (what `plan --disrupt`
// weighs): a NodeClaim labelled with its NodePool, its instance type, zone, capacity type and price in its status
// (priced by price), its node labelled as Stevedore labels its own. Karpenter's NodePools lose what Stevedore
// refuses (Problems lists it).
func AsStevedore(objs []runtime.Object, price Pricer) ([]runtime.Object, []string, error) {
	var problems []string
	claimOf := map[string]string{} // node name -> NodeClaim
	for _, obj := range objs {
		if c, ok := obj.(*stevedorev1.NodeClaim); ok && manifest.IsKarpenter(c) && c.Status.NodeName != "" {
			claimOf[c.Status.NodeName] = c.Name
		}
	}
	out := make([]runtime.Object, 0, len(objs))
	for _, obj := range objs {
		switch o := obj.(type) {
		case *stevedorev1.NodeClaim:
			if manifest.IsKarpenter(o) {
				c, err := claimAsStevedore(o, price)
				if err != nil {
					return nil, nil, err
				}
				obj = c
			}
		case *corev1.Node:
			if isKarpenterNode(o) {
				obj = nodeAsStevedore(o, claimOf[o.Name])
			}
		case *stevedorev1.NodePool:
			if manifest.IsKarpenter(o) {
				problems = append(problems, Problems(o)...)
				obj = withoutRefused(o)
			}
		default:
			if manifest.IsKarpenter(obj) {
				problems = append(problems, Problems(obj)...)
			}
		}
		out = append(out, obj)
	}
	return out, problems, nil
}

// claimAsStevedore is a copy of one of Karpenter's NodeClaims as Stevedore keeps its own.
func claimAsStevedore(c *stevedorev1.NodeClaim, price Pricer) (*stevedorev1.NodeClaim, error) {
	out := c.DeepCopy()
	pool := c.Labels[LabelNodePool]
	if pool == "" {
		return nil, fmt.Errorf("%s: has no %s label, so its NodePool is not known", manifest.Name(c), LabelNodePool)
	}
	out.Labels[stevedorev1.LabelNodePool] = pool
	if out.Spec.NodeClassRef != nil {
		out.Spec.NodeClassRef.Normalize()
	}
	s := &out.Status
	s.InstanceType, s.Zone = c.Labels[corev1.LabelInstanceTypeStable], c.Labels[corev1.LabelTopologyZone]
	s.CapacityType = c.Labels[stevedorev1.LabelCapacityType]
	if i := strings.LastIndex(s.ProviderID, "/"); i >= 0 {
		s.InstanceID = s.ProviderID[i+1:]
	}
	if p := price(s.InstanceType, s.Zone, s.CapacityType); p > 0 && s.Price == "" {
		s.Price = strconv.FormatFloat(p, 'f', -1, 64)
	}
	return out, nil
}

// nodeAsStevedore is a copy of one of Karpenter's nodes labelled as Stevedore labels its own.
func nodeAsStevedore(n *corev1.Node, claim string) *corev1.Node {
	out := n.DeepCopy()
	out.Labels[stevedorev1.LabelNodePool] = n.Labels[LabelNodePool]
	if claim != "" {
		out.Labels[stevedorev1.LabelNodeClaim] = claim
	}
	if n.Labels[LabelInitialized] == "true" {
		out.Labels[stevedorev1.LabelInitialized] = "true"
	}
	return out
}
