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
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/stevedore-dev/stevedore/manifests"
	"github.com/stevedore-dev/stevedore/pkg/admission"
)

// KarpenterNodePoolLabel is the label every node Karpenter launches carries; the scheduling policy keeps
// Stevedore's pods off nodes that have it.
const KarpenterNodePoolLabel = admission.KarpenterNodePoolLabel

// WebhookNamespace is where the sandbox's scheduler keeps the admission webhook's certificate, as Stevedore's own
// namespace holds it in a cluster.
const WebhookNamespace = "stevedore"

// Admission modes: how the sandbox opts namespaces in and keeps Karpenter off Stevedore's pods.
const (
	// AdmissionPolicy is the MutatingAdmissionPolicy (API servers 1.36 and newer).
	AdmissionPolicy = "MutatingAdmissionPolicy"
	// AdmissionWebhook is the webhook the scheduler serves (older API servers).
	AdmissionWebhook = "MutatingWebhookConfiguration"
)

// servesMutatingAdmissionPolicy reports whether the API server serves admissionregistration.k8s.io/v1
// MutatingAdmissionPolicies.
func servesMutatingAdmissionPolicy(kube kubernetes.Interface) (bool, error) {
	list, err := kube.Discovery().ServerResourcesForGroupVersion(admissionregistrationv1.SchemeGroupVersion.String())
	if err != nil {
		return false, fmt.Errorf("discovering admissionregistration.k8s.io/v1: %w", err)
	}
	for _, r := range list.APIResources {
		if r.Name == "mutatingadmissionpolicies" {
			return true, nil
		}
	}
	return false, nil
}

// installAdmission installs what the README's install would for the API server: the MutatingAdmissionPolicy
// where it is served (waiting until it takes effect), else the webhook configuration, which the in-process
// scheduler serves on webhookPort (it takes effect once the scheduler runs: StartScheduler waits for it; with no
// in-process scheduler, webhookPort 0, nothing is installed). It returns the mode.
func installAdmission(ctx context.Context, kube kubernetes.Interface, webhookPort int) (string, error) {
	served, err := servesMutatingAdmissionPolicy(kube)
	if err != nil {
		return "", err
	}
	if served {
		return AdmissionPolicy, installSchedulingPolicy(ctx, kube)
	}
	if webhookPort == 0 {
		return "", nil
	}
	return AdmissionWebhook, installSchedulingWebhook(ctx, kube, webhookPort)
}

// installSchedulingPolicy creates the shipped admission policy (deploy/scheduling-policy.yaml, as the README's
// install does) and waits until the API server applies it.
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
	return waitForAdmission(ctx, kube, "the scheduling policy")
}

// installSchedulingWebhook creates the shipped webhook configuration (admission-webhook/webhook.yaml), calling the
// scheduler at https://127.0.0.1:port instead of through its Service (the sandbox has no Service network), and
// Stevedore's namespace, where the scheduler keeps the webhook's certificate.
func installSchedulingWebhook(ctx context.Context, kube kubernetes.Interface, port int) error {
	var cfg admissionregistrationv1.MutatingWebhookConfiguration
	doc, _, _ := bytes.Cut(manifests.SchedulingWebhook, []byte("\n---\n"))
	if err := yaml.UnmarshalStrict(doc, &cfg); err != nil {
		return fmt.Errorf("admission-webhook/webhook.yaml: %w", err)
	}
	for i := range cfg.Webhooks {
		svc := cfg.Webhooks[i].ClientConfig.Service
		if svc == nil || svc.Path == nil {
			return fmt.Errorf("admission-webhook/webhook.yaml: webhook %s does not call a Service's path", cfg.Webhooks[i].Name)
		}
		cfg.Webhooks[i].ClientConfig = admissionregistrationv1.WebhookClientConfig{URL: ptr.To(fmt.Sprintf("https://127.0.0.1:%d%s", port, *svc.Path))}
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: WebhookNamespace}}
	if _, err := kube.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating namespace %s: %w", WebhookNamespace, err)
	}
	api := kube.AdmissionregistrationV1().MutatingWebhookConfigurations()
	if _, err := api.Create(ctx, &cfg, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating MutatingWebhookConfiguration %s: %w", cfg.Name, err)
	}
	return nil
}

// waitForAdmission waits until a dry-run pod naming the stevedore scheduler comes back kept off Karpenter's nodes.
func waitForAdmission(ctx context.Context, kube kubernetes.Interface, what string) error {
	probe := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "scheduling-policy-probe", Namespace: metav1.NamespaceDefault},
		Spec: corev1.PodSpec{SchedulerName: "stevedore", Containers: []corev1.Container{{Name: "probe", Image: "probe"}}}}
	var last error
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		got, err := kube.CoreV1().Pods(probe.Namespace).Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil {
			last = err // refused while the policy's compiled form is not loaded, or the webhook's certificate not issued
			return false, nil
		}
		last = fmt.Errorf("the probe pod came back without the karpenter.sh/nodepool term: %+v", got.Spec.Affinity)
		return KeptOffKarpenter(got), nil
	})
	if err != nil {
		return fmt.Errorf("%s did not take effect within a minute (last: %w): %w", what, last, err)
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
