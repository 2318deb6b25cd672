package oidctest_test

import (
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/internal/oidctest"
)

// claimsOf decodes an ID token's claims (unverified: the identity package
// tests verification against this provider).
func claimsOf(t *testing.T, tok string) map[string]any {
	t.Helper()
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		t.Fatalf("not a compact JWS: %q", tok)
	}
	b, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	var c map[string]any
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	return c
}

func TestDeviceFlowAndRefresh(t *testing.T) {
	p := oidctest.Start(t)
	p.SetGroups("dave", "finance-emea")
	ctx := t.Context()
	cfg := p.OAuth2Config("")
	da, err := cfg.DeviceAuth(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.CompleteDevice(ctx, da.UserCode, "dave"); err != nil {
		t.Fatal(err)
	}
	tok, err := cfg.DeviceAccessToken(ctx, da) // polls after one interval (5 s at exampleop)
	if err != nil {
		t.Fatal(err)
	}
	c := claimsOf(t, oidctest.IDToken(tok))
	if c["sub"] != "dave" || c["iss"] != p.Issuer || c["aud"] == nil {
		t.Fatalf("device ID token claims: %v", c)
	}
	if g, _ := c["groups"].([]any); len(g) != 1 || g[0] != "finance-emea" {
		t.Fatalf("device ID token groups: %v", c["groups"])
	}

	// A refresh brings the groups the provider holds now.
	p.SetGroups("dave")
	code, err := p.CodeFlowToken(ctx, "dave")
	if err != nil {
		t.Fatal(err)
	}
	p.SetGroups("dave", "staff")
	code.Expiry = time.Now().Add(-time.Minute) // make the source refresh
	fresh, err := cfg.TokenSource(ctx, code).Token()
	if err != nil {
		t.Fatal(err)
	}
	if g, _ := claimsOf(t, oidctest.IDToken(fresh))["groups"].([]any); len(g) != 1 || g[0] != "staff" {
		t.Fatalf("refreshed ID token groups: %v", g)
	}
}

func TestUnknownUserIsRefused(t *testing.T) {
	p := oidctest.Start(t)
	if _, err := p.CodeFlowToken(t.Context(), "nobody"); err == nil {
		t.Fatal("sign-in of an unknown user succeeded")
	}
}
