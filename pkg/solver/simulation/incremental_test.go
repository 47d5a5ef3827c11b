/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package simulation

import (
	"context"
	"fmt"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/stevedore-dev/stevedore/pkg/test"
)

// probes are the pods whose incremental state the cache test checks: every kind of term the two plugins count.
func probes() []*v1.Pod {
	spreadZone := test.Pod("spread-zone").Labels("app", "web").Spread(v1.LabelTopologyZone, 1, v1.DoNotSchedule, "app", "web").Obj()
	spreadHost := test.Pod("spread-host").Labels("app", "web").Spread(v1.LabelHostname, 1, v1.DoNotSchedule, "app", "web").Obj()
	minDomains := test.Pod("min-domains").Labels("app", "web").Spread(v1.LabelTopologyZone, 1, v1.DoNotSchedule, "app", "web").Obj()
	minDomains.Spec.TopologySpreadConstraints[0].MinDomains = ptrTo(int32(3))
	selected := test.Pod("spread-selected").Labels("app", "web").NodeSelector("tier", "a").
		Spread(v1.LabelTopologyZone, 1, v1.DoNotSchedule, "app", "web").Obj()
	term := func(key string, kv ...string) v1.PodAffinityTerm {
		return v1.PodAffinityTerm{TopologyKey: key, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{kv[0]: kv[1]}}}
	}
	affZone := test.Pod("affinity-zone").Labels("app", "api").Obj()
	affZone.Spec.Affinity = &v1.Affinity{PodAffinity: &v1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []v1.PodAffinityTerm{
		term(v1.LabelTopologyZone, "app", "web")}}}
	antiHost := test.Pod("anti-host").Labels("app", "db").Obj()
	antiHost.Spec.Affinity = &v1.Affinity{PodAntiAffinity: &v1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []v1.PodAffinityTerm{
		term(v1.LabelHostname, "app", "db")}}}
	antiZone := test.Pod("anti-zone").Labels("app", "cache").Obj()
	antiZone.Spec.Affinity = &v1.Affinity{PodAntiAffinity: &v1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []v1.PodAffinityTerm{
		term(v1.LabelTopologyZone, "app", "cache")}}}
	plainWeb := test.Pod("plain-web").Labels("app", "web").Obj()
	plainCache := test.Pod("plain-cache").Labels("app", "cache").Obj()
	return []*v1.Pod{spreadZone, spreadHost, minDomains, selected, affZone, antiHost, antiZone, plainWeb, plainCache}
}

func ptrTo[T any](v T) *T { return &v }

// op is one change to the snapshot.
type op func(t *testing.T, s *Snapshot)

func addNode(name, zone string, labels ...string) op {
	return func(t *testing.T, s *Snapshot) {
		s.AddNode(test.Node(name).Labels(append([]string{v1.LabelHostname, name, v1.LabelTopologyZone, zone}, labels...)...).
			Allocatable("cpu", "16", "memory", "64Gi", "pods", "110").Obj())
	}
}

func addPod(node string, p *v1.Pod) op {
	return func(t *testing.T, s *Snapshot) {
		if err := s.AddPod(node, p); err != nil {
			t.Fatal(err)
		}
	}
}

func removePod(node string, p *v1.Pod) op {
	return func(t *testing.T, s *Snapshot) {
		if err := s.RemovePod(node, p); err != nil {
			t.Fatal(err)
		}
	}
}

func removeNode(name string) op { return func(t *testing.T, s *Snapshot) { s.RemoveNode(name) } }

func relabel(name string, kv ...string) op {
	return func(t *testing.T, s *Snapshot) {
		n := s.NodeInfo(name).Node().DeepCopy()
		for i := 0; i+1 < len(kv); i += 2 {
			if kv[i+1] == "" {
				delete(n.Labels, kv[i])
			} else {
				n.Labels[kv[i]] = kv[i+1]
			}
		}
		if err := s.SetNode(n); err != nil {
			t.Fatal(err)
		}
	}
}

func taint(name string) op {
	return func(t *testing.T, s *Snapshot) {
		n := s.NodeInfo(name).Node().DeepCopy()
		n.Spec.Taints = append(n.Spec.Taints, v1.Taint{Key: "dedicated", Value: "x", Effect: v1.TaintEffectNoSchedule})
		if err := s.SetNode(n); err != nil {
			t.Fatal(err)
		}
	}
}

// trial changes the snapshot while suspended and puts it back.
func trial(inner ...op) op {
	return func(t *testing.T, s *Snapshot) {
		s.Suspend()
		defer s.Resume()
		for _, o := range inner {
			o(t, s)
		}
	}
}

func labelled(name string, kv ...string) *v1.Pod {
	p := test.Pod(name).Labels(kv...).Obj()
	p.UID = types.UID(name)
	return p
}

func TestIncrementalStateFollowsEveryChange(t *testing.T) {
	web1, web2, web3 := labelled("web1", "app", "web"), labelled("web2", "app", "web"), labelled("web3", "app", "web")
	db1, cache1 := labelled("db1", "app", "db"), labelled("cache1", "app", "cache")
	db1.Spec.Affinity = &v1.Affinity{PodAntiAffinity: &v1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []v1.PodAffinityTerm{
		{TopologyKey: v1.LabelHostname, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}}}}}}
	cache1.Spec.Affinity = &v1.Affinity{PodAntiAffinity: &v1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []v1.PodAffinityTerm{
		{TopologyKey: v1.LabelTopologyZone, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "cache"}}}}}}
	terminating := labelled("terminating", "app", "web")
	terminating.DeletionTimestamp = &metav1.Time{}
	base := []op{addNode("a", "z1", "tier", "a"), addNode("b", "z2", "tier", "a"), addNode("c", "z3")}
	cases := []struct {
		name string
		ops  []op
	}{
		{"pods added one by one", []op{addPod("a", web1), addPod("a", web2), addPod("b", web3)}},
		{"pods removed again", []op{addPod("a", web1), addPod("b", web2), removePod("a", web1), removePod("b", web2)}},
		// every domain holds a pod: the new node's empty domain lowers the minimum
		{"a new empty node is a new hostname domain", []op{addPod("a", web1), addPod("b", web2), addPod("c", web3), addNode("d", "z1")}},
		{"a new node in a new zone", []op{addPod("a", web1), addPod("b", web2), addPod("c", web3), addNode("d", "z4")}},
		{"a node added with pods on it", []op{addPod("a", web1), func(t *testing.T, s *Snapshot) {
			s.AddNode(test.Node("d").Labels(v1.LabelHostname, "d", v1.LabelTopologyZone, "z1").Allocatable("cpu", "16", "pods", "110").Obj(), web2, db1)
		}}},
		{"the only node of a zone removed", []op{addPod("a", web1), addPod("c", web2), removeNode("c")}},
		{"a node removed from a zone that keeps others", []op{addNode("d", "z1"), addPod("d", web1), addPod("a", web2), removeNode("d")}},
		{"an empty node removed", []op{addPod("a", web1), removeNode("b")}},
		{"a node moves zone with its pods", []op{addPod("a", web1), addPod("a", web2), addPod("b", web3), relabel("a", v1.LabelTopologyZone, "z2")}},
		{"a node moves its pod into another zone", []op{addPod("a", web1), addPod("b", web2), addPod("c", web3), relabel("c", v1.LabelTopologyZone, "z1")}},
		{"an empty node moves zone", []op{addPod("a", web1), relabel("c", v1.LabelTopologyZone, "z1")}},
		{"a node loses its zone label", []op{addPod("a", web1), addPod("c", web2), relabel("c", v1.LabelTopologyZone, "")}},
		{"a node stops matching a pod's node selector", []op{addPod("a", web1), addPod("b", web2), relabel("b", "tier", "b")}},
		{"a node is tainted", []op{addPod("a", web1), taint("b")}},
		{"a pod with hostname anti-affinity arrives", []op{addPod("a", web1), addPod("b", db1)}},
		{"a pod with zone anti-affinity arrives and its node moves", []op{addPod("a", cache1), relabel("a", v1.LabelTopologyZone, "z3")}},
		{"a pod with zone anti-affinity leaves", []op{addPod("a", cache1), addPod("b", web1), removePod("a", cache1)}},
		{"a terminating pod", []op{addPod("a", web1), addPod("b", terminating)}},
		{"a trial put back", []op{addPod("a", web1), trial(relabel("a", v1.LabelTopologyZone, "z9"), addPod("a", web2), removePod("a", web2),
			relabel("a", v1.LabelTopologyZone, "z1"))}},
		{"many nodes removed at once", []op{addPod("a", web1), addPod("b", db1), func(t *testing.T, s *Snapshot) { s.RemoveNodes("a", "b") }}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			snap := NewSnapshot()
			sim, err := New(ctx, snap, Options{CheckIncremental: true})
			if err != nil {
				t.Fatal(err)
			}
			ask := func(when string) {
				for _, p := range probes() {
					state, _, status := sim.PreFilter(ctx, p)
					if !status.IsSuccess() && !status.IsSkip() {
						t.Fatalf("%s: PreFilter %s: %v", when, p.Name, status.AsError())
					}
					if _, err := state.Read(generationKey); err != nil {
						t.Fatalf("%s: the state of %s was not lent from the cache", when, p.Name)
					}
				}
			}
			for _, o := range base {
				o(t, snap)
			}
			ask("before the changes") // every class is in the cache and follows what comes next
			for i, o := range tc.ops {
				o(t, snap)
				ask(fmt.Sprintf("after change %d", i+1))
			}
			for _, m := range sim.Mismatches {
				t.Error(m)
			}
		})
	}
}

func TestLentStateIsNotUsedAfterTheSnapshotChanges(t *testing.T) {
	ctx := context.Background()
	snap := NewSnapshot()
	addNode("a", "z1")(t, snap)
	addNode("b", "z2")(t, snap)
	sim, err := New(ctx, snap, Options{})
	if err != nil {
		t.Fatal(err)
	}
	p := test.Pod("spread").Labels("app", "web").Spread(v1.LabelTopologyZone, 1, v1.DoNotSchedule, "app", "web").Obj()
	state, _, _ := sim.PreFilter(ctx, p)
	if err := snap.AddPod("a", labelled("web", "app", "web")); err != nil {
		t.Fatal(err)
	}
	// the lent state no longer counts what is on a; Filter must see the pod there (skew 2 > 1 on a)
	if st := sim.Filter(ctx, state, p, "a"); st.IsSuccess() {
		t.Fatal("a state lent before the snapshot changed was used as it was")
	}
	if sim.Stale != 1 {
		t.Fatalf("Stale = %d, want 1", sim.Stale)
	}
}

func TestFromScratchNeverLends(t *testing.T) {
	ctx := context.Background()
	snap := NewSnapshot()
	addNode("a", "z1")(t, snap)
	sim, err := New(ctx, snap, Options{FromScratch: true})
	if err != nil {
		t.Fatal(err)
	}
	state, _, _ := sim.PreFilter(ctx, probes()[0])
	if _, err := state.Read(generationKey); err == nil {
		t.Fatal("FromScratch lent a cached state")
	}
}
