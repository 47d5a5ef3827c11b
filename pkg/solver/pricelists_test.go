/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package solver

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/stevedore-dev/stevedore/pkg/cloud"
	"github.com/stevedore-dev/stevedore/pkg/scheduling"
)

func TestPriceListsShareOnlyEqualInputs(t *testing.T) {
	its := testInstanceTypes(t)
	a, b := its[:10], append([]*cloud.InstanceType(nil), its[:10]...) // equal content, different arrays
	none := scheduling.Requirements{}
	zoneA := scheduling.NewRequirements(scheduling.MustRequirement(corev1.LabelTopologyZone, corev1.NodeSelectorOpIn, "us-east-1a"))
	var pl priceLists
	first := pl.get(a, none, "", "")
	if len(first) == 0 || cap(first) != len(first) {
		t.Fatalf("list of %d with capacity %d: want some, with no room for an append to write into", len(first), cap(first))
	}
	if got := pl.get(b, none, "", ""); &got[0] != &first[0] {
		t.Error("equal candidates, pins and requirements must share one list")
	}
	for name, got := range map[string][]pricedType{
		"other candidates":   pl.get(its[:9], none, "", ""),
		"a pinned zone":      pl.get(a, none, "us-east-1a", ""),
		"a pinned type":      pl.get(a, none, "", "spot"),
		"a zone requirement": pl.get(a, zoneA, "", ""),
	} {
		if len(got) > 0 && &got[0] == &first[0] {
			t.Errorf("%s got the list of the unpinned candidates", name)
		}
	}
	for i := 1; i < len(first); i++ {
		if first[i].price < first[i-1].price {
			t.Fatalf("list not cheapest first at %d", i)
		}
	}
	if got := pl.intern(b); &got[0] != &pl.intern(a)[0] || cap(got) != len(got) {
		t.Error("equal candidate lists must be interned as one, with no spare capacity")
	}
}
