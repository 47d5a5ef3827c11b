/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package solver

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/stevedore-dev/stevedore/pkg/cloud"
	"github.com/stevedore-dev/stevedore/pkg/cloud/catalog"
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
