/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package deletioncost

import (
	"context"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	kubefake "k8s.io/client-go/kubernetes/fake"

	"github.com/stevedore-dev/stevedore/pkg/test"
)

func TestRank(t *testing.T) {
	nodes := []rankedNode{
		{name: "full", pods: 5, requested: 0.9},
		{name: "static", static: true, pods: 0},
		{name: "two-light", pods: 2, requested: 0.1},
		{name: "two-heavy", pods: 2, requested: 0.8},
		{name: "draining", leaving: true, pods: 9},
		{name: "b-empty", pods: 0},
		{name: "a-empty", pods: 0},
	}
	rank(nodes)
	var got []string
	for _, n := range nodes {
		got = append(got, n.name)
	}
	want := []string{"draining", "a-empty", "b-empty", "two-light", "two-heavy", "full", "static"}
	if !slices.Equal(got, want) {
		t.Errorf("rank = %v, want %v", got, want)
	}
}

func TestReconcileSetsCostsByNodeRank(t *testing.T) {
	machine := func(name string) []runtime.Object {
		cw := test.NodeClaim("claim-"+name, "default").Launched(name, "m5.large", "us-east-1a", "on-demand", "0.096").Initialized()
		nw := cw.NodeFor().Allocatable("cpu", "2", "memory", "8Gi", "pods", "29")
		return []runtime.Object{cw.Obj(), nw.Obj()}
	}
	rsPod := func(name, node, cpu string) *test.PodWrapper {
		return test.Pod(name).Node(node).Req("cpu", cpu, "memory", "128Mi").OwnedBy("ReplicaSet", "rs")
	}
	objs := []runtime.Object{test.NodePool("default").Obj()}
	objs = append(objs, machine("busy")...)
	objs = append(objs, machine("light")...)
	objs = append(objs,
		rsPod("b1", "busy", "500m").Obj(), rsPod("b2", "busy", "500m").Obj(),
		rsPod("l1", "light", "100m").Obj(),
		rsPod("user", "busy", "100m").Annotations(AnnotationDeletionCost, "100").Obj(), // the user's
		test.Pod("bare").Node("light").Req("cpu", "100m").Obj(),                        // no ReplicaSet: not steered
	)
	l, err := test.NewListers(objs...)
	if err != nil {
		t.Fatal(err)
	}
	var kubeObjs []runtime.Object
	for _, o := range objs {
		if p, ok := o.(*corev1.Pod); ok {
			kubeObjs = append(kubeObjs, p)
		}
	}
	kube := kubefake.NewClientset(kubeObjs...)
	c := New(Options{Kube: kube, Pods: l.Pods, Nodes: l.Nodes, NodeClaims: l.NodeClaims, NodePools: l.NodePools})
	n, err := c.Reconcile(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if n != 3 {
		t.Errorf("patched %d pods, want 3", n)
	}
	cost := func(name string) string {
		p, err := kube.CoreV1().Pods(metav1.NamespaceDefault).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return p.Annotations[AnnotationDeletionCost]
	}
	// light runs 2 pods (l1, bare), busy 3 (b1, b2, user): light goes first
	for pod, want := range map[string]string{"l1": "1", "b1": "2", "b2": "2", "user": "100", "bare": ""} {
		if got := cost(pod); got != want {
			t.Errorf("pod %s: deletion cost %q, want %q", pod, got, want)
		}
	}
}
