package webhook

import (
	"bytes"
	"container/heap"
	"context"
	"crypto/hmac"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"
)

// Verifier defaults.
const (
	DefaultTolerance       = 5 * time.Minute
	DefaultMaxBody         = 1 << 20
	DefaultReplayCacheSize = 100_000
	maxDeliveryID          = 128
)

// ReplayCache remembers the delivery ids a receiver has accepted.
//
// MarkSeen reports whether id was already recorded and not expired at now
// (an id is live while now < until); if it was not, it records id until
// the given time, atomically with the check. The Verifier calls it only
// for requests whose signature and timestamp were good, with until a
// second past the last instant the signed timestamp is within tolerance:
// from then on, a replay fails as ErrStale anyway.
//
// MemoryReplayCache serves one process. A receiver run as several
// processes or replicas must share one cache (for example Redis
// SET id 1 NX PXAT until), or a request replayed to another replica passes.
type ReplayCache interface {
	MarkSeen(ctx context.Context, id string, now, until time.Time) (seen bool, err error)
}

// Verifier checks deliveries on the receiving side. Use NewVerifier, or set
// Seen yourself: a Verifier without a ReplayCache refuses every request.
// A Verifier is safe for concurrent use.
type Verifier struct {
	Secrets   [][]byte         // any of them may have signed (several while rotating)
	Tolerance time.Duration    // how far the signed timestamp may be from Now; default 5 min
	Now       func() time.Time // default time.Now
	Seen      ReplayCache      // required
	MaxBody   int64            // default 1 MiB
}

// NewVerifier returns a Verifier with the defaults and a MemoryReplayCache
// of DefaultReplayCacheSize.
func NewVerifier(secrets ...[]byte) *Verifier {
	return &Verifier{Secrets: secrets, Seen: NewMemoryReplayCache(DefaultReplayCacheSize)}
}

// Verify reads r's body (at most MaxBody bytes) and verifies it; see
// VerifyPayload. The body is returned only when it verified.
func (v *Verifier) Verify(r *http.Request) ([]byte, Envelope, error) {
	limit := v.MaxBody
	if limit <= 0 {
		limit = DefaultMaxBody
	}
	if r.Body == nil {
		r.Body = http.NoBody
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, limit+1))
	if err != nil {
		return nil, Envelope{}, fmt.Errorf("%w: reading body: %v", ErrMalformed, err)
	}
	if int64(len(body)) > limit {
		return nil, Envelope{}, fmt.Errorf("%w: %w", ErrMalformed, errTooLarge)
	}
	env, err := v.VerifyPayload(r.Context(), r.Header, body)
	if err != nil {
		return nil, Envelope{}, err
	}
	return body, env, nil
}

var errTooLarge = errors.New("body too large")

// VerifyPayload verifies a delivery given its headers and raw body, in
// this order, and returns the decoded body:
//
//   - ErrMalformed: a header missing, repeated or malformed, or a body
//     that is not an Envelope;
//   - ErrBadSignature: no v1 matches HMAC-SHA256 under any secret
//     (compared in constant time), or the Tollgate-Delivery or
//     Tollgate-Event header differs from the signed body;
//   - ErrStale: the signed timestamp is more than Tolerance from Now,
//     either way;
//   - ErrReplay: the delivery id was accepted before (within Tolerance);
//     ErrReplayCacheFull when the cache cannot take another id.
func (v *Verifier) VerifyPayload(ctx context.Context, h http.Header, body []byte) (Envelope, error) {
	if len(v.Secrets) == 0 {
		return Envelope{}, errors.New("webhook: Verifier has no secrets")
	}
	if v.Seen == nil {
		return Envelope{}, errors.New("webhook: Verifier has no ReplayCache")
	}
	sigHeader, err := single(h, HeaderSignature)
	if err != nil {
		return Envelope{}, err
	}
	id, err := single(h, HeaderDelivery)
	if err != nil {
		return Envelope{}, err
	}
	if !validID(id) {
		return Envelope{}, fmt.Errorf("%w: %s is not 1..%d of [A-Za-z0-9_.:-]", ErrMalformed, HeaderDelivery, maxDeliveryID)
	}
	kind, err := single(h, HeaderEvent)
	if err != nil {
		return Envelope{}, err
	}
	sig, err := ParseSignatureHeader(sigHeader)
	if err != nil {
		return Envelope{}, err
	}
	if !v.signed(sig, body) {
		return Envelope{}, ErrBadSignature
	}
	now := v.now()
	tol := v.tolerance()
	signedAt := time.Unix(sig.Timestamp, 0)
	if skew := now.Sub(signedAt); skew > tol || skew < -tol {
		return Envelope{}, fmt.Errorf("%w: signed at %s, now %s", ErrStale, signedAt.UTC().Format(time.RFC3339), now.UTC().Format(time.RFC3339))
	}
	var env Envelope
	if err := json.Unmarshal(body, &env); err != nil {
		return Envelope{}, fmt.Errorf("%w: body: %v", ErrMalformed, err)
	}
	if env.DeliveryID != id {
		return Envelope{}, fmt.Errorf("%w: %s is not the signed delivery id", ErrBadSignature, HeaderDelivery)
	}
	if env.Event.Kind != kind {
		return Envelope{}, fmt.Errorf("%w: %s is not the signed event kind", ErrBadSignature, HeaderEvent)
	}
	// a second past the last instant the timestamp check passes
	seen, err := v.Seen.MarkSeen(ctx, id, now, signedAt.Add(tol+time.Second))
	if err != nil {
		return Envelope{}, err
	}
	if seen {
		return Envelope{}, fmt.Errorf("%w: %s", ErrReplay, id)
	}
	return env, nil
}

func (v *Verifier) signed(sig Signature, body []byte) bool {
	for _, k := range v.Secrets {
		want := Sign(k, sig.Timestamp, body)
		for _, got := range sig.V1 {
			if hmac.Equal(want, got) {
				return true
			}
		}
	}
	return false
}

func (v *Verifier) now() time.Time {
	if v.Now != nil {
		return v.Now()
	}
	return time.Now()
}

func (v *Verifier) tolerance() time.Duration {
	if v.Tolerance > 0 {
		return v.Tolerance
	}
	return DefaultTolerance
}

func single(h http.Header, name string) (string, error) {
	vs := h.Values(name)
	switch {
	case len(vs) == 0 || vs[0] == "":
		return "", fmt.Errorf("%w: no %s header", ErrMalformed, name)
	case len(vs) > 1:
		return "", fmt.Errorf("%w: %d %s headers", ErrMalformed, len(vs), name)
	}
	return vs[0], nil
}

func validID(id string) bool {
	if id == "" || len(id) > maxDeliveryID {
		return false
	}
	for _, c := range []byte(id) {
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '_', c == '.', c == ':', c == '-':
		default:
			return false
		}
	}
	return true
}

// Middleware verifies each request before next sees it. A verified
// request reaches next with its body restored and the Envelope in the
// context (EnvelopeFrom). A rejected one is answered with a short plain
// text reason: 400 malformed, 413 body too large, 401 bad signature or
// stale, 409 replay, 503 replay cache full (the sender retries), 500
// otherwise. Tollgate does not retry a 4xx.
func (v *Verifier) Middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, env, err := v.Verify(r)
		if err != nil {
			code := http.StatusInternalServerError
			switch {
			case errors.Is(err, errTooLarge):
				code = http.StatusRequestEntityTooLarge
			case errors.Is(err, ErrMalformed):
				code = http.StatusBadRequest
			case errors.Is(err, ErrBadSignature), errors.Is(err, ErrStale):
				code = http.StatusUnauthorized
			case errors.Is(err, ErrReplay):
				code = http.StatusConflict
			case errors.Is(err, ErrReplayCacheFull):
				w.Header().Set("Retry-After", "5")
				code = http.StatusServiceUnavailable
			}
			http.Error(w, err.Error(), code)
			return
		}
		r = r.WithContext(context.WithValue(r.Context(), envelopeKey{}, env))
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.ContentLength = int64(len(body))
		next.ServeHTTP(w, r)
	})
}

type envelopeKey struct{}

// EnvelopeFrom returns the Envelope that Middleware verified.
func EnvelopeFrom(ctx context.Context) (Envelope, bool) {
	env, ok := ctx.Value(envelopeKey{}).(Envelope)
	return env, ok
}

// MemoryReplayCache is a ReplayCache for one process, bounded to a number
// of ids. Expired ids are pruned as new ones arrive; when it is full of
// live ids it refuses the new one with ErrReplayCacheFull rather than
// forget a live one (which would let that one be replayed).
type MemoryReplayCache struct {
	max int

	mu     sync.Mutex
	until  map[string]time.Time
	expiry expiryHeap
}

// NewMemoryReplayCache returns a cache holding at most max live ids
// (DefaultReplayCacheSize when max ≤ 0).
func NewMemoryReplayCache(max int) *MemoryReplayCache {
	if max <= 0 {
		max = DefaultReplayCacheSize
	}
	return &MemoryReplayCache{max: max, until: make(map[string]time.Time)}
}

// MarkSeen implements ReplayCache.
func (c *MemoryReplayCache) MarkSeen(_ context.Context, id string, now, until time.Time) (bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for len(c.expiry) > 0 && !c.expiry[0].until.After(now) {
		e := heap.Pop(&c.expiry).(expiring)
		if u, ok := c.until[e.id]; ok && u.Equal(e.until) {
			delete(c.until, e.id)
		}
	}
	if u, ok := c.until[id]; ok && u.After(now) {
		return true, nil
	}
	if len(c.until) >= c.max {
		return false, ErrReplayCacheFull
	}
	c.until[id] = until
	heap.Push(&c.expiry, expiring{id: id, until: until})
	return false, nil
}

// Len returns the number of ids held, expired ones not yet pruned included.
func (c *MemoryReplayCache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.until)
}

type expiring struct {
	id    string
	until time.Time
}

type expiryHeap []expiring

func (h expiryHeap) Len() int           { return len(h) }
func (h expiryHeap) Less(i, j int) bool { return h[i].until.Before(h[j].until) }
func (h expiryHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *expiryHeap) Push(x any)        { *h = append(*h, x.(expiring)) }
func (h *expiryHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
