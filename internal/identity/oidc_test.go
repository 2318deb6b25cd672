package identity

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/tollgate-dev/tollgate/internal/oidctest"
)

// fakeClock is a clock a test moves; it starts at the real time, since the
// provider stamps its tokens with that.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newFakeClock() *fakeClock { return &fakeClock{t: time.Now()} }
func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}
func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func newOIDC(t *testing.T, p *oidctest.Provider, clock *fakeClock, mod ...func(*OIDCConfig)) *OIDCVerifier {
	t.Helper()
	cfg := OIDCConfig{Issuer: p.Issuer, Audience: oidctest.ClientID, Leeway: 30 * time.Second, Now: clock.Now}
	for _, m := range mod {
		m(&cfg)
	}
	v, err := NewOIDCVerifier(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func wantRefused(t *testing.T, what string, err error, reason string) {
	t.Helper()
	if !errors.Is(err, ErrUnauthenticated) {
		t.Fatalf("%s: err %v, want unauthenticated", what, err)
	}
	if !strings.Contains(err.Error(), reason) {
		t.Fatalf("%s: err %q, want it to say %q", what, err, reason)
	}
}

func TestOIDCAcceptsRS256AndES256AndFollowsRotation(t *testing.T) {
	p := oidctest.Start(t)
	p.SetGroups("dave", "finance-emea", "staff", "finance-emea")
	clock := newFakeClock()
	v := newOIDC(t, p, clock)

	rsTok := p.IDToken(t, "dave")
	got, err := v.Verify(t.Context(), rsTok)
	if err != nil {
		t.Fatalf("RS256 ID token: %v", err)
	}
	want := Principal{Subject: "dave", Kind: KindPerson, Issuer: p.Issuer, Groups: []string{"finance-emea", "staff"}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("RS256: got %+v, want %+v", got, want)
	}

	// The provider starts signing with a new EC key it publishes beside
	// the old one: its kid is unknown, so the set is fetched again (once
	// MinRefresh has passed since the last fetch).
	if err := p.Rotate("ES256", "ec-2", true); err != nil {
		t.Fatal(err)
	}
	esTok := p.IDToken(t, "dave")
	_, err = v.Verify(t.Context(), esTok)
	wantRefused(t, "ES256 inside MinRefresh of the last fetch", err, `unknown key id "ec-2"`)
	clock.Add(31 * time.Second)
	if _, err := v.Verify(t.Context(), esTok); err != nil {
		t.Fatalf("ES256 after rotation: %v", err)
	}
	if _, err := v.Verify(t.Context(), rsTok); err != nil {
		t.Fatalf("RS256 while its key is still published: %v", err)
	}

	// The provider withdraws both keys: once a token with the newest kid
	// has refreshed the set, tokens of withdrawn keys are refused, the
	// cached RS256 one included.
	if err := p.Rotate("ES256", "ec-3", false); err != nil {
		t.Fatal(err)
	}
	clock.Add(31 * time.Second)
	if _, err := v.Verify(t.Context(), p.IDToken(t, "dave")); err != nil {
		t.Fatalf("ec-3: %v", err)
	}
	_, err = v.Verify(t.Context(), rsTok)
	wantRefused(t, "RS256 token of a withdrawn key", err, `unknown key id "rsa-1": the identity provider no longer publishes it; sign in again`)
	_, err = v.Verify(t.Context(), esTok)
	wantRefused(t, "ES256 token of a withdrawn key", err, `unknown key id "ec-2"`)
}

// forge signs claims with key under method, with the given kid.
func forge(t *testing.T, method jwt.SigningMethod, kid string, claims jwt.MapClaims, key any) string {
	t.Helper()
	tok := jwt.NewWithClaims(method, claims)
	tok.Header["kid"] = kid
	s, err := tok.SignedString(key)
	if err != nil {
		t.Fatalf("forge %s: %v", method.Alg(), err)
	}
	return s
}

func TestOIDCRefusesAlgorithmConfusionAndBadClaims(t *testing.T) {
	p := oidctest.Start(t)
	clock := newFakeClock()
	v := newOIDC(t, p, clock)
	rsaPriv := p.PrivateKey("rsa-1").(*rsa.PrivateKey)
	claims := func() jwt.MapClaims {
		return jwt.MapClaims{"iss": p.Issuer, "aud": oidctest.ClientID, "sub": "dave",
			"iat": clock.Now().Unix(), "exp": clock.Now().Add(time.Hour).Unix()}
	}
	// The genuine article, forged here with the provider's own key, passes:
	// so each refusal below is down to the one thing changed.
	if _, err := v.Verify(t.Context(), forge(t, jwt.SigningMethodRS256, "rsa-1", claims(), rsaPriv)); err != nil {
		t.Fatalf("control token: %v", err)
	}
	pubDER, err := x509.MarshalPKIXPublicKey(&rsaPriv.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	ec, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	none := forge(t, jwt.SigningMethodNone, "rsa-1", claims(), jwt.UnsafeAllowNoneSignatureType)
	for _, tc := range []struct {
		name, token, reason string
	}{
		{"HS256 keyed with the RSA public key", forge(t, jwt.SigningMethodHS256, "rsa-1", claims(), pubDER), `unsupported algorithm "HS256"`},
		{"alg none", none, `unsupported algorithm "none"`},
		{"ES256 header on an RSA kid", forge(t, jwt.SigningMethodES256, "rsa-1", claims(), ec), `algorithm "ES256" does not match key "rsa-1" (its type allows only RS256`},
		{"PS256 with the RSA key", forge(t, jwt.SigningMethodPS256, "rsa-1", claims(), rsaPriv), `unsupported algorithm "PS256"`},
		{"no kid", forge(t, jwt.SigningMethodRS256, "", claims(), rsaPriv), "missing key id"},
	} {
		_, err := v.Verify(t.Context(), tc.token)
		wantRefused(t, tc.name, err, tc.reason)
	}

	real := p.IDToken(t, "dave")
	other := newOIDC(t, p, clock, func(c *OIDCConfig) { c.Audience = "another-app" })
	_, err = other.Verify(t.Context(), real)
	wantRefused(t, "wrong audience", err, "wrong audience: the token was not issued for this server's client id")

	clock.Add(2 * time.Hour) // zitadel's ID tokens last an hour
	_, err = v.Verify(t.Context(), real)
	wantRefused(t, "expired", err, "token expired: sign in again")
}

func TestOIDCUnknownKidsFetchAtMostOncePerMinRefresh(t *testing.T) {
	p := oidctest.Start(t)
	clock := newFakeClock()
	v := newOIDC(t, p, clock, func(c *OIDCConfig) { c.MinRefresh = 30 * time.Second })
	rsaPriv := p.PrivateKey("rsa-1").(*rsa.PrivateKey)
	claims := jwt.MapClaims{"iss": p.Issuer, "aud": oidctest.ClientID, "sub": "dave",
		"iat": clock.Now().Unix(), "exp": clock.Now().Add(time.Hour).Unix()}
	storm := func() {
		var wg sync.WaitGroup
		for i := range 50 {
			wg.Go(func() {
				_, err := v.Verify(t.Context(), forge(t, jwt.SigningMethodRS256, fmt.Sprintf("random-%d", i), claims, rsaPriv))
				if !errors.Is(err, ErrUnauthenticated) {
					t.Errorf("unknown kid %d: %v", i, err)
				}
			})
		}
		wg.Wait()
	}
	base, served := v.KeyFetches(), p.KeyFetches()
	storm()
	if n := v.KeyFetches() - base; n != 0 {
		t.Fatalf("50 unknown kids right after the start-up fetch: %d fetches, want 0", n)
	}
	clock.Add(31 * time.Second)
	storm()
	if n := v.KeyFetches() - base; n != 1 {
		t.Fatalf("50 unknown kids after MinRefresh: %d fetches, want 1", n)
	}
	if n := p.KeyFetches() - served; n != 1 {
		t.Fatalf("the provider served the key set %d times, want 1", n)
	}
}

func TestOIDCPersonAndGroupsClaims(t *testing.T) {
	p := oidctest.Start(t)
	clock := newFakeClock()
	byEmail := newOIDC(t, p, clock, func(c *OIDCConfig) { c.PersonClaim = "email"; c.GroupsClaim = "roles" })

	p.SetClaim("dave", "email", "dave@acme.test")
	p.SetClaim("dave", "email_verified", true)
	p.SetClaim("dave", "roles", "finance-emea") // one group as a string
	got, err := byEmail.Verify(t.Context(), p.IDToken(t, "dave"))
	if err != nil {
		t.Fatal(err)
	}
	if got.Subject != "dave@acme.test" || !reflect.DeepEqual(got.Groups, []string{"finance-emea"}) {
		t.Fatalf("by email: %+v", got)
	}

	p.SetClaim("dave", "email_verified", false)
	_, err = byEmail.Verify(t.Context(), p.IDToken(t, "dave"))
	wantRefused(t, "unverified email", err, "email is not verified")

	p.SetClaim("dave", "email_verified", true)
	p.SetClaim("dave", "email", "group:finance")
	_, err = byEmail.Verify(t.Context(), p.IDToken(t, "dave"))
	wantRefused(t, "a person named like a group", err, `email claim "group:finance" starts with "group:"`)
	p.SetClaim("dave", "email", "role:finance-1m")
	_, err = byEmail.Verify(t.Context(), p.IDToken(t, "dave"))
	wantRefused(t, "a person named like a role", err, `starts with "role:"`)

	p.SetClaim("dave", "email", "dave@acme.test")
	p.SetClaim("dave", "roles", map[string]any{"finance": true})
	_, err = byEmail.Verify(t.Context(), p.IDToken(t, "dave"))
	wantRefused(t, "groups as an object", err, "roles claim is neither a string nor a list of strings")
	many := make([]string, 300)
	for i := range many {
		many[i] = fmt.Sprint("g", i)
	}
	p.SetClaim("dave", "roles", many)
	_, err = byEmail.Verify(t.Context(), p.IDToken(t, "dave"))
	wantRefused(t, "too many groups", err, "lists 300 groups; at most 256")

	// A subject that is a group name, by the default person claim.
	p.AddUser("group:finance")
	_, err = newOIDC(t, p, clock).Verify(t.Context(), p.IDToken(t, "group:finance"))
	wantRefused(t, "sub group:finance", err, `sub claim "group:finance" starts with "group:"`)
}

func TestRoutingByIssuer(t *testing.T) {
	p := oidctest.Start(t)
	p.SetGroups("dave", "finance-emea")
	clock := newFakeClock()
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	v, err := NewVerifier(Config{Issuer: testIssuer, Audience: testAudience, Keys: map[string]ed25519.PublicKey{"svc": pub},
		Leeway: 30 * time.Second, Now: clock.Now, OIDC: newOIDC(t, p, clock)})
	if err != nil {
		t.Fatal(err)
	}
	got, err := v.Verify(t.Context(), p.IDToken(t, "dave"))
	if err != nil || got.Subject != "dave" || !reflect.DeepEqual(got.Groups, []string{"finance-emea"}) {
		t.Fatalf("OIDC token through the router: %+v, %v", got, err)
	}

	// A service token of the static keys claiming groups gets none: groups
	// come only from the OpenID provider.
	svc := forge(t, jwt.SigningMethodEdDSA, "svc", jwt.MapClaims{"iss": testIssuer, "aud": testAudience, "sub": "dave",
		"groups": []string{"finance-emea"}, "iat": clock.Now().Unix(), "exp": clock.Now().Add(time.Hour).Unix()}, priv)
	got, err = v.Verify(t.Context(), svc)
	if err != nil || got.Subject != "dave" || got.Groups != nil {
		t.Fatalf("static-key token claiming groups: %+v, %v (want dave with no groups)", got, err)
	}
	bad := forge(t, jwt.SigningMethodEdDSA, "svc", jwt.MapClaims{"iss": testIssuer, "aud": testAudience, "sub": "role:finance",
		"iat": clock.Now().Unix(), "exp": clock.Now().Add(time.Hour).Unix()}, priv)
	_, err = v.Verify(t.Context(), bad)
	wantRefused(t, "static sub role:finance", err, `sub claim starts with "role:"`)

	// Another provider's token: an issuer this server does not know.
	q := oidctest.Start(t)
	_, err = v.Verify(t.Context(), q.IDToken(t, "dave"))
	wantRefused(t, "unknown issuer", err, fmt.Sprintf("unknown issuer %q: this server accepts tokens of %s", q.Issuer, p.Issuer))

	if _, err := NewVerifier(Config{Issuer: p.Issuer, Audience: testAudience, OIDC: newOIDC(t, p, clock)}); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("static issuer == OIDC issuer: %v", err)
	}
}

func TestOIDCDiscoveryFailsTheStart(t *testing.T) {
	p := oidctest.Start(t)
	for _, tc := range []struct{ issuer, says string }{
		{"http://127.0.0.1:1", "is --oidc-issuer right and the provider reachable?"},
		{p.Issuer + "/", "the provider calls itself " + fmt.Sprintf("%q", p.Issuer)},
	} {
		_, err := NewOIDCVerifier(t.Context(), OIDCConfig{Issuer: tc.issuer, Audience: oidctest.ClientID})
		if err == nil || !strings.Contains(err.Error(), tc.says) {
			t.Fatalf("issuer %s: err %v, want it to say %q", tc.issuer, err, tc.says)
		}
	}
}
