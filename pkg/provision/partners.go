/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package provision

import (
	"context"
	"maps"
	"slices"
	"sort"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/utils/ptr"
)

// withPartners returns the batch with the pending pods of ours that a required pod-affinity term ties to one of
// its pods, in either direction, or that are of a gang one of its pods is in, and their partners in turn: pods the
// scheduler has not tried yet (it tries a burst's pods one at a time) and that no plan holds. Planned apart, the
// pod planned first may land where its partner cannot follow (a node of a NodePool whose taint the partner does
// not tolerate, a zone the partner's node affinity excludes), and the partner stays Pending; a gang planned in
// parts is short in each. Planned in one solve, they go where all of them can.
// It returns the gangs of the pods it returns, worked out once for the batch.
func (p *Provisioner) withPartners(ctx context.Context, batch []*corev1.Pod) ([]*corev1.Pod, podGangs) {
	all, err := p.opts.Pods.List(labels.Everything())
	if err != nil {
		return batch, gangsOf(batch)
	}
	in := make(map[types.UID]bool, len(batch))
	for _, pod := range batch {
		in[pod.UID] = true
	}
	var candidates []*corev1.Pod
	for _, pod := range all {
		if !in[pod.UID] && p.unplannedPending(pod) {
			candidates = append(candidates, pod)
		}
	}
	gangs := gangsOf(batch, candidates)
	if len(candidates) == 0 || (!anyRequiredAffinity(batch) && !anyRequiredAffinity(candidates) && !gangs.anyOf(batch)) {
		return batch, gangs
	}
	// deterministic: the partners join in namespace/name order, whatever order the lister gave
	sort.Slice(candidates, func(i, j int) bool {
		if candidates[i].Namespace != candidates[j].Namespace {
			return candidates[i].Namespace < candidates[j].Namespace
		}
		return candidates[i].Name < candidates[j].Name
	})
	out := append(batch[:len(batch):len(batch)], partnersOf(batch, candidates, gangs)...)
	if added := len(out) - len(batch); added > 0 {
		klog.FromContext(ctx).V(2).Info("Planning pods with the batch that a required pod affinity or a gang ties to it", "batch", len(batch), "partners", added)
	}
	return out, gangs
}

// partnersOf returns the candidates tied to the pods by a required pod-affinity term, either way, or by a gang
// (gangs says which), directly or through other candidates, in the order they are found.
func partnersOf(pods, candidates []*corev1.Pod, gangs podGangs) []*corev1.Pod {
	terms := map[types.UID][]fwk.AffinityTerm{}
	for _, group := range [][]*corev1.Pod{pods, candidates} {
		for _, pod := range group {
			if !hasRequiredAffinity(pod) {
				continue
			}
			if pi, err := framework.NewPodInfo(pod); err == nil {
				terms[pod.UID] = pi.GetRequiredAffinityTerms()
			}
		}
	}
	joined := map[types.UID]bool{}
	var out []*corev1.Pod
	queue := append([]*corev1.Pod(nil), pods...)
	for len(queue) > 0 {
		x := queue[0]
		queue = queue[1:]
		for _, y := range candidates {
			if joined[y.UID] || !tied(terms[x.UID], y) && !tied(terms[y.UID], x) && !gangs.same(x, y) {
				continue
			}
			joined[y.UID] = true
			out = append(out, y)
			queue = append(queue, y)
		}
	}
	return out
}

// unplannedPending reports whether a pod is ours, unbound, not gated, not headed to a node and held by no plan.
func (p *Provisioner) unplannedPending(pod *corev1.Pod) bool {
	if pod.Spec.SchedulerName != p.opts.SchedulerName || pod.Spec.NodeName != "" || pod.DeletionTimestamp != nil ||
		len(pod.Spec.SchedulingGates) > 0 || pod.Status.NominatedNodeName != "" {
		return false
	}
	return !p.plans.Held(pod.UID) && !p.solving.has(pod.UID)
}

func hasRequiredAffinity(pod *corev1.Pod) bool {
	a := pod.Spec.Affinity
	return a != nil && a.PodAffinity != nil && len(a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution) > 0
}

func anyRequiredAffinity(pods []*corev1.Pod) bool {
	for _, pod := range pods {
		if hasRequiredAffinity(pod) {
			return true
		}
	}
	return false
}

// tied reports whether one of the terms selects the pod. A term that selects namespaces by label is not
// followed (the namespaces' labels are not read here): such partners are planned as they come, as before.
func tied(terms []fwk.AffinityTerm, pod *corev1.Pod) bool {
	for i := range terms {
		if terms[i].Matches(pod, nil) {
			return true
		}
	}
	return false
}

// partnersComing says which workload a batch waits for ("" if none): a Deployment or ReplicaSet of ours still
// creating pods (its status behind its spec) whose pod template a required pod-affinity term ties to a pod of
// the batch, either way. Its pods, created after the batch closed, could not follow where the batch is planned
// (a NodePool whose taint they do not tolerate); created while it is open, they join it (withPartners). Applied
// together, the workloads' pods are then planned together whatever order their controllers create them in.
func (p *Provisioner) partnersComing(batch []*corev1.Pod) string {
	if p.opts.Deployments == nil || p.opts.ReplicaSets == nil {
		return ""
	}
	namespaces := map[string]bool{}
	for _, pod := range batch {
		namespaces[pod.Namespace] = true
	}
	for _, ns := range slices.Sorted(maps.Keys(namespaces)) {
		var templates []workloadTemplate
		if ds, err := p.opts.Deployments.Deployments(ns).List(labels.Everything()); err == nil {
			for _, d := range ds {
				if deploymentCreating(d) {
					templates = append(templates, workloadTemplate{"Deployment " + ns + "/" + d.Name, &d.Spec.Template})
				}
			}
		}
		if rss, err := p.opts.ReplicaSets.ReplicaSets(ns).List(labels.Everything()); err == nil {
			for _, rs := range rss {
				if replicaSetCreating(rs) {
					templates = append(templates, workloadTemplate{"ReplicaSet " + ns + "/" + rs.Name, &rs.Spec.Template})
				}
			}
		}
		sort.Slice(templates, func(i, j int) bool { return templates[i].name < templates[j].name })
		for _, tw := range templates {
			if tw.template.Spec.SchedulerName != p.opts.SchedulerName {
				continue
			}
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Labels: tw.template.Labels}, Spec: tw.template.Spec}
			if len(partnersOf([]*corev1.Pod{pod}, batch, gangsOf([]*corev1.Pod{pod}, batch))) > 0 {
				return tw.name
			}
		}
	}
	return ""
}

// workloadTemplate is the pod template of a workload still creating pods, with the workload's kind and name.
type workloadTemplate struct {
	name     string
	template *corev1.PodTemplateSpec
}

// deploymentCreating reports whether a Deployment may still create pods of its current spec: not yet observed,
// or fewer pods than its replicas.
func deploymentCreating(d *appsv1.Deployment) bool {
	return d.DeletionTimestamp == nil && (d.Status.ObservedGeneration < d.Generation || d.Status.Replicas < ptr.Deref(d.Spec.Replicas, 1))
}

// replicaSetCreating reports whether a ReplicaSet may still create pods: not yet observed, or fewer pods than
// its replicas.
func replicaSetCreating(rs *appsv1.ReplicaSet) bool {
	return rs.DeletionTimestamp == nil && (rs.Status.ObservedGeneration < rs.Generation || rs.Status.Replicas < ptr.Deref(rs.Spec.Replicas, 1))
}
