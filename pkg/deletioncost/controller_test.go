/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package deletioncost

import (
	"context"
	"math"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	kubefake "k8s.io/client-go/kubernetes/fake"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/test"
)

func TestCostOrdersNodesAsConsolidationRemovesThem(t *testing.T) {
	// in the order consolidation removes them; alike nodes cost the same
	nodes := []struct {
		node rankedNode
		want int
	}{
		{rankedNode{name: "draining", leaving: true, pods: 9}, math.MinInt32},
		{rankedNode{name: "static-draining", static: true, leaving: true}, math.MinInt32},
		{rankedNode{name: "a-empty", pods: 0}, 1},
		{rankedNode{name: "b-empty", pods: 0}, 1},
		{rankedNode{name: "two-light", pods: 2, requested: 0.1}, 2101},
		{rankedNode{name: "two-heavy", pods: 2, requested: 0.8}, 2801},
		{rankedNode{name: "full", pods: 5, requested: 1.2}, 6_000},
		{rankedNode{name: "crowded", pods: 5_000, requested: 1}, 999_000 + 999 + 1},
		{rankedNode{name: "static", static: true, pods: 0}, staticCost},
	}
	prev := rankedNode{leaving: true}
	for _, n := range nodes {
		if got := n.node.cost(); got != n.want {
			t.Errorf("%s: cost %d, want %d", n.node.name, got, n.want)
		}
		if n.node.cost() < prev.cost() {
			t.Errorf("%s costs less than %s, which consolidation removes before it", n.node.name, prev.name)
		}
		prev = n.node
	}
}

func TestReconcileSetsCostsOnceANodeSettled(t *testing.T) {
	machine := func(name, pool string) []runtime.Object {
		cw := test.NodeClaim("claim-"+name, pool).Launched(name, "m5.large", "us-east-1a", "on-demand", "0.096").Initialized()
		nw := cw.NodeFor().Allocatable("cpu", "2", "memory", "8Gi", "pods", "29")
		return []runtime.Object{cw.Obj(), nw.Obj()}
	}
	rsPod := func(name, node, cpu string) *test.PodWrapper {
		return test.Pod(name).Node(node).Req("cpu", cpu, "memory", "128Mi").OwnedBy("ReplicaSet", "rs")
	}
	objs := []runtime.Object{test.NodePool("default").Obj(), test.NodePool("kept").Consolidation(stevedorev1.ConsolidationPolicyWhenEmpty, nil).Obj()}
	objs = append(objs, machine("busy", "default")...)
	objs = append(objs, machine("light", "default")...)
	objs = append(objs, machine("never", "kept")...)
	objs = append(objs,
		rsPod("b1", "busy", "500m").Obj(), rsPod("b2", "busy", "500m").Obj(),
		rsPod("l1", "light", "100m").Obj(),
		rsPod("user", "busy", "100m").Annotations(AnnotationDeletionCost, "100").Obj(), // the user's
		test.Pod("bare").Node("light").Req("cpu", "100m").Obj(),                        // no ReplicaSet: not steered
		rsPod("n1", "never", "100m").Obj(),                                             // consolidation off: not steered
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
	cost := func(name string) string {
		p, err := kube.CoreV1().Pods(metav1.NamespaceDefault).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return p.Annotations[AnnotationDeletionCost]
	}
	// light runs 2 pods (l1, bare) requesting 10% of its CPU, busy 3 (b1, b2, user) requesting 55%: light goes
	// first. The first pass only sees the costs; the second, with the same costs, patches.
	for pass, want := range []map[string]string{
		{"l1": "", "b1": "", "b2": "", "user": "100", "bare": "", "n1": ""},
		{"l1": "2101", "b1": "3551", "b2": "3551", "user": "100", "bare": "", "n1": ""},
		{"l1": "2101", "b1": "3551", "b2": "3551", "user": "100", "bare": "", "n1": ""},
	} {
		// the pods as an informer sees them now: what the passes before patched
		current := []runtime.Object{}
		for _, o := range objs {
			if p, ok := o.(*corev1.Pod); ok {
				o, err = kube.CoreV1().Pods(p.Namespace).Get(context.Background(), p.Name, metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
			}
			current = append(current, o)
		}
		l, err := test.NewListers(current...)
		if err != nil {
			t.Fatal(err)
		}
		c.opts.Pods = l.Pods
		n, err := c.Reconcile(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		wantPatched := 0
		if pass == 1 {
			wantPatched = 3
		}
		if n != wantPatched {
			t.Errorf("pass %d: patched %d pods, want %d", pass, n, wantPatched)
		}
		got := map[string]string{}
		for pod := range want {
			got[pod] = cost(pod)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("pass %d: deletion costs (-want +got):\n%s", pass, diff)
		}
	}
}

func TestSettledKeepsNodesWhoseCostHeld(t *testing.T) {
	c := New(Options{})
	names := func(nodes []rankedNode) []string {
		var out []string
		for _, n := range nodes {
			out = append(out, n.name)
		}
		return out
	}
	passes := []struct {
		nodes []rankedNode
		want  []string
	}{
		{[]rankedNode{{name: "a", pods: 1}, {name: "b", pods: 1}}, nil},
		{[]rankedNode{{name: "a", pods: 1}, {name: "b", pods: 2}, {name: "c"}}, []string{"a"}},
		{[]rankedNode{{name: "a", pods: 1}, {name: "b", pods: 2}, {name: "c"}}, []string{"a", "b", "c"}},
		{[]rankedNode{{name: "b", pods: 2, leaving: true}}, nil},
		{[]rankedNode{{name: "a", pods: 1}, {name: "b", pods: 2, leaving: true}}, []string{"b"}},
	}
	for i, p := range passes {
		if got := names(c.settled(p.nodes)); !slices.Equal(got, p.want) {
			t.Errorf("pass %d: settled %v, want %v", i, got, p.want)
		}
	}
}
