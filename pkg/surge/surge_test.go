/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package surge

import (
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	appslisters "k8s.io/client-go/listers/apps/v1"
	autoscalinglisters "k8s.io/client-go/listers/autoscaling/v2"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
)

// world is a Deployment "web" of two replicas with its ReplicaSet, complete unless changed.
type world struct {
	deployment *appsv1.Deployment
	replicaSet *appsv1.ReplicaSet
	hpa        *autoscalingv2.HorizontalPodAutoscaler
}

func newWorld() *world {
	const replicas int32 = 2
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns", UID: "d-uid", Generation: 2},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To(replicas)},
		Status: appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: replicas, UpdatedReplicas: replicas, AvailableReplicas: replicas,
			ReadyReplicas: replicas}}
	rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: "web-abc", Namespace: "ns", UID: "rs-uid", Generation: 1,
		OwnerReferences: []metav1.OwnerReference{controllerRef("Deployment", "web", "d-uid")}},
		Spec: appsv1.ReplicaSetSpec{Replicas: ptr.To(replicas)}, Status: appsv1.ReplicaSetStatus{ObservedGeneration: 1, Replicas: replicas}}
	return &world{deployment: d, replicaSet: rs}
}

func controllerRef(kind, name string, uid types.UID) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: "apps/v1", Kind: kind, Name: name, UID: uid, Controller: ptr.To(true)}
}

func (w *world) surger(t *testing.T) *Surger {
	t.Helper()
	ds := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	rss := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	hpas := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	add := func(idx cache.Indexer, obj any) {
		if err := idx.Add(obj); err != nil {
			t.Fatal(err)
		}
	}
	add(ds, w.deployment)
	add(rss, w.replicaSet)
	if w.hpa != nil {
		add(hpas, w.hpa)
	}
	return New(Options{Deployments: appslisters.NewDeploymentLister(ds), ReplicaSets: appslisters.NewReplicaSetLister(rss),
		HPAs: autoscalinglisters.NewHorizontalPodAutoscalerLister(hpas), GitOpsManagers: []string{"argocd-controller", "kustomize-controller"}})
}

func podOf(owner *metav1.OwnerReference, annotations map[string]string) *corev1.Pod {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", Annotations: annotations}}
	if owner != nil {
		pod.OwnerReferences = []metav1.OwnerReference{*owner}
	}
	return pod
}

func TestCheckSaysWhichPodsSurge(t *testing.T) {
	rsRef := controllerRef("ReplicaSet", "web-abc", "rs-uid")
	cases := []struct {
		name  string
		pod   *corev1.Pod
		mode  stevedorev1.Replacement
		extra int32
		world func(*world)
		// wantOwner is the owner's kind when the pod surges; wantWhy a part of why not
		wantOwner string
		wantWhy   string
		wantWait  bool
		// wantGitOps is the GitOps controller the refused owner names
		wantGitOps string
	}{
		{name: "a Deployment's pod surges by its Deployment", pod: podOf(&rsRef, nil), mode: stevedorev1.ReplacementSurge,
			wantOwner: "Deployment"},
		{name: "an unset replacement is not Evict", pod: podOf(&rsRef, nil), wantOwner: "Deployment"},
		{name: "a NodePool that evicts", pod: podOf(&rsRef, nil), mode: stevedorev1.ReplacementEvict, wantWhy: "replacement is Evict"},
		{name: "the pod's annotation overrides Evict", pod: podOf(&rsRef, map[string]string{stevedorev1.AnnotationReplacement: "Surge"}),
			mode: stevedorev1.ReplacementEvict, wantOwner: "Deployment"},
		{name: "the pod's annotation overrides Surge", pod: podOf(&rsRef, map[string]string{stevedorev1.AnnotationReplacement: "Evict"}),
			mode: stevedorev1.ReplacementSurge, wantWhy: "replacement is Evict"},
		{name: "an unknown annotation value is named", pod: podOf(&rsRef, map[string]string{stevedorev1.AnnotationReplacement: "surge"}),
			wantWhy: `"surge" is neither Surge nor Evict`},
		{name: "a bare pod", pod: podOf(nil, nil), wantWhy: "no owner"},
		{name: "a StatefulSet's pod", pod: podOf(ptr.To(controllerRef("StatefulSet", "db", "s")), nil), wantWhy: "StatefulSet"},
		{name: "a Job's pod", pod: podOf(&metav1.OwnerReference{APIVersion: "batch/v1", Kind: "Job", Name: "j", UID: "j", Controller: ptr.To(true)}, nil),
			wantWhy: "a Job's pod cannot surge"},
		{name: "a ReplicaSet not in the cache", pod: podOf(ptr.To(controllerRef("ReplicaSet", "gone", "x")), nil), wantWhy: "not found"},
		{name: "a ReplicaSet of its own surges by itself", pod: podOf(&rsRef, nil),
			world: func(w *world) { w.replicaSet.OwnerReferences = nil }, wantOwner: "ReplicaSet"},
		{name: "a ReplicaSet of its own that is scaling waits", pod: podOf(&rsRef, nil),
			world: func(w *world) { w.replicaSet.OwnerReferences, w.replicaSet.Status.Replicas = nil, 3 }, wantWhy: "scaling", wantWait: true},
		{name: "a Deployment rolling out waits", pod: podOf(&rsRef, nil),
			world: func(w *world) { w.deployment.Status.UpdatedReplicas = 1 }, wantWhy: "rolling out", wantWait: true},
		{name: "a Deployment whose change is not observed waits", pod: podOf(&rsRef, nil),
			world: func(w *world) { w.deployment.Generation = 3 }, wantWhy: "rolling out", wantWait: true},
		{name: "a Deployment whose old ReplicaSet still has pods waits", pod: podOf(&rsRef, nil),
			world: func(w *world) { w.deployment.Status.Replicas = 3 }, wantWhy: "rolling out", wantWait: true},
		{name: "a Deployment surging already waits", pod: podOf(&rsRef, nil),
			world: func(w *world) { w.deployment.Annotations = map[string]string{stevedorev1.AnnotationSurge: "2:3"} }, wantWhy: "surging already", wantWait: true},
		{name: "a Deployment with an unavailable replica evicts", pod: podOf(&rsRef, nil),
			world: func(w *world) { w.deployment.Status.AvailableReplicas = 1 }, wantWhy: "1 of 2 replicas Ready"},
		{name: "a paused Deployment", pod: podOf(&rsRef, nil), world: func(w *world) { w.deployment.Spec.Paused = true }, wantWhy: "paused"},
		{name: "an HPA with room", pod: podOf(&rsRef, nil), world: func(w *world) { w.hpa = hpa(3) }, wantOwner: "Deployment"},
		{name: "an HPA at its maximum", pod: podOf(&rsRef, nil), world: func(w *world) { w.hpa = hpa(2) }, wantWhy: "at its maxReplicas 2"},
		{name: "a Deployment whose replicas a GitOps controller owns is evicted", pod: podOf(&rsRef, nil),
			world: func(w *world) {
				w.deployment.ManagedFields = []metav1.ManagedFieldsEntry{owning("kustomize-controller", replicasOwned)}
			},
			wantWhy: "its Deployment web has spec.replicas owned by kustomize-controller", wantGitOps: "kustomize-controller"},
		{name: "a GitOps controller that owns other fields only", pod: podOf(&rsRef, nil),
			world: func(w *world) {
				w.deployment.ManagedFields = []metav1.ManagedFieldsEntry{owning("argocd-controller", imageOwned)}
			},
			wantOwner: "Deployment"},
		{name: "replicas owned by a manager not in the list", pod: podOf(&rsRef, nil),
			world: func(w *world) {
				w.deployment.ManagedFields = []metav1.ManagedFieldsEntry{owning("kubectl", replicasOwned)}
			},
			wantOwner: "Deployment"},
		{name: "replicas applied by Argo CD's client-side apply", pod: podOf(&rsRef, nil),
			world:   func(w *world) { w.deployment.Annotations = argoCDApplied(`{"spec":{"replicas":2}}`) },
			wantWhy: "owned by Argo CD (client-side apply)", wantGitOps: "Argo CD (client-side apply)"},
		{name: "Argo CD's client-side apply leaving replicas out", pod: podOf(&rsRef, nil),
			world: func(w *world) { w.deployment.Annotations = argoCDApplied(`{"spec":{"template":{}}}`) }, wantOwner: "Deployment"},
		{name: "a ReplicaSet of its own whose replicas a GitOps controller owns", pod: podOf(&rsRef, nil),
			world: func(w *world) {
				w.replicaSet.OwnerReferences = nil
				w.replicaSet.ManagedFields = []metav1.ManagedFieldsEntry{owning("argocd-controller", replicasOwned)}
			}, wantWhy: "its ReplicaSet web-abc has spec.replicas owned by argocd-controller", wantGitOps: "argocd-controller"},
		{name: "an HPA with room for one surge but not two", pod: podOf(&rsRef, nil), extra: 1, world: func(w *world) { w.hpa = hpa(3) },
			wantWhy: "at its maxReplicas 3"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld()
			if tc.world != nil {
				tc.world(w)
			}
			owner, why, wait := w.surger(t).Check(tc.pod, tc.mode, tc.extra)
			if tc.wantOwner != "" {
				if why != "" || owner.Kind != tc.wantOwner {
					t.Fatalf("Check = %v, %q; want the pod to surge by its %s", owner, why, tc.wantOwner)
				}
				return
			}
			if why == "" || !strings.Contains(why, tc.wantWhy) {
				t.Fatalf("Check = %v, %q; want a reason containing %q", owner, why, tc.wantWhy)
			}
			if wait != tc.wantWait {
				t.Errorf("wait = %v, want %v (%s)", wait, tc.wantWait, why)
			}
			if owner.GitOps != tc.wantGitOps {
				t.Errorf("the owner names GitOps controller %q, want %q", owner.GitOps, tc.wantGitOps)
			}
		})
	}
}

// Field sets of managed-fields entries.
const (
	replicasOwned = `{"f:metadata":{"f:labels":{".":{},"f:app":{}}},"f:spec":{"f:replicas":{},"f:template":{}}}`
	imageOwned    = `{"f:spec":{"f:template":{"f:spec":{"f:containers":{}}}}}`
)

func owning(manager, fields string) metav1.ManagedFieldsEntry {
	return metav1.ManagedFieldsEntry{Manager: manager, Operation: metav1.ManagedFieldsOperationApply, APIVersion: "apps/v1",
		FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(fields)}
}

func argoCDApplied(lastApplied string) map[string]string {
	return map[string]string{annotationArgoCDTracking: "app:apps/Deployment:ns/web", annotationLastApplied: lastApplied}
}

// KeepReplicasOwners leaves of a Deployment's managed fields the entries that own spec.replicas, reduced to that
// field, and the surge check reads the same owner from what it leaves.
func TestKeepReplicasOwnersLeavesWhoOwnsTheReplicaCount(t *testing.T) {
	w := newWorld()
	w.deployment.ManagedFields = []metav1.ManagedFieldsEntry{owning("kube-controller-manager", imageOwned),
		owning("kustomize-controller", replicasOwned), owning("kubectl", `{"f:metadata":{}}`), owning("broken", `{`)}
	obj, err := KeepReplicasOwners(w.deployment)
	if err != nil {
		t.Fatal(err)
	}
	kept := obj.(*appsv1.Deployment).ManagedFields
	if len(kept) != 1 || kept[0].Manager != "kustomize-controller" || string(kept[0].FieldsV1.GetRawBytes()) != replicasFields {
		t.Fatalf("kept %+v, want the kustomize-controller entry reduced to spec.replicas", kept)
	}
	rsRef := controllerRef("ReplicaSet", "web-abc", "rs-uid")
	if owner, why, _ := w.surger(t).Check(podOf(&rsRef, nil), stevedorev1.ReplacementSurge, 0); owner.GitOps != "kustomize-controller" {
		t.Errorf("after the transform Check = %+v, %q; want the kustomize-controller named", owner, why)
	}
	if obj, _ := KeepReplicasOwners(&corev1.Pod{}); obj == nil {
		t.Error("an object of another kind is dropped")
	}
}

func hpa(maxReplicas int32) *autoscalingv2.HorizontalPodAutoscaler {
	return &autoscalingv2.HorizontalPodAutoscaler{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns"},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{MaxReplicas: maxReplicas,
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"}}}
}

// A Deployment whose status lags behind its pods surges once its pods are Ready; a count of them that refuses a
// surge is kept for the ReplicaSet's version, and counted again once the ReplicaSet changes.
func TestReadyPodsAreCountedAgainWhenTheReplicaSetChanges(t *testing.T) {
	w := newWorld()
	w.deployment.Status.AvailableReplicas = 0
	w.replicaSet.ResourceVersion = "1"
	s := w.surger(t)
	pods := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	s.opts.Pods = corelisters.NewPodLister(pods)
	rsRef := controllerRef("ReplicaSet", "web-abc", "rs-uid")
	replica := func(name string, ready bool) *corev1.Pod {
		pod := podOf(&rsRef, nil)
		pod.Name, pod.Spec.NodeName = name, "node-a"
		status := corev1.ConditionFalse
		if ready {
			status = corev1.ConditionTrue
		}
		pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: status}}
		return pod
	}
	check := func(want string) {
		t.Helper()
		_, why, _ := s.Check(podOf(&rsRef, nil), stevedorev1.ReplacementSurge, 0)
		if why != want {
			t.Fatalf("Check says %q, want %q", why, want)
		}
	}
	for _, pod := range []*corev1.Pod{replica("a", true), replica("b", false)} {
		if err := pods.Add(pod); err != nil {
			t.Fatal(err)
		}
	}
	check("its Deployment web has 1 of 2 replicas Ready")
	if err := pods.Update(replica("b", true)); err != nil {
		t.Fatal(err)
	}
	check("its Deployment web has 1 of 2 replicas Ready") // the ReplicaSet has not seen the pod yet
	w.replicaSet.ResourceVersion = "2"
	check("")
	if err := pods.Update(replica("b", false)); err != nil {
		t.Fatal(err)
	}
	check("its Deployment web has 1 of 2 replicas Ready") // a count that allowed a surge is not kept
}
