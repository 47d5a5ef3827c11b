/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package provision

import (
	"context"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
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
	"github.com/stevedore-dev/stevedore/pkg/nodeclaim/termination"
	"github.com/stevedore-dev/stevedore/pkg/test"
)

// t0 is when every lifecycle test starts.
var t0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

const (
	testRegion              = "us-east-1"
	testRegistrationTimeout = 5 * time.Minute
)

// lifecycleHarness is a Lifecycle over fake clientsets, listers and a fake cloud, at a fake time.
type lifecycleHarness struct {
	t       *testing.T
	ctx     context.Context
	clock   *clocktesting.FakeClock
	kube    *kubefake.Clientset
	sd      *stevedorefake.Clientset
	listers *test.Listers
	cloud   *fake.Provider
	rec     *events.FakeRecorder
	prov    *Provisioner
	life    *Lifecycle
	term    *termination.Terminator
	// initialized collects the node names OnInitialized was called with.
	initialized []string
}

// newLifecycleHarness puts objs into the listers and into the clientset that serves them.
func newLifecycleHarness(t *testing.T, objs ...runtime.Object) *lifecycleHarness {
	t.Helper()
	var kubeObjs, sdObjs []runtime.Object
	for _, o := range objs {
		switch o.(type) {
		case *stevedorev1.NodeClaim, *stevedorev1.NodePool:
			sdObjs = append(sdObjs, o.DeepCopyObject())
		default:
			kubeObjs = append(kubeObjs, o.DeepCopyObject())
		}
	}
	listers, err := test.NewListers(objs...)
	if err != nil {
		t.Fatal(err)
	}
	cl, err := fake.New([]string{"us-east-1a", "us-east-1b"}, "m5.large", "m5.xlarge")
	if err != nil {
		t.Fatal(err)
	}
	h := &lifecycleHarness{t: t, ctx: klog.NewContext(t.Context(), ktesting.NewLogger(t, ktesting.NewConfig())), clock: clocktesting.NewFakeClock(t0),
		kube: kubefake.NewClientset(kubeObjs...), sd: stevedorefake.NewSimpleClientset(sdObjs...),
		listers: listers, cloud: cl, rec: events.NewFakeRecorder(100)}
	h.prov = New(Options{ClusterName: "test", Region: testRegion, Kube: h.kube, Stevedore: h.sd,
		Nodes: listers.Nodes, Pods: listers.Pods, DaemonSets: listers.DaemonSets, NodeClaims: listers.NodeClaims,
		NodePools: listers.NodePools, Cloud: cl, Recorder: h.rec, Clock: h.clock})
	h.term = termination.New(termination.Options{Kube: h.kube, Stevedore: h.sd, Cloud: cl, Nodes: listers.Nodes, Pods: listers.Pods,
		NodeClaims: listers.NodeClaims, Recorder: h.rec, Clock: h.clock, Provisioning: h.prov})
	h.life = NewLifecycle(h.prov, LifecycleOptions{RegistrationTimeout: testRegistrationTimeout, Terminator: h.term,
		OnInitialized: func(node string) { h.initialized = append(h.initialized, node) }})
	honorFinalizers(&h.sd.Fake, h.sd.Tracker(), "nodeclaims", h.clock.Now)
	honorFinalizers(&h.kube.Fake, h.kube.Tracker(), "nodes", h.clock.Now)
	t.Cleanup(h.life.queue.ShutDown)
	return h
}

// honorFinalizers makes a fake clientset delete objects of a resource as the API server does: an object with
// finalizers only gets its deletion timestamp, and goes when an update removes its last finalizer.
func honorFinalizers(f *clienttesting.Fake, tracker clienttesting.ObjectTracker, resource string, now func() time.Time) {
	f.PrependReactor("delete", resource, func(a clienttesting.Action) (bool, runtime.Object, error) {
		d := a.(clienttesting.DeleteActionImpl)
		obj, err := tracker.Get(d.GetResource(), d.GetNamespace(), d.GetName())
		if err != nil {
			return true, nil, err
		}
		m, err := meta.Accessor(obj)
		if err != nil {
			return true, nil, err
		}
		if len(m.GetFinalizers()) == 0 {
			return false, nil, nil
		}
		if m.GetDeletionTimestamp() == nil {
			at := metav1.NewTime(now())
			m.SetDeletionTimestamp(&at)
			return true, nil, tracker.Update(d.GetResource(), obj, d.GetNamespace())
		}
		return true, nil, nil
	})
	f.PrependReactor("update", resource, func(a clienttesting.Action) (bool, runtime.Object, error) {
		u := a.(clienttesting.UpdateActionImpl)
		m, err := meta.Accessor(u.GetObject())
		if err != nil || m.GetDeletionTimestamp() == nil || len(m.GetFinalizers()) > 0 {
			return false, nil, nil
		}
		return true, u.GetObject(), tracker.Delete(u.GetResource(), u.GetNamespace(), m.GetName())
	})
}

// add puts an object into the listers and its clientset after the harness is built.
func (h *lifecycleHarness) add(obj runtime.Object) {
	h.t.Helper()
	if err := h.listers.Add(obj); err != nil {
		h.t.Fatal(err)
	}
	var err error
	switch o := obj.DeepCopyObject().(type) {
	case *stevedorev1.NodeClaim:
		_, err = h.sd.StevedoreV1().NodeClaims().Create(h.ctx, o, metav1.CreateOptions{})
	case *corev1.Node:
		_, err = h.kube.CoreV1().Nodes().Create(h.ctx, o, metav1.CreateOptions{})
	case *corev1.Pod:
		_, err = h.kube.CoreV1().Pods(o.Namespace).Create(h.ctx, o, metav1.CreateOptions{})
	case *appsv1.DaemonSet:
		_, err = h.kube.AppsV1().DaemonSets(o.Namespace).Create(h.ctx, o, metav1.CreateOptions{})
	default:
		h.t.Fatalf("harness cannot add %T", obj)
	}
	if err != nil {
		h.t.Fatal(err)
	}
}

// claim reads NodeClaim c1 back from the clientset; nil when it is gone.
func (h *lifecycleHarness) claim() *stevedorev1.NodeClaim {
	h.t.Helper()
	c, err := h.sd.StevedoreV1().NodeClaims().Get(h.ctx, "c1", metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		h.t.Fatal(err)
	}
	return c
}

// node reads a Node back from the clientset; nil when it is gone.
func (h *lifecycleHarness) node(name string) *corev1.Node {
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

// pod reads a pod back from the clientset.
func (h *lifecycleHarness) pod(name string) *corev1.Pod {
	h.t.Helper()
	p, err := h.kube.CoreV1().Pods(metav1.NamespaceDefault).Get(h.ctx, name, metav1.GetOptions{})
	if err != nil {
		h.t.Fatal(err)
	}
	return p
}

// events drains the events recorded so far.
func (h *lifecycleHarness) events() []string { return test.Events(h.rec) }

// evicted lists the pods evicted through the Eviction API so far, as namespace/name.
func (h *lifecycleHarness) evicted() []string { return test.Evicted(h.kube.Actions()) }

// condition returns a NodeClaim's condition of a type, or nil.
func condition(c *stevedorev1.NodeClaim, condType string) *metav1.Condition {
	return meta.FindStatusCondition(c.Status.Conditions, condType)
}

func hasString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func countString(list []string, s string) int {
	n := 0
	for _, x := range list {
		if x == s {
			n++
		}
	}
	return n
}
