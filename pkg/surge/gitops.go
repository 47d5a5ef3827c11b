/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package surge

import (
	"encoding/json"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Annotations by which Argo CD's client-side apply, which leaves no field manager of its own, is recognised: the
// object is tracked by an Argo CD Application and the configuration last applied to it sets spec.replicas.
const (
	annotationArgoCDTracking = "argocd.argoproj.io/tracking-id"
	annotationLastApplied    = "kubectl.kubernetes.io/last-applied-configuration"
)

// replicasFields is the field set of spec.replicas, all that KeepReplicasOwners leaves of a managed-fields entry.
const replicasFields = `{"f:spec":{"f:replicas":{}}}`

// KeepReplicasOwners is the informer transform of the Deployments and ReplicaSets a surge scales: of their managed
// fields it keeps only the entries that own spec.replicas, each reduced to that field, so that a surge can tell
// who owns the replica count at the cost of a few bytes per object.
func KeepReplicasOwners(obj any) (any, error) {
	var meta *metav1.ObjectMeta
	switch o := obj.(type) {
	case *appsv1.Deployment:
		meta = &o.ObjectMeta
	case *appsv1.ReplicaSet:
		meta = &o.ObjectMeta
	default:
		return obj, nil
	}
	if meta.ManagedFields == nil {
		return obj, nil
	}
	var kept []metav1.ManagedFieldsEntry
	for _, entry := range meta.ManagedFields {
		if ownsReplicas(entry) {
			entry.FieldsV1 = metav1.NewFieldsV1(replicasFields)
			entry.Time = nil
			kept = append(kept, entry)
		}
	}
	meta.ManagedFields = kept
	return obj, nil
}

// ownsReplicas reports whether a managed-fields entry owns spec.replicas.
func ownsReplicas(entry metav1.ManagedFieldsEntry) bool {
	if entry.FieldsV1 == nil {
		return false
	}
	var root map[string]json.RawMessage
	if err := json.Unmarshal(entry.FieldsV1.GetRawBytes(), &root); err != nil {
		return false
	}
	var spec map[string]json.RawMessage
	if err := json.Unmarshal(root["f:spec"], &spec); err != nil {
		return false
	}
	_, ok := spec["f:replicas"]
	return ok
}

// gitOpsOwner names the GitOps controller that owns the object's spec.replicas, "" when none does: a field manager
// of the Surger's list that owns it, or Argo CD's client-side apply.
func (s *Surger) gitOpsOwner(obj *metav1.ObjectMeta) string {
	for _, entry := range obj.ManagedFields {
		if slices.Contains(s.opts.GitOpsManagers, entry.Manager) && ownsReplicas(entry) {
			return entry.Manager
		}
	}
	if _, tracked := obj.Annotations[annotationArgoCDTracking]; tracked && lastAppliedSetsReplicas(obj.Annotations[annotationLastApplied]) {
		return "Argo CD (client-side apply)"
	}
	return ""
}

// lastAppliedSetsReplicas reports whether a last-applied configuration sets spec.replicas.
func lastAppliedSetsReplicas(config string) bool {
	var applied struct {
		Spec struct {
			Replicas *int32 `json:"replicas"`
		} `json:"spec"`
	}
	return config != "" && json.Unmarshal([]byte(config), &applied) == nil && applied.Spec.Replicas != nil
}
