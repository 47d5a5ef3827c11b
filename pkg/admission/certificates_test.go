/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package admission

import (
	"context"
	"crypto/x509"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	clocktesting "k8s.io/utils/clock/testing"
)

func webhookConfiguration() *admissionregistrationv1.MutatingWebhookConfiguration {
	return &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "stevedore-scheduling"},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{Name: "opt-in.stevedore.dev"}, {Name: "karpenter-guard.stevedore.dev"}}}
}

func newCertificates(kube *fake.Clientset, clock *clocktesting.FakeClock) *Certificates {
	return &Certificates{Kube: kube, Namespace: "stevedore", Secret: "stevedore-webhook-cert", Service: "stevedore-webhook",
		Configuration: "stevedore-scheduling", Clock: clock}
}

// writes counts the create and update calls the clientset saw.
func writes(kube *fake.Clientset) int {
	n := 0
	for _, a := range kube.Actions() {
		if a.GetVerb() == "create" || a.GetVerb() == "update" {
			n++
		}
	}
	return n
}

// verifies reports whether the served certificate chains to the configuration's caBundle for the Service's name.
func verifies(t *testing.T, c *Certificates, kube *fake.Clientset, now time.Time) {
	t.Helper()
	cfg, err := kube.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(context.Background(), "stevedore-scheduling", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	served, err := c.GetCertificate(nil)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(served.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range cfg.Webhooks {
		roots := x509.NewCertPool()
		if !roots.AppendCertsFromPEM(w.ClientConfig.CABundle) {
			t.Fatalf("webhook %s has no caBundle", w.Name)
		}
		if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, DNSName: "stevedore-webhook.stevedore.svc", CurrentTime: now}); err != nil {
			t.Errorf("webhook %s: the served certificate does not verify against its caBundle: %v", w.Name, err)
		}
	}
}

func TestCertificatesAreIssuedOnceAndRenewedBeforeTheyEnd(t *testing.T) {
	ctx := context.Background()
	clock := clocktesting.NewFakeClock(time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC))
	kube := fake.NewClientset(webhookConfiguration())
	c := newCertificates(kube, clock)
	if _, err := c.GetCertificate(nil); err == nil {
		t.Fatal("a certificate was served before any sync")
	}
	if err := c.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	verifies(t, c, kube, clock.Now())
	if w := writes(kube); w != 2 {
		t.Errorf("%d writes for the first sync, want 2 (the Secret, the caBundle)", w)
	}

	// a second replica reads what the first wrote; an unchanged state writes nothing
	other := newCertificates(kube, clock)
	kube.ClearActions()
	for _, r := range []*Certificates{c, other} {
		if err := r.Sync(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if w := writes(kube); w != 0 {
		t.Errorf("%d writes when nothing changed", w)
	}
	first, _ := c.GetCertificate(nil)
	second, _ := other.GetCertificate(nil)
	if string(first.Certificate[0]) != string(second.Certificate[0]) {
		t.Error("two replicas serve different certificates")
	}

	// 340 days on, the serving certificate is renewed under the same authority: the caBundle stays
	secret, _ := kube.CoreV1().Secrets("stevedore").Get(ctx, "stevedore-webhook-cert", metav1.GetOptions{})
	oldCA := string(secret.Data[secretCA])
	clock.Step(340 * 24 * time.Hour)
	kube.ClearActions()
	if err := c.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	renewed, _ := c.GetCertificate(nil)
	if string(renewed.Certificate[0]) == string(first.Certificate[0]) {
		t.Error("a certificate 25 days from its end was not renewed")
	}
	secret, _ = kube.CoreV1().Secrets("stevedore").Get(ctx, "stevedore-webhook-cert", metav1.GetOptions{})
	if string(secret.Data[secretCA]) != oldCA {
		t.Error("renewing the serving certificate replaced the authority")
	}
	if w := writes(kube); w != 1 {
		t.Errorf("%d writes for a renewal, want 1 (the Secret)", w)
	}
	verifies(t, c, kube, clock.Now())
}

func TestCertificatesPutTheCABundleBackAfterAReinstall(t *testing.T) {
	ctx := context.Background()
	clock := clocktesting.NewFakeClock(time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC))
	kube := fake.NewClientset(webhookConfiguration())
	c := newCertificates(kube, clock)
	if err := c.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	// helm upgrade or kubectl apply writes the configuration again, without a caBundle
	if _, err := kube.AdmissionregistrationV1().MutatingWebhookConfigurations().Update(ctx, webhookConfiguration(), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := c.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	verifies(t, c, kube, clock.Now())
}

func TestCertificatesSayWhichConfigurationIsMissing(t *testing.T) {
	kube := fake.NewClientset()
	c := newCertificates(kube, clocktesting.NewFakeClock(time.Now()))
	err := c.Sync(context.Background())
	if err == nil || !strings.Contains(err.Error(), "MutatingWebhookConfiguration stevedore-scheduling") {
		t.Fatalf("error %v, want one naming the configuration", err)
	}
	if _, err := c.GetCertificate(nil); err != nil {
		t.Errorf("the certificate is served even while the configuration is missing: %v", err)
	}
}
