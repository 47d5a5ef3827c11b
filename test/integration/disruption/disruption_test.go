/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

// Package disruption tests the disruption loop on a sandbox: emptiness, consolidation, budgets, do-not-disrupt,
// drift, expiry, manual deletion and garbage collection.
package disruption

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/util/retry"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/podutil"
	"github.com/stevedore-dev/stevedore/pkg/sandbox"
	"github.com/stevedore-dev/stevedore/test/integration/harness"
)

var sb *sandbox.Sandbox

func TestMain(m *testing.M) {
	harness.Run(m, sandbox.Options{WithScheduler: true, LaunchDelay: 200 * time.Millisecond, PluginArgs: map[string]any{
		"disruptionPollInterval":    "1s",
		"disruptionValidationDelay": "1s",
		"garbageCollectionInterval": "2s",
		// repair within a minute (repair_test.go). Ready Unknown waits 45 s: under load a simulated kubelet's lease
		// renewal can lag past the node lifecycle controller's 20 s grace for a moment, which must not repair it.
		"nodeRepair": map[string]any{"enabled": true, "drainTimeout": "5s", "rebootWait": "20s", "policies": []map[string]any{
			{"conditionType": "Ready", "conditionStatus": "Unknown", "toleration": "45s"},
			{"conditionType": "Ready", "conditionStatus": "False", "toleration": "10s"},
			{"conditionType": "KernelReady", "conditionStatus": "False", "toleration": "5s", "reboot": true},
		}},
	}}, func(s *sandbox.Sandbox) { sb = s })
}

func budget(nodes string) func(*stevedorev1.NodePool) {
	return func(np *stevedorev1.NodePool) {
		np.Spec.Disruption.Budgets = []stevedorev1.Budget{{Nodes: nodes}}
	}
}

func waitNoNodeClaims(t *testing.T, pool string) {
	t.Helper()
	harness.EventuallyWithin(t, 4*time.Minute, "every NodeClaim of "+pool+" to be gone", func(ctx context.Context) (bool, error) {
		return len(harness.NodeClaimsOf(t, sb, pool)) == 0, nil
	})
}

func TestScalingToZeroRemovesEveryEmptyNode(t *testing.T) {
	ns := harness.Namespace(t, sb)
	harness.NodePool(t, sb, "empty", "empty")
	harness.IsolatedDeployment(t, sb, harness.Deployment(ns, "inflate", 10, "1", "512Mi"), "empty")
	harness.WaitRunning(t, sb, ns, "inflate", 10)
	if n := len(harness.LiveNodeClaimsOf(t, sb, "empty")); n < 5 {
		t.Fatalf("10 pods of 1 CPU on %d nodes; the test needs several", n)
	}
	harness.Scale(t, sb, ns, "inflate", 0)
	waitNoNodeClaims(t, "empty")
}

// TestScalingDownConsolidatesWithoutOutage runs 100 pods, scales to 30 and waits until consolidation has moved
// them onto fewer nodes costing less, while a PodDisruptionBudget allows at most 3 of them to be unavailable:
// a watch checks that the Deployment never has fewer than 27 available, and every pod ends up Running.
func TestScalingDownConsolidatesWithoutOutage(t *testing.T) {
	ns := harness.Namespace(t, sb)
	harness.NodePool(t, sb, "consolidate", "consolidate", budget("50%"))
	harness.IsolatedDeployment(t, sb, harness.Deployment(ns, "web", 100, "250m", "256Mi"), "consolidate")
	harness.WaitRunning(t, sb, ns, "web", 100)
	before, beforeCost := fleet(t, "consolidate")
	harness.Scale(t, sb, ns, "web", 30)
	harness.WaitRunning(t, sb, ns, "web", 30)
	minAvailable := intstr.FromInt32(27)
	pdb := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns}, Spec: policyv1.PodDisruptionBudgetSpec{
		MinAvailable: &minAvailable, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}}
	if _, err := sb.Kube.PolicyV1().PodDisruptionBudgets(ns).Create(context.Background(), pdb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	lowest := watchAvailable(t, ns, "web")
	t.Cleanup(func() {
		if t.Failed() {
			dumpDrain(t, ns, "web")
		}
	})
	_, afterScaleCost := fleet(t, "consolidate")
	// Consolidation has settled when no NodeClaim is being deleted, the 30 pods all run on live nodes of the
	// NodePool, and the fleet is at most a third of its size (30 pods of 250m fit on few nodes) and costs less
	// than right after the scale-down.
	var after []stevedorev1.NodeClaim
	var afterCost float64
	harness.EventuallyWithin(t, 6*time.Minute, "consolidation to settle on fewer, cheaper nodes", func(ctx context.Context) (bool, error) {
		all := harness.NodeClaimsOf(t, sb, "consolidate")
		live := map[string]bool{}
		for _, c := range all {
			if c.DeletionTimestamp != nil {
				return false, nil
			}
			live[c.Status.NodeName] = true
		}
		pods, err := harness.RunningPods(ctx, sb, ns, "web")
		if err != nil || len(pods) != 30 {
			return false, err
		}
		for _, p := range pods {
			if !live[p.Spec.NodeName] {
				return false, nil
			}
		}
		after, afterCost = fleet(t, "consolidate")
		return len(after) <= len(before)/3+1 && afterCost < afterScaleCost, nil
	})
	t.Logf("100 pods on %d nodes ($%.4f/h); 30 pods consolidated onto %d nodes ($%.4f/h, was $%.4f/h after the scale-down)",
		len(before), beforeCost, len(after), afterCost, afterScaleCost)
	if got := lowest(); got < 27 {
		t.Errorf("the Deployment had only %d available pods at one point; the PodDisruptionBudget requires 27", got)
	}
}

// dumpDrain logs the PodDisruptionBudget's status and where each pod of app is, for a failed drain.
func dumpDrain(t *testing.T, ns, app string) {
	ctx := context.Background()
	if pdb, err := sb.Kube.PolicyV1().PodDisruptionBudgets(ns).Get(ctx, app, metav1.GetOptions{}); err == nil {
		t.Logf("PDB %s: allowed=%d healthy=%d desired=%d expected=%d", app, pdb.Status.DisruptionsAllowed, pdb.Status.CurrentHealthy,
			pdb.Status.DesiredHealthy, pdb.Status.ExpectedPods)
	}
	list, _ := sb.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=" + app})
	for _, p := range list.Items {
		t.Logf("pod %s node=%s phase=%s deleting=%v", p.Name, p.Spec.NodeName, p.Status.Phase, p.DeletionTimestamp != nil)
	}
}

// fleet returns a NodePool's live NodeClaims and their total hourly price.
func fleet(t *testing.T, pool string) ([]stevedorev1.NodeClaim, float64) {
	claims := harness.LiveNodeClaimsOf(t, sb, pool)
	total := 0.0
	for _, c := range claims {
		total += stevedorev1.ParsePrice(c.Status.Price)
	}
	return claims, total
}

// watchAvailable watches the pods of a Deployment (label app=<name>) until the test ends and returns a function
// giving the fewest of them Ready at once (what a PodDisruptionBudget protects). It starts once all the
// Deployment's replicas are Ready, and counts from the pods themselves: the Deployment's own status lags behind
// them and would show dips that never happened.
func watchAvailable(t *testing.T, ns, name string) func() int32 {
	ctx := harness.Context(t)
	selector := "app=" + name
	ready := map[string]bool{}
	var since string
	harness.Eventually(t, "every replica of Deployment "+ns+"/"+name+" to be Ready", func(ctx context.Context) (bool, error) {
		dep, err := sb.Kube.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		pods, err := sb.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			return false, err
		}
		clear(ready)
		for i := range pods.Items {
			if podReady(&pods.Items[i]) {
				ready[pods.Items[i].Name] = true
			}
		}
		since = pods.ResourceVersion
		return dep.Spec.Replicas != nil && int32(len(ready)) == *dep.Spec.Replicas, nil //nolint:gosec // G115: a test's few replicas
	})
	w, err := sb.Kube.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{LabelSelector: selector, ResourceVersion: since})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	lowest := int32(len(ready)) //nolint:gosec // G115: a test's few replicas
	go func() {
		for ev := range w.ResultChan() {
			pod, ok := ev.Object.(*corev1.Pod)
			if !ok {
				continue
			}
			mu.Lock()
			if ev.Type != watch.Deleted && podReady(pod) {
				ready[pod.Name] = true
			} else {
				delete(ready, pod.Name)
			}
			lowest = min(lowest, int32(len(ready))) //nolint:gosec // G115: a test's few replicas
			mu.Unlock()
		}
	}()
	t.Cleanup(w.Stop)
	return func() int32 {
		mu.Lock()
		defer mu.Unlock()
		return lowest
	}
}

// podReady reports whether a pod is Ready and not on its way out.
func podReady(pod *corev1.Pod) bool {
	return pod.DeletionTimestamp == nil && podutil.Ready(pod)
}

// TestABudgetOfOneNodeIsNeverExceeded removes eight empty nodes under a budget of one and watches the nodes: at
// no moment are two of them being disrupted (tainted stevedore.dev/disrupted or deleted) at once.
func TestABudgetOfOneNodeIsNeverExceeded(t *testing.T) {
	ns := harness.Namespace(t, sb)
	harness.NodePool(t, sb, "budget", "budget", budget("1"))
	harness.IsolatedDeployment(t, sb, harness.Deployment(ns, "inflate", 8, "1", "512Mi"), "budget")
	harness.WaitRunning(t, sb, ns, "inflate", 8)
	maxSeen := watchDisrupting(t, "budget")
	harness.Scale(t, sb, ns, "inflate", 0)
	waitNoNodeClaims(t, "budget")
	if got := maxSeen(); got != 1 {
		t.Errorf("at most %d nodes were being disrupted at once; the budget is 1 (and 0 means nothing was seen)", got)
	}
}

// watchDisrupting watches a NodePool's nodes and returns a function giving the most seen being disrupted at once.
func watchDisrupting(t *testing.T, pool string) func() int {
	ctx := harness.Context(t)
	sel := labels.SelectorFromSet(labels.Set{stevedorev1.LabelNodePool: pool}).String()
	w, err := sb.Kube.CoreV1().Nodes().Watch(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	disrupting := map[string]bool{}
	maxSeen := 0
	go func() {
		for ev := range w.ResultChan() {
			node, ok := ev.Object.(*corev1.Node)
			if !ok {
				continue
			}
			mu.Lock()
			switch {
			case ev.Type == watch.Deleted:
				delete(disrupting, node.Name)
			case node.DeletionTimestamp != nil || hasTaint(node, stevedorev1.TaintDisrupted):
				disrupting[node.Name] = true
			default:
				delete(disrupting, node.Name)
			}
			maxSeen = max(maxSeen, len(disrupting))
			mu.Unlock()
		}
	}()
	t.Cleanup(w.Stop)
	return func() int {
		mu.Lock()
		defer mu.Unlock()
		return maxSeen
	}
}

func hasTaint(node *corev1.Node, key string) bool {
	for _, t := range node.Spec.Taints {
		if t.Key == key {
			return true
		}
	}
	return false
}

// TestDoNotDisruptPodsAndNodesAreLeftAlone: four pods, one per node (hostname anti-affinity). Node A keeps a
// do-not-disrupt pod, node B is annotated do-not-disrupt and emptied, node C is emptied, node D keeps a plain pod
// that fits on B. Emptiness removes C and consolidation removes D (its pod moves); A and B, which the same passes
// would otherwise have taken, stay untouched.
func TestDoNotDisruptPodsAndNodesAreLeftAlone(t *testing.T) {
	ns := harness.Namespace(t, sb)
	harness.NodePool(t, sb, "dnd", "dnd", budget("100%"))
	var pods []*corev1.Pod
	var names []string
	for _, n := range []string{"a", "b", "c", "d"} {
		p := harness.Isolated(harness.Pod(ns, n, "500m", "256Mi"), "dnd")
		p.Labels = map[string]string{"group": "dnd"}
		p.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"group": "dnd"}}, TopologyKey: corev1.LabelHostname}}}}
		if n == "a" {
			p.Annotations = map[string]string{stevedorev1.DoNotDisruptKey: "true"}
		}
		pods = append(pods, p)
		names = append(names, n)
	}
	// d's pod must be able to move to B, which will host no anti-affine pod; it is created without the label
	pods[3].Labels = map[string]string{"group": "other"}
	harness.CreatePods(t, sb, pods...)
	// A do-not-disrupt pod holds its node's drain until the NodePool's terminationGracePeriod (none here): the
	// test removes it before the NodePool goes.
	t.Cleanup(func() {
		zero := int64(0)
		_ = sb.Kube.CoreV1().Pods(ns).Delete(context.Background(), "a", metav1.DeleteOptions{GracePeriodSeconds: &zero})
	})
	bound := harness.WaitBound(t, sb, ns, names)
	nodeA, nodeB, nodeC, nodeD := bound["a"].Spec.NodeName, bound["b"].Spec.NodeName, bound["c"].Spec.NodeName, bound["d"].Spec.NodeName
	if len(map[string]bool{nodeA: true, nodeB: true, nodeC: true, nodeD: true}) != 4 {
		t.Fatalf("pods share nodes: a=%s b=%s c=%s d=%s", nodeA, nodeB, nodeC, nodeD)
	}
	patch := []byte(fmt.Sprintf(`{"metadata":{"annotations":{%q:"true"}}}`, stevedorev1.DoNotDisruptKey))
	if _, err := sb.Kube.CoreV1().Nodes().Patch(context.Background(), nodeB, "application/merge-patch+json", patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"b", "c"} {
		if err := sb.Kube.CoreV1().Pods(ns).Delete(context.Background(), n, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	harness.EventuallyWithin(t, 3*time.Minute, "nodes C (empty) and D (its pod fits on B) to be removed", func(ctx context.Context) (bool, error) {
		return nodeGone(ctx, nodeC) && nodeGone(ctx, nodeD), nil
	})
	for _, name := range []string{nodeA, nodeB} {
		node := harness.Node(t, sb, name)
		if node.DeletionTimestamp != nil || hasTaint(node, stevedorev1.TaintDisrupted) {
			t.Errorf("node %s was disrupted despite do-not-disrupt", name)
		}
	}
	if p, err := sb.Kube.CoreV1().Pods(ns).Get(context.Background(), "a", metav1.GetOptions{}); err != nil || p.Spec.NodeName != nodeA {
		t.Errorf("the do-not-disrupt pod a moved or is gone: %v", err)
	}
	for _, name := range []string{nodeA, nodeB} {
		harness.EventuallyWithin(t, time.Minute, "a DisruptionBlocked event on "+name, func(ctx context.Context) (bool, error) {
			list, err := sb.Kube.EventsV1().Events(metav1.NamespaceAll).List(ctx, metav1.ListOptions{FieldSelector: "regarding.name=" + name})
			if err != nil {
				return false, err
			}
			for _, ev := range list.Items {
				if ev.Reason == "DisruptionBlocked" {
					return true, nil
				}
			}
			return false, nil
		})
	}
}

func nodeGone(ctx context.Context, name string) bool {
	_, err := sb.Kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	return apierrors.IsNotFound(err)
}

// TestChangingTheAMIReplacesEveryNodeWithoutOutage points the node class at new AMIs: every node drifts and is
// replaced by one running the new AMI, launched before the old one is drained, while a PodDisruptionBudget
// keeps at least 3 of the 4 pods available (checked by a watch).
func TestChangingTheAMIReplacesEveryNodeWithoutOutage(t *testing.T) {
	ctx := context.Background()
	ns := harness.Namespace(t, sb)
	nc := &stevedorev1.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: "drift"}, Spec: stevedorev1.EC2NodeClassSpec{
		Role:                       "KarpenterNodeRole-my-cluster",
		AMISelectorTerms:           []stevedorev1.AMISelectorTerm{{Alias: "al2023@latest"}},
		SubnetSelectorTerms:        []stevedorev1.SubnetSelectorTerm{{Tags: map[string]string{"karpenter.sh/discovery": "my-cluster"}}},
		SecurityGroupSelectorTerms: []stevedorev1.SecurityGroupSelectorTerm{{Tags: map[string]string{"karpenter.sh/discovery": "my-cluster"}}},
	}}
	if _, err := sb.Stevedore.StevedoreV1().EC2NodeClasses().Create(ctx, nc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sb.Stevedore.StevedoreV1().EC2NodeClasses().Delete(ctx, "drift", metav1.DeleteOptions{}) })
	harness.NodePool(t, sb, "drift", "drift", budget("100%"), func(np *stevedorev1.NodePool) {
		np.Spec.Template.Spec.NodeClassRef = &stevedorev1.NodeClassReference{Name: "drift"}
	})
	harness.IsolatedDeployment(t, sb, harness.Deployment(ns, "app", 4, "1", "512Mi"), "drift")
	harness.WaitRunning(t, sb, ns, "app", 4)
	maxUnavailable := intstr.FromInt32(1)
	pdb := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: ns}, Spec: policyv1.PodDisruptionBudgetSpec{
		MaxUnavailable: &maxUnavailable, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "app"}}}}
	if _, err := sb.Kube.PolicyV1().PodDisruptionBudgets(ns).Create(ctx, pdb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	old := map[string]bool{}
	for _, c := range harness.LiveNodeClaimsOf(t, sb, "drift") {
		old[c.Name] = true
	}
	lowest := watchAvailable(t, ns, "app")
	newAMIs := map[string]bool{}
	var terms []stevedorev1.AMISelectorTerm
	for _, arch := range []string{"amd64", "arm64"} {
		id := sb.AWS.AddImage("al2023-eks-next-"+arch, arch, map[string]string{"release": "next"})
		newAMIs[id] = true
		terms = append(terms, stevedorev1.AMISelectorTerm{ID: id})
	}
	// Stevedore writes the node class's status: read-modify-write until the write lands on the latest version
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := sb.Stevedore.StevedoreV1().EC2NodeClasses().Get(ctx, "drift", metav1.GetOptions{})
		if err != nil {
			return err
		}
		family := stevedorev1.AMIFamilyAL2023
		cur.Spec.AMIFamily = &family
		cur.Spec.AMISelectorTerms = terms
		_, err = sb.Stevedore.StevedoreV1().EC2NodeClasses().Update(ctx, cur, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	harness.EventuallyWithin(t, 6*time.Minute, "every node replaced by one on the new AMI", func(ctx context.Context) (bool, error) {
		claims := harness.NodeClaimsOf(t, sb, "drift")
		for _, c := range claims {
			if old[c.Name] || !newAMIs[c.Status.ImageID] || !c.IsInitialized() {
				return false, nil
			}
		}
		return len(claims) > 0, nil
	})
	harness.WaitRunning(t, sb, ns, "app", 4)
	if got := lowest(); got < 3 {
		t.Errorf("only %d of 4 pods were available at one point during the replacement", got)
	}
}

// TestExpiredNodesAreReplaced: nodes of a NodePool with expireAfter 45s are replaced once they expire, and the
// pods run on the replacements.
func TestExpiredNodesAreReplaced(t *testing.T) {
	ns := harness.Namespace(t, sb)
	harness.NodePool(t, sb, "expire", "expire", func(np *stevedorev1.NodePool) {
		np.Spec.Template.Spec.ExpireAfter = stevedorev1.NewDuration(45 * time.Second)
		never := stevedorev1.NeverDuration()
		np.Spec.Disruption.ConsolidateAfter = never
	})
	harness.IsolatedDeployment(t, sb, harness.Deployment(ns, "app", 2, "1", "512Mi"), "expire")
	harness.WaitRunning(t, sb, ns, "app", 2)
	old := map[string]bool{}
	for _, c := range harness.LiveNodeClaimsOf(t, sb, "expire") {
		old[c.Name] = true
	}
	harness.EventuallyWithin(t, 4*time.Minute, "the expired nodes to be replaced", func(ctx context.Context) (bool, error) {
		for _, c := range harness.NodeClaimsOf(t, sb, "expire") {
			if old[c.Name] {
				return false, nil
			}
		}
		return true, nil
	})
	pods := harness.WaitRunning(t, sb, ns, "app", 2)
	for _, p := range pods {
		node := harness.Node(t, sb, p.Spec.NodeName)
		if old[node.Labels[stevedorev1.LabelNodeClaim]] {
			t.Errorf("pod %s still runs on the expired node %s", p.Name, node.Name)
		}
	}
}

// TestDeletingANodeDrainsThenTerminatesIt deletes a node as kubectl delete node does: its pod is evicted, and the
// emulated instance is terminated only once no pod is left on the node (checked on every poll).
func TestDeletingANodeDrainsThenTerminatesIt(t *testing.T) {
	ctx := context.Background()
	ns := harness.Namespace(t, sb)
	harness.NodePool(t, sb, "delete", "delete", func(np *stevedorev1.NodePool) {
		np.Spec.Disruption.ConsolidateAfter = stevedorev1.NeverDuration()
	})
	harness.IsolatedDeployment(t, sb, harness.Deployment(ns, "app", 1, "1", "512Mi"), "delete")
	pods := harness.WaitRunning(t, sb, ns, "app", 1)
	nodeName := pods[0].Spec.NodeName
	node := harness.Node(t, sb, nodeName)
	claim, err := sb.Stevedore.StevedoreV1().NodeClaims().Get(ctx, node.Labels[stevedorev1.LabelNodeClaim], metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := sb.Kube.CoreV1().Nodes().Delete(ctx, nodeName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	harness.EventuallyWithin(t, 3*time.Minute, "the instance to be terminated after the drain", func(ctx context.Context) (bool, error) {
		inst := sb.AWS.EC2.Instance(claim.Status.InstanceID)
		terminated := inst == nil || inst.State == "terminated" || inst.State == "shutting-down"
		if terminated {
			list, err := sb.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + nodeName})
			if err != nil {
				return false, err
			}
			for _, p := range list.Items {
				if p.DeletionTimestamp == nil {
					return false, fmt.Errorf("instance %s terminated while pod %s was still on the node", claim.Status.InstanceID, p.Name)
				}
			}
		}
		return terminated && nodeGone(ctx, nodeName), nil
	})
	harness.WaitRunning(t, sb, ns, "app", 1)
}

// TestGarbageCollection terminates an instance tagged as the cluster's that no NodeClaim accounts for, and
// deletes a NodeClaim whose instance was terminated behind Stevedore's back.
func TestGarbageCollection(t *testing.T) {
	ns := harness.Namespace(t, sb)
	harness.NodePool(t, sb, "gc", "gc", func(np *stevedorev1.NodePool) {
		np.Spec.Disruption.ConsolidateAfter = stevedorev1.NeverDuration()
	})
	orphan := sb.AWS.EC2.RunInstance("t4g.small", "us-east-1a", map[string]string{
		"kubernetes.io/cluster/my-cluster": "owned", stevedorev1.LabelNodePool: "gc", "eks:eks-cluster-name": "my-cluster"})
	harness.IsolatedDeployment(t, sb, harness.Deployment(ns, "app", 1, "1", "512Mi"), "gc")
	pods := harness.WaitRunning(t, sb, ns, "app", 1)
	node := harness.Node(t, sb, pods[0].Spec.NodeName)
	claim, err := sb.Stevedore.StevedoreV1().NodeClaims().Get(context.Background(), node.Labels[stevedorev1.LabelNodeClaim], metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := sb.AWS.EC2.Interrupt(claim.Status.InstanceID, "terminated outside Stevedore"); err != nil {
		t.Fatal(err)
	}
	harness.EventuallyWithin(t, 3*time.Minute, "the orphan terminated and the NodeClaim without instance deleted", func(ctx context.Context) (bool, error) {
		inst := sb.AWS.EC2.Instance(orphan.ID)
		_, err := sb.Stevedore.StevedoreV1().NodeClaims().Get(ctx, claim.Name, metav1.GetOptions{})
		return (inst.State == "terminated" || inst.State == "shutting-down") && apierrors.IsNotFound(err), nil
	})
	harness.WaitRunning(t, sb, ns, "app", 1)
}
