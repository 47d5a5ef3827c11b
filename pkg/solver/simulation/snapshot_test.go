/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package simulation

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"

	"github.com/stevedore-dev/stevedore/pkg/test"
)

// view is what a trial must leave as it found it: each node's labels and pods (a removal undone puts the pod back
// last, so they are compared by name), the claims in use and the nodes with affinity pods.
func view(s *Snapshot) map[string]any {
	out := map[string]any{}
	for name, ni := range s.nodes {
		var pods []string
		for _, pi := range ni.GetPods() {
			pods = append(pods, pi.GetPod().Name)
		}
		slices.Sort(pods)
		out[name] = map[string]any{"labels": ni.Node().Labels, "pods": pods}
	}
	out["pvcs"] = s.pvcRefs
	var withAffinity []string
	s.refreshLists()
	for _, ni := range s.withAffinity {
		withAffinity = append(withAffinity, ni.Node().Name)
	}
	slices.Sort(withAffinity)
	out["withAffinity"] = withAffinity
	return out
}

func TestRollbackUndoesATrial(t *testing.T) {
	withClaim := labelled("with-claim", "app", "db")
	withClaim.Spec.Volumes = []v1.Volume{{Name: "data", VolumeSource: v1.VolumeSource{
		PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}}}
	affine := labelled("affine", "app", "web")
	affine.Spec.Affinity = &v1.Affinity{PodAffinity: &v1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []v1.PodAffinityTerm{
		{TopologyKey: v1.LabelHostname}}}}
	tests := []struct {
		name  string
		trial func(t *testing.T, s *Snapshot)
	}{
		{name: "a node relabelled and pods added", trial: func(t *testing.T, s *Snapshot) {
			must(t, s.SetNode(test.Node("a").Labels("tier", "b").Obj()))
			must(t, s.AddPod("a", withClaim))
			must(t, s.AddPod("a", affine))
			must(t, s.AddPod("b", labelled("d1", "app", "ds")))
		}},
		{name: "a pod removed and the node relabelled twice", trial: func(t *testing.T, s *Snapshot) {
			must(t, s.RemovePod("a", s.nodes["a"].GetPods()[0].GetPod()))
			must(t, s.SetNode(test.Node("a").Labels("tier", "b").Obj()))
			must(t, s.SetNode(test.Node("a").Labels("tier", "c").Obj()))
		}},
		{name: "a nested trial rolled back inside one that is kept going", trial: func(t *testing.T, s *Snapshot) {
			must(t, s.AddPod("b", affine))
			s.Suspend()
			must(t, s.AddPod("b", withClaim))
			must(t, s.SetNode(test.Node("b").Labels("tier", "z").Obj()))
			s.Rollback()
			must(t, s.AddPod("a", labelled("d2", "app", "ds")))
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := NewSnapshot()
			s.AddNode(test.Node("a").Labels("tier", "a").Obj(), labelled("web1", "app", "web"), labelled("web2", "app", "web"))
			s.AddNode(test.Node("b").Labels("tier", "a").Obj())
			before := view(s)
			s.Suspend()
			tc.trial(t, s)
			s.Rollback()
			if s.Suspended() {
				t.Error("the snapshot is still suspended after Rollback")
			}
			if diff := cmp.Diff(before, view(s)); diff != "" {
				t.Errorf("snapshot after the trial's rollback (-before +after):\n%s", diff)
			}
		})
	}
}

func TestRollbackRefusesATrialThatAddedANode(t *testing.T) {
	s := NewSnapshot()
	s.Suspend()
	s.AddNode(test.Node("new").Obj())
	defer func() {
		if recover() == nil {
			t.Error("Rollback undid a trial that added a node, which its log cannot")
		}
	}()
	s.Rollback()
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
