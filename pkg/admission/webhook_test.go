/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package admission

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
)

// review posts an AdmissionReview of creating obj (kind Pod unless kind says otherwise) to the handler and returns
// its response.
func review(t *testing.T, h *Handler, obj any, kind string) *admissionv1.AdmissionResponse {
	t.Helper()
	raw, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	req := admissionv1.AdmissionReview{TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{UID: types.UID("req-1"), Kind: metav1.GroupVersionKind{Version: "v1", Kind: kind},
			Operation: admissionv1.Create, Namespace: "shop", Name: "web", Object: runtime.RawExtension{Raw: raw}}}
	body, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, Path, bytes.NewReader(body)))
	if rec.Code != http.StatusOK {
		t.Fatalf("status %d: %s", rec.Code, rec.Body)
	}
	var out admissionv1.AdmissionReview
	if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
		t.Fatal(err)
	}
	if out.Response == nil || out.Response.UID != "req-1" || out.APIVersion != "admission.k8s.io/v1" {
		t.Fatalf("not the review's answer: %+v", out)
	}
	return out.Response
}

func TestTheWebhookAnswersAReviewWithThePatch(t *testing.T) {
	labels := map[string]map[string]string{"shop": {NamespaceOptInLabel: NamespaceOptInValue}}
	h := &Handler{SchedulerName: "stevedore", Logger: klog.Background(), Namespaces: func(_ context.Context, name string) (map[string]string, error) {
		l, ok := labels[name]
		if !ok {
			return nil, errors.New("not found")
		}
		return l, nil
	}}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "shop"}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "i"}}}}

	resp := review(t, h, pod, "Pod")
	if !resp.Allowed || resp.PatchType == nil || *resp.PatchType != admissionv1.PatchTypeJSONPatch {
		t.Fatalf("response %+v, want an allowed JSON patch", resp)
	}
	var ops []Operation
	if err := json.Unmarshal(resp.Patch, &ops); err != nil {
		t.Fatal(err)
	}
	got := applyPatch(t, pod, ops)
	if got.Spec.SchedulerName != "stevedore" || got.Spec.Affinity == nil {
		t.Errorf("after the patch: scheduler %q, affinity %+v", got.Spec.SchedulerName, got.Spec.Affinity)
	}

	if resp := review(t, h, &corev1.Service{}, "Service"); !resp.Allowed || resp.Patch != nil {
		t.Errorf("a Service: %+v, want allowed untouched", resp)
	}
	delete(labels, "shop")
	if resp := review(t, h, pod, "Pod"); resp.Allowed || !strings.Contains(resp.Result.Message, "namespace shop") {
		t.Errorf("a pod of a namespace that cannot be read: %+v, want refused naming it", resp)
	}
}

func TestTheWebhookRefusesWhatIsNotAReview(t *testing.T) {
	h := &Handler{SchedulerName: "stevedore", Logger: klog.Background()}
	for _, tc := range []struct {
		method, body string
		want         int
	}{
		{http.MethodGet, "", http.StatusMethodNotAllowed},
		{http.MethodPost, "{", http.StatusBadRequest},
		{http.MethodPost, `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}`, http.StatusBadRequest},
	} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(tc.method, Path, strings.NewReader(tc.body)))
		if rec.Code != tc.want {
			t.Errorf("%s %q: status %d, want %d", tc.method, tc.body, rec.Code, tc.want)
		}
	}
}
