package identity

import (
	"crypto/ed25519"
	"errors"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// A remembered token is accepted only inside the window its claims allow:
// once the clock leaves it, Verify answers as if it had never seen it.
func TestVerifiedTokenCacheKeepsTheClaimsWindow(t *testing.T) {
	pub, priv := newKey(t)
	now := t0
	v, err := NewVerifier(Config{Issuer: testIssuer, Audience: testAudience, Keys: map[string]ed25519.PublicKey{"k1": pub},
		Leeway: 30 * time.Second, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	tok := sign(t, jwt.SigningMethodEdDSA, priv, "k1", with(goodClaims(), "nbf", t0.Add(time.Minute).Unix()))
	cases := []struct {
		at time.Time
		ok bool
	}{
		{t0, false},                                    // nbf is a minute ahead, beyond the leeway
		{t0.Add(30 * time.Second), true},               // nbf less the leeway
		{t0.Add(time.Minute), true},                    // remembered from here on
		{t0.Add(30 * time.Second), true},               // still inside the window
		{t0.Add(29 * time.Second), false},              // before it, although remembered
		{t0.Add(5*time.Minute + 30*time.Second), true}, // exp plus the leeway
		{t0.Add(5*time.Minute + 31*time.Second), false},
		{t0.Add(2 * time.Minute), true},
	}
	for _, c := range cases {
		now = c.at
		p, err := v.Verify(t.Context(), tok)
		switch {
		case c.ok && (err != nil || p.Subject != "alice"):
			t.Errorf("at t0%+v: %v %+v", c.at.Sub(t0), err, p)
		case !c.ok && !errors.Is(err, ErrUnauthenticated):
			t.Errorf("at t0%+v: accepted", c.at.Sub(t0))
		}
	}
	// A different token (one byte of the signature changed) is never taken
	// for a remembered one.
	bad := []byte(tok)
	if bad[len(bad)-2] == 'A' {
		bad[len(bad)-2] = 'B'
	} else {
		bad[len(bad)-2] = 'A'
	}
	if _, err := v.Verify(t.Context(), string(bad)); !errors.Is(err, ErrUnauthenticated) {
		t.Fatalf("a forged signature was accepted: %v", err)
	}
}
