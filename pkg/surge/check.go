/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package surge

import (
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/podutil"
)

// Check says how a pod on a node of a NodePool whose replacement is mode would move: by surging its owner (the
// owner is returned), or else why not (the owner is returned with that too when a GitOps controller owns its
// replica count). wait says the reason passes (the owner is rolling out, scaling or surging
// already): the pod had better wait for it than be evicted. extra is how many of the owner's pods the same move
// surges already (the HPA's maxReplicas must leave room for one more).
func (s *Surger) Check(pod *corev1.Pod, mode stevedorev1.Replacement, extra int32) (owner Owner, why string, wait bool) {
	if why := evicts(pod, mode); why != "" {
		return Owner{}, why, false
	}
	ref := metav1.GetControllerOf(pod)
	rs, err := s.opts.ReplicaSets.ReplicaSets(pod.Namespace).Get(ref.Name)
	if err != nil || rs.UID != ref.UID {
		return Owner{}, fmt.Sprintf("its ReplicaSet %s is not found", ref.Name), false
	}
	if rs.DeletionTimestamp != nil {
		return Owner{}, fmt.Sprintf("its ReplicaSet %s is being deleted", rs.Name), false
	}
	owner = Owner{Kind: kindReplicaSet, Namespace: rs.Namespace, Name: rs.Name, UID: rs.UID, ReplicaSet: rs}
	replicas := ptrValue(rs.Spec.Replicas)
	if dref := metav1.GetControllerOf(rs); dref != nil {
		if dref.Kind != kindDeployment {
			return Owner{}, fmt.Sprintf("its ReplicaSet is controlled by a %s", dref.Kind), false
		}
		d, err := s.opts.Deployments.Deployments(rs.Namespace).Get(dref.Name)
		if err != nil || d.UID != dref.UID {
			return Owner{}, fmt.Sprintf("its Deployment %s is not found", dref.Name), false
		}
		owner = Owner{Kind: kindDeployment, Namespace: d.Namespace, Name: d.Name, UID: d.UID, ReplicaSet: rs}
		if manager := s.gitOpsOwner(&d.ObjectMeta); manager != "" {
			return gitOpsOwned(owner, manager)
		}
		if why, wait := s.rollingOut(d, rs); why != "" {
			return Owner{}, why, wait
		}
		replicas = ptrValue(d.Spec.Replicas)
	} else {
		if manager := s.gitOpsOwner(&rs.ObjectMeta); manager != "" {
			return gitOpsOwned(owner, manager)
		}
		if why := replicaSetBusy(rs); why != "" {
			return Owner{}, why, true
		}
	}
	if why := s.hpaRoom(owner, replicas+extra+1); why != "" {
		return Owner{}, why, false
	}
	return owner, "", false
}

// replicaSetBusy says why a ReplicaSet of its own cannot surge now, which passes: it is surging or scaling.
func replicaSetBusy(rs *appsv1.ReplicaSet) string {
	switch {
	case rs.Annotations[stevedorev1.AnnotationSurge] != "":
		return fmt.Sprintf("its ReplicaSet %s is surging already", rs.Name)
	case rs.Status.ObservedGeneration < rs.Generation || rs.Status.Replicas != ptrValue(rs.Spec.Replicas):
		return fmt.Sprintf("its ReplicaSet %s is scaling", rs.Name)
	}
	return ""
}

// gitOpsOwned is Check's answer for an owner whose spec.replicas a GitOps controller owns: a surge would change a
// field that controller puts back, so the pod is evicted instead. The owner is returned, with GitOps set, for the
// event that says so.
func gitOpsOwned(owner Owner, manager string) (Owner, string, bool) {
	owner.GitOps = manager
	return owner, fmt.Sprintf("its %s %s has spec.replicas owned by %s, which would undo a surge", owner.Kind, owner.Name, manager), false
}

// evicts says why a pod is evicted whatever its owner's state: its replacement (the pod's annotation, else mode) is
// Evict, or its owner is not a ReplicaSet.
func evicts(pod *corev1.Pod, mode stevedorev1.Replacement) string {
	if v, ok := pod.Annotations[stevedorev1.AnnotationReplacement]; ok {
		switch stevedorev1.Replacement(v) {
		case stevedorev1.ReplacementSurge, stevedorev1.ReplacementEvict:
			mode = stevedorev1.Replacement(v)
		default:
			return fmt.Sprintf("its %s annotation %q is neither Surge nor Evict", stevedorev1.AnnotationReplacement, v)
		}
	}
	if mode == stevedorev1.ReplacementEvict {
		return "its replacement is Evict"
	}
	ref := metav1.GetControllerOf(pod)
	switch {
	case ref == nil:
		return "a pod with no owner cannot surge"
	case ref.Kind == "StatefulSet":
		return "a StatefulSet's pod keeps its identity and cannot surge"
	case ref.Kind != kindReplicaSet || !strings.HasPrefix(ref.APIVersion, "apps/"):
		return fmt.Sprintf("a %s's pod cannot surge", ref.Kind)
	}
	return ""
}

// rollingOut says why a Deployment cannot surge now, and whether that passes: a surge under way, or a rollout
// or scaling under way (a surge would land in whichever ReplicaSet the Deployment controller chooses, and fight
// it) pass; a paused Deployment or one being deleted does not.
func (s *Surger) rollingOut(d *appsv1.Deployment, rs *appsv1.ReplicaSet) (string, bool) {
	switch {
	case d.DeletionTimestamp != nil:
		return fmt.Sprintf("its Deployment %s is being deleted", d.Name), false
	case d.Spec.Paused:
		return fmt.Sprintf("its Deployment %s is paused", d.Name), false
	case d.Annotations[stevedorev1.AnnotationSurge] != "":
		return fmt.Sprintf("its Deployment %s is surging already", d.Name), true
	}
	want := ptrValue(d.Spec.Replicas)
	st := d.Status
	// status.replicas counts the pods of every ReplicaSet of the Deployment: equal to the updated ones, no older
	// ReplicaSet has pods
	if st.ObservedGeneration < d.Generation || st.UpdatedReplicas != want || st.Replicas != want {
		return fmt.Sprintf("its Deployment %s is rolling out or scaling (%d of %d replicas updated, %d in all)", d.Name, st.UpdatedReplicas,
			want, st.Replicas), true
	}
	if st.AvailableReplicas < want {
		// the status may lag behind the pods; a surge waits for every pod of the ReplicaSet to be Ready, which a
		// failing pod never is
		if ready := s.readyPods(rs, st.AvailableReplicas); ready < want {
			return fmt.Sprintf("its Deployment %s has %d of %d replicas Ready", d.Name, ready, want), false
		}
	}
	return "", false
}

// readyPods counts the ReplicaSet's Ready pods from the pod cache (the Deployment's status lags behind it), or is
// fallback without a pod cache. A count short of the ReplicaSet's replicas is kept until the ReplicaSet changes
// (its status follows its pods), so that a disruption pass asking for every pod of a Deployment of thousands that
// is still coming up does not walk the namespace's pods for each; a count that lets a surge start is never
// reused.
func (s *Surger) readyPods(rs *appsv1.ReplicaSet, fallback int32) int32 {
	if s.opts.Pods == nil {
		return fallback
	}
	s.mu.Lock()
	c, ok := s.ready[rs.UID]
	s.mu.Unlock()
	if ok && c.version == rs.ResourceVersion {
		return c.ready
	}
	ready, _, err := s.podsOf(rs)
	if err != nil {
		return fallback
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.ready, rs.UID)
	if len(s.ready) > maxReadyCounts {
		clear(s.ready) // ReplicaSets come and go: keep the memo from growing without bound
	}
	if ready < ptrValue(rs.Spec.Replicas) {
		s.ready[rs.UID] = readyCount{version: rs.ResourceVersion, ready: ready}
	}
	return ready
}

// maxReadyCounts bounds the ReplicaSets readyPods remembers.
const maxReadyCounts = 4096

// podsOf counts the ReplicaSet's pods in the pod cache that are neither finished nor being deleted (live), and
// those of them bound and Ready.
func (s *Surger) podsOf(rs *appsv1.ReplicaSet) (ready, live int32, err error) {
	pods, err := s.opts.Pods.Pods(rs.Namespace).List(labels.Everything())
	if err != nil {
		return 0, 0, err
	}
	for _, pod := range pods {
		if pod.DeletionTimestamp != nil || !metav1.IsControlledBy(pod, rs) || podutil.Finished(pod) {
			continue
		}
		live++
		if pod.Spec.NodeName != "" && podutil.Ready(pod) {
			ready++
		}
	}
	return ready, live, nil
}

// hpaRoom says why an HPA would undo a scale to replicas: it is above the HPA's maxReplicas.
func (s *Surger) hpaRoom(o Owner, replicas int32) string {
	if s.opts.HPAs == nil {
		return ""
	}
	hpas, err := s.opts.HPAs.HorizontalPodAutoscalers(o.Namespace).List(labels.Everything())
	if err != nil {
		return err.Error()
	}
	for _, h := range hpas {
		ref := h.Spec.ScaleTargetRef
		if ref.Kind == o.Kind && ref.Name == o.Name && replicas > h.Spec.MaxReplicas {
			return fmt.Sprintf("HorizontalPodAutoscaler %s is at its maxReplicas %d", h.Name, h.Spec.MaxReplicas)
		}
	}
	return ""
}

// Waiting lists the pods ("namespace/name") whose owner cannot surge now but will once what it does passes (a
// rollout, a scaling or another surge under way), with why: moving them now would evict them.
func (s *Surger) Waiting(pods []*corev1.Pod, modes func(*corev1.Pod) stevedorev1.Replacement) map[string]string {
	out := map[string]string{}
	for _, pod := range sortedPods(pods) {
		if _, why, wait := s.Check(pod, modes(pod), 0); wait {
			out[podutil.Key(pod)] = why
		}
	}
	return out
}
