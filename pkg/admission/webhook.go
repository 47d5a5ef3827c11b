/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package admission

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
)

// Path is where the webhook serves pod admission.
const Path = "/mutate-pods"

// maxReviewBytes bounds an AdmissionReview's body (the API server sends at most its own request limit, 3 MiB).
const maxReviewBytes = 4 << 20

// NamespaceLabels returns the labels of a namespace.
type NamespaceLabels func(ctx context.Context, name string) (map[string]string, error)

// Handler answers the API server's AdmissionReviews of pods being created with Patch's operations.
type Handler struct {
	// SchedulerName is the scheduler pods opt in to.
	SchedulerName string
	// Namespaces reads a namespace's labels (an informer's lister: the policy reads them the same way).
	Namespaces NamespaceLabels
	Logger     klog.Logger
}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		http.Error(w, "POST an AdmissionReview", http.StatusMethodNotAllowed)
		return
	}
	raw, err := io.ReadAll(io.LimitReader(r.Body, maxReviewBytes))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var review admissionv1.AdmissionReview
	if err := json.Unmarshal(raw, &review); err != nil || review.Request == nil {
		http.Error(w, fmt.Sprintf("not an admission.k8s.io/v1 AdmissionReview: %v", err), http.StatusBadRequest)
		return
	}
	resp := h.review(r.Context(), review.Request)
	resp.UID = review.Request.UID
	out, err := json.Marshal(admissionv1.AdmissionReview{TypeMeta: review.TypeMeta, Response: resp})
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(out) // the API server's connection is gone if this fails: nothing more to say
}

// review decides one request: pods only; a pod it cannot read, or whose namespace it cannot read, is refused with
// the reason (as the policy, failurePolicy Fail, refuses a pod it cannot mutate).
func (h *Handler) review(ctx context.Context, req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
	if req.Kind.Group != "" || req.Kind.Kind != "Pod" || req.Operation != admissionv1.Create || req.SubResource != "" {
		return &admissionv1.AdmissionResponse{Allowed: true}
	}
	var pod corev1.Pod
	if err := json.Unmarshal(req.Object.Raw, &pod); err != nil {
		return refused(fmt.Sprintf("reading pod %s/%s: %v", req.Namespace, req.Name, err))
	}
	labels, err := h.Namespaces(ctx, req.Namespace)
	if err != nil {
		return refused(fmt.Sprintf("reading namespace %s: %v", req.Namespace, err))
	}
	ops := Patch(&pod, labels, h.SchedulerName)
	if len(ops) == 0 {
		return &admissionv1.AdmissionResponse{Allowed: true}
	}
	patch, err := json.Marshal(ops)
	if err != nil {
		return refused(err.Error())
	}
	h.Logger.V(4).Info("Admitting pod", "namespace", req.Namespace, "pod", podName(req, &pod), "patch", string(patch))
	jsonPatch := admissionv1.PatchTypeJSONPatch
	return &admissionv1.AdmissionResponse{Allowed: true, Patch: patch, PatchType: &jsonPatch}
}

func podName(req *admissionv1.AdmissionRequest, pod *corev1.Pod) string {
	if req.Name != "" {
		return req.Name
	}
	return pod.GenerateName + "<generated>"
}

func refused(msg string) *admissionv1.AdmissionResponse {
	return &admissionv1.AdmissionResponse{Allowed: false, Result: &metav1.Status{
		Status: metav1.StatusFailure, Code: http.StatusInternalServerError, Reason: metav1.StatusReasonInternalError,
		Message: "stevedore-scheduling: " + msg}}
}
