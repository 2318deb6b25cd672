package approvals

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/tollgate-dev/tollgate/internal/controlplane/runner"
	"github.com/tollgate-dev/tollgate/internal/store"
	"github.com/tollgate-dev/tollgate/pkg/engine"
	"github.com/tollgate-dev/tollgate/pkg/plan"
	"github.com/tollgate-dev/tollgate/pkg/webhook"
)

// Notifier sends ask notices to people's webhooks (pkg/webhook). Notify
// must not block.
type Notifier interface {
	Notify(ctx context.Context, ev webhook.Event) error
}

// Opened implements runner.AskHook: a standing approval may decide the ask at
// once; otherwise, if policy leaves nobody eligible, it escalates (never
// approved by default); and its audience is told.
func (d *Desk) Opened(ctx context.Context, rec runner.Recorder, run *engine.Run, askID string) {
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
			return // the escalation's notice goes out from Noticed
		}
		if !errors.Is(err, engine.ErrAlreadyDecided) {
			d.log().Warn("could not escalate an ask nobody may decide", "ask", askID, "error", err)
		}
	}
	d.notify(ctx, rec, run, a, webhook.KindOpened)
}

// Noticed implements runner.AskHook: a rung of the deadline ladder.
func (d *Desk) Noticed(ctx context.Context, rec runner.Recorder, run *engine.Run, askID string, kind engine.NoticeKind) {
	a := run.Asks[askID]
	if a == nil {
		return
	}
	switch kind {
	case engine.NoticeReminder:
		d.notify(ctx, rec, run, a, webhook.KindReminder)
	case engine.NoticeEscalated:
		d.notify(ctx, rec, run, a, webhook.KindEscalated)
	}
}

// Closed implements runner.AskHook: the audience hears how it ended.
func (d *Desk) Closed(ctx context.Context, rec runner.Recorder, run *engine.Run, askID string, state engine.AskState) {
	a := run.Asks[askID]
	if a == nil {
		return
	}
	switch state {
	case engine.AskExpired:
		d.notify(ctx, rec, run, a, webhook.KindExpired)
	case engine.AskApproved, engine.AskConsumed, engine.AskRejected, engine.AskAnswered, engine.AskStale:
		d.notify(ctx, rec, run, a, webhook.KindDecided)
	}
}

// notify tells the ask's audience, and the people it names, of kind;
// each delivery attempt is recorded in the run's journal through rec.
func (d *Desk) notify(ctx context.Context, rec runner.Recorder, run *engine.Run, a *engine.AskRun, kind string) {
	if d.cfg.Notifier == nil {
		return
	}
	audience := a.Audience
	var people []string
	if audience == "" || audience == plan.AudienceRequester {
		audience, people = "", []string{run.Requester}
	}
	people = append(people, a.Approvers...)
	ev := webhook.Event{ID: fmt.Sprintf("%s/%s/%s/%d", run.ID, a.ID, kind, run.Version), Kind: kind, AskID: store.AskID(run.ID, a.ID), RunID: run.ID,
		Title: a.Title, Audience: audience, People: people, ExpiresAt: a.ExpiresAt,
		Payload: map[string]any{"state": string(a.State), "requester": run.Requester, "payload_digest": a.PayloadDigest(),
			"answer_command": d.answerCommand(run, a)},
		Journal: DeliveryJournal{Runner: rec}}
	if err := d.cfg.Notifier.Notify(ctx, ev); err != nil {
		d.log().Warn("notice not queued", "ask", ev.AskID, "kind", kind, "error", err)
	}
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
