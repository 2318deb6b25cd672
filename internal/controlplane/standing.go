package controlplane

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	tollgatev1 "github.com/tollgate-dev/tollgate/gen/tollgate/v1"
	"github.com/tollgate-dev/tollgate/internal/controlplane/errkind"
	"github.com/tollgate-dev/tollgate/internal/controlplane/ids"
	"github.com/tollgate-dev/tollgate/internal/controlplane/runner"
	"github.com/tollgate-dev/tollgate/internal/store"
	"github.com/tollgate-dev/tollgate/pkg/authz"
	"github.com/tollgate-dev/tollgate/pkg/engine"
	"github.com/tollgate-dev/tollgate/pkg/limits"
	"github.com/tollgate-dev/tollgate/pkg/plan"
	"github.com/tollgate-dev/tollgate/pkg/standing"
)

// approveException approves an ask and grants a standing approval over
// its scope. The scope must contain this ask's payload, and must not be
// wider than the granter's own authority now: an amount-bearing action
// needs an amount ceiling the granter may approve.
func (s *Services) approveException(ctx context.Context, who string, run *engine.Run, a *engine.AskRun, auth authority, judged engine.Judged, d *tollgatev1.ApproveException) (*tollgatev1.DecideResponse, error) {
	if a.Type != plan.StopMenu || len(a.Payload) == 0 {
		return nil, fmt.Errorf("%q governs no action; a standing approval needs one: %w", a.Title, errkind.Invalid)
	}
	if strings.TrimSpace(d.GetReason()) == "" {
		return nil, fmt.Errorf("a standing approval needs a reason: %w", errkind.Invalid)
	}
	sc, err := standing.Parse(d.GetScope())
	if err != nil {
		return nil, fmt.Errorf("%w: %w", err, errkind.Invalid)
	}
	now, err := s.cfg.Store.Now(ctx)
	if err != nil {
		return nil, err
	}
	until := d.GetUntil().AsTime()
	if d.GetUntil() == nil || !until.After(now) {
		return nil, fmt.Errorf("a standing approval needs --until in the future: %w", errkind.Invalid)
	}
	for _, p := range a.Payload {
		if ok, why := sc.Match(p.Server+"."+p.Tool, p.Args); !ok {
			return nil, fmt.Errorf("the scope %q does not cover this ask's %s: %s: %w", sc, p.Step, why, errkind.Invalid)
		}
	}
	if err := s.withinAuthority(ctx, who, run, a, sc); err != nil {
		return nil, err
	}
	x := store.Exception{ID: "sx_" + ids.Token(), AskID: store.AskID(run.ID, a.ID), GrantedBy: who, GrantedAt: now, Until: until.UTC(),
		Scope: sc.String(), Reason: d.GetReason()}
	opt := d.GetOptionId()
	if opt == "" {
		opt = "1"
	}
	why := fmt.Sprintf("%s; and granted standing approval %s (%s) until %s", auth.why, x.ID, x.Scope, x.Until.Format(time.RFC3339))
	tr, err := s.cfg.Runner.Event(ctx, run.ID, func(now time.Time) engine.Event {
		return engine.Decide{Ask: a.ID, Actor: who, Option: opt, Reason: d.GetReason(), Why: why, Policy: auth.policy, Quorum: auth.quorum, Judged: judged, At: now}
	})
	if err != nil {
		return nil, err
	}
	// Stored after the approval it came with: if this write fails, the
	// ask is approved and no standing approval exists — the safe side.
	if err := s.cfg.Store.PutException(ctx, x); err != nil {
		return nil, fmt.Errorf("the ask is approved, but the standing approval was not stored: %w", err)
	}
	na := tr.Run.Asks[a.ID]
	out := &tollgatev1.DecideResponse{Ask: askToProto(tr.Run, na, ""), RunState: runStateToProto[tr.Run.State]}
	if n := len(out.Ask.Decisions); n > 0 {
		out.Decision = out.Ask.Decisions[n-1]
	}
	return out, nil
}

// withinAuthority checks a scope is no wider than what who may approve
// now for this run: each governed action, at the scope's amount ceiling.
func (s *Services) withinAuthority(ctx context.Context, who string, run *engine.Run, a *engine.AskRun, sc standing.Scope) error {
	if s.cfg.Authority == nil {
		return fmt.Errorf("no policy is loaded, so nobody may grant standing approvals: %w", errkind.Denied)
	}
	ms := s.matters(run, a)
	for i, m := range ms {
		if m.err != nil {
			return fmt.Errorf("%w: %w", m.err, errkind.Invalid)
		}
		if m.Amount != nil {
			ceiling, ok := sc.AtMost["amount"]
			if !ok {
				return fmt.Errorf("%s carries an amount: bound it in the scope (amount<=N): %w", m.Action, errkind.Invalid)
			}
			ms[i].Amount = &ceiling
		}
	}
	// Policy alone, with no recipe narrowing: the scope covers later asks.
	if auth, err := s.judge(ctx, who, ms, authz.RecipeAsk{}); err != nil || !auth.ok {
		return fmt.Errorf("the scope is wider than your authority: %s: %w", auth.why, errkind.Denied)
	}
	return nil
}

// applyStanding approves an ask whose every governed action lies within
// one active standing approval — under the granter's authority as policy
// judges it now, separation of duties included — and the decision names
// the standing approval. It reports whether it did.
func (s *Services) applyStanding(ctx context.Context, rec runner.Recorder, run *engine.Run, askID string) bool {
	a := run.Asks[askID]
	if a == nil || a.Type != plan.StopMenu || len(a.Payload) == 0 || s.cfg.Authority == nil {
		return false
	}
	xs, err := s.cfg.Store.ListExceptions(ctx)
	if err != nil {
		s.log().Warn("standing approvals not read; the ask waits for a person", "ask", askID, "error", err)
		return false
	}
	now, err := s.cfg.Store.Now(ctx)
	if err != nil {
		return false
	}
	for _, x := range xs {
		if x.Revoked || !now.Before(x.Until) {
			continue
		}
		sc, err := standing.Parse(x.Scope)
		if err != nil {
			continue
		}
		covered := true
		for _, p := range a.Payload {
			if ok, _ := sc.Match(p.Server+"."+p.Tool, p.Args); !ok {
				covered = false
				break
			}
		}
		if !covered {
			continue
		}
		auth, err := s.authorize(ctx, x.GrantedBy, run, a, decideStanding)
		if err != nil || !auth.ok {
			continue // the granter may not decide this one (e.g. they requested it)
		}
		why := fmt.Sprintf("automatically, by standing approval %s (%s) granted by %s until %s; %s", x.ID, x.Scope, x.GrantedBy, x.Until.Format(time.RFC3339), auth.why)
		// Pinned to the ask the scope and the granter's authority were
		// judged on (the payload the scope matched).
		judged := engine.JudgedOn(a, a.PayloadDigest(), a.EvidenceDigest(), true)
		_, err = rec.Event(ctx, run.ID, func(now time.Time) engine.Event {
			return engine.Decide{Ask: a.ID, Actor: x.GrantedBy, Option: "1", Reason: "standing approval " + x.ID, Why: why, Policy: auth.policy, Quorum: auth.quorum, Judged: judged, At: now}
		})
		if err != nil && !errors.Is(err, engine.ErrAlreadyDecided) {
			s.log().Warn("standing approval not applied", "ask", askID, "exception", x.ID, "error", err)
			return false
		}
		return true
	}
	return false
}

// ListExceptions lists standing approvals: active ones, or all.
func (s *Services) ListExceptions(ctx context.Context, req *tollgatev1.ListExceptionsRequest) (*tollgatev1.ListExceptionsResponse, error) {
	who, err := caller(ctx)
	if err != nil {
		return nil, err
	}
	xs, err := s.cfg.Store.ListExceptions(ctx)
	if err != nil {
		return nil, err
	}
	now, err := s.cfg.Store.Now(ctx)
	if err != nil {
		return nil, err
	}
	out := &tollgatev1.ListExceptionsResponse{}
	for _, x := range xs {
		if !req.GetIncludeInactive() && (x.Revoked || !now.Before(x.Until)) || !s.seesException(who, x) {
			continue
		}
		out.Exceptions = append(out.Exceptions, exceptionToProto(x))
	}
	return out, nil
}

// RevokeException revokes a standing approval: its granter may, and so
// may anyone policy lets decide its action.
func (s *Services) RevokeException(ctx context.Context, req *tollgatev1.RevokeExceptionRequest) (*tollgatev1.RevokeExceptionResponse, error) {
	who, err := caller(ctx)
	if err != nil {
		return nil, err
	}
	if strings.TrimSpace(req.GetReason()) == "" {
		return nil, fmt.Errorf("revoking needs a reason: %w", errkind.Invalid)
	}
	xs, err := s.cfg.Store.ListExceptions(ctx)
	if err != nil {
		return nil, err
	}
	for _, x := range xs {
		if x.ID != req.GetExceptionId() {
			continue
		}
		if x.Revoked {
			return nil, fmt.Errorf("%s was revoked by %s at %s: %w", x.ID, x.RevokedBy, x.RevokedAt.Format(time.RFC3339), engine.ErrAlreadyDecided)
		}
		if who != x.GrantedBy && !s.mayGovern(who, x.Scope) {
			return nil, fmt.Errorf("only %s or someone policy lets decide its action may revoke %s: %w", x.GrantedBy, x.ID, errkind.Denied)
		}
		now, err := s.cfg.Store.Now(ctx)
		if err != nil {
			return nil, err
		}
		x.Revoked, x.RevokedBy, x.RevokedAt, x.RevokeReason = true, who, now, req.GetReason()
		if err := s.cfg.Store.PutException(ctx, x); err != nil {
			return nil, err
		}
		return &tollgatev1.RevokeExceptionResponse{Exception: exceptionToProto(x)}, nil
	}
	return nil, fmt.Errorf("standing approval %s: %w", limits.Short(req.GetExceptionId()), errkind.NotFound)
}

// mayGovern reports whether who holds a role policy lets decide scope's
// action at all.
func (s *Services) mayGovern(who, scope string) bool {
	sc, err := standing.Parse(scope)
	if err != nil || s.cfg.Authority == nil {
		return false
	}
	f, ok := s.cfg.Authority.Floor(s.cfg.Domain, sc.Action)
	if !ok {
		return false
	}
	for _, r := range f.Rules {
		if s.cfg.Authority.Holds(who, r.Role, s.cfg.Domain) {
			return true
		}
	}
	return false
}

func exceptionToProto(x store.Exception) *tollgatev1.StandingException {
	return &tollgatev1.StandingException{Id: x.ID, AskId: x.AskID, GrantedBy: x.GrantedBy, GrantedAt: ts(x.GrantedAt), Until: ts(x.Until),
		Scope: x.Scope, Revoked: x.Revoked, RevokedBy: x.RevokedBy, RevokedAt: ts(x.RevokedAt), RevokeReason: x.RevokeReason}
}
