package webhook

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// A sender that keeps pending deliveries somewhere durable — a store
// shared by several processes — uses Prepare and Deliver instead of
// Notify and Run: Prepare encodes an event and names the endpoints that
// want it, the sender stores one delivery per endpoint, and whoever holds
// a stored delivery later hands it to Deliver, in this process or
// another. Deliver makes the attempts with the same signing, timeouts,
// retries, backoff, Retry-After and refusal of redirects as Run.
//
// A delivery handed to Deliver twice (a process died mid-delivery and
// another took it over) reaches the receiver twice, each request with
// its own Tollgate-Delivery id, and the same Event.ID: receivers that
// must act once per event dedupe on Event.ID.

// Prepare checks ev and encodes it as Notify would — setting ev.ID and
// ev.OccurredAt when empty, which a caller that may prepare the same
// event again sets itself, so that both encodings agree — and returns the
// JSON and the names of the endpoints that want it (Endpoint.Wants), in
// the order they were configured. It queues nothing.
func (n *Notifier) Prepare(ev Event) (raw []byte, endpoints []string, err error) {
	_, raw, eps, err := n.prepare(ev)
	if err != nil {
		return nil, nil, err
	}
	for _, e := range eps {
		endpoints = append(endpoints, e.Name)
	}
	return raw, endpoints, nil
}

// Deliver delivers raw, an event Prepare encoded, to the endpoint named
// endpoint, and returns when the delivery is final: each attempt, with
// the retries and backoff of Config, goes to rec (Config.Recorder when
// rec is nil) as it happens, the last one with Final set, and is
// returned. At most Concurrency requests of Deliver calls are in flight
// at once; a call waiting to retry holds none.
//
// An endpoint not configured now (a configuration changed since the
// delivery was stored) is final at once: Dropped, recorded. So is an raw
// that is not an event (Rejected).
//
// When ctx ends first, Deliver returns a Delivery with Outcome Abandoned
// and Final false, and records nothing for it: the caller still holds
// the delivery, to hand it to Deliver again, here or elsewhere.
func (n *Notifier) Deliver(ctx context.Context, endpoint string, raw []byte, rec Recorder) Delivery {
	var ev Event
	if err := json.Unmarshal(raw, &ev); err != nil || !KnownKind(ev.Kind) || ev.AskID == "" {
		j := &job{ep: Endpoint{Name: endpoint}, ev: Event{ID: ev.ID, Kind: ev.Kind, AskID: ev.AskID, Journal: rec}}
		d := n.settle(j, Delivery{Outcome: Rejected, Err: "not an event this sender can deliver"})
		n.record(ctx, j, d)
		return withJob(j, d)
	}
	j := &job{ev: Event{ID: ev.ID, Kind: ev.Kind, AskID: ev.AskID, Journal: rec}, raw: raw}
	ep, ok := n.endpoint(endpoint)
	if !ok {
		j.ep = Endpoint{Name: endpoint}
		d := n.settle(j, Delivery{Outcome: Dropped, Err: fmt.Sprintf("no endpoint named %q is configured", endpoint)})
		n.record(ctx, j, d)
		return withJob(j, d)
	}
	j.ep = ep
	n.pending.Add(1)
	abandoned := func() Delivery {
		n.pending.Add(-1)
		return withJob(j, Delivery{Outcome: Abandoned, Attempt: j.attempt, Err: "stopped before the delivery was final", At: n.cfg.Now()})
	}
	final := func(d Delivery) Delivery {
		d = n.settle(j, d)
		n.pending.Add(-1) // before the record, as in finish
		n.record(ctx, j, d)
		return withJob(j, d)
	}
	for {
		select {
		case n.sending <- struct{}{}:
		case <-ctx.Done():
			return abandoned()
		}
		j.attempt++
		n.attempts.Add(1)
		d, retryAfter, hasRetryAfter := n.send(ctx, j)
		<-n.sending
		switch {
		case d.Outcome == Abandoned:
			return abandoned()
		case d.Outcome != Retrying:
			return final(d)
		case j.attempt >= n.cfg.MaxAttempts:
			d.Outcome = Failed
			d.Err += fmt.Sprintf(" (attempt %d of %d)", j.attempt, n.cfg.MaxAttempts)
			return final(d)
		}
		d.RetryIn = n.retryDelay(j.attempt, retryAfter, hasRetryAfter)
		n.record(ctx, j, d)
		t := time.NewTimer(d.RetryIn)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return abandoned()
		}
	}
}

// endpoint returns the endpoint configured as name now.
func (n *Notifier) endpoint(name string) (Endpoint, bool) {
	for _, e := range *n.endpoints.Load() {
		if e.Name == name {
			return e, true
		}
	}
	return Endpoint{}, false
}

// withJob fills in what a returned Delivery says about its event, as
// record does for the recorded one.
func withJob(j *job, d Delivery) Delivery {
	d.EventID, d.Endpoint, d.Kind, d.AskID = j.ev.ID, j.ep.Name, j.ev.Kind, j.ev.AskID
	return d
}

// CloseIdleConnections closes the idle connections of the Notifier's own
// client (Config.Client nil), as Run does when it returns: a sender that
// uses Deliver alone calls it when it stops.
func (n *Notifier) CloseIdleConnections() {
	if n.ownClient {
		n.client.CloseIdleConnections()
	}
}
