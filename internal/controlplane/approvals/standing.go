package approvals

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

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

// Standing approvals (DESIGN.md §5 "Decisions"): a person approving an
// ask may grant, with it, a standing approval over a scope (package
// standing) until a date; a later ask whose every governed action lies
// within the scope is approved by it at once, judged as its granter now.
// They are listed and revocable. The store keeps them as store.Standing.

// StandingGrant is what a person asks for when approving an ask with a
// standing approval.
type StandingGrant struct {
	// Option is the option approved ("" is "1").
	Option string
	Scope  string
	// Until is when it lapses; it must be after the store's now (the zero
	// time never is).
	Until  time.Time
	Reason string
}

// GrantStanding approves ask a, as judged for who (v, judged: what
// decidable found, Kind GrantStanding), and grants a standing approval
// over g's scope. The scope must contain this ask's payload, and must not
// be wider than the granter's own authority now: an amount-bearing action
// needs an amount ceiling the granter may approve. It returns the
// approval's transition.
func (d *Desk) GrantStanding(ctx context.Context, rec runner.Recorder, who string, run *engine.Run, a *engine.AskRun, v Verdict, judged engine.Judged, g StandingGrant) (engine.Transition, error) {
	if a.Type != plan.StopMenu || len(a.Payload) == 0 {
		return engine.Transition{}, fmt.Errorf("%q governs no action; a standing approval needs one: %w", a.Title, errkind.Invalid)
	}
	if strings.TrimSpace(g.Reason) == "" {
		return engine.Transition{}, fmt.Errorf("a standing approval needs a reason: %w", errkind.Invalid)
	}
	sc, err := standing.Parse(g.Scope)
	if err != nil {
		return engine.Transition{}, fmt.Errorf("%w: %w", err, errkind.Invalid)
	}
	now, err := d.cfg.Store.Now(ctx)
	if err != nil {
		return engine.Transition{}, err
	}
	if !g.Until.After(now) {
		return engine.Transition{}, fmt.Errorf("a standing approval needs --until in the future: %w", errkind.Invalid)
	}
	for _, p := range a.Payload {
		if ok, why := sc.Match(p.Server+"."+p.Tool, p.Args); !ok {
			return engine.Transition{}, fmt.Errorf("the scope %q does not cover this ask's %s: %s: %w", sc, p.Step, why, errkind.Invalid)
		}
	}
	if ok, why := sc.Covers(run.Requester); !ok {
		return engine.Transition{}, fmt.Errorf("the scope %q does not cover this ask: %s: %w", sc, why, errkind.Invalid)
	}
	if err := d.withinAuthority(ctx, who, run, a, sc); err != nil {
		return engine.Transition{}, err
	}
	x := store.Standing{ID: "sx_" + ids.Token(), AskID: store.AskID(run.ID, a.ID), GrantedBy: who, GrantedAt: now, Until: g.Until.UTC(),
		Scope: sc.String(), Reason: g.Reason, GrantedGroups: callerGroups(ctx, who)}
	opt := g.Option
	if opt == "" {
		opt = "1"
	}
	why := fmt.Sprintf("%s; and granted standing approval %s (%s) until %s", v.Why, x.ID, x.Scope, x.Until.Format(time.RFC3339))
	tr, err := rec.Event(ctx, run.ID, func(now time.Time) engine.Event {
		return engine.Decide{Ask: a.ID, Actor: who, Option: opt, Reason: g.Reason, Why: why, Policy: v.Policy, Quorum: v.Quorum, Groups: callerGroups(ctx, who), Judged: judged, At: now}
	})
	if err != nil {
		return engine.Transition{}, err
	}
	// Stored after the approval it came with: if this write fails, the
	// ask is approved and no standing approval exists — the safe side.
	if err := d.cfg.Store.PutStanding(ctx, x); err != nil {
		return engine.Transition{}, fmt.Errorf("the ask is approved, but the standing approval was not stored: %w", err)
	}
	return tr, nil
}

// withinAuthority checks a scope is no wider than what who may approve
// now for this run: each governed action, at the scope's amount ceiling.
func (d *Desk) withinAuthority(ctx context.Context, who string, run *engine.Run, a *engine.AskRun, sc standing.Scope) error {
	if d.cfg.Policy == nil {
		return fmt.Errorf("no policy is loaded, so nobody may grant standing approvals: %w", errkind.Denied)
	}
	ms := d.matters(run, a)
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
	if v, err := d.judge(ctx, who, ms, authz.RecipeAsk{}, "", false); err != nil || !v.OK {
		return fmt.Errorf("the scope is wider than your authority: %s: %w", v.Why, errkind.Denied)
	}
	return nil
}

// applyStanding approves an ask whose every governed action lies within
// one active standing approval — under the granter's authority as policy
// judges it now, separation of duties included — and the decision names
// the standing approval. It reports whether it did.
func (d *Desk) applyStanding(ctx context.Context, rec runner.Recorder, run *engine.Run, askID string) bool {
	a := run.Asks[askID]
	if a == nil || a.Type != plan.StopMenu || len(a.Payload) == 0 || d.cfg.Policy == nil {
		return false
	}
	xs, err := d.cfg.Store.ListStanding(ctx)
	if err != nil {
		d.log().Warn("standing approvals not read; the ask waits for a person", "ask", askID, "error", err)
		return false
	}
	now, err := d.cfg.Store.Now(ctx)
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
		covered, _ := sc.Covers(run.Requester)
		for _, p := range a.Payload {
			if ok, _ := sc.Match(p.Server+"."+p.Tool, p.Args); !ok {
				covered = false
				break
			}
		}
		if !covered {
			continue
		}
		v, err := d.Authorize(judgedWith(ctx, x.GrantedBy, x.GrantedGroups), x.GrantedBy, run, a, ApplyStanding)
		if err != nil || !v.OK {
			continue // the granter may not decide this one (e.g. they requested it)
		}
		why := fmt.Sprintf("automatically, by standing approval %s (%s) granted by %s until %s; %s", x.ID, x.Scope, x.GrantedBy, x.Until.Format(time.RFC3339), v.Why)
		// Pinned to the ask the scope and the granter's authority were
		// judged on (the payload the scope matched).
		judged := engine.JudgedOn(a, a.PayloadDigest(), a.EvidenceDigest(), true)
		_, err = rec.Event(ctx, run.ID, func(now time.Time) engine.Event {
			return engine.Decide{Ask: a.ID, Actor: x.GrantedBy, Option: "1", Reason: "standing approval " + x.ID, Why: why, Policy: v.Policy, Quorum: v.Quorum,
				Groups: x.GrantedGroups, Judged: judged, At: now}
		})
		if err != nil && !errors.Is(err, engine.ErrAlreadyDecided) {
			d.log().Warn("standing approval not applied", "ask", askID, "exception", x.ID, "error", err)
			return false
		}
		return true
	}
	return false
}

// ListStanding returns the standing approvals in force now by the
// store's clock, or with all every one, revoked and lapsed included. Who
// may see which is the caller's rule to apply.
func (d *Desk) ListStanding(ctx context.Context, all bool) ([]store.Standing, error) {
	xs, err := d.cfg.Store.ListStanding(ctx)
	if err != nil {
		return nil, err
	}
	now, err := d.cfg.Store.Now(ctx)
	if err != nil {
		return nil, err
	}
	var out []store.Standing
	for _, x := range xs {
		if !all && (x.Revoked || !now.Before(x.Until)) {
			continue
		}
		out = append(out, x)
	}
	return out, nil
}

// RevokeStanding revokes standing approval id for reason (required): its
// granter may, and so may anyone policy lets decide its action
// (MayGovern). It returns the standing approval as revoked.
func (d *Desk) RevokeStanding(ctx context.Context, who, id, reason string) (store.Standing, error) {
	if strings.TrimSpace(reason) == "" {
		return store.Standing{}, fmt.Errorf("revoking needs a reason: %w", errkind.Invalid)
	}
	xs, err := d.cfg.Store.ListStanding(ctx)
	if err != nil {
		return store.Standing{}, err
	}
	for _, x := range xs {
		if x.ID != id {
			continue
		}
		if x.Revoked {
			return store.Standing{}, fmt.Errorf("%s was revoked by %s at %s: %w", x.ID, x.RevokedBy, x.RevokedAt.Format(time.RFC3339), engine.ErrAlreadyDecided)
		}
		if who != x.GrantedBy && !d.MayGovern(ctx, who, x.Scope) {
			return store.Standing{}, fmt.Errorf("only %s or someone policy lets decide its action may revoke %s: %w", x.GrantedBy, x.ID, errkind.Denied)
		}
		now, err := d.cfg.Store.Now(ctx)
		if err != nil {
			return store.Standing{}, err
		}
		x.Revoked, x.RevokedBy, x.RevokedAt, x.RevokeReason = true, who, now, reason
		if err := d.cfg.Store.PutStanding(ctx, x); err != nil {
			return store.Standing{}, err
		}
		return x, nil
	}
	return store.Standing{}, fmt.Errorf("standing approval %s: %w", limits.Short(id), errkind.NotFound)
}

// MayGovern reports whether who holds a role policy lets decide scope's
// action at all: who may revoke (and so see) a standing approval over it.
func (d *Desk) MayGovern(ctx context.Context, who, scope string) bool {
	sc, err := standing.Parse(scope)
	if err != nil || d.cfg.Policy == nil {
		return false
	}
	_, ok := d.holdsRoleFor(ctx, who, sc.Action)
	return ok
}
