package redisstore

import (
	"context"
	"crypto/x509"
	"fmt"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/internal/identity"
	"github.com/tollgate-dev/tollgate/internal/redistest"
)

// TestPasswordApart: a password given apart from the URL (as
// --redis-password-file gives it) authenticates; without it the server
// refuses; given twice is an error, not one silently winning.
func TestPasswordApart(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	// Set after the start: the harness waits for a PONG without one.
	if _, err := srv.Do("CONFIG", "SET", "requirepass", "s3cret-pw"); err != nil {
		t.Fatal(err)
	}
	if s, err := New(ctx, Config{URL: srv.URL()}); err == nil {
		s.Close()
		t.Fatal("opened a store on a server that requires a password, without one")
	}
	s, err := New(ctx, Config{URL: srv.URL(), Password: "s3cret-pw"})
	if err != nil {
		t.Fatalf("with the password: %v", err)
	}
	s.Close()
	withPass := strings.Replace(srv.URL(), "://", "://:other@", 1)
	if _, err := New(ctx, Config{URL: withPass, Password: "s3cret-pw"}); err == nil || !strings.Contains(err.Error(), "give it once") {
		t.Fatalf("a password in the URL and one apart: %v", err)
	}
}

// TestRootCAs: against a Redis serving TLS with a private CA, a store
// given that CA connects and one without it refuses the certificate; a CA
// for a URL that is not rediss:// is an error.
func TestRootCAs(t *testing.T) {
	pki, err := identity.MintDevPKI(t.TempDir(), identity.DefaultTrustDomain, nil, time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := lis.Addr().(*net.TCPAddr).Port
	lis.Close()
	srv := redistest.Start(t, redistest.Args("--tls-port", fmt.Sprint(port), "--tls-cert-file", pki.Server.Cert,
		"--tls-key-file", pki.Server.Key, "--tls-ca-cert-file", pki.CA, "--tls-auth-clients", "no"))
	_ = srv
	caPEM, err := os.ReadFile(pki.CA)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	ctx := context.Background()
	url := fmt.Sprintf("rediss://127.0.0.1:%d/0", port)
	if s, err := New(ctx, Config{URL: url}); err == nil {
		s.Close()
		t.Fatal("trusted a certificate from a CA nobody gave")
	}
	s, err := New(ctx, Config{URL: url, RootCAs: pool})
	if err != nil {
		t.Fatalf("with the CA: %v", err)
	}
	s.Close()
	if _, err := New(ctx, Config{URL: fmt.Sprintf("redis://127.0.0.1:%d/0", port), RootCAs: pool}); err == nil || !strings.Contains(err.Error(), "not rediss://") {
		t.Fatalf("a CA with a plain URL: %v", err)
	}
}
