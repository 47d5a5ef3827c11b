/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package sandbox

import (
	"bytes"
	"context"
	"fmt"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/stevedore-dev/stevedore/manifests"
)

// KarpenterNodePoolLabel is the label every node Karpenter launches carries; the scheduling policy keeps
// Stevedore's pods off nodes that have it.
const KarpenterNodePoolLabel = "karpenter.sh/nodepool"

// installSchedulingPolicy creates the shipped admission policy (deploy/scheduling-policy.yaml, as the README's
// install does) and waits until the API server applies it: a dry-run pod naming the stevedore scheduler comes back
// kept off Karpenter's nodes.
func installSchedulingPolicy(ctx context.Context, kube kubernetes.Interface) error {
	var policy admissionregistrationv1.MutatingAdmissionPolicy
	var binding admissionregistrationv1.MutatingAdmissionPolicyBinding
	docs := bytes.Split(manifests.SchedulingPolicy, []byte("\n---\n"))
	if len(docs) != 2 {
		return fmt.Errorf("deploy/scheduling-policy.yaml: %d documents, want the policy and its binding", len(docs))
	}
	if err := yaml.UnmarshalStrict(docs[0], &policy); err != nil {
		return fmt.Errorf("deploy/scheduling-policy.yaml: %w", err)
	}
	if err := yaml.UnmarshalStrict(docs[1], &binding); err != nil {
		return fmt.Errorf("deploy/scheduling-policy.yaml: %w", err)
	}
	api := kube.AdmissionregistrationV1()
	if _, err := api.MutatingAdmissionPolicies().Create(ctx, &policy, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating MutatingAdmissionPolicy %s: %w", policy.Name, err)
	}
	if _, err := api.MutatingAdmissionPolicyBindings().Create(ctx, &binding, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating MutatingAdmissionPolicyBinding %s: %w", binding.Name, err)
	}
	probe := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "scheduling-policy-probe", Namespace: metav1.NamespaceDefault},
		Spec: corev1.PodSpec{SchedulerName: "stevedore", Containers: []corev1.Container{{Name: "probe", Image: "probe"}}}}
	var last error
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		got, err := kube.CoreV1().Pods(probe.Namespace).Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil {
			last = err // the policy may refuse while its compiled form is not loaded yet; keep polling
			return false, nil
		}
		last = fmt.Errorf("the probe pod came back without the karpenter.sh/nodepool term: %+v", got.Spec.Affinity)
		return KeptOffKarpenter(got), nil
	})
	if err != nil {
		return fmt.Errorf("the scheduling policy did not take effect within a minute (last: %w): %w", last, err)
	}
	return nil
}

// KeptOffKarpenter reports whether no Karpenter node can take the pod: every term of its required node affinity
// says karpenter.sh/nodepool DoesNotExist.
func KeptOffKarpenter(pod *corev1.Pod) bool {
	a := pod.Spec.Affinity
	if a == nil || a.NodeAffinity == nil || a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return false
	}
	terms := a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	for _, t := range terms {
		off := false
		for _, e := range t.MatchExpressions {
			if e.Key == KarpenterNodePoolLabel && e.Operator == corev1.NodeSelectorOpDoesNotExist {
				off = true
			}
		}
		if !off {
			return false
		}
	}
	return len(terms) > 0
}
