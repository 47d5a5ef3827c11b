/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

// Package certs issues the X.509 certificates Stevedore serves and connects with when nothing else issues them:
// a certificate authority of its own and the certificates it signs (the admission webhook's serving certificate,
// the sandbox's API server and admin). Everything is ECDSA P-256, PEM-encoded.
package certs

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"time"

	"k8s.io/client-go/util/keyutil"
)

// KeyPair is a certificate and its private key, PEM-encoded.
type KeyPair struct {
	Cert, Key []byte
}

// Leaf is what a certificate is issued for.
type Leaf struct {
	Subject pkix.Name
	// Server or client use.
	Usage x509.ExtKeyUsage
	IPs   []net.IP
	Names []string
}

// NewCA returns a self-signed certificate authority valid from now for validity.
func NewCA(commonName string, now time.Time, validity time.Duration) (KeyPair, error) {
	key, serial, err := newKey()
	if err != nil {
		return KeyPair{}, err
	}
	template := &x509.Certificate{
		SerialNumber: serial, Subject: pkix.Name{CommonName: commonName},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(validity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true, IsCA: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, template, template, &key.PublicKey, key)
	if err != nil {
		return KeyPair{}, err
	}
	return encode(der, key)
}

// Sign issues a certificate for leaf, signed by ca, valid from now for validity (at most as long as the CA).
func Sign(ca KeyPair, leaf Leaf, now time.Time, validity time.Duration) (KeyPair, error) {
	caCert, caKey, err := ca.Parse()
	if err != nil {
		return KeyPair{}, fmt.Errorf("the certificate authority: %w", err)
	}
	key, serial, err := newKey()
	if err != nil {
		return KeyPair{}, err
	}
	notAfter := now.Add(validity)
	if notAfter.After(caCert.NotAfter) {
		notAfter = caCert.NotAfter
	}
	template := &x509.Certificate{
		SerialNumber: serial, Subject: leaf.Subject, NotBefore: now.Add(-time.Hour), NotAfter: notAfter,
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage: []x509.ExtKeyUsage{leaf.Usage}, IPAddresses: leaf.IPs, DNSNames: leaf.Names,
	}
	der, err := x509.CreateCertificate(rand.Reader, template, caCert, &key.PublicKey, caKey)
	if err != nil {
		return KeyPair{}, fmt.Errorf("signing %s: %w", leaf.Subject.CommonName, err)
	}
	return encode(der, key)
}

// Parse decodes the pair's certificate and ECDSA key.
func (p KeyPair) Parse() (*x509.Certificate, *ecdsa.PrivateKey, error) {
	block, _ := pem.Decode(p.Cert)
	if block == nil || block.Type != "CERTIFICATE" {
		return nil, nil, errors.New("no PEM certificate")
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return nil, nil, err
	}
	key, err := keyutil.ParsePrivateKeyPEM(p.Key)
	if err != nil {
		return nil, nil, err
	}
	ecKey, ok := key.(*ecdsa.PrivateKey)
	if !ok {
		return nil, nil, fmt.Errorf("the key is a %T, not ECDSA", key)
	}
	return cert, ecKey, nil
}

func encode(der []byte, key *ecdsa.PrivateKey) (KeyPair, error) {
	keyPEM, err := keyutil.MarshalPrivateKeyToPEM(key)
	if err != nil {
		return KeyPair{}, err
	}
	return KeyPair{Cert: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), Key: keyPEM}, nil
}

// serialNumber is a random 128-bit serial number, as RFC 5280 recommends.
// newKey returns a new P-256 key and a random 128-bit serial number for the certificate it will sign.
func newKey() (*ecdsa.PrivateKey, *big.Int, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		return nil, nil, err
	}
	return key, serial, nil
}
