/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package termination

import (
	"context"
	"errors"
	"reflect"
	"sort"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	kubefake "k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
	clocktesting "k8s.io/utils/clock/testing"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/cloud/fake"
	stevedorefake "github.com/stevedore-dev/stevedore/pkg/generated/clientset/versioned/fake"
	"github.com/stevedore-dev/stevedore/pkg/test"
)

// t0 is when every termination test starts.
var t0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

// harness is a Terminator over fake clientsets, listers and a fake cloud, at a fake time.
type harness struct {
	t       *testing.T
	ctx     context.Context
	clock   *clocktesting.FakeClock
	kube    *kubefake.Clientset
	listers *test.Listers
	rec     *events.FakeRecorder
	term    *Terminator
	forgot  []string
}

// ForgetClaim and ForgetDaemons record what the terminator tells provisioning.
func (h *harness) ForgetClaim(_ context.Context, name string) {
	h.forgot = append(h.forgot, "claim "+name)
}
func (h *harness) ForgetDaemons(node string) { h.forgot = append(h.forgot, "daemons "+node) }

// newHarness puts objs into the listers and into the clientset that serves them.
func newHarness(t *testing.T, objs ...runtime.Object) *harness {
	t.Helper()
	var kubeObjs, sdObjs []runtime.Object
	for _, o := range objs {
		if _, ok := o.(*stevedorev1.NodeClaim); ok {
			sdObjs = append(sdObjs, o.DeepCopyObject())
		} else {
			kubeObjs = append(kubeObjs, o.DeepCopyObject())
		}
	}
	listers, err := test.NewListers(objs...)
	if err != nil {
		t.Fatal(err)
	}
	cl, err := fake.New([]string{"us-east-1a"}, "m5.large")
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, ctx: klog.NewContext(t.Context(), ktesting.NewLogger(t, ktesting.NewConfig())), clock: clocktesting.NewFakeClock(t0),
		kube: kubefake.NewClientset(kubeObjs...), listers: listers, rec: events.NewFakeRecorder(100)}
	h.term = New(Options{Kube: h.kube, Stevedore: stevedorefake.NewSimpleClientset(sdObjs...), Cloud: cl, Nodes: listers.Nodes,
		Pods: listers.Pods, NodeClaims: listers.NodeClaims, Recorder: h.rec, Clock: h.clock, Provisioning: h})
	return h
}

// add puts an object into the listers and the clientset after the harness is built.
func (h *harness) add(obj runtime.Object) {
	h.t.Helper()
	if err := h.listers.Add(obj); err != nil {
		h.t.Fatal(err)
	}
	var err error
	switch o := obj.DeepCopyObject().(type) {
	case *corev1.Node:
		_, err = h.kube.CoreV1().Nodes().Create(h.ctx, o, metav1.CreateOptions{})
	case *corev1.Pod:
		_, err = h.kube.CoreV1().Pods(o.Namespace).Create(h.ctx, o, metav1.CreateOptions{})
	default:
		h.t.Fatalf("harness cannot add %T", obj)
	}
	if err != nil {
		h.t.Fatal(err)
	}
}

// node reads a Node back from the clientset; nil when it is gone.
func (h *harness) node(name string) *corev1.Node {
	h.t.Helper()
	n, err := h.kube.CoreV1().Nodes().Get(h.ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		h.t.Fatal(err)
	}
	return n
}

// events drains the events recorded so far.
func (h *harness) events() []string { return test.Events(h.rec) }

// evicted lists the pods evicted through the Eviction API so far, as namespace/name.
func (h *harness) evicted() []string { return test.Evicted(h.kube.Actions()) }

// onN1 is a pod of a ReplicaSet running on node n1.
func onN1(name string) *test.PodWrapper { return test.Pod(name).Node("n1").OwnedBy("ReplicaSet", "rs") }

// daemonOnN1 is a DaemonSet's pod on n1 that does not tolerate the disrupted taint.
func daemonOnN1(name string) *test.PodWrapper {
	return test.Pod(name).Node("n1").OwnedBy("DaemonSet", name)
}

// mirrorOnN1 is static pod etcd's mirror on n1.
func mirrorOnN1() *test.PodWrapper {
	return test.Pod("etcd").Node("n1").OwnedBy("Node", "n1").Annotations(corev1.MirrorPodAnnotationKey, "hash")
}

// tolerantOnN1 tolerates every taint, the disrupted one included.
func tolerantOnN1(name string) *test.PodWrapper {
	return daemonOnN1(name).Toleration("", corev1.TolerationOpExists, "", "")
}

// failEvictions makes the Eviction API answer err.
func (h *harness) failEvictions(err error) {
	h.kube.PrependReactor("create", "pods", func(a clienttesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() != "eviction" {
			return false, nil, nil
		}
		return true, nil, err
	})
}

func TestDrainTier(t *testing.T) {
	tests := []struct {
		name string
		pod  *corev1.Pod
		want int
	}{
		{name: "regular", pod: onN1("web").Obj(), want: 0},
		{name: "bare pod", pod: test.Pod("bare").Obj(), want: 0},
		{name: "high priority below the critical range", pod: onN1("p").Priority(1000000000).Obj(), want: 0},
		{name: "system-cluster-critical", pod: onN1("dns").PriorityClass("system-cluster-critical").Obj(), want: 1},
		{name: "system-node-critical", pod: onN1("cni").PriorityClass("system-node-critical").Obj(), want: 1},
		{name: "priority in the critical range", pod: onN1("p").Priority(2000000000).Obj(), want: 1},
		{name: "DaemonSet pod", pod: daemonOnN1("logs").Obj(), want: 2},
		{name: "critical DaemonSet pod goes last", pod: daemonOnN1("cni").PriorityClass("system-node-critical").Obj(), want: 2},
		{name: "mirror pod (owned by its node)", pod: mirrorOnN1().Obj(), want: 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := drainTier(tc.pod); got != tc.want {
				t.Errorf("drainTier = %d, want %d", got, tc.want)
			}
		})
	}
}

// TestEvictTierOrder drains a node tier by tier: regular pods, then critical ones, then DaemonSet pods; mirror
// pods, finished pods and other nodes' pods are never touched.
func TestEvictTierOrder(t *testing.T) {
	pods := []*corev1.Pod{
		onN1("web").Obj(), onN1("api").Obj(),
		onN1("dns").PriorityClass("system-cluster-critical").Obj(), onN1("metrics").Priority(2000001000).Obj(),
		daemonOnN1("logs").Obj(),
		mirrorOnN1().Obj(),
		onN1("done").Phase(corev1.PodSucceeded).Obj(), onN1("crashed").Phase(corev1.PodFailed).Obj(),
		test.Pod("elsewhere").Node("n2").Obj(),
	}
	objs := []runtime.Object{test.Node("n1").Obj()}
	for _, p := range pods {
		objs = append(objs, p)
	}
	h := newHarness(t, objs...)
	node := test.Node("n1").Obj()
	steps := []struct {
		evicted   []string
		remaining int
	}{
		{evicted: []string{"default/api", "default/web"}, remaining: 5},
		{evicted: []string{"default/dns", "default/metrics"}, remaining: 3},
		{evicted: []string{"default/logs"}, remaining: 1},
		{evicted: nil, remaining: 0},
	}
	seen := 0
	for i, step := range steps {
		remaining, err := h.term.evictTier(h.ctx, node, false)
		if err != nil {
			t.Fatalf("step %d: %v", i+1, err)
		}
		all := h.evicted()
		got := all[seen:]
		seen = len(all)
		sort.Strings(got)
		if len(got) == 0 {
			got = nil
		}
		if remaining != step.remaining || !reflect.DeepEqual(got, step.evicted) {
			t.Fatalf("step %d: evicted %q with %d left, want %q with %d left", i+1, got, remaining, step.evicted, step.remaining)
		}
		if ev := h.events(); len(ev) != len(step.evicted) || len(ev) > 0 && ev[0] != "Normal Evicted evicted: node n1 is being terminated" {
			t.Errorf("step %d: events = %q, want one Evicted event per eviction", i+1, ev)
		}
		for _, name := range got { // the evicted pods go
			ns, n := "default", name[len("default/"):]
			if err := h.listers.Delete(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: n}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if d := test.Deleted(h.kube.Actions(), "pods"); len(d) != 0 {
		t.Errorf("pods deleted %q; within the grace period pods are only evicted", d)
	}
}

func TestEvictTier(t *testing.T) {
	tests := []struct {
		name          string
		pods          []*corev1.Pod
		notInAPI      bool  // the pods are in the cache but gone from the API server
		evictErr      error // what the Eviction API answers
		expired       bool  // the termination grace period is over
		wantEvicted   []string
		wantDeleted   []string
		wantRemaining int
		wantErr       bool
		wantEvents    int
	}{
		{name: "a terminating pod is waited for, not evicted again",
			pods: []*corev1.Pod{onN1("web").Deleting(metav1.NewTime(t0)).Obj()}, wantRemaining: 1},
		{name: "a pod tolerating the disrupted taint goes with the node",
			pods: []*corev1.Pod{tolerantOnN1("agent").Obj()}, wantRemaining: 0},
		{name: "a tolerating pod is not waited for while others are evicted",
			pods:        []*corev1.Pod{tolerantOnN1("agent").Obj(), onN1("web").Obj()},
			wantEvicted: []string{"default/web"}, wantRemaining: 1, wantEvents: 1},
		{name: "a do-not-disrupt pod is held while the others are evicted",
			pods:        []*corev1.Pod{onN1("web").Obj(), onN1("batch").Annotations(stevedorev1.DoNotDisruptKey, "true").Obj()},
			wantEvicted: []string{"default/web"}, wantRemaining: 2, wantEvents: 1},
		{name: "Karpenter's do-not-disrupt is honoured",
			pods:          []*corev1.Pod{onN1("batch").Annotations(stevedorev1.KarpenterDoNotDisruptKey, "true").Obj()},
			wantRemaining: 1},
		{name: "do-not-disrupt for a while holds the pod while it lasts",
			pods: []*corev1.Pod{onN1("batch").Annotations(stevedorev1.DoNotDisruptKey, "1h").
				Started(t0.Add(-30 * time.Minute)).Obj()},
			wantRemaining: 1},
		{name: "do-not-disrupt for a while that is over lets the pod be evicted",
			pods: []*corev1.Pod{onN1("batch").Annotations(stevedorev1.DoNotDisruptKey, "1h").
				Started(t0.Add(-2 * time.Hour)).Obj()},
			wantEvicted: []string{"default/batch"}, wantRemaining: 1, wantEvents: 1},
		{name: "a held regular pod does not hold back the critical tier",
			pods: []*corev1.Pod{onN1("batch").Annotations(stevedorev1.DoNotDisruptKey, "true").Obj(),
				onN1("dns").PriorityClass("system-cluster-critical").Obj()},
			wantEvicted: []string{"default/dns"}, wantRemaining: 2, wantEvents: 1},
		{name: "a terminating regular pod holds back the critical and DaemonSet tiers until it is gone",
			pods: []*corev1.Pod{onN1("web").Deleting(metav1.NewTime(t0)).Obj(),
				onN1("dns").PriorityClass("system-cluster-critical").Obj(), daemonOnN1("logs").Obj()},
			wantRemaining: 3},
		{name: "a terminating critical pod holds back the DaemonSet tier",
			pods: []*corev1.Pod{onN1("dns").PriorityClass("system-cluster-critical").Deleting(metav1.NewTime(t0)).Obj(),
				daemonOnN1("logs").Obj()},
			wantRemaining: 2},
		{name: "mirror pods are never evicted", pods: []*corev1.Pod{mirrorOnN1().Obj()}, wantRemaining: 0},
		{name: "grace period over: every pod is deleted at once, mirror pods excepted", expired: true,
			pods: []*corev1.Pod{onN1("web").Obj(), onN1("batch").Annotations(stevedorev1.DoNotDisruptKey, "true").Obj(),
				onN1("stuck").Deleting(metav1.NewTime(t0.Add(-time.Hour))).Obj(), tolerantOnN1("agent").Obj(),
				daemonOnN1("logs").Obj(), onN1("dns").PriorityClass("system-cluster-critical").Obj(), mirrorOnN1().Obj()},
			wantDeleted:   []string{"agent grace=0", "batch grace=0", "dns grace=0", "logs grace=0", "stuck grace=0", "web grace=0"},
			wantRemaining: 6},
		{name: "a PodDisruptionBudget's refusal is retried",
			pods:     []*corev1.Pod{onN1("web").Obj()},
			evictErr: apierrors.NewTooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.", 10),
			// the pod is attempted and stays to be evicted on the next pass
			wantEvicted: []string{"default/web"}, wantRemaining: 1},
		{name: "a pod gone from the API server is not an error",
			pods: []*corev1.Pod{onN1("web").Obj()}, notInAPI: true,
			wantEvicted: []string{"default/web"}, wantRemaining: 1},
		{name: "another eviction error is returned",
			pods:     []*corev1.Pod{onN1("web").Obj()},
			evictErr: apierrors.NewInternalError(errors.New("etcd unavailable")),
			wantErr:  true, wantEvicted: []string{"default/web"}},
		{name: "finished pods and other nodes' pods are not drained",
			pods: []*corev1.Pod{onN1("done").Phase(corev1.PodSucceeded).Obj(), onN1("crashed").Phase(corev1.PodFailed).Obj(),
				test.Pod("elsewhere").Node("n2").Obj()},
			wantRemaining: 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			for _, p := range tc.pods {
				if tc.notInAPI {
					if err := h.listers.Add(p); err != nil {
						t.Fatal(err)
					}
				} else {
					h.add(p)
				}
			}
			if tc.evictErr != nil {
				h.failEvictions(tc.evictErr)
			}
			h.kube.ClearActions()

			remaining, err := h.term.evictTier(h.ctx, test.Node("n1").Obj(), tc.expired)
			if (err != nil) != tc.wantErr {
				t.Fatalf("evictTier error = %v, want error %v", err, tc.wantErr)
			}
			if err == nil && remaining != tc.wantRemaining {
				t.Errorf("remaining = %d, want %d", remaining, tc.wantRemaining)
			}
			got := h.evicted()
			sort.Strings(got)
			if !reflect.DeepEqual(got, tc.wantEvicted) {
				t.Errorf("evictions = %q, want %q", got, tc.wantEvicted)
			}
			d := test.Deleted(h.kube.Actions(), "pods")
			sort.Strings(d)
			if !reflect.DeepEqual(d, tc.wantDeleted) {
				t.Errorf("pod deletions = %q, want %q", d, tc.wantDeleted)
			}
			if ev := h.events(); len(ev) != tc.wantEvents {
				t.Errorf("events = %q, want %d", ev, tc.wantEvents)
			}
		})
	}
}

func TestTaintDisrupted(t *testing.T) {
	h := newHarness(t, test.Node("n1").Taint("dedicated", "batch", corev1.TaintEffectNoSchedule).Obj())
	for i := 0; i < 2; i++ {
		if err := h.term.taintDisrupted(h.ctx, h.node("n1")); err != nil {
			t.Fatalf("taintDisrupted #%d: %v", i+1, err)
		}
	}
	want := []corev1.Taint{{Key: "dedicated", Value: "batch", Effect: corev1.TaintEffectNoSchedule},
		{Key: stevedorev1.TaintDisrupted, Value: "true", Effect: corev1.TaintEffectNoSchedule}}
	if got := h.node("n1").Spec.Taints; !reflect.DeepEqual(got, want) {
		t.Errorf("taints = %+v, want %+v", got, want)
	}
	if n := test.Updated(h.kube.Actions(), "nodes", ""); n != 1 {
		t.Errorf("%d node updates, want 1", n)
	}
}
