/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package lifecycle

import (
	"reflect"
	"testing"
	"time"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/test"
)

// onN1 is a pod of a ReplicaSet running on node n1.
func onN1(name string) *test.PodWrapper { return test.Pod(name).Node("n1").OwnedBy("ReplicaSet", "rs") }

// TestTerminationFlow follows a deleted NodeClaim with a running node: the node is deleted and drained, the
// instance terminated, the node and then the NodeClaim let go.
func TestTerminationFlow(t *testing.T) {
	claim := launchedClaim().Initialized().Deleting(t0).Obj()
	node := launchedClaim().NodeFor().Finalizers(stevedorev1.TerminationFinalizer).Obj()
	h := newHarness(t, claim, node, onN1("web").Obj())
	sync := func() { // the informers catch up
		t.Helper()
		if n := h.Node("n1"); n != nil {
			if err := h.Listers.Add(n); err != nil {
				t.Fatal(err)
			}
		} else if err := h.Listers.Delete(node); err != nil {
			t.Fatal(err)
		}
	}

	if after, err := h.life.reconcile(h.Ctx, "c1"); err != nil || after != 2*time.Second {
		t.Fatalf("reconcile = %v, %v; want to wait for the node's drain", after, err)
	}
	sync()
	if n := h.Node("n1"); n == nil || n.DeletionTimestamp == nil {
		t.Fatal("node not deleted")
	}
	if done, err := h.term.DrainNode(h.Ctx, "n1"); err != nil || done {
		t.Fatalf("drainNode = %v, %v; want the pod evicted first", done, err)
	}
	if got := h.Evicted(); !reflect.DeepEqual(got, []string{"default/web"}) {
		t.Fatalf("evictions = %q", got)
	}
	if len(h.Cloud.Calls()) != 0 {
		t.Fatalf("instance terminated before the node was drained: %q", h.Cloud.Calls())
	}
	if err := h.Listers.Delete(onN1("web").Obj()); err != nil {
		t.Fatal(err)
	}
	if done, err := h.term.DrainNode(h.Ctx, "n1"); err != nil || !done {
		t.Fatalf("drainNode = %v, %v; want done", done, err)
	}
	sync()
	if h.Node("n1") != nil {
		t.Fatal("node kept after its drain")
	}
	if h.claim() == nil {
		t.Fatal("NodeClaim released before its own termination")
	}
	if after, err := h.life.reconcile(h.Ctx, "c1"); err != nil || after != 0 {
		t.Fatalf("reconcile = %v, %v", after, err)
	}
	if h.claim() != nil {
		t.Error("NodeClaim not released")
	}
	if calls := h.Cloud.Calls(); !reflect.DeepEqual(calls, []string{"Delete i-n1", "Delete i-n1"}) {
		t.Errorf("cloud calls = %q; the drain and the NodeClaim each terminate the instance", calls)
	}
}
