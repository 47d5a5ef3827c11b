/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package nodeclaim_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/nodeclaim"
)

func TestNodeLabelsTakeTheLaunchFromTheStatus(t *testing.T) {
	cases := []struct {
		name   string
		claim  stevedorev1.NodeClaim
		want   map[string]string
		absent []string
	}{{
		name: "launched: zone, its ID, capacity type and type from the status",
		claim: stevedorev1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{stevedorev1.LabelNodePool: "default"}},
			Status: stevedorev1.NodeClaimStatus{Zone: "us-east-1b", ZoneID: "use1-az2", CapacityType: "spot", InstanceType: "m5.large"}},
		want: map[string]string{corev1.LabelTopologyZone: "us-east-1b", stevedorev1.LabelZoneID: "use1-az2",
			stevedorev1.LabelCapacityType: "spot", corev1.LabelInstanceTypeStable: "m5.large", stevedorev1.LabelNodePool: "default",
			corev1.LabelTopologyRegion: "us-east-1"},
	}, {
		name: "a zone ID on the NodeClaim's labels (launched by an earlier release) is kept",
		claim: stevedorev1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{stevedorev1.LabelZoneID: "use1-az4"}},
			Status: stevedorev1.NodeClaimStatus{Zone: "us-east-1c"}},
		want: map[string]string{corev1.LabelTopologyZone: "us-east-1c", stevedorev1.LabelZoneID: "use1-az4"},
	}, {
		name: "not launched: the zone its requirements pin, no zone ID",
		claim: stevedorev1.NodeClaim{Spec: stevedorev1.NodeClaimSpec{Requirements: []stevedorev1.NodeSelectorRequirementWithMinValues{
			{Key: corev1.LabelTopologyZone, Operator: "In", Values: []string{"us-east-1a"}}}}},
		want:   map[string]string{corev1.LabelTopologyZone: "us-east-1a"},
		absent: []string{stevedorev1.LabelZoneID, stevedorev1.LabelCapacityType},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := nodeclaim.NodeLabels(&tc.claim, nil, "us-east-1")
			for k, v := range tc.want {
				if got[k] != v {
					t.Errorf("label %s = %q, want %q", k, got[k], v)
				}
			}
			for _, k := range tc.absent {
				if v, ok := got[k]; ok {
					t.Errorf("label %s = %q, want none", k, v)
				}
			}
		})
	}
}
