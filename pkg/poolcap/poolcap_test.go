/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package poolcap

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/test"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		value string
		want  int
		err   bool
	}{
		{"2", 2, false},
		{" 10 ", 10, false},
		{"1", 1, false},
		{"0", 0, true},
		{"-1", 0, true},
		{"20%", 0, true},
		{"two", 0, true},
		{"", 0, true},
	} {
		got, err := Parse(tc.value)
		if (err != nil) != tc.err || got != tc.want {
			t.Errorf("Parse(%q) = %d, %v; want %d, error %t", tc.value, got, err, tc.want, tc.err)
		}
		if err != nil && !strings.Contains(err.Error(), Annotation) {
			t.Errorf("Parse(%q): the error %q does not name the annotation", tc.value, err)
		}
	}
}

func TestOf(t *testing.T) {
	if _, ok, err := Of(test.Pod("none").Obj()); ok || err != nil {
		t.Errorf("a pod without the annotation has a cap: %t, %v", ok, err)
	}
	if c, ok, err := Of(test.Pod("two").Annotations(Annotation, "2").Obj()); !ok || err != nil || c != 2 {
		t.Errorf("Of = %d, %t, %v; want 2", c, ok, err)
	}
	bad := test.Pod("bad").Annotations(Annotation, "lots").Obj()
	if _, ok, err := Of(bad); ok || err == nil {
		t.Errorf("an invalid value is a cap: %t, %v", ok, err)
	}
	if !Has(bad) {
		t.Error("Has is false for a pod carrying the annotation")
	}
}

func TestPoolOf(t *testing.T) {
	typed := func(w *test.NodeWrapper) *test.NodeWrapper {
		return w.Labels(corev1.LabelInstanceTypeStable, "m5.large", corev1.LabelTopologyZone, "us-east-1a")
	}
	for _, tc := range []struct {
		name string
		node *corev1.Node
		pool string
		kind Kind
	}{
		{"spot", typed(test.Node("n")).Labels(stevedorev1.LabelCapacityType, "spot").Obj(), "m5.large/us-east-1a", Spot},
		{"on-demand", typed(test.Node("n")).Labels(stevedorev1.LabelCapacityType, "on-demand").Obj(), "", NotSpot},
		{"reserved", typed(test.Node("n")).Labels(stevedorev1.LabelCapacityType, "reserved").Obj(), "", NotSpot},
		{"managed node group spot", typed(test.Node("n")).Labels("eks.amazonaws.com/capacityType", "SPOT").Obj(), "m5.large/us-east-1a", Spot},
		{"managed node group on-demand", typed(test.Node("n")).Labels("eks.amazonaws.com/capacityType", "ON_DEMAND").Obj(), "", NotSpot},
		{"spot, type not decided", test.Node("n").Labels(stevedorev1.LabelCapacityType, "spot", corev1.LabelTopologyZone, "us-east-1a").Obj(), "", Undecided},
		{"spot, zone not decided", test.Node("n").Labels(stevedorev1.LabelCapacityType, "spot", corev1.LabelInstanceTypeStable, "m5.large").Obj(), "", Undecided},
		{"a NodePool's node, capacity type not decided", typed(test.Node("n")).Labels(stevedorev1.LabelNodePool, "default").Obj(), "", Undecided},
		{"unknown origin", typed(test.Node("n")).Obj(), "", NotSpot},
		{"no node", nil, "", Undecided},
	} {
		pool, kind := PoolOf(tc.node)
		if pool != tc.pool || kind != tc.kind {
			t.Errorf("%s: PoolOf = %q, %d; want %q, %d", tc.name, pool, kind, tc.pool, tc.kind)
		}
	}
}
