/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package admission

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"net"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"

	"github.com/stevedore-dev/stevedore/pkg/certs"
)

// Validity of the webhook's certificate authority and serving certificate, and how long before its end the
// serving certificate is renewed.
const (
	caValidity      = 10 * 365 * 24 * time.Hour
	servingValidity = 365 * 24 * time.Hour
	renewBefore     = 30 * 24 * time.Hour
)

// Keys of the Secret holding the certificates.
const (
	secretCA   = "ca.crt"
	secretCert = corev1.TLSCertKey
	secretKey  = corev1.TLSPrivateKeyKey
)

// Certificates keeps the webhook's serving certificate, shared by every replica: a certificate authority and a
// certificate it signed for the Service's DNS names (and 127.0.0.1), in a Secret; the authority in the caBundle of
// every webhook of the MutatingWebhookConfiguration. It serves the Secret's certificate (GetCertificate).
type Certificates struct {
	Kube kubernetes.Interface
	// Namespace of the Secret and the Service; Secret and Service their names; Configuration the
	// MutatingWebhookConfiguration's.
	Namespace, Secret, Service, Configuration string
	Clock                                     clock.PassiveClock

	mu      sync.RWMutex
	serving *tls.Certificate
}

// GetCertificate serves the certificate the last Sync read (tls.Config.GetCertificate).
func (c *Certificates) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.serving == nil {
		return nil, errors.New("the webhook's certificate is not read yet")
	}
	return c.serving, nil
}

// names are the DNS names the serving certificate is for: the Service's, as the API server calls it.
func (c *Certificates) names() []string {
	return []string{c.Service, c.Service + "." + c.Namespace, c.Service + "." + c.Namespace + ".svc",
		c.Service + "." + c.Namespace + ".svc.cluster.local", "localhost"}
}

// Sync makes the Secret hold a certificate authority and a serving certificate for the Service valid for at least
// renewBefore more (creating or renewing them; the first replica to write wins, the others read what it wrote),
// serves that certificate, and puts the authority in the caBundle of every webhook of the configuration.
func (c *Certificates) Sync(ctx context.Context) error {
	secret, err := c.secret(ctx)
	if err != nil {
		return fmt.Errorf("secret %s/%s: %w", c.Namespace, c.Secret, err)
	}
	pair, err := tls.X509KeyPair(secret.Data[secretCert], secret.Data[secretKey])
	if err != nil {
		return fmt.Errorf("secret %s/%s: %w", c.Namespace, c.Secret, err)
	}
	c.mu.Lock()
	c.serving = &pair
	c.mu.Unlock()
	return c.injectCABundle(ctx, secret.Data[secretCA])
}

// secret returns the Secret once it holds a valid authority and serving certificate.
func (c *Certificates) secret(ctx context.Context) (*corev1.Secret, error) {
	api := c.Kube.CoreV1().Secrets(c.Namespace)
	secret, err := api.Get(ctx, c.Secret, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		secret = &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: c.Secret, Namespace: c.Namespace,
			Labels: map[string]string{"app.kubernetes.io/name": "stevedore"}}, Type: corev1.SecretTypeTLS}
		if err := c.issue(secret); err != nil {
			return nil, err
		}
		created, err := api.Create(ctx, secret, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			return api.Get(ctx, c.Secret, metav1.GetOptions{}) // another replica was first
		}
		return created, err
	}
	if err != nil {
		return nil, err
	}
	if c.valid(secret) {
		return secret, nil
	}
	if err := c.issue(secret); err != nil {
		return nil, err
	}
	// a conflict means another replica renewed it: the next sync reads that
	return api.Update(ctx, secret, metav1.UpdateOptions{})
}

// valid reports whether the Secret's serving certificate is signed by its authority, is for the Service's names
// and stays valid for renewBefore more.
func (c *Certificates) valid(secret *corev1.Secret) bool {
	serving, _, err := certs.KeyPair{Cert: secret.Data[secretCert], Key: secret.Data[secretKey]}.Parse()
	if err != nil {
		return false
	}
	ca, _, err := certs.KeyPair{Cert: secret.Data[secretCA], Key: secret.Data["ca.key"]}.Parse()
	if err != nil || serving.CheckSignatureFrom(ca) != nil {
		return false
	}
	return c.Clock.Now().Add(renewBefore).Before(serving.NotAfter) && slices.Equal(serving.DNSNames, c.names())
}

// issue writes a serving certificate into the Secret, signed by its authority when that stays valid long enough,
// else by a new one.
func (c *Certificates) issue(secret *corev1.Secret) error {
	now := c.Clock.Now()
	ca := certs.KeyPair{Cert: secret.Data[secretCA], Key: secret.Data["ca.key"]}
	if caCert, _, err := ca.Parse(); err != nil || !now.Add(servingValidity).Before(caCert.NotAfter) {
		if ca, err = certs.NewCA("stevedore-webhook-ca", now, caValidity); err != nil {
			return err
		}
	}
	serving, err := certs.Sign(ca, certs.Leaf{Subject: pkix.Name{CommonName: c.Service + "." + c.Namespace + ".svc"},
		Usage: x509.ExtKeyUsageServerAuth, IPs: []net.IP{net.ParseIP("127.0.0.1")}, Names: c.names()}, now, servingValidity)
	if err != nil {
		return err
	}
	secret.Data = map[string][]byte{secretCA: ca.Cert, "ca.key": ca.Key, secretCert: serving.Cert, secretKey: serving.Key}
	return nil
}

// injectCABundle sets the caBundle of every webhook of the configuration to ca, when it is not already.
func (c *Certificates) injectCABundle(ctx context.Context, ca []byte) error {
	api := c.Kube.AdmissionregistrationV1().MutatingWebhookConfigurations()
	cfg, err := api.Get(ctx, c.Configuration, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("MutatingWebhookConfiguration %s: %w", c.Configuration, err)
	}
	changed := false
	for i := range cfg.Webhooks {
		if !bytes.Equal(cfg.Webhooks[i].ClientConfig.CABundle, ca) {
			cfg.Webhooks[i].ClientConfig.CABundle = ca
			changed = true
		}
	}
	if !changed {
		return nil
	}
	if _, err := api.Update(ctx, cfg, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("MutatingWebhookConfiguration %s: setting the caBundle: %w", c.Configuration, err)
	}
	return nil
}
