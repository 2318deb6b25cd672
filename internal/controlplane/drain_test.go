package controlplane

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	tollgatev1 "github.com/tollgate-dev/tollgate/gen/tollgate/v1"
	"github.com/tollgate-dev/tollgate/internal/controlplane/runner"
	"github.com/tollgate-dev/tollgate/internal/identity"
)

// TestDrainDelayKeepsServingWhileNotReady: on shutdown with a drain delay,
// readiness turns NOT_SERVING at once while calls are still answered, and
// the server stops only after the delay — the order a load balancer that
// polls readiness needs so that no call lands on a closed listener.
func TestDrainDelayKeepsServingWhileNotReady(t *testing.T) {
	const delay = 5 * time.Second
	e := newEnvOn(t, nil, devPolicy(t), nil, func(c *Config) { c.DrainDelay = delay; c.Dispatcher = runner.NoExecutors{} })
	waitReady := func(want bool) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for (e.srv.Ready() == nil) != want {
			if time.Now().After(deadline) {
				t.Fatalf("Ready() = %v, want ready=%v", e.srv.Ready(), want)
			}
			time.Sleep(5 * time.Millisecond) // polling a state; nothing to wait on
		}
	}
	waitReady(true)
	if _, err := e.runs("alice").ListRuns(context.Background(), &tollgatev1.ListRunsRequest{}); err != nil {
		t.Fatalf("serving: %v", err)
	}
	stopped := make(chan time.Time, 1)
	began := time.Now()
	go func() { e.stop(); stopped <- time.Now() }()
	waitReady(false)
	if err := e.srv.Ready(); !strings.Contains(err.Error(), "NOT_SERVING") {
		t.Fatalf("the reason does not name the health status: %v", err)
	}
	// Not ready, and still answering: a call now succeeds.
	if _, err := e.runs("bob").ListRuns(context.Background(), &tollgatev1.ListRunsRequest{}); err != nil {
		t.Fatalf("a call during the drain delay failed: %v", err)
	}
	select {
	case at := <-stopped:
		t.Fatalf("stopped %v after the shutdown began, before the %v delay", at.Sub(began), delay)
	default:
	}
	if at := <-stopped; at.Sub(began) < delay {
		t.Fatalf("stopped after %v, before the %v delay", at.Sub(began), delay)
	}
}

func TestReadyzFollowsReady(t *testing.T) {
	var why error = errors.New("gRPC health is NOT_SERVING (starting, or draining)")
	h := AdminMux(AdminConfig{Ready: func() error { return why }})
	if code, body := adminGet(t, h, "/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "NOT_SERVING") {
		t.Fatalf("/readyz while not ready: %d %q", code, body)
	}
	why = nil
	if code, body := adminGet(t, h, "/readyz"); code != http.StatusOK || body != "ok\n" {
		t.Fatalf("/readyz when ready: %d %q", code, body)
	}
	if code, _ := adminGet(t, AdminMux(AdminConfig{}), "/readyz"); code != http.StatusNotFound {
		t.Fatalf("/readyz with no readiness: %d", code)
	}
}

// TestAPIOverTLS: with an API certificate the listener speaks TLS only: a
// client trusting its CA is served with its token, a plain-TCP client
// is not.
func TestAPIOverTLS(t *testing.T) {
	pki, err := identity.MintDevPKI(t.TempDir(), identity.DefaultTrustDomain, nil, time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	apiTLS, err := identity.APITLS(pki.Server.Cert, pki.Server.Key, nil)
	if err != nil {
		t.Fatal(err)
	}
	e := newEnvOn(t, nil, devPolicy(t), nil, func(c *Config) { c.APITLS = apiTLS })
	caPEM, err := os.ReadFile(pki.CA)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(caPEM)
	conn, err := grpc.NewClient(e.addr, grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12})),
		grpc.WithPerRPCCredentials(identity.PerRPCCredentials{Token: e.token("alice")}))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := tollgatev1.NewRunServiceClient(conn).ListRuns(context.Background(), &tollgatev1.ListRunsRequest{}); err != nil {
		t.Fatalf("over TLS: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if _, err := e.runs("alice").ListRuns(ctx, &tollgatev1.ListRunsRequest{}); err == nil {
		t.Fatal("a plain-TCP client was served by a TLS listener")
	}
}
