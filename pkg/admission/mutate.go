/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

// Package admission is the admission webhook Stevedore serves where the API server has no MutatingAdmissionPolicy
// (Kubernetes before 1.36): it does what the stevedore-scheduling policy (manifests/deploy/scheduling-policy.yaml)
// does, to the same pods, with the same JSON patches. A pod created in a namespace labelled
// stevedore.dev/scheduling=enabled that names no scheduler gets Stevedore's; every pod that names Stevedore's
// scheduler gets karpenter.sh/nodepool DoesNotExist in each term of its required node affinity, so that a Karpenter
// running beside Stevedore never launches for it. The webhook's serving certificate is Stevedore's own, kept in a
// Secret and in the webhook configuration's caBundle.
package admission

import (
	"strconv"

	corev1 "k8s.io/api/core/v1"

	"github.com/stevedore-dev/stevedore/pkg/podutil"
)

// The keys the policy reads and writes.
const (
	// NamespaceOptInLabel with value NamespaceOptInValue on a namespace gives its new pods Stevedore's scheduler.
	NamespaceOptInLabel = "stevedore.dev/scheduling"
	NamespaceOptInValue = "enabled"
	// KarpenterNodePoolLabel is on every node Karpenter launches.
	KarpenterNodePoolLabel = "karpenter.sh/nodepool"
)

// Operation is one JSON patch operation (RFC 6902) of the webhook's answer.
type Operation struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value,omitempty"`
}

// add is the operation that adds value at path (the only operation the webhook makes).
func add(path string, value any) Operation {
	return Operation{Op: "add", Path: path, Value: value}
}

// Patch returns the operations the policy applies to a pod being created in a namespace with the given labels, for
// the scheduler named schedulerName: none for a pod already on a node, a DaemonSet's or a mirror pod, or a pod
// neither opted in nor naming that scheduler.
func Patch(pod *corev1.Pod, namespaceLabels map[string]string, schedulerName string) []Operation {
	if pod.Spec.NodeName != "" {
		return nil
	}
	if podutil.IsDaemonSetPod(pod) || podutil.IsMirrorPod(pod) {
		return nil
	}
	name := pod.Spec.SchedulerName
	optedIn := (name == "" || name == corev1.DefaultSchedulerName) && namespaceLabels[NamespaceOptInLabel] == NamespaceOptInValue
	if !optedIn && name != schedulerName {
		return nil
	}
	var ops []Operation
	if optedIn {
		ops = append(ops, add("/spec/schedulerName", schedulerName))
	}
	return append(ops, keepOffKarpenter(pod)...)
}

// karpenterOff is the expression no Karpenter node satisfies.
func karpenterOff() corev1.NodeSelectorRequirement {
	return corev1.NodeSelectorRequirement{Key: KarpenterNodePoolLabel, Operator: corev1.NodeSelectorOpDoesNotExist}
}

// keepOffKarpenter adds karpenterOff to each term of the pod's required node affinity that says nothing of
// karpenter.sh/nodepool (terms are ORed), or creates the one term that holds it.
func keepOffKarpenter(pod *corev1.Pod) []Operation {
	onlyOff := map[string]any{"nodeSelectorTerms": []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{karpenterOff()}}}}
	a := pod.Spec.Affinity
	switch {
	case a == nil:
		return []Operation{add("/spec/affinity", map[string]any{"nodeAffinity": map[string]any{
			"requiredDuringSchedulingIgnoredDuringExecution": onlyOff}})}
	case a.NodeAffinity == nil:
		return []Operation{add("/spec/affinity/nodeAffinity", map[string]any{
			"requiredDuringSchedulingIgnoredDuringExecution": onlyOff})}
	case a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil:
		return []Operation{add("/spec/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution", onlyOff)}
	}
	var ops []Operation
	const terms = "/spec/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution/nodeSelectorTerms/"
	for i, t := range a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
		if mentionsKarpenter(t) {
			continue
		}
		if len(t.MatchExpressions) > 0 {
			ops = append(ops, add(terms+strconv.Itoa(i)+"/matchExpressions/-", karpenterOff()))
		} else {
			ops = append(ops, add(terms+strconv.Itoa(i)+"/matchExpressions", []corev1.NodeSelectorRequirement{karpenterOff()}))
		}
	}
	return ops
}

func mentionsKarpenter(t corev1.NodeSelectorTerm) bool {
	for _, e := range t.MatchExpressions {
		if e.Key == KarpenterNodePoolLabel {
			return true
		}
	}
	return false
}
