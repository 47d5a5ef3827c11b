/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package simulation

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/stevedore-dev/stevedore/pkg/test"
)

// TestPodInfosAreMadeOncePerPodObject: a pod object's PodInfo is made once while snapshots keep asking for it; an
// updated pod (a new object) gets its own; one no snapshot asked for since the Rotate before last is dropped.
func TestPodInfosAreMadeOncePerPodObject(t *testing.T) {
	a := test.Pod("a").Node("n").Req("cpu", "1").Obj()
	updated := a.DeepCopy()
	b := test.Pod("b").Node("n").Req("cpu", "2").Obj()
	infos := NewPodInfos()
	first := infos.Get(a)
	infos.Rotate()
	if infos.Get(a) != first {
		t.Error("the same pod object got a second PodInfo after a Rotate")
	}
	if infos.Get(updated) == first {
		t.Error("an updated pod object shares the old object's PodInfo")
	}
	infos.Get(b)
	infos.Rotate()
	infos.Rotate() // nothing asked for in between: every PodInfo goes
	if n := infos.Len(); n != 0 {
		t.Errorf("%d PodInfos kept after two Rotates with nothing asked for, want 0", n)
	}
	if infos.Get(a) == first {
		t.Error("a dropped PodInfo came back")
	}
}

// TestASnapshotWithSharedPodInfosCountsTheSame: a node's requested resources and pods are the same whether the
// snapshot makes its own PodInfos or shares them with another snapshot.
func TestASnapshotWithSharedPodInfosCountsTheSame(t *testing.T) {
	node := test.Node("n").Allocatable("cpu", "8", "memory", "32Gi", "pods", "110").Obj()
	objs := []*corev1.Pod{test.Pod("a").Node("n").Req("cpu", "1").Obj(), test.Pod("b").Node("n").Req("cpu", "500m").Obj(),
		test.Pod("c").Node("n").Req("cpu", "2", "memory", "1Gi").Obj()}
	infos := NewPodInfos()
	own, shared1, shared2 := NewSnapshot(), NewSnapshot(), NewSnapshot()
	shared1.UsePodInfos(infos)
	shared2.UsePodInfos(infos)
	for _, s := range []*Snapshot{own, shared1, shared2} {
		s.AddNode(node, objs...)
	}
	want := own.nodes["n"].Requested
	for _, s := range []*Snapshot{shared1, shared2} {
		if diff := cmp.Diff(want, s.nodes["n"].Requested); diff != "" {
			t.Errorf("requested (-own +shared):\n%s", diff)
		}
		if len(s.nodes["n"].Pods) != len(objs) {
			t.Errorf("%d pods on the node, want %d", len(s.nodes["n"].Pods), len(objs))
		}
	}
	if shared1.nodes["n"].Pods[0] != shared2.nodes["n"].Pods[0] {
		t.Error("two snapshots sharing PodInfos made two of the same pod")
	}
}
