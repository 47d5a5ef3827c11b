/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package solver

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/cloud"
	"github.com/stevedore-dev/stevedore/pkg/cloud/catalog"
	"github.com/stevedore-dev/stevedore/pkg/solver/simulation"
	"github.com/stevedore-dev/stevedore/pkg/test"
)

func testPool(name string, weight int32, reqs ...stevedorev1.NodeSelectorRequirementWithMinValues) *stevedorev1.NodePool {
	np := test.NodePool(name)
	if weight > 0 {
		np.Weight(weight)
	}
	np.Spec.Template.Spec.Requirements = reqs
	return np.Obj()
}

func req(key string, op string, values ...string) stevedorev1.NodeSelectorRequirementWithMinValues {
	return stevedorev1.NodeSelectorRequirementWithMinValues{Key: key, Operator: stevedorev1.NodeSelectorOperator(op), Values: values}
}

func testPod(name, cpu, mem string) *corev1.Pod {
	return test.Pod(name).Pending().Labels("app", name).Req("cpu", cpu, "memory", mem).Obj()
}

func replicas(prefix string, n int, cpu, mem string, mutate ...func(*corev1.Pod)) []runtime.Object {
	var out []runtime.Object
	for i := 0; i < n; i++ {
		p := testPod(fmt.Sprintf("%s-%d", prefix, i), cpu, mem)
		p.Labels = map[string]string{"app": prefix}
		for _, m := range mutate {
			m(p)
		}
		out = append(out, p)
	}
	return out
}

func solveObjects(t *testing.T, objs ...runtime.Object) (*Plan, *OfflineProblem, *simulation.Simulator) {
	t.Helper()
	ctx := context.Background()
	p, err := NewOfflineProblem(OfflineInput{Objects: objs, Catalog: catalog.Default(), VMMemoryOverheadPercent: 7.5})
	if err != nil {
		t.Fatal(err)
	}
	sim, err := simulation.New(ctx, simulation.NewSnapshot(), simulation.Options{})
	if err != nil {
		t.Fatal(err)
	}
	plan, err := NewSolver(sim).Solve(ctx, p.Input(500*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	if v := Verify(ctx, sim, p.Snapshot(), p.Region, plan, p.DaemonSets); len(v) > 0 {
		t.Fatalf("the plan breaks scheduling rules: %v", v)
	}
	return plan, p, sim
}

func TestSolverRespectsNodePoolsAndPodConstraints(t *testing.T) {
	spread := func(key string) func(*corev1.Pod) {
		return func(p *corev1.Pod) {
			p.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: key,
				WhenUnsatisfiable: corev1.DoNotSchedule, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": p.Labels["app"]}}}}
		}
	}
	cases := []struct {
		name  string
		objs  []runtime.Object
		check func(t *testing.T, plan *Plan)
	}{
		{
			name: "the higher weight NodePool is tried first",
			objs: append([]runtime.Object{testPool("low", 10), testPool("high", 90)}, replicas("web", 3, "500m", "512Mi")...),
			check: func(t *testing.T, plan *Plan) {
				for _, n := range plan.NewNodes {
					if n.NodePool.Name != "high" {
						t.Errorf("node of NodePool %s, want high", n.NodePool.Name)
					}
				}
			},
		},
		{
			// what the shipped admission policy adds to every Stevedore pod, to keep a Karpenter beside it off
			name: "a pod kept off Karpenter's nodes (karpenter.sh/nodepool DoesNotExist in each term) gets a node",
			objs: append([]runtime.Object{testPool("default", 0)}, replicas("kept", 2, "500m", "512Mi", func(p *corev1.Pod) {
				off := corev1.NodeSelectorRequirement{Key: "karpenter.sh/nodepool", Operator: corev1.NodeSelectorOpDoesNotExist}
				p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
					NodeSelectorTerms: []corev1.NodeSelectorTerm{
						{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: corev1.LabelArchStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"arm64"}}, off}},
						{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: corev1.LabelTopologyZone, Operator: corev1.NodeSelectorOpIn, Values: []string{"us-east-1b"}}, off}}}}}}
			})...),
			check: func(t *testing.T, plan *Plan) {
				if len(plan.Unschedulable) > 0 || len(plan.NewNodes) == 0 {
					t.Errorf("%d new nodes, unschedulable %v; want every pod placed", len(plan.NewNodes), plan.Unschedulable)
				}
			},
		},
		{
			name: "a NodePool's limits send the rest to the next one",
			objs: append([]runtime.Object{func() runtime.Object {
				np := testPool("capped", 90, req(corev1.LabelInstanceTypeStable, "In", "m5.large"))
				np.Spec.Limits = stevedorev1.Limits{corev1.ResourceCPU: resource.MustParse("4")}
				return np
			}(), testPool("overflow", 10)}, replicas("big", 4, "1500m", "1Gi", func(p *corev1.Pod) {
				p.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
					LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "big"}}, TopologyKey: corev1.LabelHostname}}}}
			})...),
			check: func(t *testing.T, plan *Plan) {
				count := map[string]int{}
				for _, n := range plan.NewNodes {
					count[n.NodePool.Name]++
				}
				if count["capped"] != 2 || count["overflow"] != 2 {
					t.Errorf("nodes per NodePool %v, want 2 m5.large (4 CPUs) in capped and the rest in overflow", count)
				}
			},
		},
		{
			name: "a memory limit caps the NodePool as its nodes grow",
			objs: append([]runtime.Object{func() runtime.Object {
				np := testPool("capped", 90, req(corev1.LabelInstanceTypeStable, "In", "r5.large"))
				np.Spec.Limits = stevedorev1.Limits{corev1.ResourceMemory: resource.MustParse("32Gi")}
				return np
			}(), testPool("overflow", 10)}, replicas("mem", 4, "200m", "6Gi", func(p *corev1.Pod) {
				p.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
					LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "mem"}}, TopologyKey: corev1.LabelHostname}}}}
			})...),
			check: func(t *testing.T, plan *Plan) {
				count := map[string]int{}
				for _, n := range plan.NewNodes {
					count[n.NodePool.Name]++
				}
				if count["capped"] != 2 || count["overflow"] != 2 || len(plan.Unschedulable) > 0 {
					t.Errorf("nodes per NodePool %v (unschedulable %d), want 2 r5.large (16 GiB each) in capped and the rest in overflow",
						count, len(plan.Unschedulable))
				}
			},
		},
		{
			name: "a taint keeps pods that do not tolerate it out",
			objs: append(append([]runtime.Object{func() runtime.Object {
				np := testPool("tainted", 90)
				np.Spec.Template.Spec.Taints = []corev1.Taint{{Key: "workload-priority", Value: "critical", Effect: corev1.TaintEffectNoSchedule}}
				return np
			}(), testPool("general", 10)}, replicas("plain", 2, "500m", "512Mi")...),
				replicas("critical", 2, "500m", "512Mi", func(p *corev1.Pod) {
					p.Spec.Tolerations = []corev1.Toleration{{Key: "workload-priority", Operator: corev1.TolerationOpEqual, Value: "critical"}}
				})...),
			check: func(t *testing.T, plan *Plan) {
				for _, n := range plan.NewNodes {
					for _, p := range n.Pods {
						if strings.HasPrefix(p.Name, "plain") && n.NodePool.Name == "tainted" {
							t.Errorf("%s landed on the tainted NodePool", p.Name)
						}
						if strings.HasPrefix(p.Name, "critical") && n.NodePool.Name != "tainted" {
							t.Errorf("%s did not use the higher-weight tainted NodePool it tolerates", p.Name)
						}
					}
				}
			},
		},
		{
			// the repair places a pod of the target next to where the follower can go, rather than the restarts
			// finding it by chance (a slow machine's time cap stops them first)
			name: "a pod whose required affinity names pods of a tainted NodePool it does not tolerate joins one of them elsewhere",
			objs: append(append([]runtime.Object{func() runtime.Object {
				np := testPool("dedicated", 90)
				np.Spec.Template.Spec.Taints = []corev1.Taint{{Key: "dedicated", Value: "team", Effect: corev1.TaintEffectNoSchedule}}
				return np
			}(), testPool("general", 0)}, replicas("target", 5, "2", "1Gi", func(p *corev1.Pod) {
				p.Spec.Tolerations = []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "team"}}
			})...), replicas("follower", 1, "1", "2Gi", func(p *corev1.Pod) {
				p.Spec.Affinity = &corev1.Affinity{PodAffinity: &corev1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
					LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "target"}}, TopologyKey: corev1.LabelHostname}}}}
			})...),
			check: func(t *testing.T, plan *Plan) {
				if len(plan.Unschedulable) > 0 {
					t.Fatalf("unschedulable %v, want every pod placed", plan.Unschedulable)
				}
				if most := 2 + maxRepairRounds; plan.Attempts > most {
					t.Errorf("%d attempts, want the repair rounds to place the follower (at most %d)", plan.Attempts, most)
				}
				for _, n := range plan.NewNodes {
					apps := map[string]bool{}
					for _, p := range n.Pods {
						apps[p.Labels["app"]] = true
					}
					if apps["follower"] && (!apps["target"] || n.NodePool.Name != "general") {
						t.Errorf("the follower is on a node of %s with %v, want a node of general with a target pod", n.NodePool.Name, apps)
					}
				}
			},
		},
		{
			name: "arch and capacity type come from the pod's node selector",
			objs: append([]runtime.Object{testPool("default", 0)}, replicas("arm", 2, "1", "2Gi", func(p *corev1.Pod) {
				p.Spec.NodeSelector = map[string]string{corev1.LabelArchStable: "arm64", stevedorev1.LabelCapacityType: "on-demand"}
			})...),
			check: func(t *testing.T, plan *Plan) {
				for _, n := range plan.NewNodes {
					if n.InstanceType.Labels()[corev1.LabelArchStable] != "arm64" || n.Offering.CapacityType != "on-demand" {
						t.Errorf("node %s/%s, want arm64 on-demand", n.InstanceType.Name, n.Offering.CapacityType)
					}
				}
			},
		},
		{
			name: "zone spread uses three zones",
			objs: append([]runtime.Object{testPool("default", 0)}, replicas("zonal", 6, "1", "1Gi", spread(corev1.LabelTopologyZone))...),
			check: func(t *testing.T, plan *Plan) {
				zones := map[string]int{}
				for _, n := range plan.NewNodes {
					zones[n.Offering.Zone] += len(n.Pods)
				}
				if len(zones) != 3 {
					t.Fatalf("pods per zone %v, want 3 zones", zones)
				}
				for z, c := range zones {
					if c != 2 {
						t.Errorf("zone %s has %d pods, want 2", z, c)
					}
				}
			},
		},
		{
			name: "hostname anti-affinity gives each replica its own node",
			objs: append([]runtime.Object{testPool("default", 0)}, replicas("solo", 4, "250m", "256Mi", func(p *corev1.Pod) {
				p.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
					LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "solo"}}, TopologyKey: corev1.LabelHostname}}}}
			})...),
			check: func(t *testing.T, plan *Plan) {
				if len(plan.NewNodes) != 4 {
					t.Fatalf("%d nodes, want 4", len(plan.NewNodes))
				}
				// alike nodes fit the same types: the plan holds one list for them, not one each
				first := plan.NewNodes[0].InstanceTypes
				for _, n := range plan.NewNodes[1:] {
					if len(n.InstanceTypes) == 0 || &n.InstanceTypes[0] != &first[0] {
						t.Errorf("node of %s has its own list of %d types, want the shared one", n.Pods[0].Name, len(n.InstanceTypes))
					}
				}
			},
		},
		{
			name: "DaemonSet pods are counted on every new node",
			objs: append([]runtime.Object{testPool("default", 0), &appsv1.DaemonSet{
				ObjectMeta: metav1.ObjectMeta{Name: "agent", Namespace: "kube-system", UID: "ds-1"},
				Spec: appsv1.DaemonSetSpec{Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "agent"}},
					Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "a", Resources: corev1.ResourceRequirements{
						Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("512Mi")}}}}}}},
			}}, replicas("web", 2, "1", "1Gi")...),
			check: func(t *testing.T, plan *Plan) {
				for _, n := range plan.NewNodes {
					if len(n.DaemonSets) != 1 {
						t.Errorf("node has %d DaemonSet pods, want 1", len(n.DaemonSets))
					}
					alloc := n.InstanceType.Allocatable()
					if !fitsList(n.Requests, alloc) {
						t.Errorf("requests %v do not fit %s", n.Requests, n.InstanceType.Name)
					}
					if cpu := n.Requests[corev1.ResourceCPU]; cpu.MilliValue() < 500 {
						t.Errorf("requests %v leave out the DaemonSet", n.Requests)
					}
				}
			},
		},
		{
			name: "a pod no instance type can hold is unschedulable with a reason",
			objs: []runtime.Object{testPool("default", 0), testPod("huge", "1000", "1Gi")},
			check: func(t *testing.T, plan *Plan) {
				reason, ok := plan.Unschedulable[testPod("huge", "1000", "1Gi").UID]
				if !ok || !strings.Contains(reason, "NodePool default") {
					t.Errorf("unschedulable = %v, want huge with a reason naming the NodePool", plan.Unschedulable)
				}
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			plan, _, _ := solveObjects(t, tc.objs...)
			tc.check(t, plan)
		})
	}
}

// TestSolverBeatsFirstFitDecreasing packs a mix of the benchmark's pod kinds (generic, zone spread, hostname
// spread, zone self-affinity, hostname anti-affinity; each kind's constraints select its own pods, as workloads'
// do) and checks the plan breaks no rule and costs less than plain first-fit decreasing.
func TestSolverBeatsFirstFitDecreasing(t *testing.T) {
	objs := []runtime.Object{testPool("default", 0)}
	sizes := []string{"100m", "250m", "500m", "1", "1500m"}
	mems := []string{"128Mi", "512Mi", "1Gi", "2Gi", "4Gi"}
	kinds := []string{"generic", "zone-spread", "host-spread", "zone-affinity", "anti"}
	for i := 0; i < 150; i++ {
		p := testPod(fmt.Sprintf("p-%d", i), sizes[i%5], mems[(i/5)%5])
		kind := kinds[i%5]
		p.Labels = map[string]string{"app": kind}
		sel := &metav1.LabelSelector{MatchLabels: p.Labels}
		switch kind {
		case "zone-spread":
			p.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: corev1.LabelTopologyZone, WhenUnsatisfiable: corev1.DoNotSchedule, LabelSelector: sel}}
		case "host-spread":
			p.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: corev1.LabelHostname, WhenUnsatisfiable: corev1.DoNotSchedule, LabelSelector: sel}}
		case "zone-affinity":
			p.Spec.Affinity = &corev1.Affinity{PodAffinity: &corev1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
				LabelSelector: sel, TopologyKey: corev1.LabelTopologyZone}}}}
		case "anti":
			p.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
				LabelSelector: sel, TopologyKey: corev1.LabelHostname}}}}
		}
		objs = append(objs, p)
	}
	given := map[string]*corev1.Pod{}
	for _, obj := range objs {
		if p, ok := obj.(*corev1.Pod); ok {
			given[p.Name] = p.DeepCopy()
		}
	}
	plan, problem, sim := solveObjects(t, objs...)
	if len(plan.Unschedulable) > 0 {
		t.Fatalf("unschedulable: %v", plan.Unschedulable)
	}
	in := problem.Input(0)
	in.FirstFitDecreasing = true
	ffd, err := NewSolver(sim).Solve(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	if plan.Cost >= ffd.Cost {
		t.Fatalf("solver $%.3f/h, first-fit decreasing $%.3f/h: the solver must be cheaper", plan.Cost, ffd.Cost)
	}
	// the problem holds its pods without copying them, so neither solve may modify one
	for _, p := range problem.Pods {
		if !equality.Semantic.DeepEqual(p, given[p.Name]) {
			t.Errorf("pod %s is not the pod given after solving", p.Name)
		}
	}
	t.Logf("solver $%.3f/h on %d nodes, first-fit decreasing $%.3f/h on %d nodes", plan.Cost, len(plan.NewNodes), ffd.Cost, len(ffd.NewNodes))
}

func TestLimitsFar(t *testing.T) {
	types := []*cloud.InstanceType{
		{Name: "small", Capacity: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("4Gi")}},
		{Name: "large", Capacity: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("16"), corev1.ResourceMemory: resource.MustParse("64Gi")}},
	}
	tests := []struct {
		name      string
		remaining corev1.ResourceList
		nodes     int
		want      bool
	}{
		{name: "no limits", remaining: nil, nodes: 1000, want: true},
		{name: "cpu limit far above the largest type times the nodes", remaining: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1000")}, nodes: 10, want: true},
		{name: "cpu limit within reach", remaining: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100")}, nodes: 10, want: false},
		{name: "huge memory limit does not overflow", remaining: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("10000000Gi")}, nodes: 5000, want: true},
		{name: "node count limit within reach", remaining: corev1.ResourceList{"nodes": resource.MustParse("10")}, nodes: 10, want: false},
		{name: "node count limit far", remaining: corev1.ResourceList{"nodes": resource.MustParse("100")}, nodes: 10, want: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := &NodePoolOption{InstanceTypes: types, Remaining: tc.remaining}
			if got := o.limitsFar(tc.nodes); got != tc.want {
				t.Errorf("limitsFar(%d) = %v, want %v", tc.nodes, got, tc.want)
			}
		})
	}
}

func TestFitsLimits(t *testing.T) {
	big := &cloud.InstanceType{Name: "u-24tb1.metal", Capacity: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("448"),
		corev1.ResourceMemory: resource.MustParse("24Ti")}}
	tests := []struct {
		name      string
		used      map[corev1.ResourceName]int64
		remaining corev1.ResourceList
		want      bool
	}{
		// in millibytes this limit overflows int64; the sums count bytes
		{name: "a memory limit of 10 million GiB", used: map[corev1.ResourceName]int64{corev1.ResourceMemory: 1 << 50},
			remaining: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("10000000Gi")}, want: true},
		{name: "a memory limit one byte short", used: map[corev1.ResourceName]int64{corev1.ResourceMemory: 1},
			remaining: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("24Ti")}, want: false},
		{name: "a cpu limit met exactly, in millicores", used: map[corev1.ResourceName]int64{corev1.ResourceCPU: 52000},
			remaining: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500")}, want: true},
		{name: "a cpu limit exceeded by a millicore", used: map[corev1.ResourceName]int64{corev1.ResourceCPU: 52001},
			remaining: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500")}, want: false},
		{name: "the node count is checked elsewhere", remaining: corev1.ResourceList{"nodes": resource.MustParse("0")}, want: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := fitsLimits(tc.used, big, tc.remaining); got != tc.want {
				t.Errorf("fitsLimits = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestABatchThatCannotBePlacedWholeStopsSearchingOnALargeCluster: a zone spread that ignores its own node
// affinity counts every zone the NodePool launches into as a domain, so with maxSkew 1 and two zones allowed only
// two of five replicas have a node. Each replica alone fits, so the solver searches other orders; on a cluster of
// a thousand nodes (tainted, so none takes a replica) each restart is a whole greedy solve over them, and the
// search must stop after the few restarts restartsFor allows, the same number every run.
func TestABatchThatCannotBePlacedWholeStopsSearchingOnALargeCluster(t *testing.T) {
	ignore := corev1.NodeInclusionPolicyIgnore
	pods := replicas("spread", 5, "1", "1Gi", func(p *corev1.Pod) {
		p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
			NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
				{Key: corev1.LabelTopologyZone, Operator: corev1.NodeSelectorOpIn, Values: []string{"us-east-1a", "us-east-1b"}}}}}}}}
		p.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: corev1.LabelTopologyZone,
			WhenUnsatisfiable: corev1.DoNotSchedule, NodeAffinityPolicy: &ignore,
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "spread"}}}}
	})
	const clusterNodes = 1000
	objs := append([]runtime.Object{testPool("default", 0)}, pods...)
	for i := range clusterNodes {
		objs = append(objs, &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("reserved-%04d", i), Labels: map[string]string{
				corev1.LabelHostname: fmt.Sprintf("reserved-%04d", i), corev1.LabelTopologyZone: "us-east-1c"}},
			Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: "reserved", Effect: corev1.TaintEffectNoSchedule}}},
			Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"),
				corev1.ResourceMemory: resource.MustParse("16Gi"), corev1.ResourcePods: resource.MustParse("110")}},
		})
	}
	plan, _, _ := solveObjects(t, objs...)
	if len(plan.Unschedulable) != 3 {
		t.Fatalf("%d pods unschedulable, want 3 (two zones of many hold one replica each): %v", len(plan.Unschedulable), plan.Unschedulable)
	}
	// the first greedy run, one run per stranded pod alone, the first again, up to maxRepairRounds repairs, the
	// restarts, and the best attempt run again
	restarts := restartsFor(len(pods), clusterNodes)
	if restarts >= smallBatchRestarts/4 {
		t.Fatalf("restartsFor(%d, %d) = %d: the test needs a cluster large enough to cut the restarts", len(pods), clusterNodes, restarts)
	}
	if most := 1 + 3 + 1 + maxRepairRounds + restarts + 1; plan.Attempts > most {
		t.Errorf("the solver ran the greedy placement %d times, want at most %d", plan.Attempts, most)
	}
	// the same plan again (the attempts may be fewer when a slow run reaches restartTimeCap)
	again, _, _ := solveObjects(t, objs...)
	if len(again.NewNodes) != len(plan.NewNodes) || len(again.Unschedulable) != len(plan.Unschedulable) {
		t.Errorf("a second solve planned %d nodes and left %d pods, the first %d and %d", len(again.NewNodes),
			len(again.Unschedulable), len(plan.NewNodes), len(plan.Unschedulable))
	}
}

func TestRestartsShrinkWithTheWorkOfOne(t *testing.T) {
	tests := []struct {
		pods, nodes, want int
	}{
		{pods: 5, nodes: 0, want: smallBatchRestarts},
		{pods: 24, nodes: 0, want: restartWork / (24 * 24)},
		{pods: 5, nodes: 40, want: smallBatchRestarts},
		{pods: 5, nodes: 1000, want: restartWork / (5 * 1005)},
		{pods: 24, nodes: 1000, want: minRestarts},
		{pods: 0, nodes: 0, want: smallBatchRestarts},
	}
	for _, tc := range tests {
		if got := restartsFor(tc.pods, tc.nodes); got != tc.want {
			t.Errorf("restartsFor(%d pods, %d nodes) = %d, want %d", tc.pods, tc.nodes, got, tc.want)
		}
	}
}

// TestAnUnschedulablePodIsToldOfTheNodePoolsLeftOut: a NodePool the caller left out of the input because it cannot
// launch now (its EC2NodeClass not ready) is named, with why, in the reason of every pod no NodePool takes, beside
// what the NodePools given say.
func TestAnUnschedulablePodIsToldOfTheNodePoolsLeftOut(t *testing.T) {
	const late = "NodePool late cannot launch nodes now: EC2NodeClass late is not ready: EC2NodeClass not found"
	cases := []struct {
		name        string
		objs        []runtime.Object
		unavailable []string
		want        []string
	}{
		{name: "no NodePool at all", objs: []runtime.Object{testPod("web", "1", "1Gi")},
			want: []string{"no NodePool may launch nodes for pods"}},
		{name: "the only NodePool left out", objs: []runtime.Object{testPod("web", "1", "1Gi")}, unavailable: []string{late},
			want: []string{late}},
		{name: "a NodePool too small beside one left out", objs: []runtime.Object{testPool("default", 0), testPod("web", "1000", "1Gi")},
			unavailable: []string{late}, want: []string{"NodePool default: ", late}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			sim, err := simulation.New(ctx, simulation.NewSnapshot(), simulation.Options{})
			if err != nil {
				t.Fatal(err)
			}
			in := Input{Snapshot: simulation.NewSnapshot()}
			if len(tc.objs) == 1 { // the pod alone: the offline problem wants a NodePool
				in.Pods = []*corev1.Pod{tc.objs[0].(*corev1.Pod)}
			} else {
				p, err := NewOfflineProblem(OfflineInput{Objects: tc.objs, Catalog: catalog.Default(), VMMemoryOverheadPercent: 7.5})
				if err != nil {
					t.Fatal(err)
				}
				in = p.Input(0)
			}
			in.Unavailable = tc.unavailable
			plan, err := NewSolver(sim).Solve(ctx, in)
			if err != nil {
				t.Fatal(err)
			}
			reason, ok := plan.Unschedulable[in.Pods[0].UID]
			if !ok {
				t.Fatalf("the pod was placed: %v", plan.NewNodes)
			}
			for _, w := range tc.want {
				if !strings.Contains(reason, w) {
					t.Errorf("reason %q does not say %q", reason, w)
				}
			}
		})
	}
}

// TestAPodThatChoosesTheCapacityTypeDoesNotMakeANodeOfOthersOnDemand: a small pod that requires on-demand,
// placed after two large pods that may go on spot, gets an on-demand node of its own: joining their node would
// make the whole node on-demand, which costs more than a small on-demand node beside a spot one.
func TestAPodThatChoosesTheCapacityTypeDoesNotMakeANodeOfOthersOnDemand(t *testing.T) {
	onDemand := func(p *corev1.Pod) {
		p.Spec.NodeSelector = map[string]string{stevedorev1.LabelCapacityType: stevedorev1.CapacityTypeOnDemand}
	}
	objs := append([]runtime.Object{testPool("default", 0)}, replicas("big", 2, "3", "4Gi")...)
	objs = append(objs, replicas("small", 1, "500m", "512Mi", onDemand)...)
	plan, _, _ := solveObjects(t, objs...)
	for _, n := range plan.NewNodes {
		var small, big int
		for _, p := range n.Pods {
			if p.Labels["app"] == "small" {
				small++
			} else {
				big++
			}
		}
		if ct := n.Offering.CapacityType; ct == stevedorev1.CapacityTypeOnDemand && big > 0 {
			t.Errorf("node %s (%s, on-demand, $%.4f/h) holds %d large pods that could have gone on spot beside the on-demand pod",
				n.InstanceType.Name, ct, n.Offering.Price, big)
		}
	}
	if len(plan.Unschedulable) > 0 {
		t.Errorf("unschedulable: %v", plan.Unschedulable)
	}
}
