package identity

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"time"
)

// Files of a PKI directory ([MintDevPKI], [IssueExecutorCert]).
const (
	caCertFile     = "ca.pem"
	caKeyFile      = "ca.key"
	serverCertFile = "server.pem"
	serverKeyFile  = "server.key"
)

// CertPaths locates a certificate and its private key (PEM).
type CertPaths struct {
	Cert string
	Key  string
}

// DevPKI is what [MintDevPKI] made: the CA bundle both ends trust, the
// control plane's executor-listener certificate, and one client
// certificate per executor name.
type DevPKI struct {
	CA        string
	CAKey     string
	Server    CertPaths
	Executors map[string]CertPaths
}

// MintDevPKI prepares a small PKI in dir for dev mode and tests: a CA
// (reused when dir/ca.pem and dir/ca.key exist, so executors configured
// earlier keep working; a key file others may read is refused), a server
// certificate for localhost, 127.0.0.1 and ::1, and for each executor name
// a client certificate whose URI SAN is spiffe://trustDomain/executor/NAME.
// Leaf certificates are issued anew on every call, valid from now for
// validity. Errors wrap [ErrInvalidConfig] for bad arguments.
func MintDevPKI(dir, trustDomain string, executors []string, validity time.Duration, now time.Time) (DevPKI, error) {
	if dir == "" || trustDomain == "" || validity <= 0 {
		return DevPKI{}, fmt.Errorf("%w: pki needs a directory, a trust domain and a positive validity", ErrInvalidConfig)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return DevPKI{}, err
	}
	p := DevPKI{CA: filepath.Join(dir, caCertFile), CAKey: filepath.Join(dir, caKeyFile), Executors: map[string]CertPaths{}}
	ca, caKey, err := loadCA(p.CA, p.CAKey)
	if errors.Is(err, fs.ErrNotExist) {
		ca, caKey, err = createCA(p.CA, p.CAKey, trustDomain, now)
	}
	if err != nil {
		return DevPKI{}, err
	}
	p.Server = CertPaths{Cert: filepath.Join(dir, serverCertFile), Key: filepath.Join(dir, serverKeyFile)}
	server := &x509.Certificate{
		Subject:     pkix.Name{CommonName: "tollgate control plane"},
		DNSNames:    []string{"localhost"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		URIs:        []*url.URL{{Scheme: "spiffe", Host: trustDomain, Path: "/controlplane"}},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	if err := issue(ca, caKey, server, p.Server, now, validity); err != nil {
		return DevPKI{}, err
	}
	for _, name := range executors {
		paths, err := issueExecutor(ca, caKey, dir, trustDomain, name, now, validity)
		if err != nil {
			return DevPKI{}, err
		}
		p.Executors[name] = paths
	}
	return p, nil
}

// IssueExecutorCert issues a client certificate for executor name, signed
// by the CA in caCert/caKey, into dir as executor-NAME.pem and
// executor-NAME.key (0600).
func IssueExecutorCert(caCert, caKey, dir, trustDomain, name string, validity time.Duration, now time.Time) (CertPaths, error) {
	ca, key, err := loadCA(caCert, caKey)
	if err != nil {
		return CertPaths{}, err
	}
	if validity <= 0 {
		return CertPaths{}, fmt.Errorf("%w: validity must be positive", ErrInvalidConfig)
	}
	return issueExecutor(ca, key, dir, trustDomain, name, now, validity)
}

func issueExecutor(ca *x509.Certificate, caKey crypto.Signer, dir, trustDomain, name string, now time.Time, validity time.Duration) (CertPaths, error) {
	if !validDevUser(name) {
		return CertPaths{}, fmt.Errorf("%w: bad executor name %q", ErrInvalidConfig, name)
	}
	paths := CertPaths{Cert: filepath.Join(dir, "executor-"+name+".pem"), Key: filepath.Join(dir, "executor-"+name+".key")}
	tmpl := &x509.Certificate{
		Subject:     pkix.Name{CommonName: name},
		URIs:        []*url.URL{ExecutorURI(trustDomain, name)},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	return paths, issue(ca, caKey, tmpl, paths, now, validity)
}

func createCA(certPath, keyPath, trustDomain string, now time.Time) (*x509.Certificate, crypto.Signer, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "tollgate dev ca (" + trustDomain + ")"},
		NotBefore:             now.Add(-time.Minute),
		NotAfter:              now.Add(10 * 365 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, nil, err
	}
	if err := writeKey(keyPath, key); err != nil {
		return nil, nil, err
	}
	if err := writeFileAtomic(certPath, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		return nil, nil, err
	}
	ca, err := x509.ParseCertificate(der)
	return ca, key, err
}

// loadCA reads a CA certificate and its key; an error wrapping
// fs.ErrNotExist means either file is missing.
func loadCA(certPath, keyPath string) (*x509.Certificate, crypto.Signer, error) {
	certPEM, err := os.ReadFile(certPath)
	if err != nil {
		return nil, nil, err
	}
	fi, err := os.Stat(keyPath)
	if err != nil {
		return nil, nil, err
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return nil, nil, fmt.Errorf("%w: %s may be read by others (mode %o); chmod 600 it", ErrInvalidConfig, keyPath, fi.Mode().Perm())
	}
	keyPEM, err := os.ReadFile(keyPath)
	if err != nil {
		return nil, nil, err
	}
	cb, _ := pem.Decode(certPEM)
	kb, _ := pem.Decode(keyPEM)
	if cb == nil || kb == nil {
		return nil, nil, fmt.Errorf("%w: ca files are not pem", ErrInvalidConfig)
	}
	ca, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: ca certificate: %v", ErrInvalidConfig, err)
	}
	k, err := x509.ParsePKCS8PrivateKey(kb.Bytes)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: ca key: %v", ErrInvalidConfig, err)
	}
	signer, ok := k.(crypto.Signer)
	if !ok || !ca.IsCA {
		return nil, nil, fmt.Errorf("%w: %s is not a ca with a signing key", ErrInvalidConfig, certPath)
	}
	return ca, signer, nil
}

// issue signs tmpl (given a fresh P-256 key, serial and validity) with the
// CA and writes certificate and key to paths.
func issue(ca *x509.Certificate, caKey crypto.Signer, tmpl *x509.Certificate, paths CertPaths, now time.Time, validity time.Duration) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	tmpl.SerialNumber = serial()
	tmpl.NotBefore = now.Add(-time.Minute)
	tmpl.NotAfter = now.Add(validity)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, key.Public(), caKey)
	if err != nil {
		return fmt.Errorf("issue certificate: %w", err)
	}
	if err := writeKey(paths.Key, key); err != nil {
		return err
	}
	return writeFileAtomic(paths.Cert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644)
}

func writeKey(path string, key crypto.Signer) error {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return err
	}
	return writeFileAtomic(path, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600)
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		panic(err) // crypto/rand does not fail on supported platforms
	}
	return n
}
