package identity

import (
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

// maxJWKSBytes bounds a JWKS (and a discovery document) read from an
// OpenID provider.
const maxJWKSBytes = 256 << 10

// pinnedAlg is the only algorithm key may verify, chosen by its type and
// never by a token: RSA of 2048 bits or more verifies RS256, EC P-256
// ES256, Ed25519 EdDSA. ok is false for any other key, for a key whose own
// "alg" names another algorithm, and for a key whose "use" is not "sig":
// such keys are dropped from the set.
func pinnedAlg(k jose.JSONWebKey) (alg string, ok bool) {
	switch pk := k.Key.(type) {
	case *rsa.PublicKey:
		if pk.N.BitLen() < 2048 {
			return "", false
		}
		alg = "RS256"
	case *ecdsa.PublicKey:
		// golang-jwt's ES256 checks only the signature's length, not the
		// key's curve: the curve is checked here.
		if pk.Curve != elliptic.P256() {
			return "", false
		}
		alg = "ES256"
	case ed25519.PublicKey:
		alg = algEdDSA
	default:
		return "", false
	}
	if k.Algorithm != "" && k.Algorithm != alg {
		return "", false
	}
	if k.Use != "" && k.Use != "sig" {
		return "", false
	}
	return alg, true
}

// pinnedKey is a JWKS key with the algorithm its type pins.
type pinnedKey struct {
	alg string
	key any
}

// errKeysUnavailable: the key set was never fetched.
var errKeysUnavailable = errors.New("signing keys unavailable")

// jwks is an OpenID provider's key set, cached. A known kid is served from
// the cache while it is younger than maxAge; an unknown kid (or a stale
// cache) fetches the set again, at most once per minRefresh whatever the
// outcome, so tokens with random kids cannot make it hammer the provider.
// A failed fetch keeps the keys it had (logged). Fetches are single-flight
// without holding mu over the request: a fetch that hangs (up to the
// client's timeout) holds up only the callers whose kid is unknown, never
// a token whose key is already cached — a stale known key is served while
// the set is fetched again.
type jwks struct {
	url        string
	client     *http.Client
	minRefresh time.Duration
	maxAge     time.Duration
	now        func() time.Time
	log        *slog.Logger

	mu        sync.Mutex
	keys      map[string][]pinnedKey // by kid; nil until a fetch succeeds
	fetchedAt time.Time              // last attempt
	okAt      time.Time              // last success
	fetches   int
	inflight  chan struct{} // closed when the fetch in flight ends; nil when none
}

// has reports whether kid is in the cached set, without fetching.
func (s *jwks) has(kid string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.keys[kid]) > 0
}

// lookup returns the keys kid names (RFC 7517 §4.5 lets keys of
// different types share a kid; each keeps the algorithm its type pins),
// fetching the set when kid is unknown
// or the cache is stale and the last attempt is older than minRefresh. A
// caller whose kid is unknown waits for a fetch in flight (or for ctx).
func (s *jwks) lookup(ctx context.Context, kid string) ([]pinnedKey, error) {
	s.mu.Lock()
	now := s.now()
	k, known := s.keys[kid], len(s.keys[kid]) > 0
	if known && now.Sub(s.okAt) <= s.maxAge {
		s.mu.Unlock()
		return k, nil
	}
	wait := s.inflight
	if wait == nil && (s.fetchedAt.IsZero() || now.Sub(s.fetchedAt) >= s.minRefresh) {
		done := s.beginLocked()
		s.mu.Unlock()
		if err := s.run(ctx, done); err != nil {
			s.log.Warn("OIDC signing keys not refreshed; the cached ones stay in use", "jwks", s.url, "error", err)
		}
		s.mu.Lock()
	} else if wait != nil && !known {
		s.mu.Unlock()
		select {
		case <-wait:
		case <-ctx.Done():
			return nil, fmt.Errorf("%w: %w", errKeysUnavailable, ctx.Err())
		}
		s.mu.Lock()
	}
	defer s.mu.Unlock()
	if s.keys == nil {
		return nil, errKeysUnavailable
	}
	if k := s.keys[kid]; len(k) > 0 {
		return k, nil
	}
	return nil, errKeyUnknown
}

// fetch fetches the set now (at start: a failure fails the start).
func (s *jwks) fetch(ctx context.Context) error {
	s.mu.Lock()
	if wait := s.inflight; wait != nil {
		s.mu.Unlock()
		<-wait
		s.mu.Lock()
	}
	done := s.beginLocked()
	s.mu.Unlock()
	return s.run(ctx, done)
}

// beginLocked records a fetch attempt (failures count toward the rate
// limit too) and marks it in flight; run ends it.
func (s *jwks) beginLocked() chan struct{} {
	s.fetches++
	s.fetchedAt = s.now()
	s.inflight = make(chan struct{})
	return s.inflight
}

// run fetches the set, stores it on success, and ends the fetch begun
// with done, waking its waiters.
func (s *jwks) run(ctx context.Context, done chan struct{}) error {
	keys, err := s.get(ctx)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err == nil {
		s.keys, s.okAt = keys, s.fetchedAt
	}
	s.inflight = nil
	close(done)
	return err
}

// get fetches and reads the set, without the lock.
func (s *jwks) get(ctx context.Context) (map[string][]pinnedKey, error) {
	var raw struct {
		Keys []json.RawMessage `json:"keys"`
	}
	// The fetch serves every caller waiting for it: one caller giving up
	// must not abort it (and spend the refresh budget); the client's
	// timeout bounds it.
	if err := getJSON(context.WithoutCancel(ctx), s.client, s.url, &raw); err != nil {
		return nil, err
	}
	keys := make(map[string][]pinnedKey, len(raw.Keys))
	for _, r := range raw.Keys {
		var k jose.JSONWebKey
		// Unsupported key types, private keys, kid-less keys and keys whose
		// type pins no algorithm we accept are skipped, not fatal.
		if json.Unmarshal(r, &k) != nil || k.KeyID == "" || !k.IsPublic() {
			continue
		}
		if alg, ok := pinnedAlg(k); ok {
			keys[k.KeyID] = append(keys[k.KeyID], pinnedKey{alg: alg, key: k.Key})
		}
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("jwks %s: no usable signing key (RSA ≥ 2048 bits, EC P-256 or Ed25519, use sig)", s.url)
	}
	return keys, nil
}

// getJSON GETs url and decodes its JSON body, at most maxJWKSBytes.
func getJSON(ctx context.Context, client *http.Client, url string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return fmt.Errorf("GET %s: %w", url, err)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("GET %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxJWKSBytes+1))
	if err != nil {
		return fmt.Errorf("GET %s: %w", url, err)
	}
	if len(body) > maxJWKSBytes {
		return fmt.Errorf("GET %s: body over %d bytes", url, maxJWKSBytes)
	}
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("GET %s: %w", url, err)
	}
	return nil
}
