package notice

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/tollgate-dev/tollgate/pkg/webhook"
)

// Attempts is how a notifier makes a delivery: its attempts, the waits
// between them, and the record and log of each. Every field is required
// (a notifier's New fills in its defaults).
type Attempts struct {
	Name        string // the channel, first word of every log line: "slack", "email"
	Log         *slog.Logger
	Now         func() time.Time
	Max         int           // attempts per delivery
	BaseBackoff time.Duration // first retry wait, doubling
	MaxBackoff  time.Duration // longest retry wait, a channel's own included
}

// Deliverable reports whether ev is an event a notifier delivers: a kind
// pkg/webhook knows, about an ask.
func Deliverable(ev webhook.Event) bool {
	return webhook.KnownKind(ev.Kind) && ev.AskID != ""
}

// Decode is raw, a webhook.Event as webhook.Notifier.Prepare encodes it.
// When it is not one a notifier delivers (Deliverable), ok is false and
// d is its final delivery to endpoint, Rejected and recorded.
func (a Attempts) Decode(ctx context.Context, endpoint string, raw []byte, rec webhook.Recorder) (ev webhook.Event, d webhook.Delivery, ok bool) {
	if err := json.Unmarshal(raw, &ev); err != nil || !Deliverable(ev) {
		d = webhook.Delivery{EventID: ev.ID, Endpoint: endpoint, Kind: ev.Kind, AskID: ev.AskID, Outcome: webhook.Rejected, Err: "not an event this sender can deliver", At: a.Now(), Final: true}
		a.Record(ctx, rec, d)
		return ev, d, false
	}
	return ev, webhook.Delivery{}, true
}

// Drop is ev's final delivery to endpoint when it cannot be delivered
// there (not configured now), because of why: Dropped, and recorded.
func (a Attempts) Drop(ctx context.Context, rec webhook.Recorder, ev webhook.Event, endpoint, why string) webhook.Delivery {
	d := webhook.Delivery{EventID: ev.ID, Endpoint: endpoint, Kind: ev.Kind, AskID: ev.AskID, Outcome: webhook.Dropped, Err: why, At: a.Now(), Final: true}
	a.Record(ctx, rec, d)
	return d
}

// Deliver delivers ev to endpoint by attempt, and returns when the
// delivery is final, as pkg/webhook's Deliver does: every attempt goes to
// rec as it happens, the last with Final set. attempt makes one attempt
// and says how it went (ID, At, Outcome, Status, Err, Duration; the rest
// is filled in here) and how long the channel asked to be left alone
// (0: no wish). A Retrying attempt is made again after Delay, up to Max
// (Failed after); any other outcome is final. When ctx ends first — or
// attempt says Abandoned — the result is Abandoned, not Final, and not
// recorded.
func (a Attempts) Deliver(ctx context.Context, rec webhook.Recorder, ev webhook.Event, endpoint string, attempt func() (webhook.Delivery, time.Duration)) webhook.Delivery {
	for n := 1; ; n++ {
		d, retryAfter := attempt()
		d.EventID, d.Endpoint, d.Kind, d.AskID, d.Attempt = ev.ID, endpoint, ev.Kind, ev.AskID, n
		switch {
		case d.Outcome == webhook.Abandoned:
			d.Final = false
			return d
		case d.Outcome != webhook.Retrying:
			d.Final = true
			a.Record(ctx, rec, d)
			return d
		case n >= a.Max:
			d.Outcome, d.Final = webhook.Failed, true
			d.Err += fmt.Sprintf(" (attempt %d of %d)", n, a.Max)
			a.Record(ctx, rec, d)
			return d
		}
		d.RetryIn = a.Delay(n, retryAfter)
		a.Record(ctx, rec, d)
		t := time.NewTimer(d.RetryIn)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return webhook.Delivery{EventID: ev.ID, Endpoint: endpoint, Kind: ev.Kind, AskID: ev.AskID, Attempt: n,
				Outcome: webhook.Abandoned, Err: "stopped before the delivery was final", At: a.Now()}
		}
	}
}

// Delay is the wait after attempt n failed: BaseBackoff·2^(n-1) with
// equal jitter (half of it fixed, half random), or retryAfter when that
// is longer, capped at MaxBackoff.
func (a Attempts) Delay(n int, retryAfter time.Duration) time.Duration {
	d := a.BaseBackoff
	for i := 1; i < n && d < a.MaxBackoff; i++ {
		if d > a.MaxBackoff/2 {
			d = a.MaxBackoff
			break
		}
		d *= 2
	}
	d = max(min(d, a.MaxBackoff), 0)
	d = d/2 + rand.N(d-d/2+1)
	return min(max(d, retryAfter), a.MaxBackoff)
}

// Record hands d to rec (when there is one) and logs it: at debug when
// delivered, else as a warning.
func (a Attempts) Record(ctx context.Context, rec webhook.Recorder, d webhook.Delivery) {
	attrs := []any{"endpoint", d.Endpoint, "kind", d.Kind, "ask", d.AskID, "event", d.EventID, "attempt", d.Attempt, "outcome", string(d.Outcome)}
	if d.Err != "" {
		attrs = append(attrs, "err", d.Err)
	}
	if d.Outcome == webhook.Delivered {
		a.Log.DebugContext(ctx, a.Name+" notice delivered", attrs...)
	} else {
		a.Log.WarnContext(ctx, a.Name+" notice not delivered", attrs...)
	}
	if rec == nil {
		return
	}
	if err := rec.Delivered(ctx, d); err != nil {
		a.Log.WarnContext(ctx, a.Name+" delivery not recorded", append(attrs, "error", err)...)
	}
}

// NewID returns prefix and 32 random hex digits: a delivery's id.
func NewID(prefix string) string {
	var b [16]byte
	crand.Read(b[:]) // never fails
	return prefix + hex.EncodeToString(b[:])
}

// Default sets *p, one of a notifier's bounds, to v when it is zero or
// less: in a Config, zero means the default.
func Default[T ~int | ~int64](p *T, v T) {
	if *p <= 0 {
		*p = v
	}
}
