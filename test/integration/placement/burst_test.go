/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

// Package placement applies, in one go, workloads whose placement depends on every rule Stevedore must get right
// (pod affinity among pods planned together, zone spread limited by node affinity, an architecture-specific
// DaemonSet, a NodePool chosen by a template label with minValues, pods asking for labels no NodePool offers) and
// checks the outcome in a live sandbox, several times over.
package placement

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/provision"
	"github.com/stevedore-dev/stevedore/pkg/sandbox"
	"github.com/stevedore-dev/stevedore/pkg/scheduling"
	"github.com/stevedore-dev/stevedore/pkg/solver"
	"github.com/stevedore-dev/stevedore/test/integration/harness"
)

var sb *sandbox.Sandbox

func TestMain(m *testing.M) {
	harness.Run(m, sandbox.Options{WithScheduler: true, LaunchDelay: 500 * time.Millisecond,
		PluginArgs: map[string]any{"disableDisruption": true}}, func(s *sandbox.Sandbox) { sb = s })
}

const (
	rounds       = 10
	runningAfter = 60 * time.Second
)

// TestABurstOfConstrainedWorkloadsRunsEveryTime applies the same workloads rounds times, each round on NodePools
// of its own: every pod that a NodePool can serve must be Running within runningAfter of the apply, every node's
// labels must stay within what its NodePool offers, and no DaemonSet pod may be left Pending.
func TestABurstOfConstrainedWorkloadsRunsEveryTime(t *testing.T) {
	var took []time.Duration
	for round := 1; round <= rounds; round++ {
		ok := t.Run(fmt.Sprintf("round-%02d", round), func(t *testing.T) {
			took = append(took, burst(t, round))
		})
		if !ok {
			break
		}
	}
	sort.Slice(took, func(i, j int) bool { return took[i] < took[j] })
	if len(took) > 0 {
		t.Logf("%d rounds: every pod Running %s after the apply at best, %s at worst", len(took), took[0].Round(100*time.Millisecond),
			took[len(took)-1].Round(100*time.Millisecond))
	}
}

func burst(t *testing.T, round int) time.Duration {
	ctx := context.Background()
	ns := harness.Namespace(t, sb)
	iso := fmt.Sprintf("burst-%d", round)
	general := fmt.Sprintf("general-%d", round)
	diverse := fmt.Sprintf("diverse-%d", round)
	harness.NodePool(t, sb, general, iso)
	harness.NodePool(t, sb, diverse, iso, func(np *stevedorev1.NodePool) {
		np.Spec.Template.ObjectMeta.Labels["pool"] = "diverse"
		np.Spec.Template.Spec.Requirements = []stevedorev1.NodeSelectorRequirementWithMinValues{
			{Key: stevedorev1.LabelInstanceFamily, Operator: "Exists", MinValues: ptr(3)}}
	})

	deployment := func(name string, replicas int32, cpu string, mutate func(*corev1.PodSpec)) *appsv1.Deployment {
		d := harness.Deployment(ns, name, replicas, cpu, "512Mi")
		spec := &d.Spec.Template.Spec
		p := harness.Isolated(&corev1.Pod{Spec: *spec}, iso)
		*spec = p.Spec
		if mutate != nil {
			mutate(spec)
		}
		return d
	}
	hostnameAffinity := func(spec *corev1.PodSpec) {
		spec.Affinity = &corev1.Affinity{PodAffinity: &corev1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{
			{LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "cache"}}, TopologyKey: corev1.LabelHostname}}}}
	}
	spreadTwoZones := func(spec *corev1.PodSpec) {
		spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
			NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
				{Key: corev1.LabelTopologyZone, Operator: corev1.NodeSelectorOpIn, Values: []string{"us-east-1a", "us-east-1b"}}}}}}}}
		spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: corev1.LabelTopologyZone,
			WhenUnsatisfiable: corev1.DoNotSchedule, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "spread"}}}}
	}
	diversePool := func(spec *corev1.PodSpec) { spec.NodeSelector["pool"] = "diverse" }
	workloads := []*appsv1.Deployment{
		deployment("cache", 2, "250m", nil),
		deployment("web", 2, "250m", hostnameAffinity),
		deployment("spread", 6, "500m", spreadTwoZones),
		deployment("worker", 4, "1", nil),
		deployment("batch", 3, "500m", diversePool),
	}
	agent := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: "arm64-agent", Namespace: ns},
		Spec: appsv1.DaemonSetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "arm64-agent"}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "arm64-agent"}},
				Spec: corev1.PodSpec{NodeSelector: map[string]string{corev1.LabelArchStable: "arm64", harness.IsolationKey: iso},
					Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
					Containers: []corev1.Container{{Name: "agent", Image: "agent", Resources: corev1.ResourceRequirements{
						Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("256Mi")}}}}}}}}
	// pods asking for labels no NodePool offers: a custom key and a restricted one
	unknown := harness.Isolated(harness.Pod(ns, "wants-unknown-team", "100m", "64Mi"), iso)
	unknown.Spec.NodeSelector["team"] = "unknown"
	restricted := harness.Isolated(harness.Pod(ns, "wants-restricted-label", "100m", "64Mi"), iso)
	restricted.Spec.NodeSelector["node-restriction.kubernetes.io/team"] = "payments"

	start := time.Now()
	if _, err := sb.Kube.AppsV1().DaemonSets(ns).Create(ctx, agent, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, d := range workloads {
		if _, err := sb.Kube.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	harness.CreatePods(t, sb, unknown, restricted)

	want := 0
	for _, d := range workloads {
		want += int(*d.Spec.Replicas)
	}
	var took time.Duration
	running := 0
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, runningAfter, true, func(ctx context.Context) (bool, error) {
		n := 0
		for _, d := range workloads {
			pods, err := harness.RunningPods(ctx, sb, ns, d.Name)
			if err != nil {
				return false, nil // a slow answer is no answer; keep polling
			}
			n += len(pods)
		}
		running = n
		took = time.Since(start)
		return running == want, nil
	})
	if err != nil {
		harness.DumpUnbound(t, sb, ns)
		dumpNodes(ctx, t, iso)
		t.Fatalf("round %d: %d of %d pods Running %s after the apply: %v", round, running, want, runningAfter, err)
	}
	t.Logf("round %d: %d pods Running %s after the apply", round, want, took.Round(100*time.Millisecond))

	// the two pods no NodePool can serve: a FailedProvisioning event each, and no node of the round got the label
	for _, name := range []string{unknown.Name, restricted.Name} {
		ev := harness.WaitEvent(t, sb, name, provision.ReasonFailedProvision)
		if !strings.Contains(ev, "neither sets nor requires") {
			t.Errorf("pod %s: event %q does not say the NodePools do not offer the label", name, ev)
		}
		if p, err := sb.Kube.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{}); err != nil || p.Spec.NodeName != "" {
			t.Errorf("pod %s should stay Pending: %v %v", name, p.Spec.NodeName, err)
		}
	}

	// web pods share a node with a cache pod; spread pods use the two allowed zones, evenly
	cache, _ := harness.RunningPods(ctx, sb, ns, "cache")
	cacheNodes := map[string]bool{}
	for _, p := range cache {
		cacheNodes[p.Spec.NodeName] = true
	}
	web, _ := harness.RunningPods(ctx, sb, ns, "web")
	for _, p := range web {
		if !cacheNodes[p.Spec.NodeName] {
			t.Errorf("web pod %s runs on %s, which has no cache pod", p.Name, p.Spec.NodeName)
		}
	}
	spread, _ := harness.RunningPods(ctx, sb, ns, "spread")
	zones := map[string]int{}
	for _, p := range spread {
		zones[harness.Node(t, sb, p.Spec.NodeName).Labels[corev1.LabelTopologyZone]]++
	}
	if len(zones) != 2 || zones["us-east-1a"] != 3 || zones["us-east-1b"] != 3 {
		t.Errorf("spread pods per zone: %v, want 3 in us-east-1a and 3 in us-east-1b", zones)
	}
	batch, _ := harness.RunningPods(ctx, sb, ns, "batch")
	for _, p := range batch {
		if pool := harness.Node(t, sb, p.Spec.NodeName).Labels[stevedorev1.LabelNodePool]; pool != diverse {
			t.Errorf("batch pod %s runs on a node of NodePool %s, want %s", p.Name, pool, diverse)
		}
	}
	for _, c := range harness.NodeClaimsOf(t, sb, diverse) {
		families := map[string]bool{}
		for _, r := range c.Spec.Requirements {
			if r.Key == corev1.LabelInstanceTypeStable {
				for _, it := range r.Values {
					families[strings.Split(it, ".")[0]] = true
				}
			}
		}
		if len(families) < 3 {
			t.Errorf("NodeClaim %s of %s lists instance types of %d families, minValues is 3", c.Name, diverse, len(families))
		}
	}

	// every node of the round: labels within its NodePool's offer; the arm64 agent Running on each arm64 node
	arm64 := 0
	for _, pool := range []string{general, diverse} {
		np, err := sb.Stevedore.StevedoreV1().NodePools().Get(ctx, pool, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range harness.NodeClaimsOf(t, sb, pool) {
			node := harness.Node(t, sb, c.Status.NodeName)
			for _, v := range offList(np, node) {
				t.Errorf("node %s of NodePool %s: %s", node.Name, pool, v)
			}
			if node.Labels[corev1.LabelArchStable] == "arm64" {
				arm64++
			}
		}
	}
	agents := 0
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		running, err := harness.RunningPods(ctx, sb, ns, "arm64-agent")
		agents = len(running)
		return err == nil && agents == arm64, nil
	}); err != nil {
		harness.DumpUnbound(t, sb, ns)
		if ds, err := sb.Kube.AppsV1().DaemonSets(ns).Get(ctx, agent.Name, metav1.GetOptions{}); err == nil {
			t.Logf("DaemonSet status: %+v", ds.Status)
		}
		if list, err := sb.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=arm64-agent"}); err == nil {
			for _, p := range list.Items {
				t.Logf("agent %s on %q phase %s deleting %v conditions %+v", p.Name, p.Spec.NodeName, p.Status.Phase, p.DeletionTimestamp != nil, p.Status.Conditions)
			}
		}
		dumpNodes(ctx, t, iso)
		t.Fatalf("%d arm64 agents Running, want one on each of the round's %d arm64 nodes: %v", agents, arm64, err)
	}
	pods, err := sb.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=arm64-agent"})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if p.Spec.NodeName == "" || p.Status.Phase == corev1.PodPending {
			t.Errorf("DaemonSet pod %s is Pending", p.Name)
		}
	}
	return took
}

// offList names the labels of a node that its NodePool does not offer: anything but the NodePool's template labels,
// values its requirements allow, the well-known labels, Stevedore's own keys and the deprecated aliases.
func offList(np *stevedorev1.NodePool, node *corev1.Node) []string {
	reqs, err := solver.NodePoolRequirements(np)
	if err != nil {
		return []string{err.Error()}
	}
	var out []string
	for k, v := range node.Labels {
		switch {
		case k == corev1.LabelHostname, strings.HasPrefix(k, "stevedore.dev/"):
		case scheduling.IsWellKnown(k), scheduling.StableKey(k) != k:
		case np.Spec.Template.ObjectMeta.Labels[k] == v:
		case reqs.Has(k) && reqs[k].Has(v):
		default:
			out = append(out, fmt.Sprintf("label %s=%s is not one its NodePool offers", k, v))
		}
	}
	sort.Strings(out)
	return out
}

func ptr[T any](v T) *T { return &v }

// dumpNodes logs the round's nodes with their allocatable and the pods bound to them.
func dumpNodes(ctx context.Context, t *testing.T, iso string) {
	nodes, err := sb.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: harness.IsolationKey + "=" + iso})
	if err != nil {
		return
	}
	pods, err := sb.Kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return
	}
	for _, n := range nodes.Items {
		var on []string
		for _, p := range pods.Items {
			if p.Spec.NodeName == n.Name {
				on = append(on, fmt.Sprintf("%s(%s)", p.Name, p.Spec.Containers[0].Resources.Requests.Cpu()))
			}
		}
		t.Logf("node %s %s allocatable cpu %s memory %s taints %v: %v", n.Name, n.Labels[corev1.LabelInstanceTypeStable],
			n.Status.Allocatable.Cpu(), n.Status.Allocatable.Memory(), n.Spec.Taints, on)
	}
}
