/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package manifest

import (
	"fmt"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// Expand turns workloads into the pods their controllers would create and applies to every pod what the API
// server's defaulting and admission would: the default namespace, requests defaulted from limits, and the pod
// overhead and scheduling of its RuntimeClass. A Deployment, ReplicaSet or StatefulSet gives spec.replicas pods
// (default 1), a Job spec.parallelism pods (capped by completions), a CronJob one Job's pods (none while
// suspended). Pods are named <workload>-<index> and carry the template's labels. Other objects are returned
// unchanged; RuntimeClasses are consumed. A pod naming a RuntimeClass the input does not have is an error.
func Expand(objs []runtime.Object) ([]runtime.Object, error) {
	classes := map[string]*nodev1.RuntimeClass{}
	for _, o := range objs {
		if rc, ok := o.(*nodev1.RuntimeClass); ok {
			classes[rc.Name] = rc
		}
	}
	var out []runtime.Object
	for _, o := range objs {
		if _, ok := o.(*nodev1.RuntimeClass); ok {
			continue
		}
		pods, workload := workloadPods(o)
		if !workload {
			out = append(out, o)
			continue
		}
		for _, p := range pods {
			if err := admit(p, classes); err != nil {
				return nil, err
			}
			out = append(out, p)
		}
	}
	return out, nil
}

// workloadPods returns the pods a pod or workload stands for; it reports false for any other object.
func workloadPods(o runtime.Object) ([]*corev1.Pod, bool) {
	switch w := o.(type) {
	case *corev1.Pod:
		if admitted(w) {
			return []*corev1.Pod{w}, true // nothing to default: the pod itself (a cluster dump's pods are most of it)
		}
		return []*corev1.Pod{w.DeepCopy()}, true
	case *appsv1.Deployment:
		return podsOf("Deployment", w.ObjectMeta, w.Spec.Template, replicas(w.Spec.Replicas)), true
	case *appsv1.ReplicaSet:
		return podsOf("ReplicaSet", w.ObjectMeta, w.Spec.Template, replicas(w.Spec.Replicas)), true
	case *appsv1.StatefulSet:
		pods := podsOf("StatefulSet", w.ObjectMeta, w.Spec.Template, replicas(w.Spec.Replicas))
		for _, p := range pods {
			p.Labels[appsv1.StatefulSetPodNameLabel] = p.Name
			p.Spec.Hostname = p.Name
		}
		return pods, true
	case *batchv1.Job:
		return podsOf("Job", w.ObjectMeta, w.Spec.Template, jobPods(w.Spec)), true
	case *batchv1.CronJob:
		if w.Spec.Suspend != nil && *w.Spec.Suspend {
			return nil, true
		}
		return podsOf("CronJob", w.ObjectMeta, w.Spec.JobTemplate.Spec.Template, jobPods(w.Spec.JobTemplate.Spec)), true
	}
	return nil, false
}

func replicas(r *int32) int {
	if r == nil {
		return 1
	}
	return int(*r)
}

// jobPods is how many pods a Job runs at once.
func jobPods(spec batchv1.JobSpec) int {
	if spec.Suspend != nil && *spec.Suspend {
		return 0
	}
	n := 1
	if spec.Parallelism != nil {
		n = int(*spec.Parallelism)
	}
	if spec.Completions != nil && int(*spec.Completions) < n {
		n = int(*spec.Completions)
	}
	return n
}

// podsOf returns n pods of a workload's template.
func podsOf(kind string, meta metav1.ObjectMeta, tmpl corev1.PodTemplateSpec, n int) []*corev1.Pod {
	ns := meta.Namespace
	if ns == "" {
		ns = metav1.NamespaceDefault
	}
	out := make([]*corev1.Pod, 0, n)
	for i := 0; i < n; i++ {
		p := &corev1.Pod{ObjectMeta: *tmpl.ObjectMeta.DeepCopy(), Spec: *tmpl.Spec.DeepCopy()}
		p.Name = meta.Name + "-" + strconv.Itoa(i)
		p.Namespace = ns
		p.UID = types.UID(ns + "/" + p.Name)
		if p.Labels == nil {
			p.Labels = map[string]string{}
		}
		apiVersion := "apps/v1"
		if kind == "Job" || kind == "CronJob" {
			apiVersion = "batch/v1"
		}
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: apiVersion, Kind: kind, Name: meta.Name, UID: types.UID(ns + "/" + kind + "/" + meta.Name),
			Controller: ptr.To(true)}}
		out = append(out, p)
	}
	return out
}

// admit applies to a pod what the API server would before a scheduler sees it.
func admit(p *corev1.Pod, classes map[string]*nodev1.RuntimeClass) error {
	if p.Namespace == "" {
		p.Namespace = metav1.NamespaceDefault
	}
	if p.UID == "" {
		p.UID = types.UID(p.Namespace + "/" + p.Name)
	}
	DefaultRequests(p)
	if name := p.Spec.RuntimeClassName; name != nil && *name != "" {
		rc, ok := classes[*name]
		if !ok {
			return fmt.Errorf("pod %s/%s names RuntimeClass %q, which the input does not have (its overhead and node selector are needed)", p.Namespace, p.Name, *name)
		}
		if rc.Overhead != nil && p.Spec.Overhead == nil {
			p.Spec.Overhead = rc.Overhead.PodFixed.DeepCopy()
		}
		if s := rc.Scheduling; s != nil {
			for k, v := range s.NodeSelector {
				if p.Spec.NodeSelector == nil {
					p.Spec.NodeSelector = map[string]string{}
				}
				if cur, ok := p.Spec.NodeSelector[k]; ok && cur != v {
					return fmt.Errorf("pod %s/%s: its node selector %s=%s conflicts with RuntimeClass %s's %s=%s", p.Namespace, p.Name, k, cur, rc.Name, k, v)
				}
				p.Spec.NodeSelector[k] = v
			}
			p.Spec.Tolerations = append(p.Spec.Tolerations, s.Tolerations...)
		}
	}
	return nil
}

// admitted reports whether admit would leave p as it is: a namespace and a UID, no RuntimeClass, and a request for
// every limit (as a pod read from a cluster has).
func admitted(p *corev1.Pod) bool {
	if p.Namespace == "" || p.UID == "" || (p.Spec.RuntimeClassName != nil && *p.Spec.RuntimeClassName != "") {
		return false
	}
	for _, r := range resourceLists(p) {
		for name := range r.Limits {
			if _, ok := r.Requests[name]; !ok {
				return false
			}
		}
	}
	return true
}

// DefaultRequests gives every container of a pod (and the pod, with pod-level resources) the requests the API
// server defaults from its limits.
func DefaultRequests(p *corev1.Pod) {
	for _, r := range resourceLists(p) {
		defaultRequests(r)
	}
}

// resourceLists are the requests and limits of a pod's init containers, containers and, when it has them, the pod
// itself: what the API server's defaulting reads.
func resourceLists(p *corev1.Pod) []*corev1.ResourceRequirements {
	out := make([]*corev1.ResourceRequirements, 0, len(p.Spec.InitContainers)+len(p.Spec.Containers)+1)
	for _, list := range [][]corev1.Container{p.Spec.InitContainers, p.Spec.Containers} {
		for i := range list {
			out = append(out, &list[i].Resources)
		}
	}
	if p.Spec.Resources != nil {
		out = append(out, p.Spec.Resources)
	}
	return out
}

// defaultRequests copies a limit into the request of the same resource when the request is not given, as the API
// server's defaulting does.
func defaultRequests(r *corev1.ResourceRequirements) {
	for name, q := range r.Limits {
		if _, ok := r.Requests[name]; ok {
			continue
		}
		if r.Requests == nil {
			r.Requests = corev1.ResourceList{}
		}
		r.Requests[name] = q.DeepCopy()
	}
}
