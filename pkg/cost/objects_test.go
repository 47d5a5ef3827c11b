/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package cost

import (
	"context"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/cloud/catalog"
	"github.com/stevedore-dev/stevedore/pkg/test"
)

// TestNodesArePricedAsBilled reads a cluster as objects and prices each node: on-demand and spot at the catalog's
// offering, reserved capacity at the on-demand rate, a NodeOverlay's adjustment applied; nodes Stevedore did not
// launch (Karpenter's, with its NodeClaim in the dump; a managed node group's) at the catalog's list price from their
// labels; a node without those labels is left out and named. The pods' lines, the DaemonSets' and idle add up to the priced nodes.
func TestNodesArePricedAsBilled(t *testing.T) {
	cat := catalog.Default()
	price := cat.Pricer()
	const zone = "us-east-1a"
	node := func(name, typ, capacityType, recorded string) []runtime.Object {
		cw := test.NodeClaim("claim-"+name, "default").Launched(name, typ, zone, capacityType, recorded)
		nw := cw.NodeFor()
		nw.Status.Allocatable = corev1.ResourceList{corev1.ResourceCPU: resourceOf("2"), corev1.ResourceMemory: resourceOf("7Gi")}
		return []runtime.Object{cw.Obj(), nw.Obj()}
	}
	pools := test.NodePool("default").Obj()
	other := test.NodePool("adjusted").Obj()
	var objs []runtime.Object
	objs = append(objs, pools, other)
	objs = append(objs, node("od", "m5.large", stevedorev1.CapacityTypeOnDemand, "1")...)
	objs = append(objs, node("spot", "m5.large", stevedorev1.CapacityTypeSpot, "1")...)
	objs = append(objs, node("reserved", "m5.large", stevedorev1.CapacityTypeReserved, "0.0000000096")...)
	adjusted := node("adj", "m5.large", stevedorev1.CapacityTypeOnDemand, "1")
	adjusted[0].(*stevedorev1.NodeClaim).Labels[stevedorev1.LabelNodePool] = "adjusted"
	objs = append(objs, adjusted...)
	objs = append(objs, &stevedorev1.NodeOverlay{ObjectMeta: metaNamed("discount"), Spec: stevedorev1.NodeOverlaySpec{
		Requirements:    []stevedorev1.NodeOverlayRequirement{{Key: stevedorev1.LabelNodePool, Operator: string(corev1.NodeSelectorOpIn), Values: []string{"adjusted"}}},
		PriceAdjustment: ptr.To("-0.01")}})
	objs = append(objs, test.Node("self-managed").Obj())
	karpenterNode := test.Node("karpenter").Labels(corev1.LabelInstanceTypeStable, "m5.xlarge", corev1.LabelTopologyZone, zone,
		stevedorev1.LabelCapacityType, stevedorev1.CapacityTypeSpot, "karpenter.sh/nodepool", "general").Obj()
	karpenterClaim := &stevedorev1.NodeClaim{ObjectMeta: metaNamed("general-x1"), Status: stevedorev1.NodeClaimStatus{NodeName: "karpenter"}}
	karpenterClaim.APIVersion, karpenterClaim.Kind = "karpenter.sh/v1", "NodeClaim"
	nodeGroupNode := test.Node("node-group").Labels(corev1.LabelInstanceTypeStable, "c5.large", corev1.LabelTopologyZone, zone,
		"eks.amazonaws.com/capacityType", "ON_DEMAND", "eks.amazonaws.com/nodegroup", "system").Obj()
	objs = append(objs, karpenterNode, karpenterClaim, nodeGroupNode)
	objs = append(objs, test.Pod("web").Node("od").Req("cpu", "1", "memory", "1Gi").Obj(),
		test.Pod("agent").Node("spot").Req("cpu", "500m", "memory", "1Gi").OwnedBy("DaemonSet", "agent").Obj(),
		&appsv1.DaemonSet{ObjectMeta: metaNamed("agent")})

	r, unpriced, err := FromObjects(context.Background(), objs, cat)
	if err != nil {
		t.Fatal(err)
	}
	od := price("m5.large", zone, stevedorev1.CapacityTypeOnDemand)
	want := map[string]float64{"od": od, "spot": price("m5.large", zone, stevedorev1.CapacityTypeSpot), "reserved": od, "adj": od - 0.01,
		"karpenter": price("m5.xlarge", zone, stevedorev1.CapacityTypeSpot), "node-group": price("c5.large", zone, stevedorev1.CapacityTypeOnDemand)}
	if len(r.Nodes) != len(want) {
		t.Fatalf("priced %d nodes, want %d", len(r.Nodes), len(want))
	}
	total := 0.0
	for _, n := range r.Nodes {
		if n.Name == "karpenter" && n.NodePool != "general" || n.Name == "node-group" && n.NodePool != "system" {
			t.Errorf("node %s counted in %q", n.Name, n.NodePool)
		}
		if !near(n.Price, want[n.Name]) || want[n.Name] == 0 {
			t.Errorf("node %s priced %v, want %v", n.Name, n.Price, want[n.Name])
		}
		total += want[n.Name]
	}
	if len(unpriced) != 1 || !strings.Contains(unpriced[0], "self-managed") {
		t.Errorf("unpriced = %v, want the self-managed node", unpriced)
	}
	if !near(r.Total, total) || !near(r.Pods+r.DaemonSets+r.Idle, total) {
		t.Errorf("total %v, pods %v + DaemonSets %v + idle %v; want %v", r.Total, r.Pods, r.DaemonSets, r.Idle, total)
	}
	if !near(r.ByNamespace["default"], od/2) || !near(r.DaemonSets, want["spot"]/4) {
		t.Errorf("namespace default %v, DaemonSets %v; want %v and %v", r.ByNamespace["default"], r.DaemonSets, od/2, want["spot"]/4)
	}
}

// TestAKindCostDoesNotReadIsAnError: an object of a kind cost does not read is an error naming it.
func TestAKindCostDoesNotReadIsAnError(t *testing.T) {
	_, _, err := FromObjects(context.Background(), []runtime.Object{&appsv1.Deployment{ObjectMeta: metaNamed("web")}}, catalog.Default())
	if err == nil || !strings.Contains(err.Error(), "web") || !strings.Contains(err.Error(), "does not read") {
		t.Errorf("err = %v, want one naming the Deployment", err)
	}
}

func resourceOf(v string) resource.Quantity { return resource.MustParse(v) }

func metaNamed(name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: name, Namespace: metav1.NamespaceDefault}
}
