/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package solver

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/cloud/catalog"
	"github.com/stevedore-dev/stevedore/pkg/solver/simulation"
)

func TestGangsArePlannedWholeOrNotAtAll(t *testing.T) {
	// a NodePool of m5.xlarge (4 vCPUs) capped at cpuLimit CPUs: one 3-CPU worker per node
	pool := func(cpuLimit string) runtime.Object {
		np := testPool("gpu", 0, req(corev1.LabelInstanceTypeStable, "In", "m5.xlarge"))
		np.Spec.Limits = stevedorev1.Limits{corev1.ResourceCPU: resource.MustParse(cpuLimit)}
		return np
	}
	type gang struct {
		name              string
		pods, min, placed int
	}
	cases := []struct {
		name     string
		limit    string
		gangs    []gang
		plain    int
		wantPods map[string]int // placed pods by gang ("" for the plain pods)
		// wantReason is a part of the reason every pod of a gang left out is given, by gang
		wantReason map[string]string
		// oneOf: exactly one of these gangs is planned whole and the others not at all (wantPods, wantReason unused)
		oneOf []string
	}{
		{name: "a gang that fits is planned whole", limit: "16", gangs: []gang{{name: "train", pods: 4, min: 4}},
			wantPods: map[string]int{"train": 4}},
		{name: "3 of 4: nothing of the gang is planned, the other pods are", limit: "12",
			gangs: []gang{{name: "train", pods: 4, min: 4}}, plain: 2,
			wantPods:   map[string]int{"": 2},
			wantReason: map[string]string{"train": "gang default/train needs 4 pods placed at once and only 3 can be"}},
		{name: "minMember 3 of 4 pods: 3 are planned", limit: "12", gangs: []gang{{name: "train", pods: 4, min: 3}},
			wantPods: map[string]int{"train": 3}},
		{name: "members placed already count", limit: "8", gangs: []gang{{name: "train", pods: 2, min: 4, placed: 2}},
			wantPods: map[string]int{"train": 2}},
		{name: "members placed already that are too few", limit: "8", gangs: []gang{{name: "train", pods: 2, min: 5, placed: 2}},
			wantPods:   map[string]int{},
			wantReason: map[string]string{"train": "needs 5 pods placed at once and only 4 can be"}},
		{name: "two gangs for room of one and a half: one whole, the other not at all", limit: "12",
			gangs: []gang{{name: "a", pods: 2, min: 2}, {name: "b", pods: 2, min: 2}}, oneOf: []string{"a", "b"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			objs := []runtime.Object{pool(tc.limit)}
			gangOf := map[types.UID]string{}
			for _, g := range tc.gangs {
				for _, o := range replicas(g.name, g.pods, "3", "1Gi") {
					gangOf[o.(*corev1.Pod).UID] = g.name
					objs = append(objs, o)
				}
			}
			objs = append(objs, replicas("plain", tc.plain, "100m", "128Mi")...)
			p, err := NewOfflineProblem(OfflineInput{Objects: objs, Catalog: catalog.Default(), VMMemoryOverheadPercent: 7.5})
			if err != nil {
				t.Fatal(err)
			}
			in := p.Input(100 * time.Millisecond)
			for _, g := range tc.gangs {
				sg := Gang{Name: "default/" + g.name, MinMember: g.min, Placed: g.placed}
				for _, pod := range in.Pods {
					if gangOf[pod.UID] == g.name {
						sg.Pods = append(sg.Pods, pod.UID)
					}
				}
				in.Gangs = append(in.Gangs, sg)
			}
			sim, err := simulation.New(ctx, simulation.NewSnapshot(), simulation.Options{})
			if err != nil {
				t.Fatal(err)
			}
			plan, err := NewSolver(sim).Solve(ctx, in)
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]int{}
			for _, n := range plan.NewNodes {
				for _, pod := range n.Pods {
					got[gangOf[pod.UID]]++
				}
			}
			if len(tc.oneOf) > 0 {
				whole := 0
				for _, g := range tc.oneOf {
					switch got[g] {
					case 2:
						whole++
					case 0:
						for _, pod := range in.Pods {
							if why := plan.Unschedulable[pod.UID]; gangOf[pod.UID] == g && !strings.Contains(why, "needs 2 pods placed at once") {
								t.Errorf("pod %s of gang %s left out: reason %q", pod.Name, g, why)
							}
						}
					default:
						t.Errorf("gang %s: %d pods planned, want all or none", g, got[g])
					}
				}
				if whole != 1 {
					t.Errorf("%d gangs planned whole, want 1 (pods planned by gang %v)", whole, got)
				}
			} else if diff := cmp.Diff(tc.wantPods, got); diff != "" {
				t.Errorf("pods planned by gang (-want +got):\n%s", diff)
			}
			for _, pod := range in.Pods {
				g := gangOf[pod.UID]
				want, ok := tc.wantReason[g]
				if !ok {
					continue
				}
				if why := plan.Unschedulable[pod.UID]; !strings.Contains(why, want) {
					t.Errorf("pod %s of gang %s: reason %q, want it to say %q", pod.Name, g, why, want)
				}
			}
			if v := Verify(ctx, sim, p.Snapshot(), p.Region, plan, p.DaemonSets); len(v) > 0 {
				t.Fatalf("the plan breaks scheduling rules: %v", v)
			}
			if n := in.Snapshot.Len(); n != 0 {
				t.Errorf("%d nodes left in the snapshot, want none", n)
			}
		})
	}
}
