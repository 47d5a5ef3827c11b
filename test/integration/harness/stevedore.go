/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package harness

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/util/retry"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/sandbox"
)

// IsolationKey keeps tests sharing a sandbox off each other's nodes: each test's NodePool carries the label and
// taint "stevedore-test=<name>", and its pods select and tolerate it.
const IsolationKey = "stevedore-test"

// NodeClass creates the EC2NodeClass "default" (subnets and security groups by the sandbox's discovery tag) if it
// does not exist.
func NodeClass(t testing.TB, sb *sandbox.Sandbox) {
	t.Helper()
	if _, err := sb.Stevedore.StevedoreV1().EC2NodeClasses().Create(context.Background(), NewNodeClass(), metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

// NewNodeClass returns the EC2NodeClass "default": subnets and security groups found by the sandbox's discovery
// tag.
func NewNodeClass() *stevedorev1.EC2NodeClass {
	return &stevedorev1.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: "default"}, Spec: stevedorev1.EC2NodeClassSpec{
		Role:                       "KarpenterNodeRole-my-cluster",
		SubnetSelectorTerms:        []stevedorev1.SubnetSelectorTerm{{Tags: map[string]string{"karpenter.sh/discovery": "my-cluster"}}},
		SecurityGroupSelectorTerms: []stevedorev1.SecurityGroupSelectorTerm{{Tags: map[string]string{"karpenter.sh/discovery": "my-cluster"}}},
	}}
}

// NodePool creates an isolated NodePool for the test (deleted, with its nodes, when the test ends).
func NodePool(t testing.TB, sb *sandbox.Sandbox, name, isolation string, mutate ...func(*stevedorev1.NodePool)) *stevedorev1.NodePool {
	t.Helper()
	NodeClass(t, sb)
	created, err := sb.Stevedore.StevedoreV1().NodePools().Create(context.Background(), NewNodePool(name, isolation, mutate...), metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating NodePool %s: %v", name, err)
	}
	t.Cleanup(func() { DeleteNodePool(t, sb, name) })
	return created
}

// NewNodePool returns a NodePool on the default node class whose nodes carry the isolation label and taint.
func NewNodePool(name, isolation string, mutate ...func(*stevedorev1.NodePool)) *stevedorev1.NodePool {
	np := &stevedorev1.NodePool{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: stevedorev1.NodePoolSpec{Template: stevedorev1.NodeClaimTemplate{
			ObjectMeta: stevedorev1.TemplateObjectMeta{Labels: map[string]string{IsolationKey: isolation}},
			Spec: stevedorev1.NodeClaimTemplateSpec{
				NodeClassRef: &stevedorev1.NodeClassReference{Name: "default"},
				Taints:       []corev1.Taint{{Key: IsolationKey, Value: isolation, Effect: corev1.TaintEffectNoSchedule}},
			},
		}},
	}
	for _, m := range mutate {
		m(np)
	}
	return np
}

// DeleteNodePool deletes a NodePool and waits until its NodeClaims and nodes are gone.
func DeleteNodePool(t testing.TB, sb *sandbox.Sandbox, name string) {
	ctx := context.Background()
	_ = sb.Stevedore.StevedoreV1().NodePools().Delete(ctx, name, metav1.DeleteOptions{})
	sel := labels.SelectorFromSet(labels.Set{stevedorev1.LabelNodePool: name}).String()
	claims, err := sb.Stevedore.StevedoreV1().NodeClaims().List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err == nil {
		for _, c := range claims.Items {
			_ = sb.Stevedore.StevedoreV1().NodeClaims().Delete(ctx, c.Name, metav1.DeleteOptions{})
		}
	}
	EventuallyWithin(t, 3*time.Minute, "NodeClaims of NodePool "+name+" to be gone", func(ctx context.Context) (bool, error) {
		claims, err := sb.Stevedore.StevedoreV1().NodeClaims().List(ctx, metav1.ListOptions{LabelSelector: sel})
		return err == nil && len(claims.Items) == 0, err
	})
}

// Isolated makes a pod select and tolerate a test's NodePools.
func Isolated(pod *corev1.Pod, isolation string) *corev1.Pod {
	if pod.Spec.NodeSelector == nil {
		pod.Spec.NodeSelector = map[string]string{}
	}
	pod.Spec.NodeSelector[IsolationKey] = isolation
	pod.Spec.Tolerations = append(pod.Spec.Tolerations, corev1.Toleration{Key: IsolationKey, Operator: corev1.TolerationOpEqual,
		Value: isolation, Effect: corev1.TaintEffectNoSchedule})
	return pod
}

// CreatePods creates pods.
func CreatePods(t testing.TB, sb *sandbox.Sandbox, pods ...*corev1.Pod) {
	t.Helper()
	for _, p := range pods {
		if _, err := sb.Kube.CoreV1().Pods(p.Namespace).Create(context.Background(), p, metav1.CreateOptions{}); err != nil {
			t.Fatalf("creating pod %s: %v", p.Name, err)
		}
	}
}

// WaitBound waits until every listed pod is bound and returns them as bound.
func WaitBound(t testing.TB, sb *sandbox.Sandbox, ns string, names []string) map[string]*corev1.Pod {
	t.Helper()
	out := map[string]*corev1.Pod{}
	t.Cleanup(func() {
		if t.Failed() {
			DumpUnbound(t, sb, ns)
		}
	})
	EventuallyWithin(t, 3*time.Minute, fmt.Sprintf("%d pods to be bound", len(names)), func(ctx context.Context) (bool, error) {
		list, err := sb.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		bound := map[string]*corev1.Pod{}
		for i := range list.Items {
			p := &list.Items[i]
			if p.Spec.NodeName != "" {
				bound[p.Name] = p
			}
		}
		for _, n := range names {
			if bound[n] == nil {
				return false, nil
			}
		}
		out = bound
		return true, nil
	})
	return out
}

// DumpUnbound logs why each unbound pod of a namespace is waiting: its PodScheduled condition, nomination and
// latest events, so that a failed wait says what the scheduler thought.
func DumpUnbound(t testing.TB, sb *sandbox.Sandbox, ns string) {
	ctx := context.Background()
	list, err := sb.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Logf("listing pods: %v", err)
		return
	}
	for _, p := range list.Items {
		if p.Spec.NodeName != "" {
			continue
		}
		cond := ""
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled {
				cond = c.Reason + ": " + c.Message
			}
		}
		t.Logf("unbound %s: nominated=%q %s", p.Name, p.Status.NominatedNodeName, cond)
		evs, err := sb.Kube.EventsV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("regarding.name", p.Name).String()})
		if err != nil {
			continue
		}
		for _, ev := range evs.Items {
			t.Logf("  event %s %s: %s", ev.Reason, ev.ReportingController, ev.Note)
		}
	}
}

// PlannedNode returns the node of the NodeClaim whose planned-pods annotation names the pod ("" if none, or if that
// NodeClaim has no node yet): the node Stevedore launched for it.
func PlannedNode(t testing.TB, sb *sandbox.Sandbox, ns, pod string) string {
	t.Helper()
	claims, err := sb.Stevedore.StevedoreV1().NodeClaims().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	node := ""
	var newest time.Time
	for i := range claims.Items {
		c := &claims.Items[i]
		if slices.Contains(strings.Split(c.Annotations[stevedorev1.AnnotationPlannedPods], ","), ns+"/"+pod) &&
			!c.CreationTimestamp.Time.Before(newest) {
			node, newest = c.Status.NodeName, c.CreationTimestamp.Time
		}
	}
	return node
}

// NodeClaimsOf lists a NodePool's NodeClaims.
func NodeClaimsOf(t testing.TB, sb *sandbox.Sandbox, pool string) []stevedorev1.NodeClaim {
	t.Helper()
	sel := labels.SelectorFromSet(labels.Set{stevedorev1.LabelNodePool: pool}).String()
	claims, err := sb.Stevedore.StevedoreV1().NodeClaims().List(context.Background(), metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		t.Fatal(err)
	}
	return claims.Items
}

// Node returns a node.
func Node(t testing.TB, sb *sandbox.Sandbox, name string) *corev1.Node {
	t.Helper()
	n, err := sb.Kube.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// IsolatedDeployment creates a Deployment whose pods select and tolerate the isolation of a test's NodePool.
func IsolatedDeployment(t testing.TB, sb *sandbox.Sandbox, d *appsv1.Deployment, isolation string) *appsv1.Deployment {
	t.Helper()
	pod := &corev1.Pod{Spec: d.Spec.Template.Spec}
	Isolated(pod, isolation)
	d.Spec.Template.Spec = pod.Spec
	created, err := sb.Kube.AppsV1().Deployments(d.Namespace).Create(context.Background(), d, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating Deployment %s: %v", d.Name, err)
	}
	// Deleted before the NodePool (cleanups run last-registered first): otherwise the NodePool's drain evicts
	// pods that are recreated Pending with no node to go to, and a PodDisruptionBudget then holds the drain.
	t.Cleanup(func() {
		background := metav1.DeletePropagationBackground
		_ = sb.Kube.AppsV1().Deployments(d.Namespace).Delete(context.Background(), d.Name, metav1.DeleteOptions{PropagationPolicy: &background})
	})
	return created
}

// Scale sets a Deployment's replicas.
func Scale(t testing.TB, sb *sandbox.Sandbox, ns, name string, replicas int32) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		d, err := sb.Kube.AppsV1().Deployments(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		d.Spec.Replicas = &replicas
		_, err = sb.Kube.AppsV1().Deployments(ns).Update(context.Background(), d, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatalf("scaling %s to %d: %v", name, replicas, err)
	}
}

// RunningPods returns the namespace's pods with the label app=app that are bound and not being deleted.
func RunningPods(ctx context.Context, sb *sandbox.Sandbox, ns, app string) ([]corev1.Pod, error) {
	list, err := sb.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=" + app})
	if err != nil {
		return nil, err
	}
	var out []corev1.Pod
	for _, p := range list.Items {
		if p.Spec.NodeName != "" && p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning {
			out = append(out, p)
		}
	}
	return out, nil
}

// WaitRunning waits until n pods of app are Running and returns them.
func WaitRunning(t testing.TB, sb *sandbox.Sandbox, ns, app string, n int) []corev1.Pod {
	t.Helper()
	var out []corev1.Pod
	t.Cleanup(func() {
		if t.Failed() {
			DumpUnbound(t, sb, ns)
		}
	})
	EventuallyWithin(t, 3*time.Minute, fmt.Sprintf("%d pods of %s Running", n, app), func(ctx context.Context) (bool, error) {
		pods, err := RunningPods(ctx, sb, ns, app)
		out = pods
		return err == nil && len(pods) == n, err
	})
	return out
}

// LiveNodeClaimsOf lists a NodePool's NodeClaims that are not being deleted.
func LiveNodeClaimsOf(t testing.TB, sb *sandbox.Sandbox, pool string) []stevedorev1.NodeClaim {
	t.Helper()
	var out []stevedorev1.NodeClaim
	for _, c := range NodeClaimsOf(t, sb, pool) {
		if c.DeletionTimestamp == nil {
			out = append(out, c)
		}
	}
	return out
}

// CheckUnbound fails the test for each named pod of the namespace that is bound to a node.
func CheckUnbound(ctx context.Context, t testing.TB, sb *sandbox.Sandbox, ns string, names []string) {
	t.Helper()
	for _, name := range names {
		p, err := sb.Kube.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if p.Spec.NodeName != "" {
			t.Errorf("pod %s bound to %s, want it unbound", name, p.Spec.NodeName)
		}
	}
}
