package controlplane

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	tollgatev1 "github.com/tollgate-dev/tollgate/gen/tollgate/v1"
	"github.com/tollgate-dev/tollgate/internal/identity"
	"github.com/tollgate-dev/tollgate/internal/oidctest"
)

// --oidc-issuer: discovery at start (an unreachable provider fails the
// start, saying so), then the provider's ID tokens are accepted beside the
// dev tokens.
func TestOIDCFlags(t *testing.T) {
	err := startDev(t, "--oidc-issuer", "http://127.0.0.1:1", "--oidc-client-id", "approvectl")
	if err == nil || !strings.Contains(err.Error(), "OIDC discovery for http://127.0.0.1:1") || !strings.Contains(err.Error(), "reachable") {
		t.Fatalf("start with an unreachable provider: %v", err)
	}
	p := oidctest.Start(t)
	if err := startDev(t, "--oidc-issuer", p.Issuer); err == nil || !strings.Contains(err.Error(), "--oidc-client-id") {
		t.Fatalf("start without a client id: %v", err)
	}
	// A claim the person may edit at the provider would let them name
	// themselves anyone.
	if err := startDev(t, "--oidc-issuer", p.Issuer, "--oidc-client-id", oidctest.ClientID, "--oidc-person-claim", "preferred_username"); err == nil || !strings.Contains(err.Error(), "give sub") {
		t.Fatalf("start with an editable person claim: %v", err)
	}

	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	addr := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, []string{"--dev", "--home", t.TempDir(), "--listen", "127.0.0.1:0", "--executor-listen", "127.0.0.1:0",
			"--oidc-issuer", p.Issuer, "--oidc-client-id", oidctest.ClientID},
			MainConfig{Stdout: io.Discard, Stderr: io.Discard, Getenv: func(string) string { return "" }, Ready: func(a string) { addr <- a }})
	}()
	var a string
	select {
	case a = <-addr:
	case err := <-done:
		t.Fatalf("Run: %v", err)
	}
	c, err := grpc.NewClient(a, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithPerRPCCredentials(identity.PerRPCCredentials{Token: p.IDToken(t, "dave"), Insecure: true}))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := tollgatev1.NewApprovalServiceClient(c).ListAsks(ctx, &tollgatev1.ListAsksRequest{}); err != nil {
		t.Fatalf("an ID token of --oidc-issuer: %v", err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run after cancel: %v", err)
	}
}
