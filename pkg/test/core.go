/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package test

import (
	"strconv"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/events"
)

// PodWrapper builds a pod.
type PodWrapper struct{ corev1.Pod }

// Pod starts a running pod in namespace default with one container and no requests, scheduled by stevedore.
func Pod(name string) *PodWrapper {
	return &PodWrapper{corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: metav1.NamespaceDefault, UID: types.UID("pod-" + name)},
		Spec: corev1.PodSpec{SchedulerName: "stevedore",
			Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning},
	}}
}

// Obj returns the pod.
func (w *PodWrapper) Obj() *corev1.Pod { return &w.Pod }

// Namespace sets the namespace.
func (w *PodWrapper) Namespace(ns string) *PodWrapper { w.Pod.Namespace = ns; return w }

// Req sets the first container's requests, e.g. Req("cpu", "500m", "memory", "1Gi").
func (w *PodWrapper) Req(nameValue ...string) *PodWrapper {
	w.Spec.Containers[0].Resources.Requests = Resources(nameValue...)
	return w
}

// Labels adds labels.
func (w *PodWrapper) Labels(kv ...string) *PodWrapper {
	w.Pod.Labels = addPairs(w.Pod.Labels, kv)
	return w
}

// Annotations adds annotations.
func (w *PodWrapper) Annotations(kv ...string) *PodWrapper {
	w.Pod.Annotations = addPairs(w.Pod.Annotations, kv)
	return w
}

// NodeSelector adds nodeSelector entries.
func (w *PodWrapper) NodeSelector(kv ...string) *PodWrapper {
	w.Spec.NodeSelector = addPairs(w.Spec.NodeSelector, kv)
	return w
}

// Node binds the pod to a node.
func (w *PodWrapper) Node(name string) *PodWrapper { w.Spec.NodeName = name; return w }

// Pending leaves the pod unbound and Pending.
func (w *PodWrapper) Pending() *PodWrapper {
	w.Spec.NodeName = ""
	w.Status.Phase = corev1.PodPending
	return w
}

// Phase sets the pod's phase.
func (w *PodWrapper) Phase(p corev1.PodPhase) *PodWrapper { w.Status.Phase = p; return w }

// Nominated sets status.nominatedNodeName.
func (w *PodWrapper) Nominated(node string) *PodWrapper { w.Status.NominatedNodeName = node; return w }

// OwnedBy sets a controller owner reference (kind ReplicaSet, DaemonSet, Node for mirror pods...).
func (w *PodWrapper) OwnedBy(kind, name string) *PodWrapper {
	yes := true
	apiVersion := "apps/v1"
	if kind == "Node" {
		apiVersion = "v1"
	}
	w.OwnerReferences = append(w.OwnerReferences, metav1.OwnerReference{APIVersion: apiVersion, Kind: kind, Name: name,
		UID: types.UID(kind + "-" + name), Controller: &yes})
	return w
}

// Toleration adds a toleration.
func (w *PodWrapper) Toleration(key string, op corev1.TolerationOperator, value string, effect corev1.TaintEffect) *PodWrapper {
	w.Spec.Tolerations = append(w.Spec.Tolerations, corev1.Toleration{Key: key, Operator: op, Value: value, Effect: effect})
	return w
}

// PriorityClass sets the priority class name.
func (w *PodWrapper) PriorityClass(name string) *PodWrapper {
	w.Spec.PriorityClassName = name
	return w
}

// Priority sets the pod's resolved priority (spec.priority).
func (w *PodWrapper) Priority(p int32) *PodWrapper { w.Spec.Priority = &p; return w }

// Started sets status.startTime.
func (w *PodWrapper) Started(at time.Time) *PodWrapper {
	t := metav1.NewTime(at)
	w.Status.StartTime = &t
	return w
}

// Deleting marks the pod terminating.
func (w *PodWrapper) Deleting(at metav1.Time) *PodWrapper { w.DeletionTimestamp = &at; return w }

// Spread adds a topology spread constraint on key over the pods with the selector's labels.
func (w *PodWrapper) Spread(key string, maxSkew int32, when corev1.UnsatisfiableConstraintAction, selector ...string) *PodWrapper {
	w.Spec.TopologySpreadConstraints = append(w.Spec.TopologySpreadConstraints, corev1.TopologySpreadConstraint{
		MaxSkew: maxSkew, TopologyKey: key, WhenUnsatisfiable: when,
		LabelSelector: &metav1.LabelSelector{MatchLabels: addPairs(nil, selector)}})
	return w
}

// NodeWrapper builds a node.
type NodeWrapper struct{ corev1.Node }

// Node starts a Ready node with 4 CPU, 16Gi and 110 pods allocatable and its hostname label.
func Node(name string) *NodeWrapper {
	rl := Resources("cpu", "4", "memory", "16Gi", "pods", "110")
	return &NodeWrapper{corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("node-" + name),
			Labels: map[string]string{corev1.LabelHostname: name}},
		Status: corev1.NodeStatus{Capacity: rl, Allocatable: rl.DeepCopy(),
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}},
	}}
}

// Obj returns the node.
func (w *NodeWrapper) Obj() *corev1.Node { return &w.Node }

// Labels adds labels.
func (w *NodeWrapper) Labels(kv ...string) *NodeWrapper {
	w.Node.Labels = addPairs(w.Node.Labels, kv)
	return w
}

// Annotations adds annotations.
func (w *NodeWrapper) Annotations(kv ...string) *NodeWrapper {
	w.Node.Annotations = addPairs(w.Node.Annotations, kv)
	return w
}

// Allocatable sets capacity and allocatable, e.g. Allocatable("cpu", "2", "memory", "4Gi", "pods", "29").
func (w *NodeWrapper) Allocatable(nameValue ...string) *NodeWrapper {
	w.Status.Capacity = Resources(nameValue...)
	w.Status.Allocatable = Resources(nameValue...)
	return w
}

// Taint adds a taint.
func (w *NodeWrapper) Taint(key, value string, effect corev1.TaintEffect) *NodeWrapper {
	w.Spec.Taints = append(w.Spec.Taints, corev1.Taint{Key: key, Value: value, Effect: effect})
	return w
}

// Unschedulable cordons the node.
func (w *NodeWrapper) Unschedulable() *NodeWrapper { w.Spec.Unschedulable = true; return w }

// ProviderID sets spec.providerID.
func (w *NodeWrapper) ProviderID(id string) *NodeWrapper { w.Spec.ProviderID = id; return w }

// Ready sets the Ready condition's status.
func (w *NodeWrapper) Ready(status corev1.ConditionStatus) *NodeWrapper {
	w.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: status}}
	return w
}

// Finalizers adds finalizers.
func (w *NodeWrapper) Finalizers(f ...string) *NodeWrapper {
	w.Node.Finalizers = append(w.Node.Finalizers, f...)
	return w
}

// Deleting marks the node terminating.
func (w *NodeWrapper) Deleting(at metav1.Time) *NodeWrapper { w.DeletionTimestamp = &at; return w }

// DaemonSetWrapper builds a DaemonSet.
type DaemonSetWrapper struct{ appsv1.DaemonSet }

// DaemonSet starts a DaemonSet in kube-system whose pod template has one container and no requests.
func DaemonSet(name string) *DaemonSetWrapper {
	sel := map[string]string{"daemon": name}
	return &DaemonSetWrapper{appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: metav1.NamespaceSystem, UID: types.UID("ds-" + name)},
		Spec: appsv1.DaemonSetSpec{Selector: &metav1.LabelSelector{MatchLabels: sel},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: sel},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}}}}},
	}}
}

// Obj returns the DaemonSet.
func (w *DaemonSetWrapper) Obj() *appsv1.DaemonSet { return &w.DaemonSet }

// Req sets the template container's requests.
func (w *DaemonSetWrapper) Req(nameValue ...string) *DaemonSetWrapper {
	w.Spec.Template.Spec.Containers[0].Resources.Requests = Resources(nameValue...)
	return w
}

// NodeSelector adds template nodeSelector entries.
func (w *DaemonSetWrapper) NodeSelector(kv ...string) *DaemonSetWrapper {
	w.Spec.Template.Spec.NodeSelector = addPairs(w.Spec.Template.Spec.NodeSelector, kv)
	return w
}

// Resources parses name, quantity pairs into a ResourceList; it panics on a bad quantity (test input).
func Resources(nameValue ...string) corev1.ResourceList {
	if len(nameValue)%2 != 0 {
		panic("Resources wants name, quantity pairs")
	}
	out := corev1.ResourceList{}
	for i := 0; i+1 < len(nameValue); i += 2 {
		out[corev1.ResourceName(nameValue[i])] = resource.MustParse(nameValue[i+1])
	}
	return out
}

// addPairs adds key, value pairs to m (allocating it); it panics on an odd count (test input).
func addPairs(m map[string]string, kv []string) map[string]string {
	if len(kv)%2 != 0 {
		panic("want key, value pairs")
	}
	if m == nil {
		m = map[string]string{}
	}
	for i := 0; i < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return m
}

// Deleted lists the objects of a resource deleted through a clientset so far, with the grace period asked
// for pods ("name" or "name grace=N").
func Deleted(actions []clienttesting.Action, resource string) []string {
	var out []string
	for _, a := range actions {
		if a.GetVerb() != "delete" || a.GetResource().Resource != resource {
			continue
		}
		d := a.(clienttesting.DeleteActionImpl)
		s := d.GetName()
		if g := d.DeleteOptions.GracePeriodSeconds; g != nil {
			s += " grace=" + strconv.FormatInt(*g, 10)
		}
		out = append(out, s)
	}
	return out
}

// Updated counts the update actions on a resource (subresource "" or "status").
func Updated(actions []clienttesting.Action, resource, subresource string) int {
	n := 0
	for _, a := range actions {
		if a.GetVerb() == "update" && a.GetResource().Resource == resource && a.GetSubresource() == subresource {
			n++
		}
	}
	return n
}

// Events drains the events a fake recorder recorded so far.
func Events(rec *events.FakeRecorder) []string {
	var out []string
	for {
		select {
		case e := <-rec.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

// Evicted lists the pods evicted through the Eviction API of a fake clientset so far, as namespace/name.
func Evicted(actions []clienttesting.Action) []string {
	var out []string
	for _, a := range actions {
		if a.GetVerb() != "create" || a.GetResource().Resource != "pods" || a.GetSubresource() != "eviction" {
			continue
		}
		ev := a.(clienttesting.CreateAction).GetObject().(*policyv1.Eviction)
		out = append(out, ev.Namespace+"/"+ev.Name)
	}
	return out
}
