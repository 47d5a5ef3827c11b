/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package provision

import (
	"context"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	appslisters "k8s.io/client-go/listers/apps/v1"
	clientcache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/solver/simulation"
	"github.com/stevedore-dev/stevedore/pkg/test"
)

// A pod whose required affinity ties it to a pod of the batch is planned with the batch, though the scheduler
// has not tried it yet: planned alone, the batch's pod would take the preferred NodePool, whose taint its
// partner does not tolerate, and the partner would stay Pending.
func TestAffinityPartnersArePlannedWithTheBatch(t *testing.T) {
	tainted := test.NodePool("tainted").Weight(100).Obj()
	tainted.Spec.Template.Spec.Taints = []corev1.Taint{{Key: "dedicated", Value: "cache", Effect: corev1.TaintEffectNoSchedule}}
	plain := test.NodePool("plain").Weight(10).Obj()
	target := func() *corev1.Pod {
		return test.Pod("target").Pending().Req("cpu", "250m").Labels("app", "cache").
			Toleration("dedicated", corev1.TolerationOpEqual, "cache", corev1.TaintEffectNoSchedule).Obj()
	}
	follower := func(name, app string) *corev1.Pod {
		pod := test.Pod(name).Pending().Req("cpu", "250m").Labels("app", "web").Obj()
		pod.Spec.Affinity = &corev1.Affinity{PodAffinity: &corev1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}, TopologyKey: corev1.LabelHostname}}}}
		return pod
	}
	tests := []struct {
		name    string
		batch   []*corev1.Pod
		pending []*corev1.Pod
		// want maps each pod planned to its NodePool; pods not in it are not planned
		want map[string]string
	}{
		{name: "the partner of a pod in the batch joins it, and both go where both can",
			batch: []*corev1.Pod{target()}, pending: []*corev1.Pod{follower("web", "cache")},
			want: map[string]string{"target": "plain", "web": "plain"}},
		{name: "the pod a batch's pod is tied to joins it",
			batch: []*corev1.Pod{follower("web", "cache")}, pending: []*corev1.Pod{target()},
			want: map[string]string{"target": "plain", "web": "plain"}},
		{name: "a pending pod tied to nothing in the batch waits for its own try",
			batch: []*corev1.Pod{target()}, pending: []*corev1.Pod{follower("web", "db")},
			want: map[string]string{"target": "tainted"}},
		{name: "a pod of another scheduler is not planned",
			batch: []*corev1.Pod{target()}, pending: []*corev1.Pod{func() *corev1.Pod {
				pod := follower("web", "cache")
				pod.Spec.SchedulerName = corev1.DefaultSchedulerName
				return pod
			}()},
			want: map[string]string{"target": "tainted"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			objs := []runtime.Object{tainted, plain}
			for _, pod := range append(append([]*corev1.Pod(nil), tc.batch...), tc.pending...) {
				objs = append(objs, pod)
			}
			h := newHarness(t, objs...)
			sim, err := simulation.New(context.Background(), simulation.NewSnapshot(), simulation.Options{})
			if err != nil {
				t.Fatal(err)
			}
			h.prov.opts.Simulator, h.prov.planner.sim, h.prov.opts.SchedulerName = sim, sim, "stevedore"
			if err := h.prov.solveBatch(h.Ctx, tc.batch); err != nil {
				t.Fatal(err)
			}
			got := map[string]string{}
			for _, pod := range append(append([]*corev1.Pod(nil), tc.batch...), tc.pending...) {
				claimName, planned := h.prov.plans.ClaimOf(pod.UID)
				if !planned {
					continue
				}
				claim, err := h.Stevedore.StevedoreV1().NodeClaims().Get(h.Ctx, claimName, metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				got[pod.Name] = claim.Labels[stevedorev1.LabelNodePool]
			}
			if len(got) != len(tc.want) {
				t.Fatalf("planned %v, want %v", got, tc.want)
			}
			for pod, pool := range tc.want {
				if got[pod] != pool {
					t.Errorf("planned %v, want %v", got, tc.want)
				}
			}
		})
	}
}

// TestABatchWaitsForThePodsOfWorkloadsTiedToIt: a batch waits while a Deployment or ReplicaSet of ours whose pod
// template a required pod affinity ties to one of its pods (either way) is still creating pods; not for one that
// created them all, one tied to nothing in the batch, one of another scheduler or one being deleted.
func TestABatchWaitsForThePodsOfWorkloadsTiedToIt(t *testing.T) {
	affinityTo := func(app string) *corev1.Affinity {
		return &corev1.Affinity{PodAffinity: &corev1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}, TopologyKey: corev1.LabelHostname}}}}
	}
	template := func(app string, affinity *corev1.Affinity) corev1.PodTemplateSpec {
		return corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": app}},
			Spec: corev1.PodSpec{SchedulerName: "stevedore", Affinity: affinity}}
	}
	deployment := func(app string, affinity *corev1.Affinity, created int32) *appsv1.Deployment {
		return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: app, Namespace: metav1.NamespaceDefault, Generation: 1},
			Spec:   appsv1.DeploymentSpec{Replicas: ptr.To(int32(2)), Template: template(app, affinity)},
			Status: appsv1.DeploymentStatus{ObservedGeneration: 1, Replicas: created}}
	}
	replicaSet := func(app string, affinity *corev1.Affinity, created int32) *appsv1.ReplicaSet {
		return &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: app + "-abc", Namespace: metav1.NamespaceDefault, Generation: 1},
			Spec:   appsv1.ReplicaSetSpec{Replicas: ptr.To(int32(2)), Template: template(app, affinity)},
			Status: appsv1.ReplicaSetStatus{ObservedGeneration: 1, Replicas: created}}
	}
	cache := test.Pod("cache-1").Pending().Labels("app", "cache").Obj()
	web := test.Pod("web-1").Pending().Labels("app", "web").Obj()
	web.Spec.Affinity = affinityTo("cache")
	tests := []struct {
		name  string
		batch []*corev1.Pod
		objs  []runtime.Object
		want  string
	}{
		{name: "a Deployment following the batch's pods has created none", batch: []*corev1.Pod{cache},
			objs: []runtime.Object{deployment("web", affinityTo("cache"), 0)}, want: "Deployment default/web"},
		{name: "a Deployment not yet observed", batch: []*corev1.Pod{cache},
			objs: []runtime.Object{func() *appsv1.Deployment {
				d := deployment("web", affinityTo("cache"), 2)
				d.Generation = 2
				return d
			}()}, want: "Deployment default/web"},
		{name: "its ReplicaSet has created one of two", batch: []*corev1.Pod{cache},
			objs: []runtime.Object{deployment("web", affinityTo("cache"), 2), replicaSet("web", affinityTo("cache"), 1)}, want: "ReplicaSet default/web-abc"},
		{name: "the Deployment a batch's pod follows is still creating", batch: []*corev1.Pod{web},
			objs: []runtime.Object{deployment("cache", nil, 1)}, want: "Deployment default/cache"},
		{name: "every pod created", batch: []*corev1.Pod{cache},
			objs: []runtime.Object{deployment("web", affinityTo("cache"), 2), replicaSet("web", affinityTo("cache"), 2)}},
		{name: "tied to nothing in the batch", batch: []*corev1.Pod{cache}, objs: []runtime.Object{deployment("web", affinityTo("db"), 0)}},
		{name: "another scheduler's", batch: []*corev1.Pod{cache}, objs: []runtime.Object{func() *appsv1.Deployment {
			d := deployment("web", affinityTo("cache"), 0)
			d.Spec.Template.Spec.SchedulerName = corev1.DefaultSchedulerName
			return d
		}()}},
		{name: "being deleted", batch: []*corev1.Pod{cache}, objs: []runtime.Object{func() *appsv1.Deployment {
			d := deployment("web", affinityTo("cache"), 0)
			d.DeletionTimestamp = &metav1.Time{Time: t0}
			return d
		}()}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ds := clientcache.NewIndexer(clientcache.MetaNamespaceKeyFunc, clientcache.Indexers{clientcache.NamespaceIndex: clientcache.MetaNamespaceIndexFunc})
			rss := clientcache.NewIndexer(clientcache.MetaNamespaceKeyFunc, clientcache.Indexers{clientcache.NamespaceIndex: clientcache.MetaNamespaceIndexFunc})
			for _, obj := range tc.objs {
				idx := ds
				if _, ok := obj.(*appsv1.ReplicaSet); ok {
					idx = rss
				}
				if err := idx.Add(obj); err != nil {
					t.Fatal(err)
				}
			}
			p := &Provisioner{base: &base{opts: Options{SchedulerName: "stevedore", Deployments: appslisters.NewDeploymentLister(ds),
				ReplicaSets: appslisters.NewReplicaSetLister(rss)}}}
			if got := p.partnersComing(tc.batch); got != tc.want {
				t.Errorf("partnersComing = %q, want %q", got, tc.want)
			}
		})
	}
}
