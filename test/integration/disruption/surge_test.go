/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package disruption

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	"k8s.io/utils/ptr"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/disruption"
	"github.com/stevedore-dev/stevedore/pkg/sandbox"
	"github.com/stevedore-dev/stevedore/pkg/surge"
	"github.com/stevedore-dev/stevedore/test/integration/harness"
)

// apart keeps the pods labelled key=value on different nodes.
func apart(pod *corev1.PodSpec, key, value string) {
	pod.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{TopologyKey: corev1.LabelHostname,
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{key: value}}}}}}
}

// TestConsolidationSurgesSingleReplicaDeploymentsWithNoMomentAtZeroReady runs three single-replica Deployments
// whose pods take 3 s to become Ready (one under an HPA, one under a minAvailable=1 PodDisruptionBudget whose pod asks
// to move make-before-break past it, stevedore.dev/replacement: Surge), one per
// node beside a 3-CPU filler; once the filler is gone, consolidation replaces every node by a cheaper one. A
// watch on each Deployment's pods records every readiness change: none of them is ever without a Ready pod, every
// pod moved, and the Deployments end with one replica and no surge left under way.
func TestConsolidationSurgesSingleReplicaDeploymentsWithNoMomentAtZeroReady(t *testing.T) {
	ctx := context.Background()
	ns := harness.Namespace(t, sb)
	solos := []string{"plain", "scaled", "budgeted"}
	nodePoolOfSolos(t, "surge", stevedorev1.ReplacementSurge)
	fillerAndSolos(t, ns, "surge", solos)
	hpa := &autoscalingv2.HorizontalPodAutoscaler{ObjectMeta: metav1.ObjectMeta{Name: "scaled", Namespace: ns},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{MinReplicas: ptr.To(int32(1)), MaxReplicas: 3,
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "scaled"},
			Metrics: []autoscalingv2.MetricSpec{{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{
				Name: corev1.ResourceCPU, Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptr.To(int32(80))}}}}}}
	if _, err := sb.Kube.AutoscalingV2().HorizontalPodAutoscalers(ns).Create(ctx, hpa, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	one := intstr.FromInt32(1)
	pdb := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: "budgeted", Namespace: ns}, Spec: policyv1.PodDisruptionBudgetSpec{
		MinAvailable: &one, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "budgeted"}}}}
	if _, err := sb.Kube.PolicyV1().PodDisruptionBudgets(ns).Create(ctx, pdb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	before, nodes := runningSolos(t, ns, solos)
	harness.Eventually(t, "the PodDisruptionBudget to allow no disruption", func(ctx context.Context) (bool, error) {
		cur, err := sb.Kube.PolicyV1().PodDisruptionBudgets(ns).Get(ctx, "budgeted", metav1.GetOptions{})
		return err == nil && cur.Status.ObservedGeneration == cur.Generation && cur.Status.CurrentHealthy == 1 && cur.Status.DisruptionsAllowed == 0, err
	})
	lowest := map[string]func() int32{}
	for _, name := range solos {
		lowest[name] = watchAvailable(t, ns, name)
	}
	t.Cleanup(func() {
		if t.Failed() {
			for _, name := range solos {
				dumpDrain(t, ns, name)
			}
		}
	})

	harness.Scale(t, sb, ns, "filler", 0)
	waitSolosMoved(t, ns, "surge", solos, before, nodes)
	for _, name := range solos {
		if got := lowest[name](); got < 1 {
			t.Errorf("Deployment %s had no Ready pod at one point while its pod moved", name)
		}
		d, err := sb.Kube.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got := ptr.Deref(d.Spec.Replicas, 0); got != 1 {
			t.Errorf("Deployment %s ends with %d replicas, want 1", name, got)
		}
		if v, ok := d.Annotations[stevedorev1.AnnotationSurge]; ok {
			t.Errorf("Deployment %s still records a surge (%q)", name, v)
		}
	}
	// every successor was nominated to the node its move planned, and runs there
	for _, name := range solos {
		pods, err := harness.RunningPods(ctx, sb, ns, name)
		if err != nil || len(pods) != 1 {
			t.Fatalf("Deployment %s runs %d pods (%v), want 1", name, len(pods), err)
		}
		if node := nominatedBySurge(ctx, t, ns, pods[0].Name); node != pods[0].Spec.NodeName {
			t.Errorf("successor %s of Deployment %s runs on %s; its surge nominated it to %q", pods[0].Name, name, pods[0].Spec.NodeName, node)
		}
	}
	// every pod moved make-before-break: a Surged event names it
	events, err := sb.Kube.CoreV1().Events("").List(ctx, metav1.ListOptions{FieldSelector: "reason=" + disruption.ReasonSurged})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range solos {
		key := ns + "/" + before[name].Name
		found := false
		for _, ev := range events.Items {
			found = found || strings.Contains(ev.Message, key)
		}
		if !found {
			t.Errorf("no %s event names pod %s", disruption.ReasonSurged, key)
		}
	}
}

// nominatedBySurge is the node a surge nominated the pod to, read from its Nominated event ("" if none).
func nominatedBySurge(ctx context.Context, t *testing.T, ns, pod string) string {
	t.Helper()
	events, err := sb.Kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "reason=" + surge.ReasonNominated +
		",involvedObject.name=" + pod})
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range events.Items {
		var node string
		if _, err := fmt.Sscanf(ev.Message, "nominated to node %s", &node); err == nil && strings.Contains(ev.Message, "the move of the pod it replaces") {
			return strings.TrimSuffix(node, ",")
		}
	}
	return ""
}

// nodePoolOfSolos makes an on-demand NodePool whose pods move by replacement (a spot node is replaced only by a
// choice of cheaper spot types, spot-to-spot consolidation).
func nodePoolOfSolos(t *testing.T, pool string, replacement stevedorev1.Replacement) {
	harness.NodePool(t, sb, pool, pool, budget("100%"), func(np *stevedorev1.NodePool) {
		np.Spec.Disruption.Replacement = replacement
		np.Spec.Template.Spec.Requirements = append(np.Spec.Template.Spec.Requirements,
			harness.Req(stevedorev1.LabelCapacityType, "In", stevedorev1.CapacityTypeOnDemand))
	})
}

// surgesPastBudget is the solo whose pods ask to surge even when a PodDisruptionBudget allows no disruption.
const surgesPastBudget = "budgeted"

// fillerAndSolos runs, on the NodePool, a filler of one 3-CPU pod per node for each solo, then the solos: single-
// replica Deployments of 250m whose pods take 3 s to become Ready and keep apart, so each lands beside a filler pod.
func fillerAndSolos(t *testing.T, ns, pool string, solos []string) {
	filler := harness.Deployment(ns, "filler", int32(len(solos)), "3", "1Gi") //nolint:gosec // G115: a test's few Deployments
	apart(&filler.Spec.Template.Spec, "app", "filler")
	harness.IsolatedDeployment(t, sb, filler, pool)
	harness.WaitRunning(t, sb, ns, "filler", len(solos))
	for _, name := range solos {
		d := harness.Deployment(ns, name, 1, "250m", "128Mi")
		d.Spec.Template.Labels["group"] = "solo"
		d.Spec.Template.Annotations = map[string]string{sandbox.AnnotationReadyAfter: "3s"}
		if name == surgesPastBudget {
			d.Spec.Template.Annotations[stevedorev1.AnnotationReplacement] = string(stevedorev1.ReplacementSurge)
		}
		apart(&d.Spec.Template.Spec, "group", "solo")
		harness.IsolatedDeployment(t, sb, d, pool)
	}
}

// runningSolos waits for each solo's pod to run and returns the pods and the nodes they run on.
func runningSolos(t *testing.T, ns string, solos []string) (map[string]corev1.Pod, map[string]bool) {
	before, nodes := map[string]corev1.Pod{}, map[string]bool{}
	for _, name := range solos {
		pods := harness.WaitRunning(t, sb, ns, name, 1)
		before[name] = pods[0]
		nodes[pods[0].Spec.NodeName] = true
	}
	return before, nodes
}

// waitSolosMoved waits until the NodePool's first nodes are gone and each solo runs one new, Ready pod elsewhere.
func waitSolosMoved(t *testing.T, ns, pool string, solos []string, before map[string]corev1.Pod, nodes map[string]bool) {
	harness.EventuallyWithin(t, 6*time.Minute, "every single-replica pod moved off the filler's nodes, which are gone", func(ctx context.Context) (bool, error) {
		for _, c := range harness.NodeClaimsOf(t, sb, pool) {
			if c.DeletionTimestamp != nil || nodes[c.Status.NodeName] {
				return false, nil
			}
		}
		for _, name := range solos {
			pods, err := harness.RunningPods(ctx, sb, ns, name)
			if err != nil || len(pods) != 1 || pods[0].UID == before[name].UID || nodes[pods[0].Spec.NodeName] || !podReady(&pods[0]) {
				return false, err
			}
		}
		return true, nil
	})
}

// TestConsolidationWithEvictLeavesASingleReplicaDeploymentWithNoReadyPod is the same move with replacement Evict:
// the watch sees the Deployment without a Ready pod between the eviction and its successor's readiness (what
// Surge avoids, and what shows the watch can tell).
func TestConsolidationWithEvictLeavesASingleReplicaDeploymentWithNoReadyPod(t *testing.T) {
	ns := harness.Namespace(t, sb)
	solos := []string{"evicted"}
	nodePoolOfSolos(t, "evict", stevedorev1.ReplacementEvict)
	fillerAndSolos(t, ns, "evict", solos)
	before, nodes := runningSolos(t, ns, solos)
	lowest := watchAvailable(t, ns, "evicted")
	harness.Scale(t, sb, ns, "filler", 0)
	waitSolosMoved(t, ns, "evict", solos, before, nodes)
	if got := lowest(); got != 0 {
		t.Errorf("with Evict, the Deployment had at least %d Ready pod throughout; the successor of an evicted pod cannot be Ready before it goes", got)
	}
}

// TestConsolidationLeavesThePodsOfABudgetAllowingNoDisruption follows Karpenter's "can delete nodes, considers PDB"
// with Surge, the default: two single-replica Deployments, one per node beside a 3-CPU filler, one of them under a
// PodDisruptionBudget with maxUnavailable 0. Once the filler is gone, consolidation replaces the other's node by a
// cheaper one, and leaves the guarded pod where it runs, with a DisruptionBlocked event that names the budget: a
// budget that allows no disruption keeps its pods unless they ask to surge past it.
func TestConsolidationLeavesThePodsOfABudgetAllowingNoDisruption(t *testing.T) {
	ctx := context.Background()
	ns := harness.Namespace(t, sb)
	nodePoolOfSolos(t, "guard", stevedorev1.ReplacementSurge)
	fillerAndSolos(t, ns, "guard", []string{"plain", "guarded"})
	zero := intstr.FromInt32(0)
	pdb := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: "guarded", Namespace: ns}, Spec: policyv1.PodDisruptionBudgetSpec{
		MaxUnavailable: &zero, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "guarded"}}}}
	if _, err := sb.Kube.PolicyV1().PodDisruptionBudgets(ns).Create(ctx, pdb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	before, _ := runningSolos(t, ns, []string{"plain", "guarded"})
	harness.Eventually(t, "the PodDisruptionBudget to allow no disruption", func(ctx context.Context) (bool, error) {
		cur, err := sb.Kube.PolicyV1().PodDisruptionBudgets(ns).Get(ctx, "guarded", metav1.GetOptions{})
		return err == nil && cur.Status.ObservedGeneration == cur.Generation && cur.Status.CurrentHealthy == 1 && cur.Status.DisruptionsAllowed == 0, err
	})
	guardedNode := before["guarded"].Spec.NodeName
	harness.Scale(t, sb, ns, "filler", 0)
	waitSolosMoved(t, ns, "guard", []string{"plain"}, before, map[string]bool{before["plain"].Spec.NodeName: true})
	harness.EventuallyWithin(t, 2*time.Minute, "a DisruptionBlocked event on node "+guardedNode+" naming the budget", func(ctx context.Context) (bool, error) {
		list, err := sb.Kube.EventsV1().Events(metav1.NamespaceAll).List(ctx, metav1.ListOptions{FieldSelector: "regarding.name=" + guardedNode})
		if err != nil {
			return false, err
		}
		for _, ev := range list.Items {
			if ev.Reason == disruption.ReasonDisruptionBlocked && strings.Contains(ev.Note, "PodDisruptionBudget guarded allows no disruption") {
				return true, nil
			}
		}
		return false, nil
	})
	node, err := sb.Kube.CoreV1().Nodes().Get(ctx, guardedNode, metav1.GetOptions{})
	if err != nil || node.DeletionTimestamp != nil || hasTaint(node, stevedorev1.TaintDisrupted) {
		t.Errorf("node %s, whose pod's budget allows no disruption, was disrupted or removed (%v)", guardedNode, err)
	}
	pods, err := harness.RunningPods(ctx, sb, ns, "guarded")
	if err != nil || len(pods) != 1 || pods[0].UID != before["guarded"].UID || pods[0].Spec.NodeName != guardedNode {
		t.Errorf("the guarded pod moved or was restarted: %d running (%v)", len(pods), err)
	}
}

// TestConsolidationEvictsWhereAGitOpsControllerOwnsTheReplicaCount: a single-replica Deployment whose
// spec.replicas Flux's kustomize-controller owns (applied server-side under that field manager), with a stand-in for
// its self-heal that applies replicas: 1 again whenever the Deployment says otherwise. Once the filler is gone,
// consolidation moves the pod by eviction: Stevedore never changes the replica count, so the stand-in never has
// anything to put back, and the Deployment carries a SurgeSkippedForGitOps event naming the controller.
func TestConsolidationEvictsWhereAGitOpsControllerOwnsTheReplicaCount(t *testing.T) {
	ctx := harness.Context(t)
	ns := harness.Namespace(t, sb)
	const manager = "kustomize-controller"
	nodePoolOfSolos(t, "gitops", stevedorev1.ReplacementSurge)
	fillerAndSolos(t, ns, "gitops", []string{"managed"})
	apply := func(ctx context.Context) error {
		_, err := sb.Kube.AppsV1().Deployments(ns).Apply(ctx, appsv1ac.Deployment("managed", ns).WithSpec(appsv1ac.DeploymentSpec().WithReplicas(1)),
			metav1.ApplyOptions{FieldManager: manager, Force: true})
		return err
	}
	if err := apply(ctx); err != nil {
		t.Fatal(err)
	}
	reverts := selfHeal(t, ns, "managed", apply)
	before, nodes := runningSolos(t, ns, []string{"managed"})
	harness.Scale(t, sb, ns, "filler", 0)
	waitSolosMoved(t, ns, "gitops", []string{"managed"}, before, nodes)
	if n := reverts(); n > 0 {
		t.Errorf("the GitOps stand-in put spec.replicas back %d times: something changed the replica count it owns", n)
	}
	harness.Eventually(t, "a "+disruption.ReasonSurgeSkippedForGitOps+" event on Deployment managed naming "+manager, func(ctx context.Context) (bool, error) {
		list, err := sb.Kube.EventsV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "regarding.name=managed"})
		if err != nil {
			return false, err
		}
		for _, ev := range list.Items {
			if ev.Reason == disruption.ReasonSurgeSkippedForGitOps && strings.Contains(ev.Note, "owned by "+manager) {
				return true, nil
			}
		}
		return false, nil
	})
}

// selfHeal stands in for a GitOps controller's self-heal: it watches the Deployment and, whenever its spec.replicas
// is not 1, applies it again. It returns how many times it had to.
func selfHeal(t *testing.T, ns, name string, apply func(context.Context) error) func() int {
	ctx := harness.Context(t)
	w, err := sb.Kube.AppsV1().Deployments(ns).Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + name})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	var mu sync.Mutex
	reverts := 0
	go func() {
		for ev := range w.ResultChan() {
			d, ok := ev.Object.(*appsv1.Deployment)
			if !ok || ptr.Deref(d.Spec.Replicas, 1) == 1 {
				continue
			}
			mu.Lock()
			reverts++
			mu.Unlock()
			_ = apply(ctx)
		}
	}()
	return func() int {
		mu.Lock()
		defer mu.Unlock()
		return reverts
	}
}
