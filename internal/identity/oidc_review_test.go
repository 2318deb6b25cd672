package identity

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/rsa"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/tollgate-dev/tollgate/internal/oidctest"
)

// gatedKeys is an HTTP transport in front of the provider whose key-set
// requests, once armed, hang until released (a provider that stops
// answering mid-rotation).
type gatedKeys struct {
	mu      sync.Mutex
	armed   bool
	entered chan struct{} // closed when an armed key-set request arrives
	release chan struct{}
}

func newGatedKeys() *gatedKeys {
	return &gatedKeys{entered: make(chan struct{}), release: make(chan struct{})}
}

func (g *gatedKeys) arm() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.armed = true
}

func (g *gatedKeys) RoundTrip(r *http.Request) (*http.Response, error) {
	g.mu.Lock()
	hang := g.armed && !strings.Contains(r.URL.Path, "openid-configuration")
	if hang {
		g.armed = false
		close(g.entered)
	}
	g.mu.Unlock()
	if hang {
		select {
		case <-g.release:
		case <-r.Context().Done():
			return nil, r.Context().Err()
		}
	}
	return http.DefaultTransport.RoundTrip(r)
}

// A key-set fetch that hangs (an unknown kid anyone can send, unsigned
// by anything: one per MinRefresh) must not hold up tokens whose key is
// already known, cached or not.
func TestOIDCHangingKeyFetchDoesNotStallKnownKeys(t *testing.T) {
	p := oidctest.Start(t)
	gate := newGatedKeys()
	clock := newFakeClock()
	v := newOIDC(t, p, clock, func(c *OIDCConfig) { c.HTTPClient = &http.Client{Transport: gate} })
	cached := p.IDToken(t, "dave")
	if _, err := v.Verify(t.Context(), cached); err != nil {
		t.Fatal(err)
	}
	fresh := p.IDToken(t, "alice")
	clock.Add(31 * time.Second) // past MinRefresh: an unknown kid fetches

	gate.arm()
	rsaPriv := p.PrivateKey("rsa-1").(*rsa.PrivateKey)
	junk := forge(t, jwt.SigningMethodRS256, "attacker-kid", jwt.MapClaims{"iss": p.Issuer, "aud": oidctest.ClientID,
		"sub": "x", "iat": clock.Now().Unix(), "exp": clock.Now().Add(time.Hour).Unix()}, rsaPriv)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer close(gate.release)
	wg.Go(func() { _, _ = v.Verify(context.Background(), junk) })
	<-gate.entered

	for name, tok := range map[string]string{"cached token": cached, "fresh token of a known key": fresh} {
		done := make(chan error, 1)
		wg.Go(func() {
			_, err := v.Verify(t.Context(), tok)
			done <- err
		})
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("%s while a key fetch hangs: %v", name, err)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: verification blocked behind a hanging key fetch for an unknown kid", name)
		}
	}
}

// A token of the provider that was issued to another client — its azp
// names that client, even though its aud lists ours too (a provider's
// project audience or an audience mapper does that) — or an access token
// (RFC 9068, typ at+jwt) is not a sign-in to this server.
func TestOIDCRefusesTokensOfAnotherClientAndAccessTokens(t *testing.T) {
	p := oidctest.Start(t)
	clock := newFakeClock()
	v := newOIDC(t, p, clock)
	rsaPriv := p.PrivateKey("rsa-1").(*rsa.PrivateKey)
	claims := func(kv ...any) jwt.MapClaims {
		c := jwt.MapClaims{"iss": p.Issuer, "aud": []string{oidctest.ClientID}, "sub": "dave",
			"iat": clock.Now().Unix(), "exp": clock.Now().Add(time.Hour).Unix()}
		for i := 0; i < len(kv); i += 2 {
			c[kv[i].(string)] = kv[i+1]
		}
		return c
	}
	ok := forge(t, jwt.SigningMethodRS256, "rsa-1", claims("azp", oidctest.ClientID), rsaPriv)
	if _, err := v.Verify(t.Context(), ok); err != nil {
		t.Fatalf("control token (azp our client): %v", err)
	}
	at := jwt.NewWithClaims(jwt.SigningMethodRS256, claims("client_id", oidctest.ClientID, "jti", "1"))
	at.Header["kid"], at.Header["typ"] = "rsa-1", "at+jwt"
	atTok, err := at.SignedString(rsaPriv)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, token, reason string }{
		{"azp another client", forge(t, jwt.SigningMethodRS256, "rsa-1",
			claims("aud", []string{"other-app", oidctest.ClientID}, "azp", "other-app"), rsaPriv), "issued to client"},
		{"two audiences, no azp", forge(t, jwt.SigningMethodRS256, "rsa-1",
			claims("aud", []string{"other-app", oidctest.ClientID}), rsaPriv), "azp"},
		{"access token", atTok, "access token"},
		{"nbf in the future", forge(t, jwt.SigningMethodRS256, "rsa-1",
			claims("nbf", clock.Now().Add(time.Hour).Unix()), rsaPriv), "not yet valid"},
	} {
		_, err := v.Verify(t.Context(), tc.token)
		wantRefused(t, tc.name, err, tc.reason)
	}
}

// email_verified must be the JSON boolean true: the string "true" (some
// providers' sloppy mappers) does not verify an address.
func TestOIDCEmailVerifiedMustBeABoolean(t *testing.T) {
	p := oidctest.Start(t)
	clock := newFakeClock()
	v := newOIDC(t, p, clock, func(c *OIDCConfig) { c.PersonClaim = "email" })
	p.SetClaim("dave", "email", "dave@example.com")
	p.SetClaim("dave", "email_verified", "true")
	_, err := v.Verify(t.Context(), p.IDToken(t, "dave"))
	wantRefused(t, `email_verified "true"`, err, "email is not verified")
}

// failingKeys answers the key set with 500 while failing is set.
type failingKeys struct {
	mu      sync.Mutex
	failing bool
}

func (f *failingKeys) set(on bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failing = on
}

func (f *failingKeys) RoundTrip(r *http.Request) (*http.Response, error) {
	f.mu.Lock()
	fail := f.failing && !strings.Contains(r.URL.Path, "openid-configuration")
	f.mu.Unlock()
	if fail {
		return &http.Response{StatusCode: http.StatusInternalServerError, Status: "500 Internal Server Error",
			Body: http.NoBody, Header: http.Header{}, Request: r}, nil
	}
	return http.DefaultTransport.RoundTrip(r)
}

// The provider rotates while its key endpoint answers 500: tokens of the
// keys already held still verify (stale past MaxAge too), a token of the
// new key is refused, and once the endpoint recovers (after MinRefresh)
// the new key is fetched and its tokens verify.
func TestOIDCKeyEndpointFailingThenRecovering(t *testing.T) {
	p := oidctest.Start(t)
	keys := &failingKeys{}
	clock := newFakeClock()
	v := newOIDC(t, p, clock, func(c *OIDCConfig) {
		c.HTTPClient = &http.Client{Transport: keys}
		c.MaxAge = time.Minute
	})
	old := p.IDToken(t, "dave")
	keys.set(true)
	if err := p.Rotate("ES256", "ec-2", true); err != nil {
		t.Fatal(err)
	}
	rotated := p.IDToken(t, "alice")
	clock.Add(2 * time.Minute) // stale, and past MinRefresh
	if _, err := v.Verify(t.Context(), old); err != nil {
		t.Fatalf("a held key while the endpoint fails: %v", err)
	}
	_, err := v.Verify(t.Context(), rotated)
	wantRefused(t, "the new key while the endpoint fails", err, "unknown key id")
	keys.set(false)
	if _, err := v.Verify(t.Context(), rotated); err == nil {
		t.Fatal("refetched within MinRefresh of the failed attempt")
	}
	clock.Add(31 * time.Second)
	if _, err := v.Verify(t.Context(), rotated); err != nil {
		t.Fatalf("the new key once the endpoint recovered: %v", err)
	}
}

// A group whose name starts with "group:" or "role:" at the provider is
// not a policy member anyone may mean (authz refuses such names), so it is
// left out rather than making its members' every decision an error.
func TestOIDCDropsGroupsWithReservedPrefixes(t *testing.T) {
	p := oidctest.Start(t)
	p.SetGroups("dave", "role:admin", "finance-emea", "group:x")
	v := newOIDC(t, p, newFakeClock())
	got, err := v.Verify(t.Context(), p.IDToken(t, "dave"))
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Groups) != 1 || got.Groups[0] != "finance-emea" {
		t.Fatalf("groups %v, want [finance-emea]", got.Groups)
	}
}

// Each issuer's tokens verify only with that issuer's keys: the static
// key signing a token that names the provider (with the static kid, or
// the provider's), and the provider's key signing one that names the
// static issuer, are refused, and an unknown-kid token costs no fetch
// within MinRefresh.
func TestIssuerKeyConfusion(t *testing.T) {
	p := oidctest.Start(t)
	clock := newFakeClock()
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	people := newOIDC(t, p, clock)
	v, err := NewVerifier(Config{Issuer: testIssuer, Audience: testAudience, Keys: map[string]ed25519.PublicKey{"svc": pub},
		Leeway: 30 * time.Second, Now: clock.Now, OIDC: people})
	if err != nil {
		t.Fatal(err)
	}
	rsaPriv := p.PrivateKey("rsa-1").(*rsa.PrivateKey)
	claims := func(iss, aud string) jwt.MapClaims {
		return jwt.MapClaims{"iss": iss, "aud": aud, "sub": "dave", "groups": []string{"finance-emea"},
			"iat": clock.Now().Unix(), "exp": clock.Now().Add(time.Hour).Unix()}
	}
	fetches := people.KeyFetches()
	for _, tc := range []struct{ name, token, reason string }{
		{"static key, provider's iss, static kid", forge(t, jwt.SigningMethodEdDSA, "svc", claims(p.Issuer, oidctest.ClientID), priv), "unknown key id"},
		{"static key, provider's iss and kid", forge(t, jwt.SigningMethodEdDSA, "rsa-1", claims(p.Issuer, oidctest.ClientID), priv), "does not match key"},
		{"provider's key, static iss, provider's kid", forge(t, jwt.SigningMethodRS256, "rsa-1", claims(testIssuer, testAudience), rsaPriv), "unsupported algorithm"},
		{"provider's key, static iss, static kid", forge(t, jwt.SigningMethodRS256, "svc", claims(testIssuer, testAudience), rsaPriv), "unsupported algorithm"},
		{"provider's key, provider's iss, static audience", forge(t, jwt.SigningMethodRS256, "rsa-1", claims(p.Issuer, testAudience), rsaPriv), "wrong audience"},
	} {
		_, err := v.Verify(t.Context(), tc.token)
		wantRefused(t, tc.name, err, tc.reason)
	}
	if n := people.KeyFetches() - fetches; n != 0 {
		t.Fatalf("confused tokens fetched the key set %d times within MinRefresh", n)
	}
}

// RFC 7517 §4.5 lets a key set give one kid to keys of different types
// ("equivalent alternatives"): a provider moving from RSA to EC under the
// same kid publishes both. Each must verify its own tokens (its type
// still pins its algorithm); the later one must not hide the earlier.
func TestOIDCOneKidTwoKeyTypes(t *testing.T) {
	p := oidctest.Start(t)
	clock := newFakeClock()
	v := newOIDC(t, p, clock)
	rsaPriv := p.PrivateKey("rsa-1").(*rsa.PrivateKey)
	if err := p.Rotate("ES256", "rsa-1", true); err != nil {
		t.Fatal(err)
	}
	clock.Add(11 * time.Minute) // past MaxAge: the set is fetched again
	ecTok := p.IDToken(t, "alice")
	if _, err := v.Verify(t.Context(), ecTok); err != nil {
		t.Fatalf("ES256 token of the new key with the shared kid: %v", err)
	}
	rsTok := forge(t, jwt.SigningMethodRS256, "rsa-1", jwt.MapClaims{"iss": p.Issuer, "aud": oidctest.ClientID, "sub": "dave",
		"iat": clock.Now().Unix(), "exp": clock.Now().Add(time.Hour).Unix()}, rsaPriv)
	if _, err := v.Verify(t.Context(), rsTok); err != nil {
		t.Fatalf("RS256 token of the old key with the shared kid: %v", err)
	}
	// Still no confusion: HS256 or PS256 under the shared kid is refused.
	_, err := v.Verify(t.Context(), forge(t, jwt.SigningMethodPS256, "rsa-1", jwt.MapClaims{"iss": p.Issuer, "aud": oidctest.ClientID, "sub": "dave",
		"iat": clock.Now().Unix(), "exp": clock.Now().Add(time.Hour).Unix()}, rsaPriv))
	wantRefused(t, "PS256 under the shared kid", err, "unsupported algorithm")
}
