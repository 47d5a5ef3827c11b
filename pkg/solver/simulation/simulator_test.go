/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package simulation

import (
	"context"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stevedore-dev/stevedore/pkg/test"
)

func node(name, zone string, cpu string, taints ...v1.Taint) *v1.Node {
	n := test.Node(name).Labels(v1.LabelTopologyZone, zone).Allocatable("cpu", cpu, "memory", "8Gi", "pods", "110").Obj()
	n.Spec.Taints = taints
	return n
}

func pod(name, cpu string, labels map[string]string) *v1.Pod {
	p := test.Pod(name).Pending().Req("cpu", cpu).Obj()
	p.Labels = labels
	return p
}

func TestFilterPluginsDecideOnVirtualNodes(t *testing.T) {
	ctx := context.Background()
	snap := NewSnapshot()
	snap.AddNode(node("a", "zone-a", "2"))
	snap.AddNode(node("tainted", "zone-b", "8", v1.Taint{Key: "dedicated", Value: "x", Effect: v1.TaintEffectNoSchedule}))
	sim, err := New(ctx, snap, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := sim.Fits(ctx, pod("small", "1", nil), "a"); err != nil {
		t.Fatalf("a 1-CPU pod must fit a 2-CPU node: %v", err)
	}
	if err := sim.Fits(ctx, pod("big", "3", nil), "a"); err == nil || !strings.Contains(err.Error(), "Insufficient cpu") {
		t.Fatalf("a 3-CPU pod on a 2-CPU node: %v, want Insufficient cpu", err)
	}
	if err := sim.Fits(ctx, pod("p", "1", nil), "tainted"); err == nil {
		t.Fatal("an untolerated taint must reject the pod")
	}
	// Placing a pod makes later checks see it.
	if err := snap.AddPod("a", pod("first", "1500m", nil)); err != nil {
		t.Fatal(err)
	}
	if err := sim.Fits(ctx, pod("second", "1", nil), "a"); err == nil {
		t.Fatal("the node is full after the first pod")
	}
}

func TestTopologySpreadAndAntiAffinitySeePlacedPods(t *testing.T) {
	ctx := context.Background()
	snap := NewSnapshot()
	snap.AddNode(node("n1", "zone-a", "8"))
	snap.AddNode(node("n2", "zone-b", "8"))
	sim, err := New(ctx, snap, Options{})
	if err != nil {
		t.Fatal(err)
	}
	app := map[string]string{"app": "web"}
	anti := pod("anti-1", "100m", app)
	anti.Spec.Affinity = &v1.Affinity{PodAntiAffinity: &v1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []v1.PodAffinityTerm{{
		LabelSelector: &metav1.LabelSelector{MatchLabels: app}, TopologyKey: v1.LabelHostname}}}}
	if err := sim.Fits(ctx, anti, "n1"); err != nil {
		t.Fatal(err)
	}
	if err := snap.AddPod("n1", anti); err != nil {
		t.Fatal(err)
	}
	second := anti.DeepCopy()
	second.Name, second.UID = "anti-2", "uid-anti-2"
	if err := sim.Fits(ctx, second, "n1"); err == nil {
		t.Fatal("hostname anti-affinity must keep a second replica off n1")
	}
	if err := sim.Fits(ctx, second, "n2"); err != nil {
		t.Fatalf("n2 is free of replicas: %v", err)
	}
	spread := pod("spread-1", "100m", map[string]string{"app": "spread"})
	spread.Spec.TopologySpreadConstraints = []v1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: v1.LabelTopologyZone,
		WhenUnsatisfiable: v1.DoNotSchedule, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "spread"}}}}
	if err := snap.AddPod("n1", spread); err != nil {
		t.Fatal(err)
	}
	next := spread.DeepCopy()
	next.Name, next.UID = "spread-2", "uid-spread-2"
	if err := sim.Fits(ctx, next, "n1"); err == nil {
		t.Fatal("zone spread must send the second replica to the other zone")
	}
	if err := sim.Fits(ctx, next, "n2"); err != nil {
		t.Fatalf("zone-b balances the spread: %v", err)
	}
	snap.RemoveNode("n2")
	if snap.Len() != 1 {
		t.Fatalf("Len = %d after removing a node", snap.Len())
	}
}
