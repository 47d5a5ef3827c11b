/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package provision

import (
	"context"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	kubefake "k8s.io/client-go/kubernetes/fake"

	"github.com/stevedore-dev/stevedore/pkg/apis/config"
	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/cloud/fake"
	stevedorefake "github.com/stevedore-dev/stevedore/pkg/generated/clientset/versioned/fake"
	"github.com/stevedore-dev/stevedore/pkg/solver/simulation"
	"github.com/stevedore-dev/stevedore/pkg/test"
)

func TestPlanStaticNodes(t *testing.T) {
	static := func(replicas int64, limitNodes string) *stevedorev1.NodePool {
		w := test.NodePool("static")
		w.Spec.Replicas = &replicas
		if limitNodes != "" {
			w.Limits("nodes", limitNodes)
		}
		return w.Obj()
	}
	existing := test.NodeClaim("static-a", "static").Launched("a", "m5.large", "us-east-1a", "on-demand", "0.096").Obj()
	existing2 := test.NodeClaim("static-a2", "static").Launched("a2", "m5.large", "us-east-1a", "on-demand", "0.096").Obj()
	inB := test.NodeClaim("static-b", "static").Launched("b", "m5.large", "us-east-1b", "on-demand", "0.096").Obj()
	cases := []struct {
		name      string
		pool      *stevedorev1.NodePool
		objs      []runtime.Object
		n         int
		leaving   []string
		wantZone  map[string]int // nil: only count wantNodes
		wantNodes int
		wantErr   string
	}{
		{name: "four nodes spread over both zones, empty, cheapest type", pool: static(4, ""), n: 4,
			wantZone: map[string]int{"us-east-1a": 2, "us-east-1b": 2}},
		{name: "limits.nodes holds: one left of two", pool: static(3, "2"), objs: []runtime.Object{existing}, n: 2,
			wantNodes: 1, wantErr: "1 of 2 nodes of NodePool static cannot be planned"},
		{name: "nothing asked", pool: static(3, ""), n: 0, wantZone: map[string]int{}},
		{name: "two nodes in us-east-1a stay: the new ones go to us-east-1b", pool: static(4, ""), objs: []runtime.Object{existing, existing2},
			n: 2, wantZone: map[string]int{"us-east-1b": 2}},
		{name: "replacing the node in us-east-1a: its replacement goes back there", pool: static(3, ""),
			objs: []runtime.Object{existing, inB}, n: 1, leaving: []string{"a"}, wantZone: map[string]int{"us-east-1a": 1}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			objs := append([]runtime.Object{tc.pool}, tc.objs...)
			l, err := test.NewListers(objs...)
			if err != nil {
				t.Fatal(err)
			}
			cp, err := fake.New([]string{"us-east-1a", "us-east-1b"}, "m5.large", "m5.xlarge")
			if err != nil {
				t.Fatal(err)
			}
			sim, err := simulation.New(ctx, simulation.NewSnapshot(), simulation.Options{})
			if err != nil {
				t.Fatal(err)
			}
			p := New(Options{Args: config.ProvisionerArgs{Region: testRegion}, Kube: kubefake.NewClientset(), Stevedore: stevedorefake.NewSimpleClientset(),
				Nodes: l.Nodes, Pods: l.Pods, DaemonSets: l.DaemonSets, NodeClaims: l.NodeClaims, NodePools: l.NodePools, Cloud: cp,
				Simulator: sim})
			nodes, err := p.PlanStaticNodes(ctx, tc.pool, tc.n, tc.leaving...)
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("error %v, want %q", err, tc.wantErr)
			}
			zones := map[string]int{}
			for _, pn := range nodes {
				zones[pn.Offering.Zone]++
				if len(pn.Pods) != 0 || pn.NodePool.Name != "static" || pn.InstanceType.Name != "m5.large" {
					t.Errorf("planned %s in %s with %d pods, want an empty m5.large of NodePool static", pn.InstanceType.Name, pn.NodePool.Name, len(pn.Pods))
				}
			}
			if tc.wantZone == nil {
				if len(nodes) != tc.wantNodes {
					t.Errorf("%d nodes planned, want %d", len(nodes), tc.wantNodes)
				}
				return
			}
			if len(zones) != len(tc.wantZone) {
				t.Fatalf("nodes by zone %v, want %v", zones, tc.wantZone)
			}
			for z, n := range tc.wantZone {
				if zones[z] != n {
					t.Errorf("nodes by zone %v, want %v", zones, tc.wantZone)
				}
			}
		})
	}
}
