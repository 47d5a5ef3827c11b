/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package scheduling

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func req(key string, op corev1.NodeSelectorOperator, values ...string) *Requirement {
	return MustRequirement(key, op, values...)
}

func TestRequirementIntersection(t *testing.T) {
	cases := []struct {
		name      string
		a, b      *Requirement
		wantEmpty bool
		has       []string
		hasNot    []string
	}{
		{"In and In overlap", req("k", "In", "a", "b"), req("k", "In", "b", "c"), false, []string{"b"}, []string{"a", "c"}},
		{"In and In disjoint", req("k", "In", "a"), req("k", "In", "b"), true, nil, []string{"a", "b"}},
		{"In and NotIn", req("k", "In", "a", "b"), req("k", "NotIn", "a"), false, []string{"b"}, []string{"a"}},
		{"NotIn and NotIn", req("k", "NotIn", "a"), req("k", "NotIn", "b"), false, []string{"c"}, []string{"a", "b"}},
		{"Exists and In", req("k", "Exists"), req("k", "In", "x"), false, []string{"x"}, []string{"y"}},
		{"DoesNotExist and In", req("k", "DoesNotExist"), req("k", "In", "x"), true, nil, []string{"x"}},
		{"Gt and In", req("gen", "Gt", "5"), req("gen", "In", "4", "5", "6", "7"), false, []string{"6", "7"}, []string{"4", "5"}},
		{"Gt and Lt empty range", req("gen", "Gt", "5"), req("gen", "Lt", "6"), true, nil, []string{"5", "6"}},
		{"Gt and Lt range", req("gen", "Gt", "5"), req("gen", "Lt", "8"), false, []string{"6", "7"}, []string{"5", "8", "x"}},
		{"Gt and a word", req("gen", "Gt", "3"), req("gen", "In", "x"), true, nil, []string{"x"}},
		{"Gt the largest integer", req("gen", "Gt", "9223372036854775807"), req("gen", "Exists"), true, nil, []string{"9223372036854775807", "0"}},
		{"Lt the smallest integer", req("gen", "Lt", "-9223372036854775808"), req("gen", "Exists"), true, nil, []string{"-9223372036854775808", "0"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for _, got := range []*Requirement{tc.a.Intersection(tc.b), tc.b.Intersection(tc.a)} {
				if got.IsEmpty() != tc.wantEmpty {
					t.Errorf("IsEmpty = %v, want %v (%s)", got.IsEmpty(), tc.wantEmpty, got)
				}
				for _, v := range tc.has {
					if !got.Has(v) {
						t.Errorf("%s should allow %q", got, v)
					}
				}
				for _, v := range tc.hasNot {
					if got.Has(v) {
						t.Errorf("%s should not allow %q", got, v)
					}
				}
			}
		})
	}
}

func TestRequirementsCompatibleWithANode(t *testing.T) {
	node := NewRequirements(
		req("kubernetes.io/arch", "In", "arm64"),
		req("topology.kubernetes.io/zone", "In", "us-east-1a", "us-east-1b"),
		req("karpenter.k8s.aws/instance-generation", "In", "7"),
	)
	cases := []struct {
		name    string
		pod     Requirements
		wantErr bool
	}{
		{"nothing required", NewRequirements(), false},
		{"same arch", NewRequirements(req("kubernetes.io/arch", "In", "arm64")), false},
		{"other arch", NewRequirements(req("kubernetes.io/arch", "In", "amd64")), true},
		{"one of the zones", NewRequirements(req("topology.kubernetes.io/zone", "In", "us-east-1b", "us-east-1c")), false},
		{"generation above 5", NewRequirements(req("karpenter.k8s.aws/instance-generation", "Gt", "5")), false},
		{"generation above 7", NewRequirements(req("karpenter.k8s.aws/instance-generation", "Gt", "7")), true},
		{"label the node lacks", NewRequirements(req("team", "In", "a")), true},
		{"NotIn a label the node lacks", NewRequirements(req("team", "NotIn", "a")), false},
		{"DoesNotExist on a label the node lacks", NewRequirements(req("gpu", "DoesNotExist")), false},
		{"Exists on a label the node lacks", NewRequirements(req("gpu", "Exists")), true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.pod.Compatible(node, nil)
			if (err != nil) != tc.wantErr {
				t.Fatalf("Compatible = %v, want error %v", err, tc.wantErr)
			}
		})
	}
	if err := NewRequirements(req("team", "In", "a")).Compatible(node, func(k string) bool { return k == "team" }); err != nil {
		t.Errorf("a label the node will still define must be compatible: %v", err)
	}
}

func TestRequirementsAddIntersectsAndLabelsPinsSingleValues(t *testing.T) {
	rs := NewRequirements(req("zone", "In", "a", "b"), req("arch", "In", "arm64"))
	rs.Add(req("zone", "NotIn", "a"))
	labels := rs.Labels()
	if labels["zone"] != "b" || labels["arch"] != "arm64" || len(labels) != 2 {
		t.Fatalf("Labels = %v", labels)
	}
	if err := rs.Intersects(NewRequirements(req("zone", "In", "a"))); err == nil {
		t.Error("zone b and zone a must not intersect")
	}
	if err := rs.Intersects(NewRequirements(req("other", "In", "x"))); err != nil {
		t.Errorf("disjoint keys intersect: %v", err)
	}
	if _, err := NewRequirement("k", "Gt", "x"); err == nil {
		t.Error("Gt with a word must be an error")
	}
	if _, err := NewRequirement("k", "Like", "x"); err == nil {
		t.Error("an unknown operator must be an error")
	}
}

var fuzzOperators = []corev1.NodeSelectorOperator{corev1.NodeSelectorOpIn, corev1.NodeSelectorOpNotIn, corev1.NodeSelectorOpExists,
	corev1.NodeSelectorOpDoesNotExist, corev1.NodeSelectorOpGt, corev1.NodeSelectorOpLt, "Like"}

// FuzzRequirements parses two requirements of one key from operator bytes and comma-separated values, as a
// NodePool or a pod would give them, and checks the set algebra on probe values: parsing never panics; an
// intersection allows exactly what both allow; an empty one allows nothing and does not overlap; a requirement
// rendered as a node selector and parsed again allows the same values.
func FuzzRequirements(f *testing.F) {
	f.Add(byte(0), "a,b", byte(1), "b", "b")
	f.Add(byte(4), "3", byte(5), "10", "7")
	f.Add(byte(4), "9223372036854775807", byte(2), "", "1")
	f.Add(byte(5), "-9223372036854775808", byte(0), "1,2", "2")
	f.Add(byte(2), "", byte(3), "", "x")
	f.Add(byte(4), "x", byte(6), "1", "")
	f.Fuzz(func(t *testing.T, opA byte, valuesA string, opB byte, valuesB string, probe string) {
		split := func(s string) []string {
			if s == "" {
				return nil
			}
			return strings.Split(s, ",")
		}
		a, errA := NewRequirement("k", fuzzOperators[int(opA)%len(fuzzOperators)], split(valuesA)...)
		b, errB := NewRequirement("k", fuzzOperators[int(opB)%len(fuzzOperators)], split(valuesB)...)
		if errA != nil || errB != nil {
			return
		}
		probes := append(append([]string{probe, "", "0", "1", "-1", "7", "9223372036854775807", "-9223372036854775808"},
			split(valuesA)...), split(valuesB)...)
		in := a.Intersection(b)
		for _, p := range probes {
			if got, want := in.Has(p), a.Has(p) && b.Has(p); got != want {
				t.Fatalf("(%s) ∩ (%s) has %q = %v, want %v", a, b, p, got, want)
			}
			if in.IsEmpty() && in.Has(p) {
				t.Fatalf("(%s) ∩ (%s) is empty but has %q", a, b, p)
			}
		}
		if a.overlaps(b) == in.IsEmpty() {
			t.Fatalf("(%s) overlaps (%s) = %v but their intersection empty = %v", a, b, a.overlaps(b), in.IsEmpty())
		}
		back, err := FromNodeSelectorRequirements(a.NodeSelectorRequirement())
		if err != nil {
			t.Fatalf("(%s) rendered as a node selector does not parse: %v", a, err)
		}
		for _, p := range probes {
			if back.Get("k").Has(p) != a.Has(p) {
				t.Fatalf("(%s) rendered and parsed again as (%s) disagrees on %q", a, back.Get("k"), p)
			}
		}
	})
}

func TestKeyTellsRequirementSetsApart(t *testing.T) {
	mk := func(rs ...*Requirement) Requirements { return NewRequirements(rs...) }
	gt3 := MustRequirement("n", corev1.NodeSelectorOpGt, "3")
	cases := []struct {
		name string
		a, b Requirements
		same bool
	}{
		{"equal sets built in another order", mk(MustRequirement("a", corev1.NodeSelectorOpIn, "x", "y"), MustRequirement("b", corev1.NodeSelectorOpExists)),
			mk(MustRequirement("b", corev1.NodeSelectorOpExists), MustRequirement("a", corev1.NodeSelectorOpIn, "y", "x")), true},
		{"In and NotIn of the same values", mk(MustRequirement("a", corev1.NodeSelectorOpIn, "x")), mk(MustRequirement("a", corev1.NodeSelectorOpNotIn, "x")), false},
		{"Exists and DoesNotExist", mk(MustRequirement("a", corev1.NodeSelectorOpExists)), mk(MustRequirement("a", corev1.NodeSelectorOpDoesNotExist)), false},
		{"ranges with the same lower bound", mk(gt3, MustRequirement("n", corev1.NodeSelectorOpLt, "10")), mk(gt3, MustRequirement("n", corev1.NodeSelectorOpLt, "5")), false},
		{"a bound and none", mk(gt3), mk(MustRequirement("n", corev1.NodeSelectorOpExists)), false},
	}
	for _, tc := range cases {
		if got := tc.a.Key() == tc.b.Key(); got != tc.same {
			t.Errorf("%s: keys %q and %q equal = %v, want %v", tc.name, tc.a.Key(), tc.b.Key(), got, tc.same)
		}
	}
}
