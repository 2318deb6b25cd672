package approvals

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/tollgate-dev/tollgate/pkg/authz"
	"github.com/tollgate-dev/tollgate/pkg/engine"
	"github.com/tollgate-dev/tollgate/pkg/plan"
)

// Verdict is what the desk found about one person and one decision:
// whether they may make it, why (in words, for the caller and the
// journal), and the policy version it was judged by.
type Verdict struct {
	OK     bool
	Why    string
	Policy string
	// Delegated: the authority came through a delegation in force.
	Delegated bool
	// Quorum is the quorum policy sets now for the ask's actions (0 when
	// policy was not asked): the decision carries it and the engine counts
	// toward it (I9: policy wins, even raised after the ask opened).
	Quorum int
}

// Authorize is decision-time authority (I9): whether who may make a
// decision of kind on ask a of run now, why in words and the policy
// version it was judged by. Every decision kind is judged here; a policy
// error denies. Policy judges it afresh (authz.Authorize).
func (d *Desk) Authorize(ctx context.Context, who string, run *engine.Run, a *engine.AskRun, kind Kind) (Verdict, error) {
	return d.authorize(ctx, who, run, a, kind, false)
}

// authorize is Authorize; kept lets policy answer from the answers it
// keeps (Policy.AuthorizeCached: the same answer, without evaluating it
// again), for the views MayDecide serves.
func (d *Desk) authorize(ctx context.Context, who string, run *engine.Run, a *engine.AskRun, kind Kind, kept bool) (Verdict, error) {
	switch needFor(kind, a.Type) {
	case needRequesterOrPolicy:
		if who == run.Requester {
			return Verdict{OK: true, Why: "you started the run, so you may say what happened"}, nil
		}
		return d.policyOver(ctx, who, run, a, kept)
	case needPolicy:
		return d.policyOver(ctx, who, run, a, kept)
	}
	return Verdict{Why: fmt.Sprintf("a %s decision does not apply to a %s ask", strings.ReplaceAll(string(kind), "_", " "), a.Type)}, nil
}

// MayDecide is whether who may make the ask's principal decision now:
// what the inbox and GetAsk show, and what makes an open ask's run
// visible to who. An inbox page asks it of every row, so policy may
// answer from the answers it keeps for its version (per person, action,
// amount band, separation relation, ask and delegation epoch: the same
// answer as Authorize at that moment); the decision itself is judged
// afresh (Authorize).
func (d *Desk) MayDecide(ctx context.Context, who string, run *engine.Run, a *engine.AskRun) (Verdict, error) {
	kind := Approve
	switch a.Type {
	case engine.InDoubt:
		kind = ItRan
	case plan.StopText:
		kind = TextAnswer
	}
	return d.authorize(ctx, who, run, a, kind, true)
}

// policyOver checks who against policy for every action a governs, within
// whom the ask asks; an ask governing nothing (or no policy loaded) by
// its audience alone.
func (d *Desk) policyOver(ctx context.Context, who string, run *engine.Run, a *engine.AskRun, kept bool) (Verdict, error) {
	me := a.Audience == "" || a.Audience == plan.AudienceRequester
	if len(a.Payload) == 0 || d.cfg.Policy == nil {
		switch {
		case me && who == run.Requester:
			return Verdict{OK: true, Why: "you started the run and the ask is for the requester"}, nil
		case me:
			return Verdict{Why: fmt.Sprintf("the ask is for the requester, %s", run.Requester)}, nil
		case d.cfg.Policy != nil && d.cfg.Policy.Holds(who, a.Audience, d.cfg.Domain, callerGroups(ctx, who)...):
			return Verdict{OK: true, Why: "you hold the role " + a.Audience, Policy: d.cfg.Policy.Version()}, nil
		}
		return Verdict{Why: "the ask is for the role " + a.Audience + ", which you do not hold"}, nil
	}
	self := ""
	if a.Type == engine.Gate {
		// A gate from code is someone else's check on a script: its
		// requester never decides it, nor anyone acting for her, whatever
		// separation a policy row sets (RouteGate refuses to open one
		// only she could decide; this holds it at decision time).
		self = run.Requester
		if who == self {
			return Verdict{Why: fmt.Sprintf("separation of duties: %s opened this gate, and a gate from code is decided by someone else", who)}, nil
		}
	}
	return d.judge(ctx, who, d.matters(run, a), recipeAsk(a), self, kept)
}

// recipeAsk is whom the recipe (or the gate's requester) asked.
func recipeAsk(a *engine.AskRun) authz.RecipeAsk {
	return authz.RecipeAsk{Audience: a.Audience, Approvers: a.Approvers, Quorum: a.Quorum}
}

// judge is the one place policy is asked to decide (pkg/authz): who must
// be allowed every matter, within what the recipe asked; the first
// refusal or unreadable matter denies.
//
// self, when set, is a gate's requester: authority that comes through a
// delegation from her does not count. kept: policy may answer from the
// answers it keeps (AuthorizeCached).
func (d *Desk) judge(ctx context.Context, who string, matters []matterOrErr, ask authz.RecipeAsk, self string, kept bool) (Verdict, error) {
	authorize := d.cfg.Policy.Authorize
	if kept {
		authorize = d.cfg.Policy.AuthorizeCached
	}
	var whys []string
	policy, delegated, quorum := "", false, 0
	for _, m := range matters {
		if m.err != nil {
			return Verdict{Why: m.err.Error()}, nil
		}
		dec, err := authorize(ctx, authz.Request{Actor: who, Groups: callerGroups(ctx, who), Matter: m.Matter, Ask: ask})
		if err != nil {
			// Why says it once, for the caller; err is for errors.Is.
			return Verdict{Why: m.Action + " " + dec.Reason}, fmt.Errorf("authorize %s on %s: %w", who, m.Action, err)
		}
		if !dec.Allowed {
			return Verdict{Why: dec.Reason, Policy: dec.PolicyVersion}, nil
		}
		if self != "" && dec.Via == self {
			return Verdict{Why: fmt.Sprintf("separation of duties: you act for %s, who opened this gate, and a gate from code is decided by someone else", self), Policy: dec.PolicyVersion}, nil
		}
		whys = append(whys, dec.Reason)
		policy = dec.PolicyVersion
		delegated = delegated || dec.Via != ""
		quorum = max(quorum, dec.Quorum)
	}
	return Verdict{OK: true, Why: strings.Join(slices.Compact(whys), "; "), Policy: policy, Delegated: delegated, Quorum: quorum}, nil
}

// matterOrErr is one matter of an ask, or why it could not be read.
type matterOrErr struct {
	authz.Matter
	err error
}

// matters is every matter policy must allow for a: one per governed
// payload, and for a gate one per action its requester added to its own
// (engine.AskRun.Also), with the gate's args — a requester raises the
// bar, never replaces it.
func (d *Desk) matters(run *engine.Run, a *engine.AskRun) []matterOrErr {
	var out []matterOrErr
	for _, p := range a.Payload {
		m, err := d.matter(run, p)
		out = append(out, matterOrErr{m, err})
		for _, act := range a.Also {
			srv, tool, _ := strings.Cut(act, ".")
			m, err := d.matter(run, engine.Payload{Step: p.Step, Server: srv, Tool: tool, Args: p.Args})
			out = append(out, matterOrErr{m, err})
		}
	}
	return out
}

// matter is the policy's view of one governed action (decidable.Matter:
// its type, who separation of duties keeps out, its amount and currency).
func (d *Desk) matter(run *engine.Run, p engine.Payload) (authz.Matter, error) {
	return d.check.Matter(run.Requester, plan.Step{ID: p.Step, Server: p.Server, Tool: p.Tool, Args: p.Args})
}
