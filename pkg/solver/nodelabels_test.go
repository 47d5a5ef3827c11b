/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package solver

import (
	"maps"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/stevedore-dev/stevedore/pkg/cloud"
	"github.com/stevedore-dev/stevedore/pkg/cloud/catalog"
	"github.com/stevedore-dev/stevedore/pkg/scheduling"
	"github.com/stevedore-dev/stevedore/pkg/test"
)

func TestLabelSetsAreComputedOncePerOptionAndRegion(t *testing.T) {
	np := test.NodePool("default").Require(corev1.LabelInstanceTypeStable, corev1.NodeSelectorOpIn, "m5.large", "c5.large").Obj()
	np.Normalize()
	opt, err := NewNodePoolOption(np, testInstanceTypes(t), nil, nil, "us-east-1")
	if err != nil {
		t.Fatal(err)
	}
	first := opt.labelSets("us-east-1")
	copied := opt // solves get the options by value: the copies share the cache
	if again := copied.labelSets("us-east-1"); again != first {
		t.Errorf("a second call computed the label sets again")
	}
	fresh := (&NodePoolOption{NodePool: opt.NodePool, Requirements: opt.Requirements, InstanceTypes: opt.InstanceTypes}).labelSets("us-east-1")
	if len(fresh.phantom) != len(first.phantom) || len(fresh.possible) != len(first.possible) {
		t.Errorf("cached %d phantom and %d possible label sets, computed %d and %d", len(first.phantom), len(first.possible),
			len(fresh.phantom), len(fresh.possible))
	}
	for i := range fresh.possible {
		if fresh.possible[i].key != first.possible[i].key {
			t.Errorf("possible label set %d: cached %s, computed %s", i, first.possible[i].key, fresh.possible[i].key)
		}
	}
	other := opt.labelSets("eu-west-1")
	if other == first || other.region != "eu-west-1" {
		t.Fatalf("another region got the cached label sets")
	}
	for _, kl := range other.phantom {
		if got := kl.labels[corev1.LabelTopologyRegion]; got != "eu-west-1" {
			t.Errorf("phantom labels in eu-west-1 have region %q", got)
		}
	}
	if len(first.phantom) == 0 || len(first.possible) <= len(first.phantom) {
		t.Errorf("%d phantom and %d possible label sets: want some, and more possible ones (they carry the type's labels)",
			len(first.phantom), len(first.possible))
	}
}

// testInstanceTypes builds the embedded catalog's instance types with the default overhead.
func testInstanceTypes(t *testing.T) []*cloud.InstanceType {
	t.Helper()
	var its []*cloud.InstanceType
	for _, ct := range catalog.Default().InstanceTypes {
		it, err := cloud.NewInstanceType(ct, cloud.DefaultOverheadModel(), nil)
		if err != nil {
			t.Fatal(err)
		}
		its = append(its, it)
	}
	return its
}

// sameReqLabels must agree with rendering both nodes' labels and comparing them, for nodes alike in everything
// else.
func TestSameReqLabelsAgreesWithTheRenderedLabels(t *testing.T) {
	np := test.NodePool("default").
		Require("team", corev1.NodeSelectorOpIn, "a", "b").
		Require(corev1.LabelTopologyZone, corev1.NodeSelectorOpIn, "us-east-1a", "us-east-1b").
		Require("node-restriction.kubernetes.io/tier", corev1.NodeSelectorOpIn, "x", "y").Obj()
	np.Normalize()
	opt, err := NewNodePoolOption(np, testInstanceTypes(t), nil, nil, "us-east-1")
	if err != nil {
		t.Fatal(err)
	}
	in := func(k string, vs ...string) *scheduling.Requirement {
		return scheduling.MustRequirement(k, corev1.NodeSelectorOpIn, vs...)
	}
	with := func(rs ...*scheduling.Requirement) scheduling.Requirements {
		out := opt.Requirements.Clone()
		for _, r := range rs {
			out.Add(r)
		}
		return out
	}
	cases := []struct {
		name string
		a, b scheduling.Requirements
	}{
		{"the NodePool's own", with(), with()},
		{"one narrowed to a value", with(), with(in("team", "a"))},
		{"narrowed alike", with(in("team", "a")), with(in("team", "a"))},
		{"narrowed to other values", with(in("team", "a")), with(in("team", "b"))},
		{"a key the NodePool lacks", with(), with(in("app", "web"))},
		{"a restricted key the NodePool leaves open", with(), with(in("node-restriction.kubernetes.io/tier", "x"))},
		{"the zone, an offering key", with(), with(in(corev1.LabelTopologyZone, "us-east-1a"))},
		{"an instance type key", with(), with(in(corev1.LabelInstanceTypeStable, "m5.large"))},
		{"narrowed on one side only, the other way", with(in("team", "b")), with()},
	}
	common := map[string]string{corev1.LabelArchStable: "amd64"}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			la := NodeLabels(np, opt.Requirements, tc.a, common, "us-east-1a", "use1-az1", "spot", "us-east-1")
			lb := NodeLabels(np, opt.Requirements, tc.b, common, "us-east-1a", "use1-az1", "spot", "us-east-1")
			want := maps.Equal(la, lb)
			if got := sameReqLabels(opt.Requirements, tc.a, tc.b); got != want {
				t.Errorf("sameReqLabels %v, the rendered labels equal: %v (%v / %v)", got, want, la, lb)
			}
		})
	}
}
