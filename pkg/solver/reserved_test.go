/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package solver

import (
	"context"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/cloud"
	"github.com/stevedore-dev/stevedore/pkg/solver/simulation"
	"github.com/stevedore-dev/stevedore/pkg/test"
)

// withReservation returns the catalog's m5.large and c5.large, m5.large with a reserved offering in us-east-1a
// that takes capacity more instances.
func withReservation(t *testing.T, capacity int) []*cloud.InstanceType {
	t.Helper()
	var out []*cloud.InstanceType
	for _, it := range testInstanceTypes(t) {
		if it.Name != "m5.large" && it.Name != "c5.large" {
			continue
		}
		if it.Name == "m5.large" {
			it.Offerings = append(it.Offerings, cloud.Offering{Zone: "us-east-1a", CapacityType: stevedorev1.CapacityTypeReserved,
				Price: 0.096 / 1e7, Available: true, ReservationID: "cr-0123", ReservationType: stevedorev1.ReservationTypeDefault,
				ReservationCapacity: capacity})
			it.AddCapacityType(stevedorev1.CapacityTypeReserved)
		}
		out = append(out, it)
	}
	return out
}

// TestReservedCapacityIsPlannedFirstUpToItsRoom: three pods that need a node each, in a NodePool that allows
// reserved and on-demand capacity, get the reservation's two slots and one on-demand node; a NodePool that does not
// name reserved capacity never plans it.
func TestReservedCapacityIsPlannedFirstUpToItsRoom(t *testing.T) {
	cases := []struct {
		name         string
		capacityType []string // the NodePool's capacity-type requirement (nil: none)
		wantReserved int
	}{
		{"a NodePool that allows reserved capacity fills the reservation, then falls back", []string{stevedorev1.CapacityTypeReserved, stevedorev1.CapacityTypeOnDemand}, 2},
		{"a NodePool without a capacity-type requirement keeps off reservations", nil, 0},
		{"a NodePool of on-demand only keeps off reservations", []string{stevedorev1.CapacityTypeOnDemand}, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			npw := test.NodePool("pool")
			if tc.capacityType != nil {
				npw.Require(stevedorev1.LabelCapacityType, corev1.NodeSelectorOpIn, tc.capacityType...)
			}
			np := npw.Obj()
			np.Normalize()
			opt, err := NewNodePoolOption(np, withReservation(t, 2), nil, nil, "us-east-1")
			if err != nil {
				t.Fatal(err)
			}
			plan := solveApart(t, opt, "db", 3)
			reserved := 0
			for _, n := range plan.NewNodes {
				if n.Offering.ReservationID != "" {
					reserved++
					if n.InstanceType.Name != "m5.large" || n.Offering.Zone != "us-east-1a" {
						t.Errorf("reserved node %s in %s, want the reservation's m5.large in us-east-1a", n.InstanceType.Name, n.Offering.Zone)
					}
				} else if n.Offering.CapacityType == stevedorev1.CapacityTypeReserved {
					t.Errorf("a node priced at a reserved offering without a reservation")
				}
			}
			if reserved != tc.wantReserved {
				t.Errorf("%d nodes planned in the reservation, want %d", reserved, tc.wantReserved)
			}
		})
	}
}

// solveApart plans n pods of 1 CPU and 2Gi that need a node each (hostname anti-affinity among them) on the
// NodePool, and fails unless they get n nodes.
func solveApart(t *testing.T, opt NodePoolOption, app string, n int) *Plan {
	t.Helper()
	var pods []*corev1.Pod
	for i := 0; i < n; i++ {
		p := testPod(fmt.Sprintf("%s-%d", app, i), "1", "2Gi")
		p.Labels = map[string]string{"app": app}
		p.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
			LabelSelector: &metav1.LabelSelector{MatchLabels: p.Labels}, TopologyKey: corev1.LabelHostname}}}}
		pods = append(pods, p)
	}
	sim, err := simulation.New(context.Background(), simulation.NewSnapshot(), simulation.Options{})
	if err != nil {
		t.Fatal(err)
	}
	plan, err := NewSolver(sim).Solve(context.Background(), Input{Pods: pods, NodePools: []NodePoolOption{opt}, Snapshot: simulation.NewSnapshot(), Region: "us-east-1"})
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.NewNodes) != n || len(plan.Unschedulable) > 0 {
		t.Fatalf("%d nodes, unschedulable %v; want %d nodes", len(plan.NewNodes), plan.Unschedulable, n)
	}
	return plan
}
