package identity

import (
	"context"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

func TestLoopbackAndDialOptions(t *testing.T) {
	for addr, want := range map[string]bool{"127.0.0.1:7443": true, "localhost:1": true, "[::1]:9": true,
		"10.0.0.1:7443": false, "example.com:443": false, "nonsense": false} {
		if got := Loopback(addr); got != want {
			t.Errorf("Loopback(%q) = %v", addr, got)
		}
	}
	if _, err := DialOptions("no-port", "t", Transport{}); err == nil {
		t.Fatal("an address without a port is refused")
	}
	if opts, err := DialOptions("example.com:443", "t", Transport{}); err != nil || len(opts) != 3 { // credentials, token, message limits
		t.Fatalf("%v %v", opts, err)
	}
	if _, err := DialOptions("127.0.0.1:1", "t", Transport{CAFile: "/nonexistent/ca.pem"}); err == nil {
		t.Fatal("a CA file that cannot be read is refused")
	}
}

// TestDialTLSOnLoopback: a TLS API reached through loopback (a kubectl
// port-forward) is served when the client names its CA, and not by the
// default rule (plain TCP on loopback); the server name can be given for
// a certificate that does not name the dialled host.
func TestDialTLSOnLoopback(t *testing.T) {
	pki, err := MintDevPKI(t.TempDir(), DefaultTrustDomain, nil, time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := APITLS(pki.Server.Cert, pki.Server.Key, nil)
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(grpc.Creds(credentials.NewTLS(cfg)))
	healthpb.RegisterHealthServer(srv, health.NewServer())
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(lis) }()
	defer func() { srv.Stop(); <-done }()
	check := func(tr Transport) error {
		t.Helper()
		opts, err := DialOptions(lis.Addr().String(), "tok", tr)
		if err != nil {
			t.Fatal(err)
		}
		conn, err := grpc.NewClient(lis.Addr().String(), opts...)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		_, err = healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
		return err
	}
	if err := check(Transport{CAFile: pki.CA}); err != nil {
		t.Fatalf("TLS with the CA: %v", err)
	}
	if err := check(Transport{CAFile: pki.CA, ServerName: "localhost"}); err != nil {
		t.Fatalf("TLS with the CA and a server name on the certificate: %v", err)
	}
	if err := check(Transport{CAFile: pki.CA, ServerName: "tollgate-api.other.svc"}); err == nil {
		t.Fatal("a server name the certificate does not carry was accepted")
	}
	if err := check(Transport{}); err == nil {
		t.Fatal("plain TCP to a TLS listener succeeded")
	}
}
