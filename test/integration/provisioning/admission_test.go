/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package provisioning

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stevedore-dev/stevedore/pkg/sandbox"
	"github.com/stevedore-dev/stevedore/test/integration/harness"
)

// TestTheSchedulingPolicyOptsNamespacesInAndKeepsKarpenterOff creates pods of every shape against the shipped
// admission policy (the sandbox installs it as the README's install does): which get the stevedore scheduler, and
// which are kept off Karpenter's nodes with every term of their required node affinity intact. Then a Deployment
// that names no scheduler, in a labelled namespace, runs on a node Stevedore launched for it.
func TestTheSchedulingPolicyOptsNamespacesInAndKeepsKarpenterOff(t *testing.T) {
	ctx := context.Background()
	optedIn := harness.CheckAdmission(t, sb)
	// a workload that names no scheduler, in the labelled namespace, runs on a node Stevedore launches
	iso := "admission"
	harness.NodePool(t, sb, "admission", iso)
	d := harness.Deployment(optedIn, "web", 2, "500m", "256Mi")
	d.Spec.Template.Spec.SchedulerName = ""
	p := harness.Isolated(&corev1.Pod{Spec: d.Spec.Template.Spec}, iso)
	d.Spec.Template.Spec = p.Spec
	if _, err := sb.Kube.AppsV1().Deployments(optedIn).Create(ctx, d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, pod := range harness.WaitRunning(t, sb, optedIn, "web", 2) {
		if pod.Spec.SchedulerName != "stevedore" || !sandbox.KeptOffKarpenter(&pod) {
			t.Errorf("pod %s: schedulerName %q, kept off Karpenter %v", pod.Name, pod.Spec.SchedulerName, sandbox.KeptOffKarpenter(&pod))
		}
		node := harness.Node(t, sb, pod.Spec.NodeName)
		if node.Labels["stevedore.dev/nodepool"] != "admission" {
			t.Errorf("pod %s runs on %s, not on a node of NodePool admission", pod.Name, node.Name)
		}
	}
}

// TestPodsOfOtherSchedulersMayUseStevedoresNodesButNeverLaunchOne: during a migration, a pod that names no
// scheduler stays with the default scheduler (EKS's): it may be placed on a node Stevedore launched, like on any
// node with room whose taints it tolerates, but a pod of the default scheduler that no node fits makes Stevedore
// launch nothing (it is Karpenter's to launch for).
func TestPodsOfOtherSchedulersMayUseStevedoresNodesButNeverLaunchOne(t *testing.T) {
	ns := harness.Namespace(t, sb)
	iso := "othersched"
	harness.NodePool(t, sb, "othersched", iso)
	harness.IsolatedDeployment(t, sb, harness.Deployment(ns, "stevedores", 1, "500m", "256Mi"), iso)
	running := harness.WaitRunning(t, sb, ns, "stevedores", 1)
	node := running[0].Spec.NodeName

	guest := harness.Isolated(harness.Pod(ns, "guest", "100m", "64Mi"), iso)
	guest.Spec.SchedulerName = corev1.DefaultSchedulerName
	guest.Spec.NodeSelector[corev1.LabelHostname] = node
	big := harness.Isolated(harness.Pod(ns, "too-big", "60", "64Mi"), iso)
	big.Spec.SchedulerName = corev1.DefaultSchedulerName
	harness.CreatePods(t, sb, guest, big)
	bound := harness.WaitBound(t, sb, ns, []string{"guest"})
	if bound["guest"].Spec.NodeName != node {
		t.Errorf("the default scheduler's pod runs on %s, want Stevedore's node %s", bound["guest"].Spec.NodeName, node)
	}
	// the too-big pod is in the same namespace: wait until the default scheduler has tried it, then check that no
	// NodeClaim names it
	harness.Eventually(t, "the default scheduler to find no node for too-big", func(ctx context.Context) (bool, error) {
		p, err := sb.Kube.CoreV1().Pods(ns).Get(ctx, "too-big", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
				return true, nil
			}
		}
		return false, nil
	})
	// a later pod of Stevedore's gets its node: the batch it was planned in had the too-big pod's time to be seen
	harness.IsolatedDeployment(t, sb, harness.Deployment(ns, "later", 1, "500m", "256Mi"), iso)
	harness.WaitRunning(t, sb, ns, "later", 1)
	for _, c := range harness.NodeClaimsOf(t, sb, "othersched") {
		if strings.Contains(c.Annotations["stevedore.dev/planned-pods"], "too-big") {
			t.Errorf("NodeClaim %s was launched for the default scheduler's pod", c.Name)
		}
	}
}
