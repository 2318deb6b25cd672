package identity

import (
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const (
	testIssuer   = "https://tollgate.test"
	testAudience = "tollgate-api"
)

// t0 is the fixed "now" of every test verifier.
var t0 = time.Unix(1_800_000_000, 0)

func newKey(t *testing.T) (ed25519.PublicKey, ed25519.PrivateKey) {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return pub, priv
}

func newVerifier(t *testing.T, keys map[string]ed25519.PublicKey) *Verifier {
	t.Helper()
	v, err := NewVerifier(Config{
		Issuer:   testIssuer,
		Audience: testAudience,
		Keys:     keys,
		Leeway:   30 * time.Second,
		Now:      func() time.Time { return t0 },
	})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// goodClaims are valid claims at t0; tests delete or change entries.
func goodClaims() jwt.MapClaims {
	return jwt.MapClaims{
		"iss": testIssuer,
		"aud": testAudience,
		"sub": "alice",
		"iat": t0.Add(-time.Minute).Unix(),
		"nbf": t0.Add(-time.Minute).Unix(),
		"exp": t0.Add(5 * time.Minute).Unix(),
	}
}

func with(c jwt.MapClaims, k string, v any) jwt.MapClaims {
	if v == nil {
		delete(c, k)
	} else {
		c[k] = v
	}
	return c
}

// sign signs claims with method and key, setting kid when not empty.
func sign(t *testing.T, method jwt.SigningMethod, key any, kid string, claims jwt.MapClaims) string {
	t.Helper()
	tok := jwt.NewWithClaims(method, claims)
	if kid != "" {
		tok.Header["kid"] = kid
	}
	s, err := tok.SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// craft builds a compact JWS by hand from a header, claims and raw signature.
func craft(t *testing.T, header map[string]any, claims jwt.MapClaims, sig []byte) string {
	t.Helper()
	h, err := json.Marshal(header)
	if err != nil {
		t.Fatal(err)
	}
	c, err := json.Marshal(claims)
	if err != nil {
		t.Fatal(err)
	}
	enc := base64.RawURLEncoding
	return enc.EncodeToString(h) + "." + enc.EncodeToString(c) + "." + enc.EncodeToString(sig)
}

func TestVerify(t *testing.T) {
	pub1, priv1 := newKey(t)
	pub2, priv2 := newKey(t)
	_, other := newKey(t)
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	ecKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	one := newVerifier(t, map[string]ed25519.PublicKey{"k1": pub1})
	two := newVerifier(t, map[string]ed25519.PublicKey{"k1": pub1, "k2": pub2})

	minted, err := Mint(priv1, "k1", testIssuer, testAudience, "alice", 5*time.Minute, t0)
	if err != nil {
		t.Fatal(err)
	}
	tampered := func() string {
		parts := strings.Split(sign(t, jwt.SigningMethodEdDSA, priv1, "k1", goodClaims()), ".")
		c, _ := json.Marshal(with(goodClaims(), "sub", "mallory"))
		parts[1] = base64.RawURLEncoding.EncodeToString(c)
		return strings.Join(parts, ".")
	}()
	alice := Principal{Subject: "alice", Kind: KindPerson, Issuer: testIssuer}

	cases := []struct {
		name   string
		v      *Verifier
		token  string
		want   Principal
		reason string // "" means the token is accepted
	}{
		{name: "valid", v: one, token: sign(t, jwt.SigningMethodEdDSA, priv1, "k1", goodClaims()), want: alice},
		{name: "valid minted", v: one, token: minted, want: alice},
		{name: "valid without kid, one key", v: one, token: sign(t, jwt.SigningMethodEdDSA, priv1, "", goodClaims()), want: alice},
		{name: "valid second key by kid", v: two, token: sign(t, jwt.SigningMethodEdDSA, priv2, "k2", goodClaims()), want: alice},
		{name: "valid service kind", v: one, token: sign(t, jwt.SigningMethodEdDSA, priv1, "k1", with(goodClaims(), "kind", "service")),
			want: Principal{Subject: "alice", Kind: KindService, Issuer: testIssuer}},
		{name: "valid audience list", v: one, token: sign(t, jwt.SigningMethodEdDSA, priv1, "k1", with(goodClaims(), "aud", []string{"other", testAudience})), want: alice},
		{name: "expired within leeway", v: one, token: sign(t, jwt.SigningMethodEdDSA, priv1, "k1", with(goodClaims(), "exp", t0.Add(-10*time.Second).Unix())), want: alice},
		{name: "nbf within leeway", v: one, token: sign(t, jwt.SigningMethodEdDSA, priv1, "k1", with(goodClaims(), "nbf", t0.Add(10*time.Second).Unix())), want: alice},
		{name: "iat within leeway", v: one, token: sign(t, jwt.SigningMethodEdDSA, priv1, "k1", with(goodClaims(), "iat", t0.Add(10*time.Second).Unix())), want: alice},

		{name: "expired", v: one, token: sign(t, jwt.SigningMethodEdDSA, priv1, "k1", with(goodClaims(), "exp", t0.Add(-time.Minute).Unix())), reason: "token expired"},
		{name: "not yet valid", v: one, token: sign(t, jwt.SigningMethodEdDSA, priv1, "k1", with(goodClaims(), "nbf", t0.Add(time.Minute).Unix())), reason: "token not yet valid"},
		{name: "issued in the future", v: one, token: sign(t, jwt.SigningMethodEdDSA, priv1, "k1", with(goodClaims(), "iat", t0.Add(time.Minute).Unix())), reason: "token used before issued"},
		{name: "wrong issuer", v: one, token: sign(t, jwt.SigningMethodEdDSA, priv1, "k1", with(goodClaims(), "iss", "https://evil.test")), reason: "wrong issuer"},
		{name: "missing issuer", v: one, token: sign(t, jwt.SigningMethodEdDSA, priv1, "k1", with(goodClaims(), "iss", nil)), reason: "missing iss claim"},
		{name: "wrong audience", v: one, token: sign(t, jwt.SigningMethodEdDSA, priv1, "k1", with(goodClaims(), "aud", "another-api")), reason: "wrong audience"},
		{name: "missing audience", v: one, token: sign(t, jwt.SigningMethodEdDSA, priv1, "k1", with(goodClaims(), "aud", nil)), reason: "missing aud claim"},
		{name: "missing exp", v: one, token: sign(t, jwt.SigningMethodEdDSA, priv1, "k1", with(goodClaims(), "exp", nil)), reason: "missing exp claim"},
		{name: "missing sub", v: one, token: sign(t, jwt.SigningMethodEdDSA, priv1, "k1", with(goodClaims(), "sub", nil)), reason: "missing sub claim"},
		{name: "empty sub", v: one, token: sign(t, jwt.SigningMethodEdDSA, priv1, "k1", with(goodClaims(), "sub", "")), reason: "missing sub claim"},
		{name: "executor kind", v: one, token: sign(t, jwt.SigningMethodEdDSA, priv1, "k1", with(goodClaims(), "kind", "executor")), reason: "executor identities must use mtls"},
		{name: "unknown kind", v: one, token: sign(t, jwt.SigningMethodEdDSA, priv1, "k1", with(goodClaims(), "kind", "admin")), reason: "unsupported principal kind"},

		{name: "alg none", v: one, token: craft(t, map[string]any{"alg": "none", "typ": "JWT"}, goodClaims(), nil), reason: "unsupported algorithm EdDSA only"},
		{name: "alg none with kid", v: one, token: craft(t, map[string]any{"alg": "none", "typ": "JWT", "kid": "k1"}, goodClaims(), nil), reason: "unsupported algorithm EdDSA only"},
		{name: "alg None", v: one, token: craft(t, map[string]any{"alg": "None", "typ": "JWT"}, goodClaims(), nil), reason: "unsupported algorithm EdDSA only"},
		{name: "HS256 with public key as secret", v: one, token: sign(t, jwt.SigningMethodHS256, []byte(pub1), "k1", goodClaims()), reason: "unsupported algorithm EdDSA only"},
		{name: "HS256 with public key as secret, no kid", v: one, token: sign(t, jwt.SigningMethodHS256, []byte(pub1), "", goodClaims()), reason: "unsupported algorithm EdDSA only"},
		{name: "RS256", v: one, token: sign(t, jwt.SigningMethodRS256, rsaKey, "k1", goodClaims()), reason: "unsupported algorithm EdDSA only"},
		{name: "ES256", v: one, token: sign(t, jwt.SigningMethodES256, ecKey, "k1", goodClaims()), reason: "unsupported algorithm EdDSA only"},
		{name: "unknown alg", v: one, token: craft(t, map[string]any{"alg": "XYZ", "kid": "k1"}, goodClaims(), []byte("sig")), reason: "unsupported algorithm EdDSA only"},
		{name: "no alg", v: one, token: craft(t, map[string]any{"kid": "k1"}, goodClaims(), []byte("sig")), reason: "unsupported algorithm EdDSA only"},

		{name: "signed by another key", v: one, token: sign(t, jwt.SigningMethodEdDSA, other, "k1", goodClaims()), reason: "invalid signature"},
		{name: "signed by the other configured key", v: two, token: sign(t, jwt.SigningMethodEdDSA, priv2, "k1", goodClaims()), reason: "invalid signature"},
		{name: "tampered payload", v: one, token: tampered, reason: "invalid signature"},
		{name: "empty signature", v: one, token: craft(t, map[string]any{"alg": "EdDSA", "kid": "k1"}, goodClaims(), nil), reason: "invalid signature"},
		{name: "unknown kid", v: one, token: sign(t, jwt.SigningMethodEdDSA, priv1, "k9", goodClaims()), reason: "unknown key id"},
		{name: "kid not a string", v: one, token: craft(t, map[string]any{"alg": "EdDSA", "kid": 1}, goodClaims(), []byte("sig")), reason: "unknown key id"},
		{name: "no kid, two keys", v: two, token: sign(t, jwt.SigningMethodEdDSA, priv1, "", goodClaims()), reason: "missing key id"},
		{name: "critical header", v: one, token: func() string {
			tok := jwt.NewWithClaims(jwt.SigningMethodEdDSA, goodClaims())
			tok.Header["kid"] = "k1"
			tok.Header["crit"] = []string{"exp"}
			s, err := tok.SignedString(priv1)
			if err != nil {
				t.Fatal(err)
			}
			return s
		}(), reason: "unsupported critical header"},

		{name: "garbage", v: one, token: "not a token", reason: "malformed token"},
		{name: "garbage segments", v: one, token: "a.b.c", reason: "malformed token"},
		{name: "too many segments", v: one, token: minted + ".x", reason: "malformed token"},
		{name: "trailing newline", v: one, token: minted + "\n", reason: "malformed token"},
		{name: "empty", v: one, token: "", reason: "missing token"},
		{name: "huge", v: one, token: strings.Repeat("a", maxTokenBytes+1), reason: "token too large"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.v.Verify(t.Context(), tc.token)
			if tc.reason == "" {
				if err != nil {
					t.Fatalf("Verify: %v", err)
				}
				if !reflect.DeepEqual(got, tc.want) {
					t.Fatalf("Principal = %+v, want %+v", got, tc.want)
				}
				return
			}
			if err == nil {
				t.Fatalf("Verify accepted the token as %+v, want %q", got, tc.reason)
			}
			if !errors.Is(err, ErrUnauthenticated) {
				t.Errorf("error %v does not wrap ErrUnauthenticated", err)
			}
			if want := "unauthenticated: " + tc.reason; err.Error() != want {
				t.Errorf("error = %q, want %q", err, want)
			}
			if !reflect.DeepEqual(got, Principal{}) {
				t.Errorf("Principal on failure = %+v, want zero", got)
			}
			if len(tc.token) > 8 && strings.Contains(err.Error(), tc.token) {
				t.Errorf("error contains the token")
			}
		})
	}
}

// The Verifier copies its keys: changing the config map afterwards changes
// nothing.
func TestVerifierCopiesKeys(t *testing.T) {
	pub, priv := newKey(t)
	keys := map[string]ed25519.PublicKey{"k1": pub}
	v := newVerifier(t, keys)
	tok := sign(t, jwt.SigningMethodEdDSA, priv, "k1", goodClaims())
	otherPub, _ := newKey(t)
	copy(keys["k1"], otherPub)
	delete(keys, "k1")
	if _, err := v.Verify(t.Context(), tok); err != nil {
		t.Fatalf("Verify after mutating the config keys: %v", err)
	}
}

func TestNewVerifierConfig(t *testing.T) {
	pub, _ := newKey(t)
	good := func() Config {
		return Config{Issuer: testIssuer, Audience: testAudience, Keys: map[string]ed25519.PublicKey{"k1": pub}}
	}
	if _, err := NewVerifier(good()); err != nil {
		t.Fatalf("good config: %v", err)
	}
	cases := map[string]func(*Config){
		"no issuer":     func(c *Config) { c.Issuer = "" },
		"no audience":   func(c *Config) { c.Audience = "" },
		"no keys":       func(c *Config) { c.Keys = nil },
		"empty kid":     func(c *Config) { c.Keys = map[string]ed25519.PublicKey{"": pub} },
		"short key":     func(c *Config) { c.Keys = map[string]ed25519.PublicKey{"k1": pub[:16]} },
		"negative skew": func(c *Config) { c.Leeway = -time.Second },
	}
	for name, mutate := range cases {
		t.Run(name, func(t *testing.T) {
			c := good()
			mutate(&c)
			if _, err := NewVerifier(c); !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("NewVerifier = %v, want ErrInvalidConfig", err)
			}
		})
	}
}

// With Now unset the verifier uses the wall clock.
func TestVerifierDefaultClock(t *testing.T) {
	pub, priv := newKey(t)
	v, err := NewVerifier(Config{Issuer: testIssuer, Audience: testAudience, Keys: map[string]ed25519.PublicKey{"k1": pub}})
	if err != nil {
		t.Fatal(err)
	}
	fresh, _ := Mint(priv, "k1", testIssuer, testAudience, "alice", time.Hour, time.Now())
	if _, err := v.Verify(t.Context(), fresh); err != nil {
		t.Fatalf("fresh token: %v", err)
	}
	old, _ := Mint(priv, "k1", testIssuer, testAudience, "alice", time.Hour, time.Now().Add(-2*time.Hour))
	if _, err := v.Verify(t.Context(), old); err == nil || err.Error() != "unauthenticated: token expired" {
		t.Fatalf("old token: %v, want token expired", err)
	}
}

func TestPrincipalContext(t *testing.T) {
	ctx := context.Background()
	if p, ok := FromContext(ctx); ok {
		t.Fatalf("empty context gave %+v", p)
	}
	want := Principal{Subject: "alice", Kind: KindPerson, Issuer: testIssuer}
	got, ok := FromContext(WithPrincipal(ctx, want))
	if !ok || !reflect.DeepEqual(got, want) {
		t.Fatalf("FromContext = %+v, %v; want %+v, true", got, ok, want)
	}
	if p, ok := FromContext(WithPrincipal(ctx, Principal{})); ok {
		t.Fatalf("zero Principal counted as authenticated: %+v", p)
	}
	replaced := Principal{Subject: "bob", Kind: KindService, Issuer: testIssuer}
	if got, _ := FromContext(WithPrincipal(WithPrincipal(ctx, want), replaced)); !reflect.DeepEqual(got, replaced) {
		t.Fatalf("FromContext after replacing = %+v, want %+v", got, replaced)
	}
}

func TestMintArgs(t *testing.T) {
	_, priv := newKey(t)
	cases := map[string]func() (string, error){
		"short key":   func() (string, error) { return Mint(priv[:10], "k", testIssuer, testAudience, "a", time.Hour, t0) },
		"no issuer":   func() (string, error) { return Mint(priv, "k", "", testAudience, "a", time.Hour, t0) },
		"no audience": func() (string, error) { return Mint(priv, "k", testIssuer, "", "a", time.Hour, t0) },
		"no subject":  func() (string, error) { return Mint(priv, "k", testIssuer, testAudience, "", time.Hour, t0) },
		"zero ttl":    func() (string, error) { return Mint(priv, "k", testIssuer, testAudience, "a", 0, t0) },
	}
	for name, mint := range cases {
		if _, err := mint(); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%s: Mint = %v, want ErrInvalidConfig", name, err)
		}
	}
}
