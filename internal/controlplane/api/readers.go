package api

import (
	"context"
	"fmt"

	"github.com/tollgate-dev/tollgate/internal/controlplane/approvals"
	"github.com/tollgate-dev/tollgate/internal/controlplane/runner"
	"github.com/tollgate-dev/tollgate/internal/store"
	"github.com/tollgate-dev/tollgate/pkg/engine"
	"github.com/tollgate-dev/tollgate/pkg/plan"
)

// Who may read (DESIGN.md §5 "Visibility", I9). This file is the one
// place the rule is written down; every handler that reads, lists,
// watches or journals a run — or acts on one of its asks or gates — asks
// Readers.VisibleRun or Readers.Sees.
//
// A run, with its asks, its gates and its journal, is visible to:
//
//   - its requester;
//   - whoever may decide one of its asks: an ask's audience role they
//     hold now (directly or by a delegation in force), a name among its
//     approvers or the one it escalated to, or — for an open ask — anyone
//     the desk lets decide it now (approvals.Desk.MayDecide);
//   - whoever decided one of its asks: every person the record names as
//     deciding, voting, amending, delegating or being delegated to, even
//     after they lost the role they decided under;
//   - holders, by policy, of the role auditor or operator in the control
//     plane's domain (RoleAuditor, RoleOperator).
//
// To everyone else it does not exist: a call naming it fails exactly as
// for a run id that was never created (NotVisible: NOT_FOUND, same
// message, nothing of the run in it), and lists leave it out without
// saying so — a page may hold fewer rows than asked for, never a count
// of what was left out.
//
// Visibility is not authority: seeing a run lets a person read it, not
// decide, cancel, or act for its script; those RPCs check that on top.
const (
	RoleAuditor  = "auditor"
	RoleOperator = "operator"
)

// NotVisible is the error for a run the caller may not see: the very
// error the Runner returns for a run id the store does not hold.
func NotVisible(runID string) error {
	return fmt.Errorf("run %s: %w", runID, store.ErrNotFound)
}

// Readers applies the rule: it reads runs through the Runner and asks the
// approvals desk who may decide.
type Readers struct {
	Runner *runner.Runner
	Desk   *approvals.Desk
}

// VisibleRun reads a run for who (every due deadline applied, as Runner.Get
// does) and returns it only if who may see it; otherwise NotVisible.
func (s Readers) VisibleRun(ctx context.Context, who, runID string) (*engine.Run, *engine.Machine, error) {
	run, m, err := s.Runner.Get(ctx, runID)
	if err != nil {
		return nil, nil, err
	}
	if !s.Sees(ctx, who, run) {
		return nil, nil, NotVisible(runID)
	}
	return run, m, nil
}

// CallersRun is VisibleRun for the authenticated caller, whom it names.
func (s Readers) CallersRun(ctx context.Context, runID string) (who string, run *engine.Run, m *engine.Machine, err error) {
	if who, err = Caller(ctx); err != nil {
		return "", nil, nil, err
	}
	run, m, err = s.VisibleRun(ctx, who, runID)
	return who, run, m, err
}

// SeesEverything reports whether who holds, by policy, a role that reads
// every run.
func (s Readers) SeesEverything(ctx context.Context, who string) bool {
	return s.Desk.Holds(ctx, who, RoleAuditor) || s.Desk.Holds(ctx, who, RoleOperator)
}

// Sees applies the rule to one run. The checks run cheapest first; policy
// is consulted in full (MayDecide) only for open asks nobody names who in.
func (s Readers) Sees(ctx context.Context, who string, run *engine.Run) bool {
	if who == "" {
		return false
	}
	if run.Requester == who || s.SeesEverything(ctx, who) {
		return true
	}
	for _, a := range run.Asks {
		if decided(who, a) || s.Addressed(ctx, who, a) {
			return true
		}
	}
	for _, a := range run.Asks {
		if !a.State.Open() {
			continue
		}
		// A policy error is no authority: it does not make the run visible.
		if v, err := s.Desk.MayDecide(ctx, who, run, a); err == nil && v.OK {
			return true
		}
	}
	return false
}

// decided reports whether the ask's record names who as having decided
// (or been handed the decision of) it.
func decided(who string, a *engine.AskRun) bool {
	if who == "system" || who == "policy" {
		// The engine's own entries (expiry, escalation, staleness, a vote
		// withdrawn by policy) are not a person deciding.
		return false
	}
	for _, d := range a.Decisions {
		if d.Actor == who {
			return true
		}
	}
	for _, v := range a.Votes {
		if v.Actor == who {
			return true
		}
	}
	for _, d := range a.Delegations {
		if d.From == who || d.To == who {
			return true
		}
	}
	return false
}

// Addressed reports whether the ask is addressed to who: its audience
// role, its escalation role, or a role among its approvers is one who
// holds now, or who is a person named among its approvers (a delegate
// sees it through MayDecide). An audience is a role (or `me`, the requester,
// whom Sees answers for by the run's requester, never by name): a caller
// whose name happens to be "me" or a role's name is not its holder.
func (s Readers) Addressed(ctx context.Context, who string, a *engine.AskRun) bool {
	holds := func(role string) bool {
		return role != "" && role != plan.AudienceRequester && s.Desk.IsRole(role) && s.Desk.Holds(ctx, who, role)
	}
	if holds(a.Audience) || holds(a.EscalatedTo) || holds(a.EscalatedFrom) {
		return true
	}
	for _, n := range a.Approvers {
		switch {
		case n == "" || n == plan.AudienceRequester:
		case s.Desk.IsRole(n):
			if holds(n) {
				return true
			}
		case n == who || n == "user:"+who:
			return true
		}
	}
	return false
}

// SeesStanding reports whether who may see a standing approval: who
// granted it, anyone who may revoke it (policy lets them decide its
// action), and auditors and operators.
func (s Readers) SeesStanding(ctx context.Context, who string, x store.Standing) bool {
	return x.GrantedBy == who || s.Desk.MayGovern(ctx, who, x.Scope) || s.SeesEverything(ctx, who)
}
