/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package sandbox

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/keyutil"

	"github.com/stevedore-dev/stevedore/pkg/certs"
)

// pki is the sandbox's certificates and keys, in files of its own directory: a CA that signs the API server's serving
// certificate, the admin's bearer token (group system:masters, in a static token file), and the key that signs
// service account tokens. Every API server of the sandbox (in this process, or another minor's binary) serves with
// them, so a client keeps working across a control-plane upgrade.
//
// The admin authenticates with a token rather than a client certificate: the API server verifies a client
// certificate's signature chain on every request (a twentieth of its CPU in a scale-out), while a token's
// authentication is cached.
type pki struct {
	CAFile, ServingCertFile, ServingKeyFile, ServiceAccountKeyFile, TokenFile string
	ca                                                                        certs.KeyPair
	adminToken                                                                string
}

// pkiValidity is how long the sandbox's certificates are valid.
const pkiValidity = 10 * 365 * 24 * time.Hour

// newPKI writes a fresh PKI into dir.
func newPKI(dir string) (*pki, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	now := time.Now()
	ca, err := certs.NewCA("stevedore-sandbox-ca", now, pkiValidity)
	if err != nil {
		return nil, err
	}
	serving, err := certs.Sign(ca, certs.Leaf{Subject: pkix.Name{CommonName: "kube-apiserver"}, Usage: x509.ExtKeyUsageServerAuth,
		IPs: []net.IP{net.ParseIP("127.0.0.1")}, Names: []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"}},
		now, pkiValidity)
	if err != nil {
		return nil, err
	}
	secret := make([]byte, 32)
	if _, err := rand.Read(secret); err != nil {
		return nil, err
	}
	adminToken := hex.EncodeToString(secret)
	saKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	saPEM, err := keyutil.MarshalPrivateKeyToPEM(saKey)
	if err != nil {
		return nil, err
	}
	p := &pki{CAFile: filepath.Join(dir, "ca.crt"), ServingCertFile: filepath.Join(dir, "apiserver.crt"),
		ServingKeyFile: filepath.Join(dir, "apiserver.key"), ServiceAccountKeyFile: filepath.Join(dir, "service-account.key"),
		TokenFile: filepath.Join(dir, "tokens.csv"), ca: ca, adminToken: adminToken}
	// token,user,uid,"group1,group2"
	tokens := fmt.Sprintf("%s,sandbox-admin,sandbox-admin,\"system:masters\"\n", adminToken)
	for path, data := range map[string][]byte{p.CAFile: ca.Cert, p.ServingCertFile: serving.Cert, p.ServingKeyFile: serving.Key,
		p.ServiceAccountKeyFile: saPEM, p.TokenFile: []byte(tokens)} {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// adminConfig is a client configuration of the sandbox's admin for the API server at host.
func (p *pki) adminConfig(host string) *rest.Config {
	return &rest.Config{Host: host, QPS: 1000, Burst: 2000, BearerToken: p.adminToken,
		TLSClientConfig: rest.TLSClientConfig{CAData: p.ca.Cert}}
}
