/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package scheduling

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestIsRestricted(t *testing.T) {
	for _, tc := range []struct {
		key  string
		want bool
	}{
		{"team", false},
		{"example.com/team", false},
		{"kubernetes.io/arch", false},                     // well-known
		{"node.kubernetes.io/instance-type", false},       // well-known
		{"topology.kubernetes.io/region", false},          // well-known
		{"karpenter.sh/capacity-type", false},             // well-known
		{"karpenter.k8s.aws/instance-family", false},      // well-known
		{"beta.kubernetes.io/arch", false},                // deprecated alias of a well-known key
		{"failure-domain.beta.kubernetes.io/zone", false}, // deprecated alias of a well-known key
		{"kubernetes.io/team", true},
		{"node-restriction.kubernetes.io/team", true},
		{"k8s.io/team", true},
		{"sub.k8s.io/team", true},
		{"karpenter.sh/nodepool", true},
		{"karpenter.k8s.aws/instance-gpu-name", false},                      // well-known (types with GPUs carry it)
		{"karpenter.k8s.aws/instance-cpu-sustained-clock-speed-mhz", false}, // well-known
		{"karpenter.k8s.aws/ec2nodeclass", false},                           // the EC2NodeClass's name
		{"topology.k8s.aws/zone-id", false},                                 // the zone's ID
		{"karpenter.k8s.aws/placement-group-id", true},                      // not a label Stevedore sets
		{"stevedore.dev/anything", true},
		{"notkubernetes.io/team", false},
	} {
		if got := IsRestricted(tc.key); got != tc.want {
			t.Errorf("IsRestricted(%q) = %v, want %v", tc.key, got, tc.want)
		}
	}
}

func TestDeprecatedKeysAreReadAsStableAndWrittenAlongside(t *testing.T) {
	for beta, stable := range map[string]string{
		"beta.kubernetes.io/arch": corev1.LabelArchStable, "beta.kubernetes.io/os": corev1.LabelOSStable,
		corev1.LabelInstanceType: corev1.LabelInstanceTypeStable, corev1.LabelFailureDomainBetaZone: corev1.LabelTopologyZone,
		corev1.LabelFailureDomainBetaRegion: corev1.LabelTopologyRegion, "team": "team",
	} {
		if got := StableKey(beta); got != stable {
			t.Errorf("StableKey(%q) = %q, want %q", beta, got, stable)
		}
	}
	got := WithDeprecatedAliases(map[string]string{corev1.LabelArchStable: "arm64", corev1.LabelTopologyZone: "us-east-1a", "team": "a"})
	for k, v := range map[string]string{"beta.kubernetes.io/arch": "arm64", corev1.LabelFailureDomainBetaZone: "us-east-1a", "team": "a"} {
		if got[k] != v {
			t.Errorf("%s = %q, want %q (labels %v)", k, got[k], v, got)
		}
	}
	if _, ok := got[corev1.LabelFailureDomainBetaRegion]; ok {
		t.Errorf("alias of a label the node does not have: %v", got)
	}
}

func TestPickIsTheSmallestAllowedValue(t *testing.T) {
	for _, tc := range []struct {
		op     corev1.NodeSelectorOperator
		values []string
		want   string
	}{
		{corev1.NodeSelectorOpIn, []string{"b", "a"}, "a"},
		{corev1.NodeSelectorOpExists, nil, "0"},
		{corev1.NodeSelectorOpNotIn, []string{"0", "1"}, "2"},
		{corev1.NodeSelectorOpGt, []string{"7"}, "8"},
		{corev1.NodeSelectorOpLt, []string{"3"}, "0"},
		{corev1.NodeSelectorOpLt, []string{"0"}, ""},
		{corev1.NodeSelectorOpDoesNotExist, nil, ""},
	} {
		if got := MustRequirement("k", tc.op, tc.values...).Pick(); got != tc.want {
			t.Errorf("Pick of k %s %v = %q, want %q", tc.op, tc.values, got, tc.want)
		}
	}
}
