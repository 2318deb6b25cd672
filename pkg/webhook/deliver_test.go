package webhook

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"
)

// Prepare names the endpoints that want an event, encodes what Notify
// would, and queues nothing.
func TestPrepareNamesTheEndpointsAndQueuesNothing(t *testing.T) {
	n, err := New(fastConfig(nil), []Endpoint{endpoint("ops", "http://127.0.0.1:1", "ops"), endpoint("fin", "http://127.0.0.1:1", "finance"), endpoint("all", "http://127.0.0.1:1", "*")})
	if err != nil {
		t.Fatal(err)
	}
	ev := opened("finance")
	ev.ID, ev.OccurredAt = "evt_fixed", t0
	raw, eps, err := n.Prepare(ev)
	if err != nil {
		t.Fatal(err)
	}
	if len(eps) != 2 || eps[0] != "fin" || eps[1] != "all" {
		t.Fatalf("endpoints %v, want fin, all", eps)
	}
	again, _, _ := n.Prepare(ev)
	if string(raw) != string(again) {
		t.Fatalf("two encodings of one event differ:\n%s\n%s", raw, again)
	}
	if s := n.Stats(); s.Pending != 0 || s.Attempts != 0 {
		t.Fatalf("stats %+v", s)
	}
	if _, _, err := n.Prepare(Event{Kind: "ask.nope", AskID: "a"}); err == nil {
		t.Fatal("an unknown kind prepared")
	}
}

// Deliver retries a 500 after a backoff, records every attempt to the
// recorder it is given, and returns the final one; every request carries
// the event's id and its own delivery id.
func TestDeliverRetriesAndRecordsEachAttempt(t *testing.T) {
	rc := newReceiver(t, func(n int, w http.ResponseWriter, r *http.Request) {
		if n == 1 {
			w.Header().Set("Retry-After", "0")
			http.Error(w, "busy", http.StatusServiceUnavailable)
		}
	})
	n, err := New(fastConfig(nil), []Endpoint{endpoint("ops", rc.srv.URL, "ops")})
	if err != nil {
		t.Fatal(err)
	}
	ev := opened("ops")
	ev.ID = "run-1/ask-1/ask.opened/3"
	raw, _, err := n.Prepare(ev)
	if err != nil {
		t.Fatal(err)
	}
	rec := &MemoryRecorder{}
	d := n.Deliver(t.Context(), "ops", raw, rec)
	if d.Outcome != Delivered || !d.Final || d.Attempt != 2 || d.EventID != ev.ID || d.Endpoint != "ops" || d.AskID != "ask-1" {
		t.Fatalf("final %+v", d)
	}
	ds := rec.Deliveries()
	if len(ds) != 2 || ds[0].Outcome != Retrying || ds[0].Final || ds[0].Status != 503 || ds[1].ID != d.ID || !ds[1].Final {
		t.Fatalf("records %+v", ds)
	}
	reqs := rc.requests()
	if len(reqs) != 2 || reqs[0].err != nil || reqs[1].err != nil || reqs[0].env.Event.ID != ev.ID || reqs[1].env.Event.ID != ev.ID ||
		reqs[0].env.DeliveryID == reqs[1].env.DeliveryID || reqs[1].env.Attempt != 2 {
		t.Fatalf("requests %+v", reqs)
	}
	if s := n.Stats(); s.Pending != 0 || s.Attempts != 2 || s.Delivered != 1 {
		t.Fatalf("stats %+v", s)
	}
}

// A 4xx and a redirect are final at once; so is an endpoint no longer
// configured (Dropped, recorded, nothing sent).
func TestDeliverFinalAtOnce(t *testing.T) {
	rc := newReceiver(t, func(n int, w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/elsewhere", http.StatusFound)
	})
	n, err := New(fastConfig(nil), []Endpoint{endpoint("ops", rc.srv.URL, "ops")})
	if err != nil {
		t.Fatal(err)
	}
	raw, _, err := n.Prepare(opened("ops"))
	if err != nil {
		t.Fatal(err)
	}
	rec := &MemoryRecorder{}
	if d := n.Deliver(t.Context(), "ops", raw, rec); d.Outcome != Rejected || !d.Final || d.Status != http.StatusFound {
		t.Fatalf("redirect: %+v", d)
	}
	if d := n.Deliver(t.Context(), "gone", raw, rec); d.Outcome != Dropped || !d.Final || d.Endpoint != "gone" || d.Attempt != 0 {
		t.Fatalf("unknown endpoint: %+v", d)
	}
	if d := n.Deliver(t.Context(), "ops", []byte("{}"), rec); d.Outcome != Rejected || !d.Final {
		t.Fatalf("not an event: %+v", d)
	}
	if ds := rec.Deliveries(); len(ds) != 3 || ds[1].Outcome != Dropped || ds[1].Err == "" {
		t.Fatalf("records %+v", ds)
	}
	if got := len(rc.requests()); got != 1 {
		t.Fatalf("%d requests, want the one redirected", got)
	}
	if s := n.Stats(); s.Pending != 0 || s.Dropped != 1 || s.Rejected != 2 {
		t.Fatalf("stats %+v", s)
	}
}

// When its context ends mid-request or while waiting to retry, Deliver
// returns Abandoned, not final, and records nothing for it: the caller
// still holds the delivery.
func TestDeliverAbandonedWhenStopped(t *testing.T) {
	held := make(chan struct{})
	var once sync.Once
	rc := newReceiver(t, func(n int, w http.ResponseWriter, r *http.Request) {
		once.Do(func() { close(held) })
		<-r.Context().Done() // never answers
	})
	n, err := New(fastConfig(nil), []Endpoint{endpoint("ops", rc.srv.URL, "ops")})
	if err != nil {
		t.Fatal(err)
	}
	raw, _, err := n.Prepare(opened("ops"))
	if err != nil {
		t.Fatal(err)
	}
	rec := &MemoryRecorder{}
	ctx, cancel := context.WithCancel(t.Context())
	go func() { <-held; cancel() }()
	if d := n.Deliver(ctx, "ops", raw, rec); d.Outcome != Abandoned || d.Final {
		t.Fatalf("mid-request: %+v", d)
	}

	rc2 := newReceiver(t, func(n int, w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "3600")
		w.WriteHeader(http.StatusTooManyRequests)
	})
	cfg := fastConfig(nil)
	cfg.MaxRetryAfter = time.Hour
	n2, err := New(cfg, []Endpoint{endpoint("ops", rc2.srv.URL, "ops")})
	if err != nil {
		t.Fatal(err)
	}
	ctx2, cancel2 := context.WithCancel(t.Context())
	rec2 := &MemoryRecorder{}
	go func() {
		_ = rec2.Wait(ctx2, func(ds []Delivery) bool { return len(ds) == 1 })
		cancel2()
	}()
	if d := n2.Deliver(ctx2, "ops", raw, rec2); d.Outcome != Abandoned || d.Final || d.Attempt != 1 {
		t.Fatalf("waiting to retry: %+v", d)
	}
	if ds := rec.Deliveries(); len(ds) != 0 {
		t.Fatalf("recorded for the abandoned request: %+v", ds)
	}
	if ds := rec2.Deliveries(); len(ds) != 1 || ds[0].Outcome != Retrying {
		t.Fatalf("recorded while waiting: %+v", ds)
	}
	if s := n2.Stats(); s.Pending != 0 {
		t.Fatalf("stats %+v", s)
	}
	n.CloseIdleConnections()
	n2.CloseIdleConnections()
}
