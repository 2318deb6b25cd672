package controlplane

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/tollgate-dev/tollgate/internal/controlplane/runner"
	"github.com/tollgate-dev/tollgate/internal/store"
	"github.com/tollgate-dev/tollgate/pkg/authz"
	"github.com/tollgate-dev/tollgate/pkg/engine"
	"github.com/tollgate-dev/tollgate/pkg/plan"
	"github.com/tollgate-dev/tollgate/pkg/webhook"
)

// Notifier sends ask notices to people's webhooks (pkg/webhook). Notify
// must not block.
type Notifier interface {
	Notify(ctx context.Context, ev webhook.Event) error
}

// Opened implements AskHook: a standing approval may decide the ask at
// once; otherwise, if policy leaves nobody eligible, it escalates (never
// approved by default); and its audience is told.
func (s *Services) Opened(ctx context.Context, rec runner.Recorder, run *engine.Run, askID string) {
	if s.applyStanding(ctx, rec, run, askID) {
		return
	}
	a := run.Asks[askID]
	if a == nil {
		return
	}
	if to, why, ok := s.unroutable(ctx, run, a); ok {
		_, err := rec.Event(ctx, run.ID, func(now time.Time) engine.Event {
			return engine.Escalate{Ask: a.ID, To: to, Reason: why, At: now}
		})
		if err == nil {
			return // the escalation's notice goes out from Noticed
		}
		if !errors.Is(err, engine.ErrAlreadyDecided) {
			s.log().Warn("could not escalate an ask nobody may decide", "ask", askID, "error", err)
		}
	}
	s.notify(ctx, run, a, webhook.KindOpened)
}

// Noticed implements AskHook: a rung of the deadline ladder.
func (s *Services) Noticed(ctx context.Context, _ runner.Recorder, run *engine.Run, askID, kind string) {
	a := run.Asks[askID]
	if a == nil {
		return
	}
	switch kind {
	case "reminder":
		s.notify(ctx, run, a, webhook.KindReminder)
	case "escalated":
		s.notify(ctx, run, a, webhook.KindEscalated)
	}
}

// Closed implements AskHook: the audience hears how it ended.
func (s *Services) Closed(ctx context.Context, _ runner.Recorder, run *engine.Run, askID string, state engine.AskState) {
	a := run.Asks[askID]
	if a == nil {
		return
	}
	switch state {
	case engine.AskExpired:
		s.notify(ctx, run, a, webhook.KindExpired)
	case engine.AskApproved, engine.AskConsumed, engine.AskRejected, engine.AskAnswered, engine.AskStale:
		s.notify(ctx, run, a, webhook.KindDecided)
	}
}

// unroutable reports whether nobody may decide the ask as asked, and
// where it should go instead: the recipe's `escalate … to`, else the
// control plane's configured role.
func (s *Services) unroutable(ctx context.Context, run *engine.Run, a *engine.AskRun) (to, why string, ok bool) {
	r, isRouter := s.cfg.Authority.(Router)
	if !isRouter || a.Type != plan.StopMenu || len(a.Payload) == 0 || a.EscalatedTo != "" {
		return "", "", false
	}
	for _, p := range a.Payload {
		m, err := s.matter(run, p)
		if err != nil {
			return "", "", false
		}
		rt, _ := r.Route(ctx, m, authz.RecipeAsk{Audience: a.Audience, Approvers: a.Approvers, Quorum: a.Quorum})
		if !rt.Escalate {
			continue
		}
		to = a.EscalateTo
		if to == "" {
			to = s.cfg.EscalateTo
		}
		if to == "" || to == a.Audience {
			s.log().Warn("nobody may decide this ask and no escalation role is configured; it waits", "ask", a.ID, "why", rt.Reason)
			return "", "", false
		}
		return to, "nobody eligible: " + rt.Reason, true
	}
	return "", "", false
}

// Router is the routing half of the policy (pkg/authz).
type Router interface {
	Route(ctx context.Context, m authz.Matter, ask authz.RecipeAsk) (authz.Route, error)
}

func (s *Services) notify(ctx context.Context, run *engine.Run, a *engine.AskRun, kind string) {
	if s.cfg.Notifier == nil {
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
			"answer_command": answerCommand(run, a)}}
	if err := s.cfg.Notifier.Notify(ctx, ev); err != nil {
		s.log().Warn("notice not queued", "ask", ev.AskID, "kind", kind, "error", err)
	}
}

// DeliveryJournal records every webhook delivery attempt in the journal
// of the run it was about (webhook.Recorder).
type DeliveryJournal struct{ Runner runner.Recorder }

// Delivered implements webhook.Recorder.
func (j DeliveryJournal) Delivered(ctx context.Context, d webhook.Delivery) error {
	runID, _, ok := strings.Cut(d.AskID, "/")
	if !ok {
		return fmt.Errorf("delivery for ask %q: no run", d.AskID)
	}
	_, err := j.Runner.Event(ctx, runID, func(now time.Time) engine.Event {
		return engine.Note{Kind: "notice.delivery", At: now, Payload: map[string]any{"ask": d.AskID, "endpoint": d.Endpoint, "event": d.Kind,
			"delivery": d.ID, "attempt": d.Attempt, "outcome": string(d.Outcome), "status": d.Status, "error": d.Err, "final": d.Final}}
	})
	return err
}
