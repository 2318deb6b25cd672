package approvals

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/tollgate-dev/tollgate/internal/controlplane/runner"
	"github.com/tollgate-dev/tollgate/internal/faults"
	"github.com/tollgate-dev/tollgate/internal/store"
	"github.com/tollgate-dev/tollgate/pkg/engine"
	"github.com/tollgate-dev/tollgate/pkg/plan"
	"github.com/tollgate-dev/tollgate/pkg/webhook"
)

// Notifier is pkg/webhook's Notifier as the outbox uses it: Prepare
// encodes a notice when the commit that causes it is built, Deliver sends
// one stored delivery (a Deliverer calls it).
type Notifier interface {
	Prepare(ev webhook.Event) (raw []byte, endpoints []string, err error)
	Sender
}

// Opened implements runner.AskHook: a standing approval may decide the ask at
// once; otherwise, if policy leaves nobody eligible, it escalates (never
// approved by default); and its audience is told. The opened notice was
// enqueued, held back, in the commit that opened the ask (Work): it is
// let go when the ask still waits for its audience, and dropped when a
// standing approval decided it or it escalated (the decided or escalated
// notice, enqueued by that commit, tells instead).
func (d *Desk) Opened(ctx context.Context, rec runner.Recorder, run *engine.Run, askID string) {
	tell := false
	defer func() { d.settleOpened(ctx, run, askID, tell) }()
	if d.applyStanding(ctx, rec, run, askID) {
		return
	}
	a := run.Asks[askID]
	if a == nil {
		return
	}
	if to, why, ok := d.unroutable(ctx, run, a); ok {
		_, err := rec.Event(ctx, run.ID, func(now time.Time) engine.Event {
			return engine.Escalate{Ask: a.ID, To: to, Reason: why, At: now}
		})
		if err == nil {
			return // the escalation's notice is enqueued by its commit
		}
		if !errors.Is(err, engine.ErrAlreadyDecided) {
			d.log().Warn("could not escalate an ask nobody may decide", "ask", askID, "error", err)
		}
	}
	tell = true
}

// Noticed implements runner.AskHook. A rung of the deadline ladder needs
// nothing after its commit: its notice was enqueued by the commit (Work).
func (d *Desk) Noticed(context.Context, runner.Recorder, *engine.Run, string, engine.NoticeKind) {}

// Closed implements runner.AskHook. How an ask ended needs nothing after
// its commit: its notice was enqueued by the commit (Work).
func (d *Desk) Closed(context.Context, runner.Recorder, *engine.Run, string, engine.AskState) {}

// noticeKind is the webhook event an ask's effect is told as, if any.
func noticeKind(e engine.Effect) (askID, kind string, ok bool) {
	switch e := e.(type) {
	case engine.AskOpened:
		return e.Ask, webhook.KindOpened, true
	case engine.AskNotice:
		switch e.Kind {
		case engine.NoticeReminder:
			return e.Ask, webhook.KindReminder, true
		case engine.NoticeEscalated:
			return e.Ask, webhook.KindEscalated, true
		}
	case engine.AskClosed:
		switch e.State {
		case engine.AskExpired:
			return e.Ask, webhook.KindExpired, true
		case engine.AskApproved, engine.AskConsumed, engine.AskRejected, engine.AskAnswered, engine.AskStale:
			return e.Ask, webhook.KindDecided, true
		}
	}
	return "", "", false
}

// notice is the event that tells the ask's audience, and the people it
// names, of kind. Its id names the run's version, so it is the same
// however often the commit is built and whichever replica sends it:
// receivers dedupe on it.
func (d *Desk) notice(run *engine.Run, a *engine.AskRun, kind string) webhook.Event {
	audience := a.Audience
	var people []string
	if audience == "" || audience == plan.AudienceRequester {
		audience, people = "", []string{run.Requester}
	}
	people = append(people, a.Approvers...)
	payload := map[string]any{"state": string(a.State), "requester": run.Requester, "payload_digest": a.PayloadDigest(),
		"answer_command": d.answerCommand(run, a)}
	if ds := d.deciders(run, a, kind); len(ds) > 0 {
		payload["deciders"] = ds
	}
	return webhook.Event{ID: noticeID(run, a.ID, kind), Kind: kind, AskID: store.AskID(run.ID, a.ID), RunID: run.ID,
		Title: a.Title, Audience: audience, People: people, ExpiresAt: a.ExpiresAt, OccurredAt: run.UpdatedAt,
		Payload: payload}
}

// maxNoticeDeciders bounds the people a notice names as able to decide.
const maxNoticeDeciders = 50

// deciders are the people policy finds able to decide an ask that asks a
// role, when its notice calls for a decision (opened, reminded,
// escalated): each gets a link of their own (a notice's links are bound to
// one person). Separation of duties keeps its excluded out. Who may decide
// is judged again at decision time; this only says whom to tell.
func (d *Desk) deciders(run *engine.Run, a *engine.AskRun, kind string) []string {
	if kind != webhook.KindOpened && kind != webhook.KindReminder && kind != webhook.KindEscalated {
		return nil
	}
	if d.cfg.Policy == nil || a.Audience == "" || a.Audience == plan.AudienceRequester {
		return nil
	}
	req := d.Requirement(context.Background(), run, a)
	var out []string // Principals holds each person once
	for _, p := range req.Principals {
		if len(out) == maxNoticeDeciders {
			break
		}
		if !slices.Contains(req.Excluded, p) {
			out = append(out, p)
		}
	}
	return out
}

func noticeID(run *engine.Run, askID, kind string) string {
	return fmt.Sprintf("%s/%s/%s/%d", run.ID, askID, kind, run.Version)
}

func (d *Desk) answerCommand(run *engine.Run, a *engine.AskRun) string {
	if d.cfg.AnswerCommand == nil {
		return ""
	}
	return d.cfg.AnswerCommand(run, a)
}

// DeliveryJournal records every webhook delivery attempt in the journal
// of the run it was about (webhook.Recorder); every notice carries one.
type DeliveryJournal struct{ Runner runner.Recorder }

// Delivered implements webhook.Recorder.
func (j DeliveryJournal) Delivered(ctx context.Context, d webhook.Delivery) error {
	if d.Outcome == webhook.Delivered {
		if err := faults.At(faults.AfterWebhookSent); err != nil {
			return err // as the record failing: the delivery was made
		}
	}
	runID, _, ok := strings.Cut(d.AskID, "/")
	if !ok {
		return fmt.Errorf("delivery for ask %q: no run", d.AskID)
	}
	_, err := j.Runner.Event(ctx, runID, func(now time.Time) engine.Event {
		return engine.Note{Kind: engine.JournalNoticeDelivery, At: now, Payload: map[string]any{"ask": d.AskID, "endpoint": d.Endpoint, "event": d.Kind,
			"delivery": d.ID, "attempt": d.Attempt, "outcome": string(d.Outcome), "status": d.Status, "error": d.Err, "final": d.Final}}
	})
	return err
}
