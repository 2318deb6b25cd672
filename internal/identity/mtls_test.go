package identity

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// serveMTLS starts a real gRPC server on loopback with the executor
// listener's TLS config and interceptors, serving the recording health
// service.
func serveMTLS(t *testing.T, pki DevPKI, trustDomain string, clock ...func() time.Time) (string, *recordingHealth) {
	t.Helper()
	cfg, err := ServerTLS(pki.Server.Cert, pki.Server.Key, pki.CA, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(clock) > 0 {
		cfg.Time = clock[0]
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(grpc.Creds(credentials.NewTLS(cfg)),
		grpc.ChainUnaryInterceptor(ExecutorUnaryInterceptor(trustDomain)),
		grpc.ChainStreamInterceptor(ExecutorStreamInterceptor(trustDomain)))
	rec := &recordingHealth{Server: health.NewServer(), seen: make(chan seen, 64)}
	healthpb.RegisterHealthServer(srv, rec)
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(lis) }()
	t.Cleanup(func() { srv.Stop(); <-done })
	return lis.Addr().String(), rec
}

func checkWith(t *testing.T, addr string, cfg *tls.Config) error {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(credentials.NewTLS(cfg)))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err = healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
	return err
}

func TestMTLSIdentityFromURISAN(t *testing.T) {
	now := time.Now()
	pki, err := MintDevPKI(t.TempDir(), "acme", []string{"edge-1"}, time.Hour, now)
	if err != nil {
		t.Fatal(err)
	}
	addr, rec := serveMTLS(t, pki, "acme")
	cfg, err := ClientTLS(pki.Executors["edge-1"].Cert, pki.Executors["edge-1"].Key, pki.CA, "")
	if err != nil {
		t.Fatal(err)
	}
	if err := checkWith(t, addr, cfg); err != nil {
		t.Fatalf("executor with a good certificate: %v", err)
	}
	got := <-rec.seen
	want := Principal{Subject: "edge-1", Kind: KindExecutor, Issuer: "spiffe://acme"}
	if !got.ok || !reflect.DeepEqual(got.p, want) {
		t.Fatalf("principal %+v (ok %v), want %+v", got.p, got.ok, want)
	}
}

func TestMTLSRejects(t *testing.T) {
	now := time.Now()
	dir := t.TempDir()
	pki, err := MintDevPKI(dir, "acme", []string{"edge-1"}, time.Hour, now)
	if err != nil {
		t.Fatal(err)
	}
	// A second PKI: another CA, its executor is a stranger.
	other, err := MintDevPKI(t.TempDir(), "acme", []string{"edge-1"}, time.Hour, now)
	if err != nil {
		t.Fatal(err)
	}
	// Certificates from the right CA with the wrong identity.
	ca, caKey, err := loadCA(pki.CA, pki.CAKey)
	if err != nil {
		t.Fatal(err)
	}
	leaf := func(name string, uris []*url.URL, notAfter time.Duration) CertPaths {
		p := CertPaths{Cert: filepath.Join(dir, name+".pem"), Key: filepath.Join(dir, name+".key")}
		tmpl := &x509.Certificate{Subject: pkix.Name{CommonName: "edge-1"}, URIs: uris, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
		if err := issue(ca, caKey, tmpl, p, now, notAfter); err != nil {
			t.Fatal(err)
		}
		return p
	}
	noURI := leaf("nouri", nil, time.Hour)
	otherDomain := leaf("otherdomain", []*url.URL{ExecutorURI("evil", "edge-1")}, time.Hour)
	twoURIs := leaf("two", []*url.URL{ExecutorURI("acme", "edge-1"), ExecutorURI("acme", "edge-2")}, time.Hour)
	notExecutor := leaf("person", []*url.URL{{Scheme: "spiffe", Host: "acme", Path: "/person/alice"}}, time.Hour)

	addr, rec := serveMTLS(t, pki, "acme")
	client := func(c CertPaths) *tls.Config {
		cfg, err := ClientTLS(c.Cert, c.Key, pki.CA, "")
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	noCert := &tls.Config{RootCAs: client(noURI).RootCAs, MinVersion: tls.VersionTLS13}
	for _, tc := range []struct {
		name string
		cfg  *tls.Config
		code codes.Code
		msg  string
	}{
		{"no uri san", client(noURI), codes.Unauthenticated, "client certificate has no uri san"},
		{"other trust domain", client(otherDomain), codes.Unauthenticated, "uri san is not in trust domain acme"},
		{"two uri sans", client(twoURIs), codes.Unauthenticated, "client certificate has more than one uri san"},
		{"not an executor path", client(notExecutor), codes.Unauthenticated, "uri san does not name an executor"},
		// Handshake failures: the server never sees an RPC.
		{"no client certificate", noCert, codes.Unavailable, ""},
		{"certificate from another ca", client(other.Executors["edge-1"]), codes.Unavailable, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantCode(t, tc.name, checkWith(t, addr, tc.cfg), tc.code, tc.msg)
			rec.noHandlerRan(t)
		})
	}
	t.Run("expired certificate", func(t *testing.T) {
		// A server whose clock reads two hours on: edge-1's one-hour
		// certificate has expired there.
		later, rec := serveMTLS(t, pki, "acme", func() time.Time { return now.Add(2 * time.Hour) })
		wantCode(t, "expired", checkWith(t, later, client(pki.Executors["edge-1"])), codes.Unavailable, "")
		rec.noHandlerRan(t)
		if err := checkWith(t, addr, client(pki.Executors["edge-1"])); err != nil {
			t.Fatalf("the same certificate on a server with today's clock: %v", err)
		}
	})
}

func TestMintDevPKIReusesCA(t *testing.T) {
	dir := t.TempDir()
	a, err := MintDevPKI(dir, "acme", []string{"x"}, time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(a.CA)
	b, err := MintDevPKI(dir, "acme", []string{"y"}, time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	after, _ := os.ReadFile(b.CA)
	if string(before) != string(after) {
		t.Fatal("second MintDevPKI replaced the CA; executors configured earlier would stop working")
	}
	if err := os.Chmod(a.CAKey, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := MintDevPKI(dir, "acme", nil, time.Hour, time.Now()); err == nil {
		t.Fatal("a CA key others may read was accepted")
	}
	if _, err := IssueExecutorCert(a.CA, a.CAKey, dir, "acme", "../evil", time.Hour, time.Now()); err == nil {
		t.Fatal("IssueExecutorCert accepted a name with a path in it")
	}
}

func TestExecutorFromCert(t *testing.T) {
	u := func(s string) *url.URL {
		p, err := url.Parse(s)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, tc := range []struct {
		uri  string
		want string
	}{
		{"spiffe://acme/executor/edge-1", "edge-1"},
		{"spiffe://acme/executor/", ""},
		{"spiffe://acme/executor/a/b", ""},
		{"spiffe://acme/executor/.hidden", ""},
		{"https://acme/executor/edge-1", ""},
		{"spiffe://user@acme/executor/edge-1", ""},
		{"spiffe://acme/executor/edge-1?x=1", ""},
		{"spiffe://acme.evil/executor/edge-1", ""},
	} {
		got, err := ExecutorFromCert(&x509.Certificate{URIs: []*url.URL{u(tc.uri)}}, "acme")
		if got != tc.want || (err == nil) != (tc.want != "") {
			t.Errorf("%s: got %q, %v; want %q", tc.uri, got, err, tc.want)
		}
	}
}
