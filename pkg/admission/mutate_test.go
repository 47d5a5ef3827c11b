/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package admission

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func term(key string, op corev1.NodeSelectorOperator, values ...string) corev1.NodeSelectorTerm {
	return corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: key, Operator: op, Values: values}}}
}

func required(terms ...corev1.NodeSelectorTerm) *corev1.Affinity {
	return &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: terms}}}
}

var off = corev1.NodeSelectorRequirement{Key: KarpenterNodePoolLabel, Operator: corev1.NodeSelectorOpDoesNotExist}

// TestPatchDoesWhatThePolicyDoes applies the webhook's patches to pods of every shape the policy's own test
// creates, and compares the pod that comes out with what the policy makes of it.
func TestPatchDoesWhatThePolicyDoes(t *testing.T) {
	optedIn := map[string]string{NamespaceOptInLabel: NamespaceOptInValue}
	arm := term(corev1.LabelArchStable, corev1.NodeSelectorOpIn, "arm64")
	zone := term(corev1.LabelTopologyZone, corev1.NodeSelectorOpIn, "us-east-1a")
	fields := corev1.NodeSelectorTerm{MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpNotIn, Values: []string{"x"}}}}
	antiAffinity := &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{
		{LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "x"}}, TopologyKey: corev1.LabelHostname}}}
	preferred := &corev1.NodeAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{{Weight: 1, Preference: arm}}}
	withOff := func(t corev1.NodeSelectorTerm) corev1.NodeSelectorTerm {
		t.MatchExpressions = append(append([]corev1.NodeSelectorRequirement{}, t.MatchExpressions...), off)
		return t
	}
	for _, tc := range []struct {
		name      string
		namespace map[string]string
		in        corev1.PodSpec
		owner     string
		want      corev1.PodSpec
	}{
		{name: "no scheduler, opted in", namespace: optedIn,
			want: corev1.PodSpec{SchedulerName: "stevedore", Affinity: required(corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{off}})}},
		{name: "default-scheduler, opted in", namespace: optedIn, in: corev1.PodSpec{SchedulerName: corev1.DefaultSchedulerName},
			want: corev1.PodSpec{SchedulerName: "stevedore", Affinity: required(corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{off}})}},
		{name: "another scheduler, opted in", namespace: optedIn, in: corev1.PodSpec{SchedulerName: "volcano"},
			want: corev1.PodSpec{SchedulerName: "volcano"}},
		{name: "no scheduler, not opted in", want: corev1.PodSpec{}},
		{name: "stevedore, not opted in", in: corev1.PodSpec{SchedulerName: "stevedore"},
			want: corev1.PodSpec{SchedulerName: "stevedore", Affinity: required(corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{off}})}},
		{name: "two terms", namespace: optedIn, in: corev1.PodSpec{Affinity: required(arm, zone)},
			want: corev1.PodSpec{SchedulerName: "stevedore", Affinity: required(withOff(arm), withOff(zone))}},
		{name: "a term of fields only", in: corev1.PodSpec{SchedulerName: "stevedore", Affinity: required(fields)},
			want: corev1.PodSpec{SchedulerName: "stevedore", Affinity: required(withOff(fields))}},
		{name: "pod anti-affinity only", namespace: optedIn, in: corev1.PodSpec{Affinity: &corev1.Affinity{PodAntiAffinity: antiAffinity}},
			want: corev1.PodSpec{SchedulerName: "stevedore", Affinity: &corev1.Affinity{PodAntiAffinity: antiAffinity,
				NodeAffinity: required(corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{off}}).NodeAffinity}}},
		{name: "preferences only", namespace: optedIn, in: corev1.PodSpec{Affinity: &corev1.Affinity{NodeAffinity: preferred.DeepCopy()}},
			want: corev1.PodSpec{SchedulerName: "stevedore", Affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
				PreferredDuringSchedulingIgnoredDuringExecution: preferred.PreferredDuringSchedulingIgnoredDuringExecution,
				RequiredDuringSchedulingIgnoredDuringExecution:  required(corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{off}}).NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution}}}},
		{name: "already kept off", in: corev1.PodSpec{SchedulerName: "stevedore", Affinity: required(corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{off}}, arm)},
			want: corev1.PodSpec{SchedulerName: "stevedore", Affinity: required(corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{off}}, withOff(arm))}},
		{name: "a DaemonSet's pod", namespace: optedIn, owner: "DaemonSet", want: corev1.PodSpec{}},
		{name: "a mirror pod", namespace: optedIn, owner: "Node", want: corev1.PodSpec{}},
		{name: "a pod with a node", namespace: optedIn, in: corev1.PodSpec{NodeName: "somewhere"}, want: corev1.PodSpec{NodeName: "somewhere"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"}, Spec: tc.in}
			if tc.owner != "" {
				pod.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: tc.owner, Name: "o", UID: "u"}}
			}
			got := applyPatch(t, pod, Patch(pod, tc.namespace, "stevedore"))
			if diff := cmp.Diff(tc.want, got.Spec); diff != "" {
				t.Errorf("pod spec after the patch (-want +got):\n%s", diff)
			}
		})
	}
}

// applyPatch applies operations to the pod's JSON, as the API server does with a webhook's JSON patch.
func applyPatch(t *testing.T, pod *corev1.Pod, ops []Operation) *corev1.Pod {
	t.Helper()
	raw, err := json.Marshal(pod)
	if err != nil {
		t.Fatal(err)
	}
	if len(ops) > 0 {
		rawOps, err := json.Marshal(ops)
		if err != nil {
			t.Fatal(err)
		}
		patch, err := jsonpatch.DecodePatch(rawOps)
		if err != nil {
			t.Fatalf("the operations are not a JSON patch: %v", err)
		}
		if raw, err = patch.Apply(raw); err != nil {
			t.Fatalf("applying %s: %v", rawOps, err)
		}
	}
	var out corev1.Pod
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatal(err)
	}
	return &out
}
