/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/cloud/catalog"
	"github.com/stevedore-dev/stevedore/test/karpenter"
)

// karpenterNodeClaims is Karpenter's NodeClaim resource.
var karpenterNodeClaims = schema.GroupVersionResource{Group: "karpenter.sh", Version: "v1", Resource: "nodeclaims"}

// TestTheMigrationGuideBesideKarpenter follows docs/migration-from-karpenter.md, from Karpenter only to Stevedore
// only, beside Karpenter's own controller (its kwok cloud provider, pinned in hack/karpenter) in the sandbox:
//   - before: Karpenter's CRD chart installed with Helm as release karpenter-crd, a NodePool of Karpenter's, a
//     workload of the default scheduler on the nodes Karpenter launched, and a CapacityBuffer stored;
//   - step 1: Stevedore installed with installation.md's two Helm lines (the charts of this tree) and run as its
//     Deployment would, under its ServiceAccount; the admission policy is there;
//   - step 2: Stevedore's NodePool and EC2NodeClass applied;
//   - step 3, the guide's commands as written: the namespace labelled, the policy seen to apply, its Deployment
//     restarted; the new pods name Stevedore, carry the term that keeps them off Karpenter's nodes, run on
//     Stevedore's nodes, and Karpenter launches nothing for them;
//   - step 5: Karpenter's NodePool deleted, Karpenter removes its nodes, and is stopped;
//   - step 6, the guide's commands as written: the release is forgotten, Karpenter's CRDs are gone, the buffer and
//     its CRD stay.
//
// The moved pods run throughout, and the API server refuses Stevedore's ServiceAccount nothing.
func TestTheMigrationGuideBesideKarpenter(t *testing.T) {
	in := &installed{t: t, scheduler: binary(t, "STEVEDORE_BIN", "./cmd/scheduler"),
		kubectl: binary(t, "KUBECTL", "k8s.io/kubernetes/cmd/kubectl"), root: repoRoot(t), dir: t.TempDir()}
	helm := helmBinary(t)
	kp := karpenter.Find(t, in.root)
	chart := karpenterCRDChart(t, in.dir)
	_, in.kubeconfig, in.envFile = startSandbox(t, in.scheduler, in.dir, "--launch-delay", "500ms")
	k := func(args ...string) (string, error) {
		return run(t, nil, in.kubectl, append([]string{"--kubeconfig", in.kubeconfig}, args...)...)
	}
	h := func(args ...string) {
		t.Helper()
		if out, err := run(t, nil, helm, append(args, "--kubeconfig", in.kubeconfig)...); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
	}
	apply := func(what, name, manifest string) {
		t.Helper()
		path := filepath.Join(in.dir, name)
		writeFile(t, path, manifest)
		eventually(t, what, func() error {
			_, err := k("apply", "-f", path)
			return err
		})
	}
	rc, err := clientcmd.BuildConfigFromFlags("", in.kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	kube, dyn := kubernetes.NewForConfigOrDie(rc), dynamic.NewForConfigOrDie(rc)
	ctx := context.Background()

	// the control plane's own scheduler, for the pods that name none (EKS runs it; here the scheduler binary with
	// kube-scheduler's default profile only, which needs none of Stevedore's CRDs)
	defaultConfig := filepath.Join(in.dir, "default-scheduler.yaml")
	writeFile(t, defaultConfig, `apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
leaderElection: {leaderElect: false}
profiles: [{schedulerName: default-scheduler}]
`)
	start(t, nil, nil, in.scheduler, "--config", defaultConfig, "--kubeconfig", in.kubeconfig, "--secure-port=0")

	// Karpenter, as the cluster runs it before the migration: its CRD chart as release karpenter-crd, the CRD of
	// its kwok provider's node class, a NodePool, its controller, a workload of the default scheduler on its nodes
	h("install", "karpenter-crd", chart, "-n", "kube-system")
	if out, err := k("apply", "-f", kp.NodeClassCRDs); err != nil {
		t.Fatalf("applying the CRD of Karpenter's kwok node class: %v\n%s", err, out)
	}
	karpenterCRDs := []string{"crd/nodepools.karpenter.sh", "crd/nodeclaims.karpenter.sh", "crd/nodeoverlays.karpenter.sh", "crd/ec2nodeclasses.karpenter.k8s.aws"}
	if out, err := k(append([]string{"wait", "--for=condition=Established", "--timeout=2m", "crd/kwoknodeclasses.karpenter.kwok.sh",
		"crd/capacitybuffers.autoscaling.x-k8s.io"}, karpenterCRDs...)...); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	apply("Karpenter's NodePool stored", "karpenter.yaml", karpenter.NodeClassAndPool("general"))
	controller := karpenter.Start(t, kp.Controller, in.kubeconfig, karpenter.InstanceTypes(t, catalog.Default().Zones()))
	apply("the CapacityBuffer created", "buffer.yaml", `apiVersion: autoscaling.x-k8s.io/v1beta1
kind: CapacityBuffer
metadata: {name: web, namespace: default}
spec: {podTemplateRef: {name: web}, replicas: 2}
`)
	apply("the shop's Deployment created", "shop.yaml", `apiVersion: v1
kind: Namespace
metadata: {name: shop}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: shop}
spec:
  replicas: 3
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      terminationGracePeriodSeconds: 0
      containers:
      - name: web
        image: registry.k8s.io/pause:3.10
        resources: {requests: {cpu: "1", memory: 1Gi}}
`)
	shopOn(ctx, t, kube, corev1.DefaultSchedulerName, "karpenter.sh/nodepool")
	before := claimNames(ctx, t, dyn)
	if len(before) == 0 {
		t.Fatal("Karpenter launched no NodeClaim for the shop's pods")
	}
	t.Logf("before the migration: the shop on Karpenter's NodeClaims %v", before)

	// step 1: Stevedore installed beside it with installation.md's two lines (the charts of this tree), and run
	// as its Deployment would; the CRD chart leaves Karpenter's CapacityBuffer CRD in its release
	h("upgrade", "--install", "stevedore-crd", filepath.Join(in.root, "charts", "stevedore-crd"), "-n", "stevedore", "--create-namespace")
	h("upgrade", "--install", "stevedore", filepath.Join(in.root, "charts", "stevedore"), "-n", "stevedore", "--create-namespace",
		"--set", "settings.clusterName=my-cluster")
	if out, err := k("get", "mutatingadmissionpolicies", "stevedore-scheduling"); err != nil {
		t.Fatalf("the guide's check of the admission policy: %v\n%s", err, out)
	}
	in.runAsServiceAccount("stevedore")

	// step 2: Stevedore's NodePool and EC2NodeClass (what `scheduler convert` writes for an EC2NodeClass)
	apply("Stevedore's NodePool stored", "stevedore.yaml", `apiVersion: stevedore.dev/v1
kind: EC2NodeClass
metadata: {name: default}
spec:
  amiSelectorTerms: [{alias: al2023@latest}]
  role: KarpenterNodeRole-my-cluster
  subnetSelectorTerms: [{tags: {karpenter.sh/discovery: my-cluster}}]
  securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: my-cluster}}]
---
apiVersion: stevedore.dev/v1
kind: NodePool
metadata: {name: general}
spec:
  template:
    spec:
      nodeClassRef: {name: default}
      requirements:
      - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
      - {key: kubernetes.io/arch, operator: In, values: [amd64]}
`)

	// step 3, as the guide writes it: the label, the wait for the policy, the restart
	guide := newDocShell(t, in.scheduler, in.kubectl, in.kubeconfig)
	if out, err := guide.run("docs/migration-from-karpenter.md", "3. **Move a namespace**"); err != nil {
		t.Fatalf("the guide's move of a namespace, run as written: %v\n%s", err, out)
	}
	if out, err := runWithin(t, 5*time.Minute, nil, in.kubectl, "--kubeconfig", in.kubeconfig, "rollout", "status", "deployment/web", "-n", "shop", "--timeout=4m"); err != nil {
		t.Fatalf("the restarted Deployment did not roll out: %v\n%s", err, out)
	}
	moved := shopOn(ctx, t, kube, "stevedore", stevedorev1.LabelNodePool)
	t.Logf("after the restart: pods %v on Stevedore's nodes %v", podNames(moved), podNodes(moved))
	for _, pod := range moved {
		if !keptOffKarpenter(pod) {
			t.Errorf("pod %s has no required node affinity term keeping it off Karpenter's nodes: %v", pod.Name, pod.Spec.Affinity)
		}
	}
	if launched := newNames(before, claimNames(ctx, t, dyn)); len(launched) > 0 {
		t.Errorf("Karpenter launched NodeClaims %v after the shop moved to Stevedore", launched)
	}

	// step 5: Karpenter's NodePools deleted, its nodes go; then it is uninstalled
	if out, err := k("delete", "nodepools.karpenter.sh", "--all", "--wait=false"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	eventually(t, "Karpenter's nodes gone", func() error {
		if names := claimNames(ctx, t, dyn); len(names) > 0 {
			return fmt.Errorf("NodeClaims %v", names)
		}
		nodes, err := kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: "karpenter.sh/nodepool"})
		if err != nil {
			return err
		}
		if len(nodes.Items) > 0 {
			return fmt.Errorf("%d nodes", len(nodes.Items))
		}
		return nil
	})
	if err := controller.Stop(); err != nil {
		t.Fatal(err)
	}

	// step 6, as the guide writes it
	out, err := guide.run("docs/migration-from-karpenter.md", "6. **Hand over the CRDs.**")
	if err != nil {
		t.Fatalf("the guide's CRD hand-over, run as written: %v\n%s", err, out)
	}
	if out, err := run(t, nil, helm, "list", "-A", "-q", "--kubeconfig", in.kubeconfig); err != nil || strings.Contains(out, "karpenter-crd") {
		t.Errorf("helm still lists karpenter-crd (%v):\n%s", err, out)
	}
	eventually(t, "Karpenter's CRDs deleted", func() error {
		out, err := k(append([]string{"get", "--ignore-not-found", "-o", "name"}, karpenterCRDs...)...)
		if err != nil {
			return err
		}
		if out != "" {
			return fmt.Errorf("still there: %s", out)
		}
		return nil
	})
	if out, err := k("get", "capacitybuffers.autoscaling.x-k8s.io", "web", "-n", "default", "-o", "name"); err != nil {
		t.Errorf("the CapacityBuffer did not stay: %v\n%s", err, out)
	}
	if still := shopOn(ctx, t, kube, "stevedore", stevedorev1.LabelNodePool); !sameNames(moved, still) {
		t.Errorf("the shop's pods changed after the hand-over: %v, then %v", podNames(moved), podNames(still))
	}
	in.checkNothingRefused()
}

// shopOn waits until the shop's Deployment has its three pods Running, each named for scheduler and on a node
// carrying the label poolLabel (a node of Stevedore's or of Karpenter's), and no other pod; it returns them.
func shopOn(ctx context.Context, t *testing.T, kube kubernetes.Interface, scheduler, poolLabel string) []corev1.Pod {
	t.Helper()
	var running []corev1.Pod
	eventually(t, fmt.Sprintf("the shop's three pods Running, by %s, on nodes labelled %s", scheduler, poolLabel), func() error {
		pods, err := kube.CoreV1().Pods("shop").List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		running = running[:0]
		for _, pod := range pods.Items {
			switch {
			case pod.Spec.SchedulerName != scheduler:
				return fmt.Errorf("pod %s names scheduler %s", pod.Name, pod.Spec.SchedulerName)
			case pod.Status.Phase != corev1.PodRunning || pod.DeletionTimestamp != nil:
				return fmt.Errorf("pod %s is %s", pod.Name, pod.Status.Phase)
			}
			node, err := kube.CoreV1().Nodes().Get(ctx, pod.Spec.NodeName, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if _, ok := node.Labels[poolLabel]; !ok {
				return fmt.Errorf("pod %s runs on node %s, which has no label %s", pod.Name, node.Name, poolLabel)
			}
			running = append(running, pod)
		}
		if len(running) != 3 {
			return fmt.Errorf("%d pods", len(running))
		}
		return nil
	})
	return running
}

// keptOffKarpenter reports whether every term of the pod's required node affinity says karpenter.sh/nodepool
// DoesNotExist, as Stevedore's admission policy writes it.
func keptOffKarpenter(pod corev1.Pod) bool {
	a := pod.Spec.Affinity
	if a == nil || a.NodeAffinity == nil || a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return false
	}
	terms := a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	for _, term := range terms {
		if !slices.ContainsFunc(term.MatchExpressions, func(r corev1.NodeSelectorRequirement) bool {
			return r.Key == "karpenter.sh/nodepool" && r.Operator == corev1.NodeSelectorOpDoesNotExist
		}) {
			return false
		}
	}
	return len(terms) > 0
}

// claimNames lists Karpenter's NodeClaims by name.
func claimNames(ctx context.Context, t *testing.T, dyn dynamic.Interface) []string {
	t.Helper()
	list, err := dyn.Resource(karpenterNodeClaims).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	names := make([]string, 0, len(list.Items))
	for _, item := range list.Items {
		names = append(names, item.GetName())
	}
	return names
}

// newNames returns the names of after that are not in before.
func newNames(before, after []string) []string {
	var out []string
	for _, name := range after {
		if !slices.Contains(before, name) {
			out = append(out, name)
		}
	}
	return out
}

func podNames(pods []corev1.Pod) []string {
	names := make([]string, 0, len(pods))
	for _, pod := range pods {
		names = append(names, pod.Name)
	}
	slices.Sort(names)
	return names
}

func podNodes(pods []corev1.Pod) []string {
	nodes := make([]string, 0, len(pods))
	for _, pod := range pods {
		if !slices.Contains(nodes, pod.Spec.NodeName) {
			nodes = append(nodes, pod.Spec.NodeName)
		}
	}
	slices.Sort(nodes)
	return nodes
}

func sameNames(a, b []corev1.Pod) bool { return slices.Equal(podNames(a), podNames(b)) }
