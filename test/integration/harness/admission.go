/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package harness

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/stevedore-dev/stevedore/pkg/sandbox"
)

// CheckAdmission creates pods of every shape (dry runs) against what the sandbox installed to opt namespaces in and
// keep Karpenter off Stevedore's pods (the MutatingAdmissionPolicy, or the webhook where the API server has no
// policies): which get the stevedore scheduler, and which are kept off Karpenter's nodes with every term of their
// required node affinity intact. It returns the namespace it labelled stevedore.dev/scheduling=enabled.
func CheckAdmission(t *testing.T, sb *sandbox.Sandbox) string {
	t.Helper()
	ctx := context.Background()
	plain := Namespace(t, sb)
	optedIn := OptedInNamespace(t, sb)
	const stevedore, defaultScheduler = StevedoreSchedulerName, corev1.DefaultSchedulerName
	term := func(key, value string) corev1.NodeSelectorTerm {
		return corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: key, Operator: corev1.NodeSelectorOpIn, Values: []string{value}}}}
	}
	required := func(terms ...corev1.NodeSelectorTerm) func(*corev1.Pod) {
		return func(p *corev1.Pod) {
			p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: terms}}}
		}
	}
	tests := []struct {
		name, namespace, scheduler string
		mutate                     func(*corev1.Pod)
		wantScheduler              string
		wantKeptOff                bool
		wantTerms                  int
	}{
		{name: "no-scheduler-opted-in", namespace: optedIn, wantScheduler: stevedore, wantKeptOff: true, wantTerms: 1},
		{name: "default-scheduler-opted-in", namespace: optedIn, scheduler: defaultScheduler, wantScheduler: stevedore, wantKeptOff: true, wantTerms: 1},
		{name: "other-scheduler-opted-in", namespace: optedIn, scheduler: "volcano", wantScheduler: "volcano"},
		{name: "no-scheduler-not-opted-in", namespace: plain, wantScheduler: defaultScheduler},
		{name: "stevedore-not-opted-in", namespace: plain, scheduler: stevedore, wantScheduler: stevedore, wantKeptOff: true, wantTerms: 1},
		{name: "two-terms", namespace: optedIn, mutate: required(term(corev1.LabelArchStable, "arm64"), term(corev1.LabelTopologyZone, "us-east-1a")),
			wantScheduler: stevedore, wantKeptOff: true, wantTerms: 2},
		{name: "a-term-of-fields-only", namespace: plain, scheduler: stevedore, mutate: required(corev1.NodeSelectorTerm{MatchFields: []corev1.NodeSelectorRequirement{
			{Key: "metadata.name", Operator: corev1.NodeSelectorOpNotIn, Values: []string{"x"}}}}), wantScheduler: stevedore, wantKeptOff: true, wantTerms: 1},
		{name: "pod-affinity-only", namespace: optedIn, mutate: func(p *corev1.Pod) {
			p.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{
				{LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "x"}}, TopologyKey: corev1.LabelHostname}}}}
		}, wantScheduler: stevedore, wantKeptOff: true, wantTerms: 1},
		{name: "preferences-only", namespace: optedIn, mutate: func(p *corev1.Pod) {
			p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{
				{Weight: 1, Preference: term(corev1.LabelArchStable, "arm64")}}}}
		}, wantScheduler: stevedore, wantKeptOff: true, wantTerms: 1},
		{name: "already-kept-off", namespace: plain, scheduler: stevedore, mutate: required(corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{
			{Key: sandbox.KarpenterNodePoolLabel, Operator: corev1.NodeSelectorOpDoesNotExist}}}), wantScheduler: stevedore, wantKeptOff: true, wantTerms: 1},
		{name: "a-daemonset-pod", namespace: optedIn, mutate: func(p *corev1.Pod) {
			p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "agent", UID: "4d3c0a5e-0000-4000-8000-000000000001"}}
		}, wantScheduler: defaultScheduler},
		{name: "a-pod-with-a-node", namespace: optedIn, mutate: func(p *corev1.Pod) { p.Spec.NodeName = "somewhere" }, wantScheduler: defaultScheduler},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pod := Pod(tc.namespace, tc.name, "100m", "64Mi")
			pod.Spec.SchedulerName = tc.scheduler
			if tc.mutate != nil {
				tc.mutate(pod)
			}
			got, err := sb.Kube.CoreV1().Pods(tc.namespace).Create(ctx, pod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
			if err != nil {
				t.Fatalf("the API server refused the pod: %v", err)
			}
			if got.Spec.SchedulerName != tc.wantScheduler {
				t.Errorf("schedulerName %q, want %q", got.Spec.SchedulerName, tc.wantScheduler)
			}
			if kept := sandbox.KeptOffKarpenter(got); kept != tc.wantKeptOff {
				t.Errorf("kept off Karpenter's nodes: %v, want %v (affinity %+v)", kept, tc.wantKeptOff, got.Spec.Affinity)
			}
			if tc.wantTerms == 0 {
				return
			}
			terms := got.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
			if len(terms) != tc.wantTerms {
				t.Errorf("%d required terms, want %d: %+v", len(terms), tc.wantTerms, terms)
			}
			checkTermsKept(t, requiredTerms(pod), terms)
			if tc.name == "already-kept-off" && len(terms[0].MatchExpressions) != 1 {
				t.Errorf("a term that already kept Karpenter off got another expression: %+v", terms[0])
			}
		})
	}
	return optedIn
}

// OptedInNamespace creates a namespace labelled stevedore.dev/scheduling=enabled, and waits until admission sees
// the label (the policy's admission plugin and Stevedore's webhook read namespaces from informers).
func OptedInNamespace(t *testing.T, sb *sandbox.Sandbox) string {
	t.Helper()
	ctx := context.Background()
	name := Namespace(t, sb)
	ns, err := sb.Kube.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ns.Labels["stevedore.dev/scheduling"] = "enabled"
	if _, err := sb.Kube.CoreV1().Namespaces().Update(ctx, ns, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	Eventually(t, "admission to see namespace "+name+" opted in", func(ctx context.Context) (bool, error) {
		probe := Pod(name, "probe", "100m", "64Mi")
		probe.Spec.SchedulerName = ""
		got, err := sb.Kube.CoreV1().Pods(name).Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err == nil && got.Spec.SchedulerName == StevedoreSchedulerName, nil
	})
	return name
}

// requiredTerms are the terms of a pod's required node affinity (none without one).
func requiredTerms(pod *corev1.Pod) []corev1.NodeSelectorTerm {
	a := pod.Spec.Affinity
	if a == nil || a.NodeAffinity == nil || a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return nil
	}
	return a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
}

// checkTermsKept fails the test when admission dropped or changed what a term of the pod said (it may only add
// expressions).
func checkTermsKept(t *testing.T, before, after []corev1.NodeSelectorTerm) {
	t.Helper()
	for i, was := range before {
		if i >= len(after) {
			t.Errorf("term %d was dropped: %+v", i, was)
			continue
		}
		now := after[i]
		if len(now.MatchFields) != len(was.MatchFields) || len(now.MatchExpressions) < len(was.MatchExpressions) {
			t.Errorf("term %d lost what it said: %+v, was %+v", i, now, was)
			continue
		}
		for j := range was.MatchExpressions {
			if now.MatchExpressions[j].Key != was.MatchExpressions[j].Key {
				t.Errorf("term %d expression %d is %+v, was %+v", i, j, now.MatchExpressions[j], was.MatchExpressions[j])
			}
		}
	}
}

// CheckAdmissionAfterAWebhook installs a mutating webhook of the user's that sets schedulerName: stevedore on pods
// labelled set-scheduler=stevedore (the usual recipe for moving workloads without editing them), and checks that
// such a pod is still kept off Karpenter's nodes. Where Stevedore's admission is the MutatingAdmissionPolicy, the
// policy runs before every webhook and the API server runs it again after the user's webhook changed the pod
// (reinvocationPolicy IfNeeded). Where it is Stevedore's webhook, the user's webhook configuration is named to sort
// before stevedore-scheduling: the API server calls webhooks in the order of their configurations' names, and a
// webhook that did not match the pod the first time is not called again.
func CheckAdmissionAfterAWebhook(t *testing.T, sb *sandbox.Sandbox) {
	t.Helper()
	ctx := context.Background()
	ns := Namespace(t, sb)
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var review admissionv1.AdmissionReview
		if err := json.NewDecoder(r.Body).Decode(&review); err != nil || review.Request == nil {
			http.Error(w, "not a review", http.StatusBadRequest)
			return
		}
		var pod corev1.Pod
		resp := &admissionv1.AdmissionResponse{UID: review.Request.UID, Allowed: true}
		if json.Unmarshal(review.Request.Object.Raw, &pod) == nil && pod.Labels["set-scheduler"] == StevedoreSchedulerName {
			jsonPatch := admissionv1.PatchTypeJSONPatch
			resp.PatchType, resp.Patch = &jsonPatch, []byte(`[{"op":"add","path":"/spec/schedulerName","value":"stevedore"}]`)
		}
		out, _ := json.Marshal(admissionv1.AdmissionReview{TypeMeta: review.TypeMeta, Response: resp})
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(out)
	}))
	t.Cleanup(srv.Close)
	caBundle := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	none, fail, never := admissionregistrationv1.SideEffectClassNone, admissionregistrationv1.Fail, admissionregistrationv1.NeverReinvocationPolicy
	name := "zzz-" + ns // after every webhook, Stevedore's policy is run again
	if sb.AdmissionMode() == sandbox.AdmissionWebhook {
		name = "aaa-" + ns // before stevedore-scheduling
	}
	cfg := &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: name},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{Name: "set-scheduler.example.com", AdmissionReviewVersions: []string{"v1"},
			SideEffects: &none, FailurePolicy: &fail, ReinvocationPolicy: &never,
			ClientConfig:      admissionregistrationv1.WebhookClientConfig{URL: ptr.To(srv.URL + "/"), CABundle: caBundle},
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: ns}},
			Rules: []admissionregistrationv1.RuleWithOperations{{Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
				Rule: admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}}}}}}}
	api := sb.Kube.AdmissionregistrationV1().MutatingWebhookConfigurations()
	if _, err := api.Create(ctx, cfg, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating the user's webhook: %v", err)
	}
	t.Cleanup(func() { _ = api.Delete(context.Background(), cfg.Name, metav1.DeleteOptions{}) })
	probe := Pod(ns, "moved-by-a-webhook", "100m", "64Mi")
	probe.Spec.SchedulerName = ""
	probe.Labels["set-scheduler"] = StevedoreSchedulerName
	var got *corev1.Pod
	Eventually(t, "the user's webhook to set the scheduler of pod "+probe.Name, func(ctx context.Context) (bool, error) {
		var err error
		got, err = sb.Kube.CoreV1().Pods(ns).Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err == nil && got.Spec.SchedulerName == StevedoreSchedulerName, nil
	})
	if !sandbox.KeptOffKarpenter(got) {
		t.Errorf("a pod a webhook gave the stevedore scheduler is not kept off Karpenter's nodes: affinity %+v", got.Spec.Affinity)
	}
}
