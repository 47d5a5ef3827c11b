/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package deletioncost

import (
	"context"
	"math"
	"slices"
	"strconv"
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

func TestWantedCostsRankTheFirstHalfOfEachReplicaSet(t *testing.T) {
	rsPod := func(name, rs string) *corev1.Pod { return test.Pod(name).OwnedBy("ReplicaSet", rs).Obj() }
	floorPod := func(name, rs string) *corev1.Pod {
		return test.Pod(name).OwnedBy("ReplicaSet", rs).Annotations(stevedorev1.AnnotationOnDemandFloor, "20%").Obj()
	}
	ranked := func(n rankedNode) string { return strconv.Itoa(n.cost() - rankedOffset) }
	one, two, three := rankedNode{name: "one", pods: 1}, rankedNode{name: "two", pods: 2}, rankedNode{name: "three", pods: 3}
	cases := []struct {
		name   string
		nodes  []rankedNode
		byNode map[string][]*corev1.Pod
		want   map[string]string // pod -> cost; "" none
	}{{
		name:  "the first-ranked nodes holding half of a ReplicaSet's pods, the node that reaches half included",
		nodes: []rankedNode{three, {name: "a-one", pods: 1}, two, one},
		byNode: map[string][]*corev1.Pod{"a-one": {rsPod("a1", "web")}, "one": {rsPod("o1", "web")},
			"two": {rsPod("t1", "web"), rsPod("t2", "web")}, "three": {rsPod("h1", "web"), rsPod("h2", "web"), rsPod("h3", "web")}},
		// 7 pods: a-one and one (ties by name) hold 2, two reaches 4 of them; three is left without
		want: map[string]string{"a1": ranked(rankedNode{name: "a-one", pods: 1}), "o1": ranked(one), "t1": ranked(two), "t2": ranked(two),
			"h1": "", "h2": "", "h3": ""},
	}, {
		name:   "each ReplicaSet by its own pods, on the same order; pods of no ReplicaSet are not steered",
		nodes:  []rankedNode{one, two},
		byNode: map[string][]*corev1.Pod{"one": {rsPod("w1", "web"), test.Pod("bare").Obj()}, "two": {rsPod("w2", "web"), rsPod("d1", "db")}},
		want:   map[string]string{"w1": ranked(one), "w2": "", "d1": ranked(two)},
	}, {
		name:   "a single pod is its ReplicaSet's first half",
		nodes:  []rankedNode{three},
		byNode: map[string][]*corev1.Pod{"three": {rsPod("solo", "solo")}},
		want:   map[string]string{"solo": ranked(three)},
	}, {
		name:  "pods on nodes being disrupted go first and count; static NodePools' last and do not",
		nodes: []rankedNode{{name: "static", static: true, pods: 2}, {name: "leaving", leaving: true, pods: 1}, one, two},
		byNode: map[string][]*corev1.Pod{"static": {rsPod("s1", "web"), rsPod("s2", "web")}, "leaving": {rsPod("l1", "web")},
			"one": {rsPod("o1", "web")}, "two": {rsPod("t1", "web"), rsPod("t2", "web")}},
		// 4 pods counted: leaving and one hold half
		want: map[string]string{"s1": strconv.Itoa(staticCost), "s2": strconv.Itoa(staticCost), "l1": strconv.Itoa(LeavingCost),
			"o1": ranked(one), "t1": "", "t2": ""},
	}, {
		// the ReplicaSet controller deletes the spot pods first: the on-demand one keeps the floor after a scale-in
		name:  "a pod holding its workload's on-demand floor on an on-demand node goes last, ranked first or not",
		nodes: []rankedNode{{name: "od", onDemand: true, pods: 1}, two},
		byNode: map[string][]*corev1.Pod{"od": {floorPod("f1", "web")},
			"two": {floorPod("w1", "web"), floorPod("w2", "web")}},
		want: map[string]string{"f1": strconv.Itoa(floorCost), "w1": ranked(two), "w2": ranked(two)},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := map[string]string{}
			for _, w := range wantedCosts(tc.nodes, tc.byNode) {
				got[w.pod.Name] = w.cost
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("wanted costs (-want +got):\n%s", diff)
			}
			for _, c := range got {
				if n, _ := strconv.Atoi(c); c != "" && c != strconv.Itoa(staticCost) && c != strconv.Itoa(floorCost) && n >= 0 {
					t.Errorf("cost %s of a ranked pod is not below 0, the cost of a pod with none", c)
				}
			}
		})
	}
}

func TestReconcileSetsCostsOnceTheyHeld(t *testing.T) {
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
		// Stevedore's, from when busy ran other pods: brought up to date
		rsPod("b3", "busy", "100m").Annotations(AnnotationDeletionCost, "-2097000", AnnotationManaged, "-2097000").Obj(),
		test.Pod("bare").Node("light").Req("cpu", "100m").Obj(), // no ReplicaSet: not steered
		rsPod("n1", "never", "100m").Obj(),                      // consolidation off: not steered
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
		if p.Annotations[AnnotationDeletionCost] != p.Annotations[AnnotationManaged] && p.Annotations[AnnotationManaged] != "" {
			t.Errorf("pod %s: cost %q, but Stevedore's record says %q", name, p.Annotations[AnnotationDeletionCost], p.Annotations[AnnotationManaged])
		}
		return p.Annotations[AnnotationDeletionCost]
	}
	// light runs 2 pods (l1, bare) requesting 10% of its CPU, busy 4 (b1, b2, b3, user) requesting 60%: light
	// goes first. Of the ReplicaSet's 5 pods, light holds 1 and busy, which reaches half, the others: all but the
	// user's are ranked. The first pass only sees the costs; the second, with the same costs, patches.
	lightCost, busyCost := strconv.Itoa(2101-rankedOffset), strconv.Itoa(4601-rankedOffset)
	for pass, want := range []map[string]string{
		{"l1": "", "b1": "", "b2": "", "b3": "-2097000", "user": "100", "bare": "", "n1": ""},
		{"l1": lightCost, "b1": busyCost, "b2": busyCost, "b3": busyCost, "user": "100", "bare": "", "n1": ""},
		{"l1": lightCost, "b1": busyCost, "b2": busyCost, "b3": busyCost, "user": "100", "bare": "", "n1": ""},
	} {
		reconcilePass(t, c, kube, objs, pass, map[int]int{1: 4}[pass])
		got := map[string]string{}
		for pod := range want {
			got[pod] = cost(pod)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("pass %d: deletion costs (-want +got):\n%s", pass, diff)
		}
	}
}

func TestReconcileTakesItsCostOffAPodNoLongerRankedFirst(t *testing.T) {
	machine := func(name string) []runtime.Object {
		cw := test.NodeClaim("claim-"+name, "default").Launched(name, "m5.large", "us-east-1a", "on-demand", "0.096").Initialized()
		return []runtime.Object{cw.Obj(), cw.NodeFor().Allocatable("cpu", "2", "memory", "8Gi", "pods", "29").Obj()}
	}
	rsPod := func(name, node string) *corev1.Pod {
		return test.Pod(name).Node(node).Req("cpu", "100m", "memory", "128Mi").OwnedBy("ReplicaSet", "rs").Obj()
	}
	objs := []runtime.Object{test.NodePool("default").Obj()}
	for _, node := range []string{"a", "b", "c", "d"} {
		objs = append(objs, machine(node)...)
	}
	objs = append(objs, rsPod("pa", "a"), rsPod("pb", "b"), rsPod("pb2", "b"))
	kube := kubefake.NewClientset(pods(objs)...)
	c := New(Options{Kube: kube})
	// a runs one pod, b two: of the three, a's and b's (b holds the second) are the first half
	for pass, wantPatched := range []int{0, 3, 0} {
		reconcilePass(t, c, kube, objs, pass, wantPatched)
	}
	// the ReplicaSet grows by one pod on c and one on d, which rank before b: a, c and d hold the first half of
	// five, and b's pods lose the cost they had
	for _, p := range []*corev1.Pod{rsPod("pc", "c"), rsPod("pd", "d")} {
		objs = append(objs, p)
		if _, err := kube.CoreV1().Pods(p.Namespace).Create(context.Background(), p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for pass, wantPatched := range []int{0, 4, 0} {
		reconcilePass(t, c, kube, objs, pass, wantPatched)
	}
	for name, want := range map[string]bool{"pa": true, "pc": true, "pd": true, "pb": false, "pb2": false} {
		p, err := kube.CoreV1().Pods(metav1.NamespaceDefault).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		_, has := p.Annotations[AnnotationDeletionCost]
		_, managed := p.Annotations[AnnotationManaged]
		if has != want || managed != want {
			t.Errorf("pod %s has a deletion cost: %v (Stevedore's record: %v), want %v", name, has, managed, want)
		}
	}
}

// pods are the pods among objs.
func pods(objs []runtime.Object) []runtime.Object {
	var out []runtime.Object
	for _, o := range objs {
		if _, ok := o.(*corev1.Pod); ok {
			out = append(out, o)
		}
	}
	return out
}

// reconcilePass runs one pass over objs with the pods as an informer sees them now (what the passes before patched),
// and checks how many pods it patched.
func reconcilePass(t *testing.T, c *Controller, kube *kubefake.Clientset, objs []runtime.Object, pass, wantPatched int) {
	t.Helper()
	current := []runtime.Object{}
	for _, o := range objs {
		if p, ok := o.(*corev1.Pod); ok {
			var err error
			if o, err = kube.CoreV1().Pods(p.Namespace).Get(context.Background(), p.Name, metav1.GetOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		current = append(current, o)
	}
	l, err := test.NewListers(current...)
	if err != nil {
		t.Fatal(err)
	}
	c.opts.Pods, c.opts.Nodes, c.opts.NodeClaims, c.opts.NodePools = l.Pods, l.Nodes, l.NodeClaims, l.NodePools
	n, err := c.Reconcile(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if n != wantPatched {
		t.Errorf("pass %d: patched %d pods, want %d", pass, n, wantPatched)
	}
}

func TestSettledKeepsCostsThatHeld(t *testing.T) {
	c := New(Options{})
	pod := func(name string) *corev1.Pod { return test.Pod(name).Obj() }
	a, b := pod("a"), pod("b")
	names := func(wanted []wantedCost) []string {
		var out []string
		for _, w := range wanted {
			out = append(out, w.pod.Name)
		}
		return out
	}
	passes := []struct {
		wanted []wantedCost
		want   []string
	}{
		{[]wantedCost{{a, "-1"}, {b, ""}}, nil},
		{[]wantedCost{{a, "-1"}, {b, "-2"}}, []string{"a"}},
		{[]wantedCost{{a, "-1"}, {b, "-2"}}, []string{"a", "b"}},
		{[]wantedCost{{b, ""}}, nil},
		{[]wantedCost{{a, "-1"}, {b, ""}}, []string{"b"}},
	}
	for i, p := range passes {
		if got := names(c.settled(p.wanted)); !slices.Equal(got, p.want) {
			t.Errorf("pass %d: settled %v, want %v", i, got, p.want)
		}
	}
}
