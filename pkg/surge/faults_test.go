/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package surge

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	appslisters "k8s.io/client-go/listers/apps/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2/ktesting"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
)

// scaleServer answers the Deployment's scale subresource from replicas; fail decides, call by call, whether an
// update is applied and what error answers it.
type scaleServer struct {
	mu       sync.Mutex
	replicas int32
	updates  int
	fail     func(n int) (apply bool, err error)
}

func (s *scaleServer) react(client *fake.Clientset) {
	client.PrependReactor("get", "deployments", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() != "scale" {
			return false, nil, nil
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		return true, &autoscalingv1.Scale{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns"},
			Spec: autoscalingv1.ScaleSpec{Replicas: s.replicas}}, nil
	})
	client.PrependReactor("update", "deployments", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() != "scale" {
			return false, nil, nil
		}
		scale := a.(k8stesting.UpdateAction).GetObject().(*autoscalingv1.Scale)
		s.mu.Lock()
		defer s.mu.Unlock()
		s.updates++
		apply, err := true, error(nil)
		if s.fail != nil {
			apply, err = s.fail(s.updates)
		}
		if apply {
			s.replicas = scale.Spec.Replicas
		}
		return true, scale, err
	})
}

func (s *scaleServer) current() int32 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.replicas
}

// faultWorld is newWorld() served by a fake API server whose scale subresource is scales, with the informers'
// caches filled from the same objects.
func faultWorld(t *testing.T, scales *scaleServer, cached *appsv1.Deployment, pods ...*corev1.Pod) (*Surger, *fake.Clientset) {
	t.Helper()
	w := newWorld()
	if cached == nil {
		cached = w.deployment
	}
	objs := []runtime.Object{w.deployment, w.replicaSet}
	for _, p := range pods {
		objs = append(objs, p)
	}
	client := fake.NewClientset(objs...)
	scales.react(client)
	ds := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	rss := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	podIdx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	for idx, obj := range map[cache.Indexer]any{ds: cached, rss: w.replicaSet} {
		if err := idx.Add(obj); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range pods {
		if err := podIdx.Add(p); err != nil {
			t.Fatal(err)
		}
	}
	return New(Options{Kube: client, Deployments: appslisters.NewDeploymentLister(ds), ReplicaSets: appslisters.NewReplicaSetLister(rss),
		Pods: corelisters.NewPodLister(podIdx), Interval: time.Millisecond}), client
}

func surgeRecord(t *testing.T, client *fake.Clientset) string {
	t.Helper()
	d, err := client.AppsV1().Deployments("ns").Get(context.Background(), "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return d.Annotations[stevedorev1.AnnotationSurge]
}

// TestAScaleUpWhoseAnswerIsLostIsUndone: the API server applies the scale-up but the connection drops before
// its answer; the surge does not go through, and the owner must end with its replicas and no record.
func TestAScaleUpWhoseAnswerIsLostIsUndone(t *testing.T) {
	lost := errors.New("http2: client connection lost")
	cases := []struct {
		name string
		fail func(n int) (bool, error)
	}{
		{name: "applied, answer lost", fail: func(n int) (bool, error) {
			if n == 1 {
				return true, lost
			}
			return true, nil
		}},
		{name: "not applied, connection refused", fail: func(n int) (bool, error) {
			if n == 1 {
				return false, lost
			}
			return true, nil
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			scales := &scaleServer{replicas: 2, fail: tc.fail}
			pod := podOf(new(controllerRef("ReplicaSet", "web-abc", "rs-uid")), nil)
			s, client := faultWorld(t, scales, nil, pod)
			res := s.Move(ctx, []*corev1.Pod{pod}, func(*corev1.Pod) stevedorev1.Replacement { return stevedorev1.ReplacementSurge }, nil, time.Second)
			if len(res.Moved) != 0 || !strings.Contains(res.Failed["ns/p"], "client connection lost") {
				t.Errorf("Move = %+v; want the pod not moved, for the lost connection", res)
			}
			if got := scales.current(); got != 2 {
				t.Errorf("the Deployment ends with %d replicas, want 2", got)
			}
			if r := surgeRecord(t, client); r != "" {
				t.Errorf("the Deployment keeps the surge record %q", r)
			}
		})
	}
}

// TestRecoverScalesBackTheSurgesNoMoveHolds: a surge record whose scale-back failed (or whose process stopped)
// is scaled back by the next Recover; one whose replicas someone else changed keeps them; a record the cache still
// shows but the owner no longer carries writes nothing.
func TestRecoverScalesBackTheSurgesNoMoveHolds(t *testing.T) {
	cases := []struct {
		name         string
		record       string // on the API server
		cachedRecord string
		replicas     int32
		wantReplicas int32
		wantWrites   bool
	}{
		{name: "a surge left at its scale", record: "2:3", cachedRecord: "2:3", replicas: 3, wantReplicas: 2, wantWrites: true},
		{name: "replicas someone else changed stand", record: "2:3", cachedRecord: "2:3", replicas: 5, wantReplicas: 5, wantWrites: true},
		{name: "a record only the cache still shows", cachedRecord: "2:3", replicas: 2, wantReplicas: 2},
		{name: "a record not understood is removed", record: "three", cachedRecord: "three", replicas: 2, wantReplicas: 2, wantWrites: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			scales := &scaleServer{replicas: tc.replicas}
			cached := newWorld().deployment
			cached.Annotations = map[string]string{stevedorev1.AnnotationSurge: tc.cachedRecord}
			s, client := faultWorld(t, scales, cached)
			if tc.record != "" {
				if err := s.annotate(ctx, Owner{Kind: kindDeployment, Namespace: "ns", Name: "web"}, tc.record); err != nil {
					t.Fatal(err)
				}
			}
			client.ClearActions()
			s.Recover(ctx)
			if got := scales.current(); got != tc.wantReplicas {
				t.Errorf("replicas = %d, want %d", got, tc.wantReplicas)
			}
			if r := surgeRecord(t, client); r != "" {
				t.Errorf("the record %q stays", r)
			}
			var writes []string
			for _, a := range client.Actions() {
				if a.GetVerb() != "get" && a.GetVerb() != "list" {
					writes = append(writes, a.GetVerb()+" "+a.GetResource().Resource+"/"+a.GetSubresource())
				}
			}
			if (len(writes) > 0) != tc.wantWrites {
				t.Errorf("writes = %v, want writes: %v", writes, tc.wantWrites)
			}
		})
	}
}

// TestRecoverLeavesASurgeUnderWay: an owner a Move holds is not scaled back under it.
func TestRecoverLeavesASurgeUnderWay(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	scales := &scaleServer{replicas: 3}
	cached := newWorld().deployment
	cached.Annotations = map[string]string{stevedorev1.AnnotationSurge: "2:3"}
	s, _ := faultWorld(t, scales, cached)
	owner := Owner{Kind: kindDeployment, Namespace: "ns", Name: "web"}
	if err := s.annotate(ctx, owner, "2:3"); err != nil {
		t.Fatal(err)
	}
	if !s.hold(owner) {
		t.Fatal("the owner is held already")
	}
	s.Recover(ctx)
	if got := scales.current(); got != 3 {
		t.Errorf("replicas = %d under a surge under way, want 3", got)
	}
	s.release(owner)
	s.Recover(ctx)
	if got := scales.current(); got != 2 {
		t.Errorf("replicas = %d once released, want 2", got)
	}
}
