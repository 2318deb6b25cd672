package webhook

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// request is what a receiver got.
type request struct {
	header http.Header
	body   []byte
	at     time.Time
	env    Envelope
	err    error // from the shipped Verifier
}

// receiver is a real HTTP server on loopback that verifies every request
// with the shipped Verifier and answers with respond (n counts from 1).
type receiver struct {
	srv     *httptest.Server
	v       *Verifier
	respond func(n int, w http.ResponseWriter, r *http.Request)

	mu   sync.Mutex
	reqs []request
	got  chan struct{} // closed and replaced on each request
}

func newReceiver(t *testing.T, respond func(n int, w http.ResponseWriter, r *http.Request)) *receiver {
	t.Helper()
	rc := &receiver{v: NewVerifier(secretA), respond: respond, got: make(chan struct{})}
	rc.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		at := time.Now()
		body, env, err := rc.v.Verify(r)
		rc.mu.Lock()
		rc.reqs = append(rc.reqs, request{header: r.Header.Clone(), body: body, at: at, env: env, err: err})
		n := len(rc.reqs)
		close(rc.got)
		rc.got = make(chan struct{})
		rc.mu.Unlock()
		if err != nil {
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		if rc.respond != nil {
			rc.respond(n, w, r)
		}
	}))
	t.Cleanup(rc.srv.Close)
	return rc
}

func (rc *receiver) requests() []request {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return slices.Clone(rc.reqs)
}

// waitRequests waits until the receiver has had n requests.
func (rc *receiver) waitRequests(t *testing.T, n int) []request {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	for {
		rc.mu.Lock()
		if len(rc.reqs) >= n {
			r := slices.Clone(rc.reqs)
			rc.mu.Unlock()
			return r
		}
		ch := rc.got
		rc.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			t.Fatalf("receiver got %d requests, want %d", len(rc.requests()), n)
		}
	}
}

func endpoint(name, url string, roles ...string) Endpoint {
	return Endpoint{Name: name, URL: url, Secret: secretA, Roles: roles}
}

func fastConfig(rec Recorder) Config {
	return Config{
		Recorder:       rec,
		BaseBackoff:    2 * time.Millisecond,
		MaxBackoff:     8 * time.Millisecond,
		MaxRetryAfter:  20 * time.Millisecond,
		AttemptTimeout: 5 * time.Second,
	}
}

// start runs n until the test ends (or stop is called) and checks that Run
// returned.
func start(t *testing.T, n *Notifier) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- n.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("Run: %v", err)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("Run did not return after its context ended")
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

func waitFor(t *testing.T, rec *MemoryRecorder, what string, cond func([]Delivery) bool) []Delivery {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := rec.Wait(ctx, cond); err != nil {
		ds := rec.Deliveries()
		if len(ds) > 10 {
			ds = ds[len(ds)-10:]
		}
		t.Fatalf("waiting for %s: %v; %d recorded, the last %+v", what, err, len(rec.Deliveries()), ds)
	}
	return rec.Deliveries()
}

func finals(n int) func([]Delivery) bool {
	return func(ds []Delivery) bool {
		c := 0
		for _, d := range ds {
			if d.Final {
				c++
			}
		}
		return c >= n
	}
}

func opened(audience string) Event {
	return Event{Kind: KindOpened, AskID: "ask-1", RunID: "run-1", Title: "Pay invoice 42", Audience: audience,
		ExpiresAt: t0.Add(time.Hour), Payload: map[string]any{"amount": "1200.00", "currency": "INR"}}
}

func TestDeliveryVerifiesAndAReplayFails(t *testing.T) {
	rc := newReceiver(t, nil)
	rec := &MemoryRecorder{}
	n, err := New(fastConfig(rec), []Endpoint{endpoint("finance-hook", rc.srv.URL+"/hook", "finance")})
	if err != nil {
		t.Fatal(err)
	}
	start(t, n)
	if err := n.Notify(t.Context(), opened("finance")); err != nil {
		t.Fatal(err)
	}
	ds := waitFor(t, rec, "the delivery", finals(1))
	got := rc.requests()[0]
	if got.err != nil {
		t.Fatalf("the shipped Verifier rejected a delivery: %v", got.err)
	}
	if ct := got.header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q", ct)
	}
	if got.header.Get(HeaderEvent) != KindOpened || got.header.Get(HeaderDelivery) != got.env.DeliveryID {
		t.Errorf("headers %v", got.header)
	}
	ev := got.env.Event
	if got.env.Attempt != 1 || ev.Kind != KindOpened || ev.AskID != "ask-1" || ev.RunID != "run-1" || ev.Audience != "finance" ||
		!ev.ExpiresAt.Equal(t0.Add(time.Hour)) || ev.Payload["amount"] != "1200.00" || !strings.HasPrefix(ev.ID, "evt_") || ev.OccurredAt.IsZero() {
		t.Errorf("envelope %+v", got.env)
	}
	d := ds[0]
	if d.Outcome != Delivered || !d.Final || d.Status != 200 || d.Attempt != 1 || d.ID != got.env.DeliveryID ||
		d.EventID != ev.ID || d.Endpoint != "finance-hook" || d.Kind != KindOpened || d.AskID != "ask-1" || d.Err != "" || d.At.IsZero() {
		t.Errorf("record %+v", d)
	}

	resend := func(h http.Header) error {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, rc.srv.URL+"/hook", bytes.NewReader(got.body))
		req.Header = h
		resp, err := rc.srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		reqs := rc.requests()
		return reqs[len(reqs)-1].err
	}
	if err := resend(got.header.Clone()); !errors.Is(err, ErrReplay) {
		t.Fatalf("replaying the same request: %v", err)
	}
	h := got.header.Clone()
	h.Set(HeaderDelivery, "dlv_fresh")
	if err := resend(h); !errors.Is(err, ErrBadSignature) {
		t.Fatalf("replaying with a new delivery id: %v", err)
	}
}

func TestRetriesOn500ThenSucceeds(t *testing.T) {
	rc := newReceiver(t, func(n int, w http.ResponseWriter, r *http.Request) {
		if n <= 2 {
			http.Error(w, "database\nis down", http.StatusInternalServerError)
		}
	})
	rec := &MemoryRecorder{}
	cfg := fastConfig(rec)
	cfg.BaseBackoff, cfg.MaxBackoff = 10*time.Millisecond, 40*time.Millisecond
	n, err := New(cfg, []Endpoint{endpoint("ops", rc.srv.URL, "ops")})
	if err != nil {
		t.Fatal(err)
	}
	start(t, n)
	if err := n.Notify(t.Context(), opened("ops")); err != nil {
		t.Fatal(err)
	}
	ds := waitFor(t, rec, "success", finals(1))
	if len(ds) != 3 {
		t.Fatalf("records %+v", ds)
	}
	for i, d := range ds {
		want := Retrying
		if i == 2 {
			want = Delivered
		}
		if d.Attempt != i+1 || d.Outcome != want || d.Final != (i == 2) {
			t.Errorf("record %d: %+v", i, d)
		}
	}
	if ds[0].Status != 500 || ds[0].Err != "HTTP 500: database is down" {
		t.Errorf("first record %+v", ds[0])
	}
	// backoff: base·2^(n-1) with equal jitter
	if r := ds[0].RetryIn; r < 5*time.Millisecond || r > 10*time.Millisecond {
		t.Errorf("first wait %s, want 5ms..10ms", r)
	}
	if r := ds[1].RetryIn; r < 10*time.Millisecond || r > 20*time.Millisecond {
		t.Errorf("second wait %s, want 10ms..20ms", r)
	}
	reqs := rc.requests()
	ids := map[string]bool{}
	for i, r := range reqs {
		if r.err != nil || r.env.Attempt != i+1 || r.env.Event.ID != ds[0].EventID || ids[r.env.DeliveryID] {
			t.Errorf("request %d: attempt %d, event %s, delivery %s, err %v", i, r.env.Attempt, r.env.Event.ID, r.env.DeliveryID, r.err)
		}
		ids[r.env.DeliveryID] = true
		if i > 0 && r.at.Sub(reqs[i-1].at) < ds[i-1].RetryIn {
			t.Errorf("attempt %d came %s after the previous, before its wait of %s", i+1, r.at.Sub(reqs[i-1].at), ds[i-1].RetryIn)
		}
	}
	if s := n.Stats(); s.Delivered != 1 || s.Attempts != 3 || s.Pending != 0 {
		t.Errorf("stats %+v", s)
	}
}

func TestClientErrorsAreNotRetried(t *testing.T) {
	for _, c := range []struct {
		name   string
		status int
	}{{"400", http.StatusBadRequest}, {"401", http.StatusUnauthorized}, {"404", http.StatusNotFound}, {"redirect", http.StatusFound}} {
		t.Run(c.name, func(t *testing.T) {
			rc := newReceiver(t, func(n int, w http.ResponseWriter, r *http.Request) {
				if r.URL.Path == "/elsewhere" {
					t.Error("the redirect was followed")
					return
				}
				if c.status == http.StatusFound {
					http.Redirect(w, r, "/elsewhere", c.status)
					return
				}
				http.Error(w, "no", c.status)
			})
			rec := &MemoryRecorder{}
			n, err := New(fastConfig(rec), []Endpoint{endpoint("ops", rc.srv.URL, "ops")})
			if err != nil {
				t.Fatal(err)
			}
			start(t, n)
			if err := n.Notify(t.Context(), opened("ops")); err != nil {
				t.Fatal(err)
			}
			ds := waitFor(t, rec, "the rejection", finals(1))
			if len(ds) != 1 || ds[0].Outcome != Rejected || ds[0].Status != c.status || ds[0].Attempt != 1 {
				t.Fatalf("records %+v", ds)
			}
			if s := n.Stats(); s.Pending != 0 || s.Attempts != 1 || s.Rejected != 1 {
				t.Fatalf("stats %+v", s) // nothing left that could retry
			}
			if got := len(rc.requests()); got != 1 {
				t.Fatalf("%d requests", got)
			}
		})
	}
}

func TestRetryAfterIsHonouredAndBounded(t *testing.T) {
	rc := newReceiver(t, func(n int, w http.ResponseWriter, r *http.Request) {
		if n == 1 {
			w.Header().Set("Retry-After", "3600")
			w.WriteHeader(http.StatusTooManyRequests)
		}
	})
	rec := &MemoryRecorder{}
	cfg := fastConfig(rec)
	cfg.BaseBackoff, cfg.MaxBackoff, cfg.MaxRetryAfter = time.Millisecond, time.Millisecond, 30*time.Millisecond
	n, err := New(cfg, []Endpoint{endpoint("ops", rc.srv.URL, "ops")})
	if err != nil {
		t.Fatal(err)
	}
	start(t, n)
	if err := n.Notify(t.Context(), opened("ops")); err != nil {
		t.Fatal(err)
	}
	ds := waitFor(t, rec, "success", finals(1))
	if len(ds) != 2 || ds[0].Status != 429 || ds[0].RetryIn != 30*time.Millisecond || ds[1].Outcome != Delivered {
		t.Fatalf("records %+v", ds)
	}
	reqs := rc.requests()
	if gap := reqs[1].at.Sub(reqs[0].at); gap < 30*time.Millisecond {
		t.Fatalf("retried after %s, before Retry-After (capped at 30ms)", gap)
	}
}

func TestRetryDelay(t *testing.T) {
	n, err := New(Config{BaseBackoff: time.Second, MaxBackoff: 10 * time.Second, MaxRetryAfter: time.Minute}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for range 200 {
		for attempt, lo := range map[int]time.Duration{1: 500 * time.Millisecond, 2: time.Second, 3: 2 * time.Second, 5: 5 * time.Second, 40: 5 * time.Second, math.MaxInt32: 5 * time.Second} {
			if d := n.retryDelay(attempt, 0, false); d < lo || d > 2*lo {
				t.Fatalf("attempt %d: %s not in [%s, %s]", attempt, d, lo, 2*lo)
			}
		}
	}
	huge, err := New(Config{BaseBackoff: time.Hour, MaxBackoff: math.MaxInt64}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, attempt := range []int{2, 20, 40, 64, 100} {
		if d := huge.retryDelay(attempt, 0, false); d < time.Hour {
			t.Fatalf("attempt %d with a huge cap: %s (overflow)", attempt, d)
		}
	}
	if d := n.retryDelay(1, 30*time.Second, true); d != 30*time.Second {
		t.Errorf("Retry-After 30s: %s", d)
	}
	if d := n.retryDelay(1, time.Hour, true); d != time.Minute {
		t.Errorf("Retry-After 1h capped: %s", d)
	}
	if d := n.retryDelay(4, time.Millisecond, true); d < 4*time.Second {
		t.Errorf("a shorter Retry-After shortened the backoff: %s", d)
	}
	now := time.Date(2026, 12, 31, 12, 0, 0, 0, time.UTC)
	for v, want := range map[string]time.Duration{
		"2": 2 * time.Second, " 0 ": 0, "Thu, 31 Dec 2026 12:00:45 GMT": 45 * time.Second,
		"Thu, 31 Dec 2026 11:00:00 GMT": 0, "99999999999": 24 * time.Hour,
	} {
		if d, ok := parseRetryAfter(v, now); !ok || d != want {
			t.Errorf("Retry-After %q: %s %v, want %s", v, d, ok, want)
		}
	}
	for _, v := range []string{"", "-1", "soon", "1.5"} {
		if d, ok := parseRetryAfter(v, now); ok {
			t.Errorf("Retry-After %q read as %s", v, d)
		}
	}
}

func TestGivesUpAfterMaxAttempts(t *testing.T) {
	rc := newReceiver(t, func(n int, w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusServiceUnavailable) })
	rec := &MemoryRecorder{}
	cfg := fastConfig(rec)
	cfg.MaxAttempts = 3
	n, err := New(cfg, []Endpoint{endpoint("ops", rc.srv.URL, "ops")})
	if err != nil {
		t.Fatal(err)
	}
	start(t, n)
	if err := n.Notify(t.Context(), opened("ops")); err != nil {
		t.Fatal(err)
	}
	ds := waitFor(t, rec, "giving up", finals(1))
	var outcomes []Outcome
	for _, d := range ds {
		outcomes = append(outcomes, d.Outcome)
	}
	if !slices.Equal(outcomes, []Outcome{Retrying, Retrying, Failed}) || ds[2].Attempt != 3 || ds[2].Status != 503 {
		t.Fatalf("records %+v", ds)
	}
	if s := n.Stats(); s.Failed != 1 || s.Pending != 0 || len(rc.requests()) != 3 {
		t.Fatalf("stats %+v, %d requests", s, len(rc.requests()))
	}
}

func TestNetworkErrorsAreRetriedAndKeepTheURLOutOfRecords(t *testing.T) {
	dead := httptest.NewServer(http.NotFoundHandler())
	url := dead.URL + "/hooks/TOKEN-in-the-path?key=TOKEN-in-the-query"
	dead.Close()
	rec := &MemoryRecorder{}
	cfg := fastConfig(rec)
	cfg.MaxAttempts = 2
	n, err := New(cfg, []Endpoint{endpoint("gone", url, "ops")})
	if err != nil {
		t.Fatal(err)
	}
	start(t, n)
	if err := n.Notify(t.Context(), opened("ops")); err != nil {
		t.Fatal(err)
	}
	ds := waitFor(t, rec, "giving up", finals(1))
	if len(ds) != 2 || ds[0].Outcome != Retrying || ds[1].Outcome != Failed || ds[1].Status != 0 || ds[1].Err == "" {
		t.Fatalf("records %+v", ds)
	}
	for _, d := range ds {
		if strings.Contains(d.Err, "TOKEN") || strings.Contains(d.Err, "127.0.0.1") && strings.Contains(d.Err, "/hooks") {
			t.Fatalf("the URL leaked into a record: %s", d.Err)
		}
	}
}

func TestAttemptTimeout(t *testing.T) {
	release := make(chan struct{})
	rc := newReceiver(t, func(n int, w http.ResponseWriter, r *http.Request) {
		if n == 1 {
			select {
			case <-release:
			case <-r.Context().Done():
			}
		}
	})
	defer close(release)
	rec := &MemoryRecorder{}
	cfg := fastConfig(rec)
	cfg.AttemptTimeout = 200 * time.Millisecond
	n, err := New(cfg, []Endpoint{endpoint("slow", rc.srv.URL, "ops")})
	if err != nil {
		t.Fatal(err)
	}
	start(t, n)
	if err := n.Notify(t.Context(), opened("ops")); err != nil {
		t.Fatal(err)
	}
	ds := waitFor(t, rec, "success", finals(1))
	if len(ds) != 2 || ds[0].Outcome != Retrying || !strings.Contains(ds[0].Err, "no response within 200ms") || ds[1].Outcome != Delivered {
		t.Fatalf("records %+v", ds)
	}
}

func TestQueueFullIsRecordedWithoutBlocking(t *testing.T) {
	rc := newReceiver(t, nil)
	rec := &MemoryRecorder{}
	cfg := fastConfig(rec)
	cfg.QueueSize = 2
	n, err := New(cfg, []Endpoint{endpoint("a", rc.srv.URL, "ops"), endpoint("b", rc.srv.URL, "ops")})
	if err != nil {
		t.Fatal(err)
	}
	// No Run yet: nothing drains the queue, so a blocking Notify would hang here.
	if err := n.Notify(t.Context(), opened("ops")); err != nil {
		t.Fatal(err)
	}
	second := opened("ops")
	second.AskID = "ask-2"
	if err := n.Notify(t.Context(), second); !errors.Is(err, ErrQueueFull) {
		t.Fatalf("second Notify: %v", err)
	}
	if s := n.Stats(); s.Pending != 2 || s.Dropped != 2 {
		t.Fatalf("stats %+v", s)
	}
	if got := rec.Deliveries(); len(got) != 0 {
		t.Fatalf("Notify called the Recorder itself: %+v", got)
	}
	start(t, n)
	ds := waitFor(t, rec, "two deliveries and two drops", finals(4))
	var drops, delivered []string
	for _, d := range ds {
		switch d.Outcome {
		case Dropped:
			if d.Attempt != 0 || d.ID != "" || !d.Final || !strings.Contains(d.Err, "queue full") {
				t.Errorf("drop record %+v", d)
			}
			drops = append(drops, d.AskID+"→"+d.Endpoint)
		case Delivered:
			delivered = append(delivered, d.AskID+"→"+d.Endpoint)
		}
	}
	slices.Sort(drops)
	slices.Sort(delivered)
	if !slices.Equal(drops, []string{"ask-2→a", "ask-2→b"}) || !slices.Equal(delivered, []string{"ask-1→a", "ask-1→b"}) {
		t.Fatalf("dropped %v, delivered %v", drops, delivered)
	}
	// with room again, Notify queues
	if err := n.Notify(t.Context(), second); err != nil {
		t.Fatal(err)
	}
	waitFor(t, rec, "the second event", finals(6))
}

func TestRunStopsAndLeavesNoGoroutines(t *testing.T) {
	before := goleak.IgnoreCurrent()
	inFlight := make(chan struct{}, 8)
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body) // lets the server notice the client hanging up
		inFlight <- struct{}{}
		<-r.Context().Done() // held until the client gives up
	}))
	failing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusBadGateway)
	}))
	rec := &MemoryRecorder{}
	cfg := fastConfig(rec)
	cfg.Concurrency = 2
	cfg.BaseBackoff, cfg.MaxBackoff = time.Hour, time.Hour // the retry waits far beyond the test
	cfg.AttemptTimeout = time.Hour
	n, err := New(cfg, []Endpoint{
		{Name: "slow", URL: slow.URL, Secret: secretA, People: []string{"alice"}},
		{Name: "failing", URL: failing.URL, Secret: secretA, People: []string{"bob"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- n.Run(ctx) }()

	ev := func(ask, person string) Event {
		return Event{Kind: KindReminder, AskID: ask, People: []string{person}}
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(n.Notify(t.Context(), ev("ask-1", "bob")))
	waitFor(t, rec, "a retry to wait for", func(ds []Delivery) bool { return len(ds) == 1 && ds[0].Outcome == Retrying })
	must(n.Notify(t.Context(), ev("ask-2", "alice")))
	must(n.Notify(t.Context(), ev("ask-3", "alice")))
	<-inFlight
	<-inFlight // both workers are held by the slow endpoint
	must(n.Notify(t.Context(), ev("ask-4", "alice")))
	if s := n.Stats(); s.Pending != 4 {
		t.Fatalf("stats %+v", s)
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after its context ended")
	}
	ds := rec.Deliveries()
	abandoned := map[string]bool{}
	for _, d := range ds {
		if d.Outcome == Abandoned && d.Final {
			abandoned[d.AskID] = true
		}
	}
	if len(abandoned) != 4 || n.Stats().Pending != 0 || n.Stats().Abandoned != 4 {
		t.Fatalf("abandoned %v, stats %+v, records %+v", abandoned, n.Stats(), ds)
	}
	if err := n.Run(ctx); err != nil { // a second Run on an ended context returns at once
		t.Fatal(err)
	}
	slow.Close()
	failing.Close()
	goleak.VerifyNone(t, before)
}

func TestOneRunAtATime(t *testing.T) {
	n, err := New(Config{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	stop := start(t, n)
	deadline := time.Now().Add(10 * time.Second)
	for !n.running.Load() && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if err := n.Run(t.Context()); !errors.Is(err, ErrRunning) {
		t.Fatalf("second Run: %v", err)
	}
	stop()
}

func TestPayloadIsFixedAtNotify(t *testing.T) {
	rc := newReceiver(t, nil)
	rec := &MemoryRecorder{}
	n, err := New(fastConfig(rec), []Endpoint{endpoint("ops", rc.srv.URL, "ops")})
	if err != nil {
		t.Fatal(err)
	}
	ev := opened("ops")
	if err := n.Notify(t.Context(), ev); err != nil {
		t.Fatal(err)
	}
	ev.Payload["amount"] = "9999.00" // the caller reuses its map
	start(t, n)
	waitFor(t, rec, "the delivery", finals(1))
	if got := rc.requests()[0].env.Event.Payload["amount"]; got != "1200.00" {
		t.Fatalf("amount %v", got)
	}
}

func TestNotifyRejectsInvalidEvents(t *testing.T) {
	n, err := New(Config{}, []Endpoint{endpoint("ops", "https://example.invalid/hook", "*")})
	if err != nil {
		t.Fatal(err)
	}
	for name, ev := range map[string]Event{
		"unknown kind": {Kind: "ask.poked", AskID: "a"},
		"no ask":       {Kind: KindOpened},
		"unencodable":  {Kind: KindOpened, AskID: "a", Payload: map[string]any{"c": make(chan int)}},
		"too large":    {Kind: KindOpened, AskID: "a", Payload: map[string]any{"blob": strings.Repeat("x", MaxEventBytes)}},
	} {
		if err := n.Notify(t.Context(), ev); err == nil || errors.Is(err, ErrQueueFull) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if s := n.Stats(); s.Pending != 0 {
		t.Fatalf("invalid events were queued: %+v", s)
	}
}

func TestNotifyWithoutListenersQueuesNothing(t *testing.T) {
	n, err := New(Config{}, []Endpoint{endpoint("ops", "https://example.invalid/hook", "ops")})
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Notify(t.Context(), opened("finance")); err != nil {
		t.Fatal(err)
	}
	if s := n.Stats(); s.Pending != 0 {
		t.Fatalf("stats %+v", s)
	}
}

func TestEndpointWants(t *testing.T) {
	ep := Endpoint{Roles: []string{"finance"}, People: []string{"alice"}}
	cases := []struct {
		name string
		ep   Endpoint
		ev   Event
		want bool
	}{
		{"role audience", ep, Event{Kind: KindOpened, Audience: "finance"}, true},
		{"other role", ep, Event{Kind: KindOpened, Audience: "legal"}, false},
		{"person audience (ask me)", ep, Event{Kind: KindOpened, Audience: "alice"}, true},
		{"named person", ep, Event{Kind: KindOpened, Audience: "legal", People: []string{"bob", "alice"}}, true},
		{"nobody it knows", ep, Event{Kind: KindOpened, Audience: "legal", People: []string{"bob"}}, false},
		{"no audience", ep, Event{Kind: KindOpened}, false},
		{"empty names match nothing", Endpoint{Roles: []string{""}, People: []string{""}}, Event{Kind: KindOpened, People: []string{""}}, false},
		{"no roles or people", Endpoint{}, Event{Kind: KindOpened, Audience: "finance"}, false},
		{"wildcard", Endpoint{Roles: []string{"*"}}, Event{Kind: KindExpired}, true},
		{"kind filtered out", Endpoint{Roles: []string{"finance"}, Kinds: []string{KindEscalated}}, Event{Kind: KindOpened, Audience: "finance"}, false},
		{"kind filtered in", Endpoint{Roles: []string{"finance"}, Kinds: []string{KindEscalated}}, Event{Kind: KindEscalated, Audience: "finance"}, true},
	}
	for _, c := range cases {
		if got := c.ep.Wants(c.ev); got != c.want {
			t.Errorf("%s: %v", c.name, got)
		}
	}
}

func TestNewValidatesEndpoints(t *testing.T) {
	good := endpoint("ops", "https://hooks.example.com/x", "ops")
	with := func(f func(*Endpoint)) []Endpoint { e := good; f(&e); return []Endpoint{e} }
	for name, eps := range map[string][]Endpoint{
		"no name":          with(func(e *Endpoint) { e.Name = "" }),
		"relative URL":     with(func(e *Endpoint) { e.URL = "/hook" }),
		"ftp":              with(func(e *Endpoint) { e.URL = "ftp://example.com/x" }),
		"short secret":     with(func(e *Endpoint) { e.Secret = []byte("short") }),
		"short old secret": with(func(e *Endpoint) { e.OldSecrets = [][]byte{[]byte("short")} }),
		"unknown kind":     with(func(e *Endpoint) { e.Kinds = []string{"ask.poked"} }),
		"duplicate names":  {good, good},
	} {
		if _, err := New(Config{}, eps); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if _, err := New(Config{}, []Endpoint{good}); err != nil {
		t.Fatal(err)
	}
}

func TestSenderRotationReachesBothReceivers(t *testing.T) {
	rc := newReceiver(t, nil)
	rc.v = NewVerifier(secretB) // the receiver moved to the new secret
	rec := &MemoryRecorder{}
	ep := Endpoint{Name: "ops", URL: rc.srv.URL, Secret: secretB, OldSecrets: [][]byte{secretA}, Roles: []string{"ops"}}
	n, err := New(fastConfig(rec), []Endpoint{ep})
	if err != nil {
		t.Fatal(err)
	}
	start(t, n)
	if err := n.Notify(t.Context(), opened("ops")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, rec, "the delivery", finals(1))
	got := rc.requests()[0]
	if got.err != nil {
		t.Fatal(got.err)
	}
	old := NewVerifier(secretA) // a receiver still on the old secret accepts the same request
	if _, err := old.VerifyPayload(t.Context(), got.header, got.body); err != nil {
		t.Fatal(err)
	}
}

func TestConcurrentNotifyAccountsForEveryDelivery(t *testing.T) {
	rc := newReceiver(t, func(n int, w http.ResponseWriter, r *http.Request) {
		if n%7 == 0 {
			w.WriteHeader(http.StatusInternalServerError)
		}
	})
	rec := &MemoryRecorder{}
	cfg := fastConfig(rec)
	cfg.QueueSize = 16
	n, err := New(cfg, []Endpoint{endpoint("a", rc.srv.URL, "ops"), endpoint("b", rc.srv.URL, "*")})
	if err != nil {
		t.Fatal(err)
	}
	start(t, n)
	const senders, each = 8, 40
	var wg sync.WaitGroup
	for s := range senders {
		wg.Go(func() {
			for i := range each {
				ev := opened("ops")
				ev.AskID = fmt.Sprintf("ask-%d-%d", s, i)
				if err := n.Notify(context.Background(), ev); err != nil && !errors.Is(err, ErrQueueFull) {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	ds := waitFor(t, rec, "every delivery to end", finals(2*senders*each))
	s := n.Stats()
	if s.Pending != 0 || s.Delivered+s.Dropped != 2*senders*each || s.Delivered == 0 {
		t.Fatalf("stats %+v", s)
	}
	ended := map[string]int{}
	for _, d := range ds {
		if d.Final {
			ended[d.AskID+"→"+d.Endpoint]++
		}
	}
	if len(ended) != 2*senders*each {
		t.Fatalf("%d deliveries ended, want %d", len(ended), 2*senders*each)
	}
	for k, c := range ended {
		if c != 1 {
			t.Fatalf("%s ended %d times", k, c)
		}
	}
}

// An event that carries a Journal has its deliveries, drops included,
// recorded there and not in Config.Recorder: the sender says where an
// event's record lives, so nothing has to be wired to the Notifier after
// it is built.
func TestEventJournalRecordsItsDeliveries(t *testing.T) {
	rc := newReceiver(t, nil)
	fallback, journal := &MemoryRecorder{}, &MemoryRecorder{}
	cfg := fastConfig(fallback)
	cfg.QueueSize = 1
	n, err := New(cfg, []Endpoint{endpoint("a", rc.srv.URL, "ops")})
	if err != nil {
		t.Fatal(err)
	}
	first := opened("ops")
	first.Journal = journal
	if err := n.Notify(t.Context(), first); err != nil {
		t.Fatal(err)
	}
	second := opened("ops")
	second.AskID, second.Journal = "ask-2", journal
	if err := n.Notify(t.Context(), second); !errors.Is(err, ErrQueueFull) {
		t.Fatalf("second Notify: %v", err)
	}
	third := opened("ops")
	third.AskID = "ask-3" // no journal: the Recorder
	start(t, n)
	ds := waitFor(t, journal, "a delivery and a drop", finals(2))
	outcomes := map[string]Outcome{}
	for _, d := range ds {
		outcomes[d.AskID] = d.Outcome
	}
	if outcomes["ask-1"] != Delivered || outcomes["ask-2"] != Dropped {
		t.Fatalf("journal got %+v", ds)
	}
	if err := n.Notify(t.Context(), third); err != nil {
		t.Fatal(err)
	}
	if got := waitFor(t, fallback, "the third event", finals(1)); got[0].AskID != "ask-3" {
		t.Fatalf("recorder got %+v", got)
	}
	if got := journal.Deliveries(); len(got) != 2 {
		t.Fatalf("journal got %d deliveries, want 2", len(got))
	}
}
