/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package test

import (
	"context"
	"fmt"
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

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	stevedorefake "github.com/stevedore-dev/stevedore/pkg/generated/clientset/versioned/fake"
)

// Cluster is a controller's view of a cluster in a unit test: fake clientsets holding objects, and listers serving
// the same objects the way informer caches would. The listers only see what Add puts in them (a write through a
// clientset reaches them when a test adds the object again, as an informer catching up).
type Cluster struct {
	t         testing.TB
	ctx       context.Context
	Kube      *kubefake.Clientset
	Stevedore *stevedorefake.Clientset
	Listers   *Listers
}

// NewCluster returns a cluster holding objs. Deleting a Node or NodeClaim with finalizers only marks it deleted
// (at now()), and it goes when an update removes its last finalizer, as the API server does.
func NewCluster(t testing.TB, now func() time.Time, objs ...runtime.Object) *Cluster {
	t.Helper()
	var kubeObjs, sdObjs []runtime.Object
	for _, o := range objs {
		if isStevedore(o) {
			sdObjs = append(sdObjs, o.DeepCopyObject())
		} else {
			kubeObjs = append(kubeObjs, o.DeepCopyObject())
		}
	}
	listers, err := NewListers(objs...)
	if err != nil {
		t.Fatal(err)
	}
	c := &Cluster{t: t, ctx: t.Context(), Kube: kubefake.NewClientset(kubeObjs...),
		Stevedore: stevedorefake.NewSimpleClientset(sdObjs...), Listers: listers}
	honorFinalizers(&c.Stevedore.Fake, c.Stevedore.Tracker(), "nodeclaims", now)
	generateNames(&c.Stevedore.Fake, "nodeclaims")
	honorFinalizers(&c.Kube.Fake, c.Kube.Tracker(), "nodes", now)
	return c
}

func isStevedore(obj runtime.Object) bool {
	switch obj.(type) {
	case *stevedorev1.NodeClaim, *stevedorev1.NodePool, *stevedorev1.EC2NodeClass, *stevedorev1.NodeOverlay:
		return true
	}
	return false
}

// generateNames makes a fake clientset name the objects of a resource created with generateName as the API server
// does: the prefix and a suffix unique in the clientset (a counter here, random there).
func generateNames(f *clienttesting.Fake, resource string) {
	generated := 0
	f.PrependReactor("create", resource, func(a clienttesting.Action) (bool, runtime.Object, error) {
		m, err := meta.Accessor(a.(clienttesting.CreateAction).GetObject())
		if err != nil || m.GetName() != "" || m.GetGenerateName() == "" {
			return false, nil, nil
		}
		generated++
		m.SetName(fmt.Sprintf("%s%05d", m.GetGenerateName(), generated))
		return false, nil, nil
	})
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

// Add puts an object into the listers and into the clientset that serves it.
func (c *Cluster) Add(obj runtime.Object) {
	c.t.Helper()
	if err := c.Listers.Add(obj); err != nil {
		c.t.Fatal(err)
	}
	var err error
	switch o := obj.DeepCopyObject().(type) {
	case *stevedorev1.NodeClaim:
		_, err = c.Stevedore.StevedoreV1().NodeClaims().Create(c.ctx, o, metav1.CreateOptions{})
	case *stevedorev1.NodePool:
		_, err = c.Stevedore.StevedoreV1().NodePools().Create(c.ctx, o, metav1.CreateOptions{})
	case *corev1.Node:
		_, err = c.Kube.CoreV1().Nodes().Create(c.ctx, o, metav1.CreateOptions{})
	case *corev1.Pod:
		_, err = c.Kube.CoreV1().Pods(o.Namespace).Create(c.ctx, o, metav1.CreateOptions{})
	case *appsv1.DaemonSet:
		_, err = c.Kube.AppsV1().DaemonSets(o.Namespace).Create(c.ctx, o, metav1.CreateOptions{})
	default:
		c.t.Fatalf("test cluster cannot add %T", obj)
	}
	if err != nil {
		c.t.Fatal(err)
	}
}

// Node reads a Node back from the clientset; nil when it is gone.
func (c *Cluster) Node(name string) *corev1.Node {
	c.t.Helper()
	n, err := c.Kube.CoreV1().Nodes().Get(c.ctx, name, metav1.GetOptions{})
	return found(c.t, n, err)
}

// NodeClaim reads a NodeClaim back from the clientset; nil when it is gone.
func (c *Cluster) NodeClaim(name string) *stevedorev1.NodeClaim {
	c.t.Helper()
	nc, err := c.Stevedore.StevedoreV1().NodeClaims().Get(c.ctx, name, metav1.GetOptions{})
	return found(c.t, nc, err)
}

// Pod reads a pod of namespace default back from the clientset; nil when it is gone.
func (c *Cluster) Pod(name string) *corev1.Pod {
	c.t.Helper()
	p, err := c.Kube.CoreV1().Pods(metav1.NamespaceDefault).Get(c.ctx, name, metav1.GetOptions{})
	return found(c.t, p, err)
}

// ClearActions forgets the calls both clientsets recorded so far.
func (c *Cluster) ClearActions() {
	c.Kube.ClearActions()
	c.Stevedore.ClearActions()
}

// found returns what a Get returned, nil when it was not found; any other error fails the test.
func found[T any](t testing.TB, obj *T, err error) *T {
	t.Helper()
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return obj
}
