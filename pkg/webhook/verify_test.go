package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

var (
	t0        = time.Date(2026, 12, 31, 12, 0, 0, 0, time.UTC)
	secretA   = []byte("secret-A-0123456789abcdef")
	secretB   = []byte("secret-B-0123456789abcdef")
	secretBad = []byte("not-the-secret-0123456789")
)

// signed builds the headers and body of a delivery signed at ts.
func signed(t *testing.T, ts time.Time, id, kind string, secrets ...[]byte) (http.Header, []byte) {
	t.Helper()
	body, err := json.Marshal(Envelope{DeliveryID: id, Attempt: 1, Event: Event{ID: "evt_1", Kind: kind, AskID: "ask-1", Title: "Pay invoice 42"}})
	if err != nil {
		t.Fatal(err)
	}
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	h.Set(HeaderSignature, SignatureHeader(ts, body, secrets...))
	h.Set(HeaderDelivery, id)
	h.Set(HeaderEvent, kind)
	return h, body
}

// clock is a settable fake clock.
type clock struct{ ns atomic.Int64 }

func newClock(at time.Time) *clock { c := &clock{}; c.set(at); return c }
func (c *clock) set(at time.Time)  { c.ns.Store(at.UnixNano()) }
func (c *clock) Now() time.Time    { return time.Unix(0, c.ns.Load()).UTC() }

func newTestVerifier(now func() time.Time, secrets ...[]byte) *Verifier {
	v := NewVerifier(secrets...)
	v.Now = now
	return v
}

func TestVerifyAcceptsAGoodDelivery(t *testing.T) {
	v := newTestVerifier(newClock(t0).Now, secretA)
	h, body := signed(t, t0, "dlv_1", KindOpened, secretA)
	env, err := v.VerifyPayload(t.Context(), h, body)
	if err != nil {
		t.Fatal(err)
	}
	if env.DeliveryID != "dlv_1" || env.Event.Kind != KindOpened || env.Event.AskID != "ask-1" || env.Event.Title != "Pay invoice 42" {
		t.Fatalf("envelope %+v", env)
	}
}

func TestVerifyRejects(t *testing.T) {
	tamper := func(f func(h http.Header, body []byte) (http.Header, []byte)) func(*testing.T) (http.Header, []byte) {
		return func(t *testing.T) (http.Header, []byte) {
			h, body := signed(t, t0, "dlv_1", KindOpened, secretA)
			return f(h, body)
		}
	}
	cases := []struct {
		name string
		req  func(*testing.T) (http.Header, []byte)
		want error
	}{
		{"tampered body", tamper(func(h http.Header, b []byte) (http.Header, []byte) {
			return h, bytes.Replace(b, []byte("invoice 42"), []byte("invoice 43"), 1)
		}), ErrBadSignature},
		{"wrong secret", func(t *testing.T) (http.Header, []byte) { return signed(t, t0, "dlv_1", KindOpened, secretBad) }, ErrBadSignature},
		{"signature of another timestamp", tamper(func(h http.Header, b []byte) (http.Header, []byte) {
			s, _ := ParseSignatureHeader(h.Get(HeaderSignature))
			s.Timestamp++
			h.Set(HeaderSignature, s.String())
			return h, b
		}), ErrBadSignature},
		{"delivery header swapped", tamper(func(h http.Header, b []byte) (http.Header, []byte) {
			h.Set(HeaderDelivery, "dlv_2")
			return h, b
		}), ErrBadSignature},
		{"event header swapped", tamper(func(h http.Header, b []byte) (http.Header, []byte) {
			h.Set(HeaderEvent, KindDecided)
			return h, b
		}), ErrBadSignature},
		{"old timestamp", func(t *testing.T) (http.Header, []byte) {
			return signed(t, t0.Add(-DefaultTolerance-time.Second), "dlv_1", KindOpened, secretA)
		}, ErrStale},
		{"future timestamp", func(t *testing.T) (http.Header, []byte) {
			return signed(t, t0.Add(DefaultTolerance+time.Second), "dlv_1", KindOpened, secretA)
		}, ErrStale},
		{"no signature", tamper(func(h http.Header, b []byte) (http.Header, []byte) { h.Del(HeaderSignature); return h, b }), ErrMalformed},
		{"two signature headers", tamper(func(h http.Header, b []byte) (http.Header, []byte) {
			h.Add(HeaderSignature, h.Get(HeaderSignature))
			return h, b
		}), ErrMalformed},
		{"garbage signature", tamper(func(h http.Header, b []byte) (http.Header, []byte) { h.Set(HeaderSignature, "sha256=abc"); return h, b }), ErrMalformed},
		{"no delivery id", tamper(func(h http.Header, b []byte) (http.Header, []byte) { h.Del(HeaderDelivery); return h, b }), ErrMalformed},
		{"odd delivery id", tamper(func(h http.Header, b []byte) (http.Header, []byte) { h.Set(HeaderDelivery, "dlv 1/x"); return h, b }), ErrMalformed},
		{"no event", tamper(func(h http.Header, b []byte) (http.Header, []byte) { h.Del(HeaderEvent); return h, b }), ErrMalformed},
		{"signed but not an envelope", func(t *testing.T) (http.Header, []byte) {
			body := []byte(`not json`)
			h, _ := signed(t, t0, "dlv_1", KindOpened, secretA)
			h.Set(HeaderSignature, SignatureHeader(t0, body, secretA))
			return h, body
		}, ErrMalformed},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			v := newTestVerifier(newClock(t0).Now, secretA)
			h, body := c.req(t)
			_, err := v.VerifyPayload(t.Context(), h, body)
			if !errors.Is(err, c.want) {
				t.Fatalf("err = %v, want %v", err, c.want)
			}
			if n := v.Seen.(*MemoryReplayCache).Len(); n != 0 {
				t.Fatalf("a rejected request left %d ids in the replay cache", n)
			}
		})
	}
}

func TestVerifyToleranceEdges(t *testing.T) {
	for _, skew := range []time.Duration{-DefaultTolerance, DefaultTolerance, -time.Minute, 30 * time.Second} {
		v := newTestVerifier(newClock(t0).Now, secretA)
		h, body := signed(t, t0.Add(skew), "dlv_1", KindOpened, secretA)
		if _, err := v.VerifyPayload(t.Context(), h, body); err != nil {
			t.Errorf("skew %s: %v", skew, err)
		}
	}
	v := newTestVerifier(newClock(t0).Now, secretA)
	v.Tolerance = 10 * time.Second
	h, body := signed(t, t0.Add(-11*time.Second), "dlv_1", KindOpened, secretA)
	if _, err := v.VerifyPayload(t.Context(), h, body); !errors.Is(err, ErrStale) {
		t.Fatalf("custom tolerance: %v", err)
	}
}

func TestVerifyRejectsAReplayUntilItIsStale(t *testing.T) {
	c := newClock(t0)
	v := newTestVerifier(c.Now, secretA)
	h, body := signed(t, t0, "dlv_1", KindOpened, secretA)
	if _, err := v.VerifyPayload(t.Context(), h, body); err != nil {
		t.Fatal(err)
	}
	c.set(t0.Add(DefaultTolerance)) // the last moment the signature is fresh
	if _, err := v.VerifyPayload(t.Context(), h, body); !errors.Is(err, ErrReplay) {
		t.Fatalf("replay: %v", err)
	}
	c.set(t0.Add(DefaultTolerance + time.Second)) // the id may be forgotten: the timestamp rejects it
	if _, err := v.VerifyPayload(t.Context(), h, body); !errors.Is(err, ErrStale) {
		t.Fatalf("late replay: %v", err)
	}
	// another delivery still passes and prunes the expired id
	h2, body2 := signed(t, c.Now(), "dlv_2", KindOpened, secretA)
	if _, err := v.VerifyPayload(t.Context(), h2, body2); err != nil {
		t.Fatal(err)
	}
	if n := v.Seen.(*MemoryReplayCache).Len(); n != 1 {
		t.Fatalf("cache holds %d ids, want 1", n)
	}
}

func TestVerifySecretRotation(t *testing.T) {
	cases := []struct {
		name            string
		sender, checker [][]byte
		ok              bool
	}{
		{"receiver accepts old and new, sender on old", [][]byte{secretA}, [][]byte{secretB, secretA}, true},
		{"receiver accepts old and new, sender on new", [][]byte{secretB}, [][]byte{secretB, secretA}, true},
		{"sender signs new and old, receiver still on old", [][]byte{secretB, secretA}, [][]byte{secretA}, true},
		{"sender signs new and old, receiver on new", [][]byte{secretB, secretA}, [][]byte{secretB}, true},
		{"neither secret known", [][]byte{secretB, secretA}, [][]byte{secretBad}, false},
	}
	for i, c := range cases {
		v := newTestVerifier(newClock(t0).Now, c.checker...)
		h, body := signed(t, t0, fmt.Sprintf("dlv_%d", i), KindOpened, c.sender...)
		_, err := v.VerifyPayload(t.Context(), h, body)
		if c.ok && err != nil || !c.ok && !errors.Is(err, ErrBadSignature) {
			t.Errorf("%s: %v", c.name, err)
		}
	}
}

func TestVerifierWithoutSecretsOrCacheRefuses(t *testing.T) {
	h, body := signed(t, time.Now(), "dlv_1", KindOpened, secretA)
	for _, v := range []*Verifier{{Secrets: [][]byte{secretA}}, {Seen: NewMemoryReplayCache(1)}} {
		if _, err := v.VerifyPayload(t.Context(), h, body); err == nil {
			t.Fatalf("%+v accepted a delivery", v)
		}
	}
}

func TestMiddleware(t *testing.T) {
	c := newClock(t0)
	v := newTestVerifier(c.Now, secretA)
	v.MaxBody = 4096
	var got []string
	var mu sync.Mutex
	srv := httptest.NewServer(v.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		env, ok := EnvelopeFrom(r.Context())
		body, _ := io.ReadAll(r.Body)
		var again Envelope
		if !ok || json.Unmarshal(body, &again) != nil || again.DeliveryID != env.DeliveryID {
			http.Error(w, "handler did not get the verified request", http.StatusTeapot)
			return
		}
		mu.Lock()
		got = append(got, env.DeliveryID)
		mu.Unlock()
	})))
	defer srv.Close()
	post := func(h http.Header, body []byte) int {
		t.Helper()
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL, bytes.NewReader(body))
		req.Header = h
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	h, body := signed(t, t0, "dlv_1", KindOpened, secretA)
	if code := post(h, body); code != http.StatusOK {
		t.Fatalf("good delivery: %d", code)
	}
	if code := post(h, body); code != http.StatusConflict {
		t.Fatalf("replay: %d", code)
	}
	if code := post(h, append(body, ' ')); code != http.StatusUnauthorized {
		t.Fatalf("tampered: %d", code)
	}
	hs, bs := signed(t, t0.Add(-time.Hour), "dlv_2", KindOpened, secretA)
	if code := post(hs, bs); code != http.StatusUnauthorized {
		t.Fatalf("stale: %d", code)
	}
	hm, bm := signed(t, t0, "dlv_3", KindOpened, secretA)
	hm.Del(HeaderSignature)
	if code := post(hm, bm); code != http.StatusBadRequest {
		t.Fatalf("malformed: %d", code)
	}
	big := []byte(`{"delivery_id":"dlv_4","pad":"` + strings.Repeat("x", 5000) + `"}`)
	hb, _ := signed(t, t0, "dlv_4", KindOpened, secretA)
	hb.Set(HeaderSignature, SignatureHeader(t0, big, secretA))
	if code := post(hb, big); code != http.StatusRequestEntityTooLarge {
		t.Fatalf("too large: %d", code)
	}
	v.Seen = NewMemoryReplayCache(1)
	h5, b5 := signed(t, t0, "dlv_5", KindOpened, secretA)
	h6, b6 := signed(t, t0, "dlv_6", KindOpened, secretA)
	if code := post(h5, b5); code != http.StatusOK {
		t.Fatalf("dlv_5: %d", code)
	}
	if code := post(h6, b6); code != http.StatusServiceUnavailable {
		t.Fatalf("cache full: %d", code)
	}
	mu.Lock()
	defer mu.Unlock()
	if strings.Join(got, " ") != "dlv_1 dlv_5" {
		t.Fatalf("handler saw %v", got)
	}
}

func TestMemoryReplayCacheIsBoundedAndExpires(t *testing.T) {
	ctx := context.Background()
	c := NewMemoryReplayCache(2)
	mark := func(id string, now time.Time) (bool, error) {
		return c.MarkSeen(ctx, id, now, now.Add(time.Minute))
	}
	for _, id := range []string{"a", "b"} {
		if seen, err := mark(id, t0); seen || err != nil {
			t.Fatalf("%s: %v %v", id, seen, err)
		}
	}
	if seen, err := mark("a", t0.Add(time.Second)); !seen || err != nil {
		t.Fatalf("a again: %v %v", seen, err)
	}
	if _, err := mark("c", t0.Add(time.Second)); !errors.Is(err, ErrReplayCacheFull) {
		t.Fatalf("full: %v", err)
	}
	if seen, err := mark("c", t0.Add(time.Minute)); seen || err != nil { // a and b expired
		t.Fatalf("c after expiry: %v %v", seen, err)
	}
	if c.Len() != 1 {
		t.Fatalf("len %d", c.Len())
	}
}

func TestMemoryReplayCacheOneWinner(t *testing.T) {
	c := NewMemoryReplayCache(0)
	var fresh atomic.Int32
	var wg sync.WaitGroup
	for range 32 {
		wg.Go(func() {
			if seen, err := c.MarkSeen(context.Background(), "same", t0, t0.Add(time.Minute)); err == nil && !seen {
				fresh.Add(1)
			}
		})
	}
	wg.Wait()
	if fresh.Load() != 1 {
		t.Fatalf("%d callers saw the id as new", fresh.Load())
	}
}

func TestVerifyARequestWithoutBody(t *testing.T) {
	v := newTestVerifier(newClock(t0).Now, secretA)
	h, _ := signed(t, t0, "dlv_1", KindOpened, secretA)
	r := &http.Request{Method: http.MethodPost, Header: h}
	if _, _, err := v.Verify(r); !errors.Is(err, ErrBadSignature) {
		t.Fatalf("err = %v", err)
	}
}
