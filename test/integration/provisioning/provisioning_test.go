/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package provisioning

import (
	"context"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/cloud"
	"github.com/stevedore-dev/stevedore/pkg/cloud/catalog"
	"github.com/stevedore-dev/stevedore/pkg/sandbox"
	"github.com/stevedore-dev/stevedore/test/integration/harness"
)

var sb *sandbox.Sandbox

func TestMain(m *testing.M) {
	harness.Run(m, sandbox.Options{WithScheduler: true, LaunchDelay: 500 * time.Millisecond,
		// a booking short enough to watch it expire
		PluginArgs: map[string]any{"disableDisruption": true, "provisioningRequestBookingTime": bookingTime.String()}},
		func(s *sandbox.Sandbox) { sb = s })
}

func TestABurstOfPodsGetsNodesAndEveryPodBindsWhereItWasPlanned(t *testing.T) {
	ns := harness.Namespace(t, sb)
	harness.NodePool(t, sb, "burst", "burst")
	ps, names := harness.Pods(ns, "burst", "web", 12, "700m", "1Gi")
	harness.CreatePods(t, sb, ps...)
	bound := harness.WaitBound(t, sb, ns, names)
	claims := harness.NodeClaimsOf(t, sb, "burst")
	if len(claims) == 0 {
		t.Fatal("no NodeClaim was created")
	}
	nodes := map[string]bool{}
	for _, c := range claims {
		nodes[c.Status.NodeName] = true
	}
	for _, name := range names {
		p := bound[name]
		if !nodes[p.Spec.NodeName] {
			t.Errorf("pod %s bound to %s, which Stevedore did not launch", name, p.Spec.NodeName)
		}
		if planned := harness.PlannedNode(t, sb, ns, name); planned != p.Spec.NodeName {
			t.Errorf("pod %s was planned on %q but bound to %s", name, planned, p.Spec.NodeName)
		}
	}
	node := harness.Node(t, sb, claims[0].Status.NodeName)
	for _, key := range []string{corev1.LabelInstanceTypeStable, corev1.LabelTopologyZone, stevedorev1.LabelCapacityType,
		corev1.LabelArchStable, stevedorev1.LabelInstanceFamily, stevedorev1.LabelInstanceCPU, stevedorev1.LabelNodePool, stevedorev1.LabelNodeClaim} {
		if node.Labels[key] == "" {
			t.Errorf("node %s lacks label %s", node.Name, key)
		}
	}
	for _, taint := range node.Spec.Taints {
		if taint.Key == stevedorev1.TaintUnregistered {
			t.Errorf("node %s still has the unregistered taint", node.Name)
		}
	}
	// Allocatable follows the EKS overhead model: capacity less kube-reserved (6% of the first core, 1% of the
	// second, 0.5% of cores 3-4, 0.25% beyond; 11 MiB per pod + 255 MiB) and the 100 MiB eviction threshold.
	vcpu := node.Status.Capacity.Cpu().Value()
	wantCPU := vcpu*1000 - cloud.KubeReservedCPU(int(vcpu))
	if got := node.Status.Allocatable.Cpu().MilliValue(); got != wantCPU {
		t.Errorf("node %s allocatable cpu %dm, want %dm", node.Name, got, wantCPU)
	}
	pods := node.Status.Capacity.Pods().Value()
	wantMem := node.Status.Capacity.Memory().Value() - (cloud.KubeReservedMemoryMiB(pods)+100)<<20
	if got := node.Status.Allocatable.Memory().Value(); got != wantMem {
		t.Errorf("node %s allocatable memory %d, want %d", node.Name, got, wantMem)
	}
	it := catalogType(t, node.Labels[corev1.LabelInstanceTypeStable])
	if int64(it.PodLimit()) != pods {
		t.Errorf("node %s has %d pods, want the ENI limit %d", node.Name, pods, it.PodLimit())
	}
}

func catalogType(t *testing.T, name string) catalog.InstanceType {
	t.Helper()
	for _, it := range catalog.Default().InstanceTypes {
		if it.Name == name {
			return it
		}
	}
	t.Fatalf("%s is not in the catalog", name)
	return catalog.InstanceType{}
}

func TestHigherWeightNodePoolIsUsedFirstAndLimitsSendTheRestToTheNext(t *testing.T) {
	ns := harness.Namespace(t, sb)
	harness.NodePool(t, sb, "weight-high", "weight", harness.WithRequirements(harness.Req(corev1.LabelInstanceTypeStable, "In", "m5.large")),
		func(np *stevedorev1.NodePool) {
			np.Spec.Weight = new(int32)
			*np.Spec.Weight = 90
			np.Spec.Limits = stevedorev1.Limits{corev1.ResourceCPU: resource.MustParse("4")}
		})
	harness.NodePool(t, sb, "weight-low", "weight", func(np *stevedorev1.NodePool) {
		np.Spec.Weight = new(int32)
		*np.Spec.Weight = 10
	})
	anti := func(p *corev1.Pod) {
		p.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "spread"}}, TopologyKey: corev1.LabelHostname}}}}
	}
	ps, names := harness.Pods(ns, "weight", "spread", 3, "1", "1Gi", anti)
	harness.CreatePods(t, sb, ps...)
	harness.WaitBound(t, sb, ns, names)
	high, low := harness.NodeClaimsOf(t, sb, "weight-high"), harness.NodeClaimsOf(t, sb, "weight-low")
	if len(high) != 2 || len(low) != 1 {
		t.Fatalf("NodeClaims: %d in weight-high (limit 4 CPUs = 2 m5.large), %d in weight-low; want 2 and 1", len(high), len(low))
	}
}

func TestArchAndCapacityTypeRequirementsAndTaintsAreHonoured(t *testing.T) {
	ns := harness.Namespace(t, sb)
	harness.NodePool(t, sb, "arm-spot", "archct", harness.WithRequirements(harness.Req(corev1.LabelArchStable, "In", "arm64"), harness.Req(stevedorev1.LabelCapacityType, "In", "spot")))
	harness.NodePool(t, sb, "amd-od", "archct", harness.WithRequirements(harness.Req(corev1.LabelArchStable, "In", "amd64"), harness.Req(stevedorev1.LabelCapacityType, "In", "on-demand")),
		func(np *stevedorev1.NodePool) {
			np.Spec.Template.Spec.Taints = append(np.Spec.Template.Spec.Taints, corev1.Taint{Key: "workload-priority", Value: "critical", Effect: corev1.TaintEffectNoSchedule})
		})
	armPods, armNames := harness.Pods(ns, "archct", "arm", 2, "500m", "512Mi", func(p *corev1.Pod) {
		p.Spec.NodeSelector[corev1.LabelArchStable] = "arm64"
	})
	critical, criticalNames := harness.Pods(ns, "archct", "critical", 2, "500m", "512Mi", func(p *corev1.Pod) {
		p.Spec.NodeSelector[stevedorev1.LabelCapacityType] = "on-demand"
		p.Spec.Tolerations = append(p.Spec.Tolerations, corev1.Toleration{Key: "workload-priority", Operator: corev1.TolerationOpEqual, Value: "critical"})
	})
	harness.CreatePods(t, sb, append(armPods, critical...)...)
	bound := harness.WaitBound(t, sb, ns, append(armNames, criticalNames...))
	for _, n := range armNames {
		node := harness.Node(t, sb, bound[n].Spec.NodeName)
		if node.Labels[corev1.LabelArchStable] != "arm64" || node.Labels[stevedorev1.LabelCapacityType] != "spot" {
			t.Errorf("%s on %s/%s, want arm64 spot", n, node.Labels[corev1.LabelArchStable], node.Labels[stevedorev1.LabelCapacityType])
		}
	}
	for _, n := range criticalNames {
		node := harness.Node(t, sb, bound[n].Spec.NodeName)
		if node.Labels[stevedorev1.LabelNodePool] != "amd-od" || node.Labels[stevedorev1.LabelCapacityType] != "on-demand" {
			t.Errorf("%s on NodePool %s, want the tainted on-demand amd-od", n, node.Labels[stevedorev1.LabelNodePool])
		}
	}
}

func TestZoneSpreadUsesThreeZonesAndAntiAffinityOneNodeEach(t *testing.T) {
	ns := harness.Namespace(t, sb)
	harness.NodePool(t, sb, "topology", "topology")
	spread := func(p *corev1.Pod) {
		p.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: corev1.LabelTopologyZone,
			WhenUnsatisfiable: corev1.DoNotSchedule, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "zonal"}}}}
	}
	anti := func(p *corev1.Pod) {
		p.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "solo"}}, TopologyKey: corev1.LabelHostname}}}}
	}
	zonal, zonalNames := harness.Pods(ns, "topology", "zonal", 6, "250m", "256Mi", spread)
	solo, soloNames := harness.Pods(ns, "topology", "solo", 3, "250m", "256Mi", anti)
	harness.CreatePods(t, sb, append(zonal, solo...)...)
	bound := harness.WaitBound(t, sb, ns, append(zonalNames, soloNames...))
	zones := map[string]int{}
	for _, n := range zonalNames {
		zones[harness.Node(t, sb, bound[n].Spec.NodeName).Labels[corev1.LabelTopologyZone]]++
	}
	if len(zones) != 3 {
		t.Errorf("zonal pods per zone %v, want 2 in each of 3 zones", zones)
	}
	soloNodes := map[string]bool{}
	for _, n := range soloNames {
		soloNodes[bound[n].Spec.NodeName] = true
	}
	if len(soloNodes) != 3 {
		t.Errorf("anti-affine pods on %d nodes, want 3", len(soloNodes))
	}
}

func TestADaemonSetPodFitsOnEveryNewNode(t *testing.T) {
	ns := harness.Namespace(t, sb)
	harness.NodePool(t, sb, "daemons", "daemons")
	ds := &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: "agent", Namespace: ns},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "agent"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "agent"}},
				Spec: corev1.PodSpec{
					NodeSelector: map[string]string{harness.IsolationKey: "daemons"},
					Tolerations:  []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
					Containers: []corev1.Container{{Name: "agent", Image: "registry.k8s.io/pause:3.10", Resources: corev1.ResourceRequirements{
						Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("512Mi")}}}},
				},
			},
		},
	}
	if _, err := sb.Kube.AppsV1().DaemonSets(ns).Create(context.Background(), ds, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Each pod asks for most of a 2-vCPU node: the DaemonSet pod must still fit beside it.
	ps, names := harness.Pods(ns, "daemons", "heavy", 3, "1300m", "1Gi")
	harness.CreatePods(t, sb, ps...)
	harness.WaitBound(t, sb, ns, names)
	claims := harness.NodeClaimsOf(t, sb, "daemons")
	harness.Eventually(t, "a running DaemonSet pod on every new node", func(ctx context.Context) (bool, error) {
		list, err := sb.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=agent"})
		if err != nil {
			return false, err
		}
		running := map[string]bool{}
		for _, p := range list.Items {
			if p.Status.Phase == corev1.PodRunning {
				running[p.Spec.NodeName] = true
			}
		}
		for _, c := range claims {
			if !running[c.Status.NodeName] {
				return false, nil
			}
		}
		return true, nil
	})
}

func TestLaunchFallsBackWhenAPoolRunsOutOfCapacity(t *testing.T) {
	ns := harness.Namespace(t, sb)
	harness.NodePool(t, sb, "ice", "ice", harness.WithRequirements(harness.Req(corev1.LabelInstanceTypeStable, "In", "m5.large", "m5.xlarge"),
		harness.Req(stevedorev1.LabelCapacityType, "In", "on-demand")))
	for _, z := range []string{"us-east-1a", "us-east-1b", "us-east-1c"} {
		sb.AWS.EC2.SetCapacity("m5.large", z, "on-demand", 0)
	}
	t.Cleanup(func() {
		for _, z := range []string{"us-east-1a", "us-east-1b", "us-east-1c"} {
			sb.AWS.EC2.SetCapacity("m5.large", z, "on-demand", -1)
		}
	})
	ps, names := harness.Pods(ns, "ice", "ice", 2, "500m", "512Mi")
	harness.CreatePods(t, sb, ps...)
	bound := harness.WaitBound(t, sb, ns, names)
	for _, n := range names {
		if typ := harness.Node(t, sb, bound[n].Spec.NodeName).Labels[corev1.LabelInstanceTypeStable]; typ != "m5.xlarge" {
			t.Errorf("%s on %s, want m5.xlarge after m5.large ran out", n, typ)
		}
	}
}

func TestASchedulerRestartMidBurstLaunchesNoDuplicate(t *testing.T) {
	ns := harness.Namespace(t, sb)
	harness.NodePool(t, sb, "restart", "restart")
	ps, names := harness.Pods(ns, "restart", "burst", 16, "1", "1Gi")
	harness.CreatePods(t, sb, ps...)
	harness.Eventually(t, "the first NodeClaims", func(ctx context.Context) (bool, error) {
		return len(harness.NodeClaimsOf(t, sb, "restart")) > 0, nil
	})
	if err := sb.StopScheduler(); err != nil {
		t.Fatal(err)
	}
	if err := sb.StartScheduler(context.Background()); err != nil {
		t.Fatal(err)
	}
	bound := harness.WaitBound(t, sb, ns, names)
	claims := harness.NodeClaimsOf(t, sb, "restart")
	used := map[string]int{}
	for _, n := range names {
		used[bound[n].Spec.NodeName]++
	}
	for _, c := range claims {
		if used[c.Status.NodeName] == 0 {
			t.Errorf("NodeClaim %s (node %s) hosts none of the pods: a duplicate launch", c.Name, c.Status.NodeName)
		}
	}
	instances := 0
	for _, inst := range sb.AWS.EC2.Instances() {
		if inst.Tags[stevedorev1.LabelNodePool] == "restart" && inst.State != "terminated" && inst.State != "shutting-down" {
			instances++
		}
	}
	if instances != len(claims) {
		t.Errorf("%d live instances for %d NodeClaims", instances, len(claims))
	}
}
