/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package lifecycle

import (
	"context"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/generated/informers/externalversions"
	"github.com/stevedore-dev/stevedore/pkg/test"
)

// TestReconcileDispatch checks which phase reconcile runs for a NodeClaim in each state, by what it does: a
// launched NodeClaim is never launched again, a deleted one is terminated.
func TestReconcileDispatch(t *testing.T) {
	tests := []struct {
		name      string
		claim     *stevedorev1.NodeClaim // nil: not in the cache
		node      *corev1.Node
		want      time.Duration
		wantCalls []string
		check     func(t *testing.T, h *harness)
	}{
		{name: "a NodeClaim gone from the cache is left to provisioning's plans, which follow its deletion", want: 0},
		{name: "a new NodeClaim is launched", claim: launchClaim().Obj(), want: testRegistrationTimeout,
			wantCalls: []string{"Create c1"}},
		{name: "a launched NodeClaim is not launched twice: it waits for its node", claim: launchedClaim().Obj(),
			want: testRegistrationTimeout + time.Second},
		{name: "a launched NodeClaim whose node is up is registered", claim: launchedClaim().Obj(),
			node: test.Node("n1").ProviderID(n1ProviderID).Obj(),
			check: func(t *testing.T, h *harness) {
				if !meta.IsStatusConditionTrue(h.claim().Status.Conditions, stevedorev1.ConditionRegistered) {
					t.Error("NodeClaim not registered")
				}
			}},
		{name: "a registered NodeClaim whose node is ready is initialized", claim: launchedClaim().Registered().Obj(),
			node: launchedClaim().NodeFor().Obj(),
			check: func(t *testing.T, h *harness) {
				if !h.claim().IsInitialized() {
					t.Error("NodeClaim not initialized")
				}
			}},
		{name: "an initialized NodeClaim is left alone", claim: launchedClaim().Initialized().Obj(),
			node: launchedClaim().NodeFor().Obj(),
			check: func(t *testing.T, h *harness) {
				if n := len(h.Stevedore.Actions()) + len(h.Kube.Actions()); n != 0 {
					t.Errorf("%d API calls for an initialized NodeClaim, want none", n)
				}
			}},
		{name: "a deleted NodeClaim is terminated, even before it launched", claim: launchClaim().Deleting(t0).Obj(),
			check: func(t *testing.T, h *harness) {
				if h.claim() != nil {
					t.Error("deleted NodeClaim kept its finalizer")
				}
			}},
		{name: "a deleted launched NodeClaim has its instance terminated", claim: launchedClaim().Initialized().Deleting(t0).Obj(),
			wantCalls: []string{"Delete i-n1"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			if tc.claim != nil {
				h.Add(tc.claim)
			}
			if tc.node != nil {
				h.Add(tc.node)
			}
			h.prov.assign(test.Pod("web").Pending().Obj())
			h.Stevedore.ClearActions()
			h.Kube.ClearActions()

			after, err := h.life.reconcile(h.Ctx, "c1")
			if err != nil || after != tc.want {
				t.Fatalf("reconcile = %v, %v; want %v, nil", after, err, tc.want)
			}
			if diff := cmp.Diff(tc.wantCalls, h.Cloud.Calls()); diff != "" {
				t.Errorf("cloud calls (-want +got):\n%s", diff)
			}
			if tc.check != nil {
				tc.check(t, h)
			}
		})
	}
}

// queued takes what a queue holds without blocking.
func queued(q workqueue.TypedRateLimitingInterface[string]) []string {
	var out []string
	for q.Len() > 0 {
		item, _ := q.Get()
		out = append(out, item)
		q.Done(item)
	}
	sort.Strings(out)
	return out
}

func TestEnqueueNode(t *testing.T) {
	deleting := metav1.NewTime(t0)
	tests := []struct {
		name       string
		node       *corev1.Node
		wantClaims []string
		wantDrain  []string
	}{
		{name: "node labelled with its NodeClaim", node: test.Node("n1").Labels(stevedorev1.LabelNodeClaim, "c1").Obj(),
			wantClaims: []string{"c1"}},
		{name: "unlabelled node found by provider ID", node: test.Node("n1").ProviderID(n1ProviderID).Obj(),
			wantClaims: []string{"c1"}},
		{name: "node of no NodeClaim", node: test.Node("other").ProviderID("aws:///us-east-1a/i-other").Obj()},
		{name: "node without a provider ID", node: test.Node("other").Obj()},
		{name: "deleted node with the termination finalizer is drained",
			node:       test.Node("n1").Labels(stevedorev1.LabelNodeClaim, "c1").Finalizers(stevedorev1.TerminationFinalizer).Deleting(deleting).Obj(),
			wantClaims: []string{"c1"}, wantDrain: []string{"n1"}},
		{name: "deleted node without the finalizer is not Stevedore's to drain",
			node: test.Node("n1").Labels(stevedorev1.LabelNodeClaim, "c1").Deleting(deleting).Obj(), wantClaims: []string{"c1"}},
		{name: "not a node", node: nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, launchedClaim().Obj(), test.NodeClaim("c2", "default").Obj())
			registerInformers(t, h)
			drains := &drainRecorder{Terminator: h.term}
			h.life.opts.Terminator = drains
			if tc.node == nil {
				h.life.enqueueNode(test.Pod("p").Obj())
			} else {
				h.life.enqueueNode(tc.node)
			}
			if diff := cmp.Diff(tc.wantClaims, queued(h.life.queue)); diff != "" {
				t.Errorf("NodeClaims queued (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantDrain, drains.nodes); diff != "" {
				t.Errorf("nodes queued for draining (-want +got):\n%s", diff)
			}
		})
	}
}

// registerInformers has the lifecycle follow NodeClaims and Nodes informers over the harness's clientsets (Register
// indexes the NodeClaims by provider ID), twice, as a new leader on the same informers would.
func registerInformers(t *testing.T, h *harness) {
	t.Helper()
	ctx := t.Context()
	claims := externalversions.NewSharedInformerFactory(h.Stevedore, 0).Stevedore().V1().NodeClaims().Informer()
	nodes := informers.NewSharedInformerFactory(h.Kube, 0).Core().V1().Nodes().Informer()
	for range 2 {
		if err := h.life.Register(ctx, claims, nodes); err != nil {
			t.Fatalf("Register: %v", err)
		}
	}
	go claims.RunWithContext(ctx)
	if !cache.WaitForCacheSync(ctx.Done(), claims.HasSynced) {
		t.Fatal("NodeClaims informer did not sync")
	}
	// the informer's own adds reach the queue after the sync: wait for both NodeClaims, then take them out
	if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, wait.ForeverTestTimeout, true, func(context.Context) (bool, error) {
		return h.life.queue.Len() == 2, nil
	}); err != nil {
		t.Fatalf("the informer's NodeClaims never reached the queue: %v", err)
	}
	queued(h.life.queue)
}

func TestSetConditionsTruncatesAndReportsChange(t *testing.T) {
	claim := launchClaim().Obj()
	h := newHarness(t, claim)
	long := strings.Repeat("x", 1500)
	cond := metav1.Condition{Type: stevedorev1.ConditionLaunched, Status: metav1.ConditionFalse, Reason: "LaunchFailed", Message: long}
	for i, want := range []bool{true, false} {
		changed, err := h.life.setConditions(h.Ctx, "c1", cond)
		if err != nil || changed != want {
			t.Fatalf("setConditions #%d = %v, %v; want %v", i+1, changed, err, want)
		}
		if err := h.Listers.Add(h.claim()); err != nil { // the informer catches up
			t.Fatal(err)
		}
	}
	if c := condition(h.claim(), stevedorev1.ConditionLaunched); c == nil || len(c.Message) != 1000 {
		t.Errorf("Launched condition = %+v, want its message cut to 1000 bytes", c)
	}
	if n := test.Updated(h.Stevedore.Actions(), "nodeclaims", "status"); n != 1 {
		t.Errorf("%d status updates, want 1 (the second set changed nothing)", n)
	}
}

// drainRecorder records the nodes the lifecycle hands the terminator to drain.
type drainRecorder struct {
	Terminator
	nodes []string
}

func (r *drainRecorder) EnqueueNode(name string) { r.nodes = append(r.nodes, name) }
