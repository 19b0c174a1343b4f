package main

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

const (
	adminUser        = "kubewasm-admin"
	unprivilegedUser = "kubewasm-unprivileged"
)

// pki holds the file names of the credentials the control plane generated on its first start.
// They are kept in DIR so a restart serves the same CA and existing kubeconfigs keep working.
type pki struct {
	dir string
}

func (p *pki) path(name string) string { return filepath.Join(p.dir, name) }

func (p *pki) CACert() string                { return p.path("ca.crt") }
func (p *pki) ServingCert() string           { return p.path("apiserver.crt") }
func (p *pki) ServingKey() string            { return p.path("apiserver.key") }
func (p *pki) ServiceAccountKey() string     { return p.path("sa.key") }
func (p *pki) ServiceAccountPub() string     { return p.path("sa.pub") }
func (p *pki) ClientCert(user string) string { return p.path(user + ".crt") }
func (p *pki) ClientKey(user string) string  { return p.path(user + ".key") }

func ensurePKI(dir string) (*pki, error) {
	p := &pki{dir: dir}
	if _, err := os.Stat(p.path("complete")); err == nil {
		return p, nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now().Add(-time.Hour)
	caTmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "kubewasm-controlplane-ca"},
		NotBefore:             now,
		NotAfter:              now.Add(10 * 365 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, caKey.Public(), caKey)
	if err != nil {
		return nil, err
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, err
	}
	if err := writePEM(p.CACert(), "CERTIFICATE", caDER); err != nil {
		return nil, err
	}

	issue := func(certFile, keyFile string, tmpl *x509.Certificate) error {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return err
		}
		tmpl.SerialNumber = serial()
		tmpl.NotBefore = now
		tmpl.NotAfter = now.Add(10 * 365 * 24 * time.Hour)
		tmpl.KeyUsage = x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, key.Public(), caKey)
		if err != nil {
			return err
		}
		if err := writePEM(certFile, "CERTIFICATE", der); err != nil {
			return err
		}
		return writeKey(keyFile, key)
	}

	if err := issue(p.ServingCert(), p.ServingKey(), &x509.Certificate{
		Subject:     pkix.Name{CommonName: "kube-apiserver"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:    []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("10.96.0.1")},
	}); err != nil {
		return nil, err
	}
	clients := map[string][]string{adminUser: {"system:masters"}, unprivilegedUser: nil}
	for user, groups := range clients {
		if err := issue(p.ClientCert(user), p.ClientKey(user), &x509.Certificate{
			Subject:     pkix.Name{CommonName: user, Organization: groups},
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		}); err != nil {
			return nil, err
		}
	}

	saKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, err
	}
	if err := writeKey(p.ServiceAccountKey(), saKey); err != nil {
		return nil, err
	}
	pubDER, err := x509.MarshalPKIXPublicKey(saKey.Public())
	if err != nil {
		return nil, err
	}
	if err := writePEM(p.ServiceAccountPub(), "PUBLIC KEY", pubDER); err != nil {
		return nil, err
	}
	// Written last: a start interrupted half-way regenerates everything.
	return p, os.WriteFile(p.path("complete"), nil, 0o600)
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		panic(err) // crypto/rand never fails on Linux
	}
	return n.Add(n, big.NewInt(1))
}

func writePEM(path, typ string, der []byte) error {
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600)
}

func writeKey(path string, key crypto.Signer) error {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return err
	}
	return writePEM(path, "PRIVATE KEY", der)
}
