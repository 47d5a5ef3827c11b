/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package provisioning

import (
	"context"
	"fmt"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/test/integration/harness"
)

// registrationRounds is how many times TestBarePodsBoundToNewNodesAreNeverEvicted registers a node for each of
// its pods.
const registrationRounds = 4

// TestBarePodsBoundToNewNodesAreNeverEvicted registers many nodes in a row, each for a bare pod (no controller
// would recreate it) that needs a node of its own, and hunts for a pod deleted on its way to its node: a pod bound
// while kube-controller-manager's taint-eviction controller still sees a NoExecute taint on the node is deleted.
// It also watches every node update: no node of Stevedore's ever carries a NoExecute taint of Stevedore's.
func TestBarePodsBoundToNewNodesAreNeverEvicted(t *testing.T) {
	ns := harness.Namespace(t, sb)
	harness.NodePool(t, sb, "registrations", "registrations", harness.WithRequirements(
		harness.Req(corev1.LabelInstanceTypeStable, "In", "m5.large")))
	taints := watchStevedoreNoExecute(t)
	for round := 1; round <= registrationRounds; round++ {
		// 1.5 CPU each: an m5.large (2 vCPUs) holds one
		ps, names := harness.Pods(ns, "registrations", fmt.Sprintf("bare-%d", round), 6, "1500m", "1Gi")
		harness.CreatePods(t, sb, ps...)
		harness.WaitBound(t, sb, ns, names)
		for _, name := range names {
			p, err := sb.Kube.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
			if err != nil || p.DeletionTimestamp != nil {
				t.Errorf("round %d: pod %s is gone or going after binding: %v", round, name, err)
			}
		}
	}
	evictions, err := sb.Kube.EventsV1().Events(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range evictions.Items {
		if ev.Reason == "TaintManagerEviction" {
			t.Errorf("pod %s deleted by taint eviction: %s", ev.Regarding.Name, ev.Note)
		}
	}
	if seen := taints(); len(seen) > 0 {
		t.Errorf("nodes carried a NoExecute taint of Stevedore's, which the taint-eviction controller acts on: %v", seen)
	}
	if n := len(harness.NodeClaimsOf(t, sb, "registrations")); n != 6*registrationRounds {
		t.Errorf("%d NodeClaims, want one per pod (%d)", n, 6*registrationRounds)
	}
}

// watchStevedoreNoExecute watches every node until the test ends and returns what reports the Stevedore-owned
// NoExecute taints seen on any of them.
func watchStevedoreNoExecute(t *testing.T) func() []string {
	var mu sync.Mutex
	var seen []string
	check := func(obj any) {
		node, ok := obj.(*corev1.Node)
		if !ok {
			return
		}
		for _, taint := range node.Spec.Taints {
			if taint.Effect == corev1.TaintEffectNoExecute && (taint.Key == stevedorev1.TaintUnregistered || taint.Key == stevedorev1.TaintDisrupted) {
				mu.Lock()
				seen = append(seen, node.Name+" "+taint.ToString())
				mu.Unlock()
			}
		}
	}
	ctx := harness.Context(t)
	f := informers.NewSharedInformerFactory(sb.Kube, 0)
	if _, err := f.Core().V1().Nodes().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: check, UpdateFunc: func(_, obj any) { check(obj) },
	}); err != nil {
		t.Fatal(err)
	}
	f.Start(ctx.Done())
	f.WaitForCacheSync(ctx.Done())
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), seen...)
	}
}
