/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package cost

import (
	"context"
	"fmt"
	"sort"
	"strconv"

	corev1 "k8s.io/api/core/v1"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/cloud"
)

// PriceBook prices offerings as provisioning does: a NodePool's instance types from the cloud provider, with the
// NodeOverlays in force. Each NodePool's types are read once.
type PriceBook struct {
	cloud  cloud.Provider
	pools  map[string]*stevedorev1.NodePool
	byPool map[string][]*cloud.InstanceType
	// listed prices the nodes Stevedore did not launch from their labels (nil: they are not priced).
	listed func(instanceType, zone, capacityType string) float64
}

// PricingOthers has the book price the nodes Stevedore did not launch (Karpenter's, a node group's) too, at the
// list price of their instance type, zone and capacity type, read from their labels.
func (b *PriceBook) PricingOthers(listed func(instanceType, zone, capacityType string) float64) *PriceBook {
	b.listed = listed
	return b
}

// labelCapacityTypeNodeGroup is the capacity type label of EKS managed node groups (ON_DEMAND, SPOT, CAPACITY_BLOCK).
const labelCapacityTypeNodeGroup = "eks.amazonaws.com/capacityType"

// listedPrice prices a node Stevedore did not launch from its labels: its instance type and zone, and its capacity
// type (Karpenter's label, else a managed node group's, else on-demand; reserved capacity at the on-demand rate).
// It returns the price (0 when the catalog has none) and the offering, for messages.
func (b *PriceBook) listedPrice(node *corev1.Node) (price float64, it, zone, ct string) {
	it, zone = node.Labels[corev1.LabelInstanceTypeStable], node.Labels[corev1.LabelTopologyZone]
	ct = node.Labels[stevedorev1.LabelCapacityType]
	if ct == "" {
		switch node.Labels[labelCapacityTypeNodeGroup] {
		case "SPOT":
			ct = stevedorev1.CapacityTypeSpot
		default:
			ct = stevedorev1.CapacityTypeOnDemand
		}
	}
	priceAs := ct
	if ct == stevedorev1.CapacityTypeReserved {
		priceAs = stevedorev1.CapacityTypeOnDemand
	}
	return b.listed(it, zone, priceAs), it, zone, ct
}

// NewPriceBook returns a PriceBook over the provider (overlaid) and the NodePools.
func NewPriceBook(provider cloud.Provider, pools []*stevedorev1.NodePool) *PriceBook {
	b := &PriceBook{cloud: provider, pools: map[string]*stevedorev1.NodePool{}, byPool: map[string][]*cloud.InstanceType{}}
	for _, np := range pools {
		b.pools[np.Name] = np
	}
	return b
}

// price is the offering's hourly price among the NodePool's types.
func (b *PriceBook) price(ctx context.Context, pool, instanceType, zone, capacityType string) (float64, bool) {
	np := b.pools[pool]
	if np == nil || b.cloud == nil {
		return 0, false
	}
	its, ok := b.byPool[pool]
	if !ok {
		var err error
		if its, err = b.cloud.InstanceTypes(ctx, np); err != nil {
			its = nil
		}
		b.byPool[pool] = its
	}
	return cloud.OfferingPrice(its, instanceType, zone, capacityType)
}

// Billed is what a NodeClaim's node costs an hour as billed, and how it was priced:
//   - spot and on-demand: the offering's price now, NodeOverlays applied (a spot price follows the market), else
//     the price recorded at launch;
//   - reserved: the on-demand price of its type and zone. An On-Demand Capacity Reservation is billed at the
//     on-demand rate whether used or not; a Capacity Block's fee is paid upfront for the block and is not in the
//     catalog, so it is priced at the same rate.
func (b *PriceBook) Billed(ctx context.Context, claim *stevedorev1.NodeClaim) (float64, string) {
	pool := claim.Labels[stevedorev1.LabelNodePool]
	st := claim.Status
	ct := st.CapacityType
	if ct == stevedorev1.CapacityTypeReserved {
		ct = stevedorev1.CapacityTypeOnDemand
	}
	if p, ok := b.price(ctx, pool, st.InstanceType, st.Zone, ct); ok {
		if st.CapacityType == stevedorev1.CapacityTypeReserved {
			return p, "reserved at the on-demand rate"
		}
		return p, "offering"
	}
	if st.CapacityType != stevedorev1.CapacityTypeReserved {
		if p, err := strconv.ParseFloat(st.Price, 64); err == nil {
			return p, "recorded at launch"
		}
	}
	return 0, ""
}

// Collect joins the nodes to the NodeClaims that launched them and to their pods, priced as billed. Nodes
// Stevedore did not launch are priced from their labels when the book prices others (PricingOthers); those it
// cannot price, and NodeClaims that could not be priced, are listed in unpriced (with why) and left out.
func Collect(ctx context.Context, book *PriceBook, nodes []*corev1.Node, claims []*stevedorev1.NodeClaim, pods []*corev1.Pod) (
	out []Node, unpriced []string) {
	claimOf := map[string]*stevedorev1.NodeClaim{}
	for _, c := range claims {
		if c.Status.NodeName != "" {
			claimOf[c.Status.NodeName] = c
		}
	}
	podsOf := map[string][]*corev1.Pod{}
	for _, pod := range pods {
		if pod.Spec.NodeName != "" {
			podsOf[pod.Spec.NodeName] = append(podsOf[pod.Spec.NodeName], pod)
		}
	}
	sorted := append([]*corev1.Node(nil), nodes...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Name < sorted[j].Name })
	for _, node := range sorted {
		claim := claimOf[node.Name]
		if claim == nil || claim.Status.InstanceType == "" { // not Stevedore's (a NodeClaim of Karpenter's has no type in its status)
			if book.listed == nil {
				unpriced = append(unpriced, fmt.Sprintf("node %s: not launched by Stevedore", node.Name))
				continue
			}
			price, it, zone, ct := book.listedPrice(node)
			if price == 0 {
				unpriced = append(unpriced, fmt.Sprintf("node %s: no price in the catalog for %s %s in %q", node.Name, ct, it, zone))
				continue
			}
			out = append(out, Node{Name: node.Name, NodePool: nodeGroupOf(node), InstanceType: it, CapacityType: ct, Price: price,
				Allocatable: node.Status.Allocatable, Pods: podsOf[node.Name]})
			continue
		}
		price, how := book.Billed(ctx, claim)
		if how == "" {
			unpriced = append(unpriced, fmt.Sprintf("node %s: no price for %s %s in %s", node.Name, claim.Status.CapacityType,
				claim.Status.InstanceType, claim.Status.Zone))
			continue
		}
		out = append(out, Node{Name: node.Name, NodePool: claim.Labels[stevedorev1.LabelNodePool], InstanceType: claim.Status.InstanceType,
			CapacityType: claim.Status.CapacityType, Price: price, Allocatable: node.Status.Allocatable, Pods: podsOf[node.Name]})
	}
	return out, unpriced
}

// nodeGroupOf names what a node Stevedore did not launch belongs to: Karpenter's NodePool, or an EKS managed node
// group.
func nodeGroupOf(node *corev1.Node) string {
	for _, key := range []string{"karpenter.sh/nodepool", "eks.amazonaws.com/nodegroup"} {
		if v := node.Labels[key]; v != "" {
			return v
		}
	}
	return ""
}
