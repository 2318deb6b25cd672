package notice

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/pkg/webhook"
)

var testAt = time.Date(2030, 5, 1, 14, 0, 0, 0, time.UTC)

func testAttempts(log *bytes.Buffer) Attempts {
	h := slog.Handler(slog.DiscardHandler)
	if log != nil {
		h = slog.NewTextHandler(log, &slog.HandlerOptions{Level: slog.LevelDebug})
	}
	return Attempts{Name: "pigeon", Log: slog.New(h), Now: func() time.Time { return testAt },
		Max: 3, BaseBackoff: time.Millisecond, MaxBackoff: 4 * time.Millisecond}
}

func TestDelay(t *testing.T) {
	for _, tc := range []struct {
		name             string
		base, maxBackoff time.Duration
		n                int
		retryAfter       time.Duration
		lo, hi           time.Duration
	}{
		{"first", time.Second, time.Minute, 1, 0, 500 * time.Millisecond, time.Second},
		{"doubling", time.Second, time.Minute, 3, 0, 2 * time.Second, 4 * time.Second},
		{"capped", time.Second, time.Minute, 30, 0, 30 * time.Second, time.Minute},
		{"a longer wait asked for", time.Second, time.Minute, 1, 20 * time.Second, 20 * time.Second, 20 * time.Second},
		{"a shorter one changes nothing", time.Second, time.Minute, 3, time.Millisecond, 2 * time.Second, 4 * time.Second},
		{"a wait asked for is capped too", time.Second, time.Minute, 1, time.Hour, time.Minute, time.Minute},
		{"no overflow", time.Duration(1) << 61, time.Duration(1)<<62 + 1, 10, 0, time.Duration(1) << 61, time.Duration(1)<<62 + 1},
		{"base over the cap", time.Minute, time.Second, 1, 0, 500 * time.Millisecond, time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := Attempts{BaseBackoff: tc.base, MaxBackoff: tc.maxBackoff}
			for range 200 {
				if d := a.Delay(tc.n, tc.retryAfter); d < tc.lo || d > tc.hi {
					t.Fatalf("Delay(%d, %v) = %v, want within [%v, %v]", tc.n, tc.retryAfter, d, tc.lo, tc.hi)
				}
			}
		})
	}
}

func TestDeliver(t *testing.T) {
	ev := webhook.Event{ID: "run_01/ask_1/ask.opened/3", Kind: webhook.KindOpened, AskID: "run_01/ask_1"}
	tried := func(o webhook.Outcome, err string) webhook.Delivery {
		return webhook.Delivery{ID: "dlv", Outcome: o, Err: err, At: testAt}
	}
	for _, tc := range []struct {
		name     string
		attempts []webhook.Delivery
		want     string // each recorded delivery: attempt:outcome final?
		err      string // the last one's
	}{
		{"delivered at once", []webhook.Delivery{tried(webhook.Delivered, "")}, "1:delivered final", ""},
		{"retried, then delivered", []webhook.Delivery{tried(webhook.Retrying, "busy"), tried(webhook.Delivered, "")}, "1:retrying, 2:delivered final", ""},
		{"refused at once", []webhook.Delivery{tried(webhook.Rejected, "no")}, "1:rejected final", "no"},
		{"retried to the end", []webhook.Delivery{tried(webhook.Retrying, "busy"), tried(webhook.Retrying, "busy"), tried(webhook.Retrying, "busy")},
			"1:retrying, 2:retrying, 3:failed final", "busy (attempt 3 of 3)"},
		{"abandoned in an attempt: not recorded", []webhook.Delivery{tried(webhook.Retrying, "busy"), tried(webhook.Abandoned, "stopped during the attempt")}, "1:retrying", "stopped during the attempt"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var rec webhook.MemoryRecorder
			n := 0
			d := testAttempts(nil).Deliver(t.Context(), &rec, ev, "pigeon:dave", func() (webhook.Delivery, time.Duration) {
				n++
				return tc.attempts[n-1], 0
			})
			var got []string
			for _, r := range rec.Deliveries() {
				s := fmt.Sprintf("%d:%s", r.Attempt, r.Outcome)
				if r.Final {
					s += " final"
				}
				if r.EventID != ev.ID || r.Endpoint != "pigeon:dave" || r.Kind != ev.Kind || r.AskID != ev.AskID || r.ID != "dlv" {
					t.Errorf("recorded %+v: not about the event, endpoint and attempt", r)
				}
				if (r.Outcome == webhook.Retrying) != (r.RetryIn > 0) {
					t.Errorf("recorded %+v: RetryIn %v", r, r.RetryIn)
				}
				got = append(got, s)
			}
			if strings.Join(got, ", ") != tc.want || n != len(tc.attempts) || d.Err != tc.err || d.Attempt != n {
				t.Fatalf("recorded %q after %d attempts, returned %+v; want %q, err %q", got, n, d, tc.want, tc.err)
			}
			if last := rec.Deliveries(); d.Final && last[len(last)-1] != d {
				t.Errorf("returned %+v, recorded last %+v", d, last[len(last)-1])
			}
		})
	}
}

// A wait the channel asks for is waited, and ctx ending in a wait
// abandons the delivery unrecorded.
func TestDeliverWaitsAndStops(t *testing.T) {
	ev := webhook.Event{ID: "e1", Kind: webhook.KindOpened, AskID: "a1"}
	a := testAttempts(nil)
	a.MaxBackoff = time.Hour
	var rec webhook.MemoryRecorder
	ctx, cancel := context.WithCancel(t.Context())
	d := a.Deliver(ctx, &rec, ev, "pigeon:dave", func() (webhook.Delivery, time.Duration) {
		time.AfterFunc(10*time.Millisecond, cancel)
		return webhook.Delivery{Outcome: webhook.Retrying, Err: "slow down"}, time.Hour
	})
	if d.Outcome != webhook.Abandoned || d.Final || d.Attempt != 1 || d.EventID != "e1" || d.Endpoint != "pigeon:dave" || !d.At.Equal(testAt) {
		t.Fatalf("delivery = %+v, want Abandoned after attempt 1", d)
	}
	if got := rec.Deliveries(); len(got) != 1 || got[0].Outcome != webhook.Retrying || got[0].RetryIn != time.Hour {
		t.Fatalf("recorded %+v, want the one Retrying attempt, waiting the hour asked for", got)
	}
}

func TestDecodeAndDrop(t *testing.T) {
	good, _ := json.Marshal(webhook.Event{ID: "e1", Kind: webhook.KindDecided, AskID: "a1"})
	for _, tc := range []struct {
		name string
		raw  string
		ok   bool
	}{
		{"an event", string(good), true},
		{"not JSON", `{"id":`, false},
		{"an unknown kind", `{"id":"e1","kind":"ask.teleported","ask_id":"a1"}`, false},
		{"about no ask", `{"id":"e1","kind":"ask.opened"}`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var rec webhook.MemoryRecorder
			ev, d, ok := testAttempts(nil).Decode(t.Context(), "pigeon:dave", []byte(tc.raw), &rec)
			if ok != tc.ok {
				t.Fatalf("Decode ok = %v, want %v (%+v)", ok, tc.ok, d)
			}
			if ok {
				if ev.ID != "e1" || ev.AskID != "a1" || len(rec.Deliveries()) != 0 {
					t.Fatalf("Decode = %+v, recorded %+v", ev, rec.Deliveries())
				}
				return
			}
			if d.Outcome != webhook.Rejected || !d.Final || d.Endpoint != "pigeon:dave" || !d.At.Equal(testAt) || len(rec.Deliveries()) != 1 || rec.Deliveries()[0] != d {
				t.Fatalf("Decode's delivery %+v, recorded %+v; want it Rejected, final and recorded", d, rec.Deliveries())
			}
		})
	}
	var rec webhook.MemoryRecorder
	d := testAttempts(nil).Drop(t.Context(), &rec, webhook.Event{ID: "e1", Kind: webhook.KindOpened, AskID: "a1"}, "pigeon:eve", "no pigeon for eve")
	if d.Outcome != webhook.Dropped || !d.Final || d.Err != "no pigeon for eve" || d.EventID != "e1" || d.AskID != "a1" || d.Kind != webhook.KindOpened ||
		len(rec.Deliveries()) != 1 || rec.Deliveries()[0] != d {
		t.Fatalf("Drop = %+v, recorded %+v", d, rec.Deliveries())
	}
}

func TestRecordLogs(t *testing.T) {
	var log bytes.Buffer
	a := testAttempts(&log)
	a.Record(t.Context(), nil, webhook.Delivery{Endpoint: "pigeon:dave", Outcome: webhook.Delivered})
	a.Record(t.Context(), webhook.RecorderFunc(func(context.Context, webhook.Delivery) error { return errors.New("journal full") }),
		webhook.Delivery{Endpoint: "pigeon:eve", Outcome: webhook.Rejected, Err: "no perch"})
	for _, want := range []string{
		`level=DEBUG msg="pigeon notice delivered" endpoint=pigeon:dave`,
		`level=WARN msg="pigeon notice not delivered" endpoint=pigeon:eve`,
		`outcome=rejected err="no perch"`,
		`level=WARN msg="pigeon delivery not recorded" endpoint=pigeon:eve`,
		`error="journal full"`,
	} {
		if !strings.Contains(log.String(), want) {
			t.Errorf("log lacks %q:\n%s", want, log.String())
		}
	}
}

func TestNewID(t *testing.T) {
	a, b := NewID("dlv_"), NewID("dlv_")
	if len(a) != len("dlv_")+32 || !strings.HasPrefix(a, "dlv_") || a == b {
		t.Fatalf("NewID = %q, %q", a, b)
	}
}

func TestDefault(t *testing.T) {
	for _, tc := range []struct{ set, want time.Duration }{{0, time.Second}, {-1, time.Second}, {time.Millisecond, time.Millisecond}} {
		d := tc.set
		if Default(&d, time.Second); d != tc.want {
			t.Errorf("Default(%v, 1s) = %v, want %v", tc.set, d, tc.want)
		}
	}
	n := 0
	if Default(&n, 5); n != 5 {
		t.Errorf("Default(0, 5) = %d", n)
	}
}
