package approvals

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/tollgate-dev/tollgate/internal/controlplane/errkind"
	"github.com/tollgate-dev/tollgate/pkg/authz"
	"github.com/tollgate-dev/tollgate/pkg/engine"
	"github.com/tollgate-dev/tollgate/pkg/plan"
)

// Before anyone is asked (issue 16): an approval nobody could decide is
// refused where it is found — when a run starts, for what is known then;
// when the ask would open, for what only earlier steps could tell (the
// run then fails with the reason: an ask nobody can answer is never
// parked to expire unseen); when a script opens a gate — never found by
// the first approver who tries. Who "could decide" is policy's answer
// (authz.Deciders) for every action the ask governs together, within
// whom it asks, or whom it would escalate to.

// GateAuthority is who may decide one approval gate of a plan under the
// policy in force, as the plan card shows it and the start checks it.
type GateAuthority struct {
	Gate, Title string
	// Actions are the governed actions as policy reads them, e.g.
	// "payments.pay (90000 INR)", or "payments.pay (amount known when the
	// ask opens)".
	Actions []string
	// Deferred: an amount or currency depends on earlier steps, so the
	// gate was judged at the least it could be and is judged again when
	// it opens.
	Deferred bool
	// Deciders are the people who may decide it as asked (or, once
	// escalated, in the role Escalates), each with the role it comes
	// from: "bob (finance-100k)", "carol (finance-1m, for dave)".
	Deciders  []string
	Quorum    int
	Escalates string
	// Problem, when set, is why nobody could decide it.
	Problem *Undecidable
}

// Undecidable is why nobody could decide an ask, and what would change
// that: policy rows to add (to File) or a fix to the recipe.
type Undecidable struct {
	Reason string
	Rows   []string
	// Replaces is the row Rows take the place of ("": Rows are added).
	Replaces string
	Fix      string
	// File is the policy file to edit ("" when unknown).
	File string
}

// Text is the reason with the remedy, on one or more lines.
func (u *Undecidable) Text() string {
	var b strings.Builder
	b.WriteString(u.Reason)
	if u.Fix != "" {
		b.WriteString(". Fix: " + u.Fix)
	}
	file := "the policy file"
	if u.File != "" {
		file = u.File
	}
	switch {
	case len(u.Rows) > 0 && u.Replaces != "":
		fmt.Fprintf(&b, ". In %s, replace %q with:\n  %s", file, u.Replaces, strings.Join(u.Rows, "\n  "))
	case len(u.Rows) > 0:
		fmt.Fprintf(&b, ". Add to %s:\n  %s", file, strings.Join(u.Rows, "\n  "))
	}
	return b.String()
}

// CheckStart refuses a plan with an approval gate nobody could decide
// when requester starts it (errkind.Precondition): the reasons, and the
// rows to add or the recipe's fix. Gates whose amounts are known only
// later are judged again when they open (Undecidable). With no policy
// loaded, nothing is refused here (only the requester decides).
func (d *Desk) CheckStart(ctx context.Context, requester string, p *plan.Plan) error {
	gates, err := d.PlanAuthority(ctx, requester, p)
	if err != nil {
		return err
	}
	var bad []string
	for _, g := range gates {
		if g.Problem != nil {
			bad = append(bad, fmt.Sprintf("%q (%s) cannot be decided by anyone: %s", g.Title, g.Gate, g.Problem.Text()))
		}
	}
	if len(bad) == 0 {
		return nil
	}
	return fmt.Errorf("the run was not started: %s: %w", strings.Join(bad, "\n"), errkind.Precondition)
}

// PlanAuthority is who may decide each approval gate of p if requester
// starts it now. Nil without a policy.
func (d *Desk) PlanAuthority(ctx context.Context, requester string, p *plan.Plan) ([]GateAuthority, error) {
	if d.cfg.Policy == nil {
		return nil, nil
	}
	run := &engine.Run{Requester: requester}
	var out []GateAuthority
	for _, g := range planGates(p) {
		ga := GateAuthority{Gate: g.sp.ID, Title: g.sp.Title}
		var ms []authz.Matter
		for _, st := range g.steps {
			m, deferred, err := d.startMatter(run, st)
			if err != nil {
				ga.Problem = d.undecidable(&authz.Gap{Reason: err.Error(), Fix: "give step " + st.ID + " an amount in whole minor units"})
				break
			}
			ga.Deferred = ga.Deferred || deferred
			if deferred {
				ga.Actions = append(ga.Actions, m.Action+" (amount known when the ask opens)")
			} else {
				ga.Actions = append(ga.Actions, describe(m))
			}
			ms = append(ms, m)
		}
		if ga.Problem == nil {
			ask := authz.RecipeAsk{Audience: g.sp.Audience, Approvers: g.sp.Approvers, Quorum: g.sp.Quorum}
			if ask.Audience == "" {
				ask.Audience = plan.AudienceRequester
			}
			to := cmpOr(g.sp.EscalateTo, d.cfg.EscalateTo)
			who, q, esc, prob, err := d.decidable(ctx, ms, ask, to, "")
			if err != nil {
				return nil, err
			}
			ga.Quorum, ga.Escalates, ga.Problem = q, esc, prob
			for _, dec := range who {
				ga.Deciders = append(ga.Deciders, deciderName(dec))
			}
			if prob != nil && ga.Deferred {
				prob.Reason += " (judged at the least its amount could be: none of its amounts is known before earlier steps run)"
			}
		}
		out = append(out, ga)
	}
	return out, nil
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func describe(m authz.Matter) string {
	switch {
	case m.Amount == nil:
		return m.Action
	case m.Currency == "":
		return fmt.Sprintf("%s (%d, no currency)", m.Action, *m.Amount)
	}
	return fmt.Sprintf("%s (%d %s)", m.Action, *m.Amount, m.Currency)
}

func deciderName(d authz.Decision) string {
	if d.Via != "" {
		return fmt.Sprintf("%s (%s, for %s)", d.Actor, d.Role, d.Via)
	}
	return fmt.Sprintf("%s (%s)", d.Actor, d.Role)
}

// Undecidable is the engine's check as a recipe's approval ask opens
// (engine.Config.Undecidable): why nobody could decide a as it is now,
// its payload resolved, or "". It reads policy in memory only.
func (d *Desk) Undecidable(run *engine.Run, a *engine.AskRun) string {
	if d.cfg.Policy == nil || len(a.Payload) == 0 {
		return ""
	}
	var ms []authz.Matter
	for _, m := range d.matters(run, a) {
		if m.err != nil {
			return m.err.Error()
		}
		ms = append(ms, m.Matter)
	}
	_, _, _, prob, err := d.decidable(context.Background(), ms, recipeAsk(a), cmpOr(a.EscalateTo, d.cfg.EscalateTo), "")
	if err != nil {
		return err.Error()
	}
	if prob != nil {
		return prob.Text()
	}
	return ""
}

// decidable is who could decide matters together as ask asks (through
// an escalation to the role to, when the asked are too few), and the
// quorum; or why nobody could. A gate from code is someone else's check
// on a script: self, when set, is its requester, who never counts.
func (d *Desk) decidable(ctx context.Context, ms []authz.Matter, ask authz.RecipeAsk, to, self string) (who []authz.Decision, quorum int, escalates string, prob *Undecidable, err error) {
	ds, err := d.cfg.Policy.Deciders(ctx, ms, ask)
	if err != nil {
		return nil, 0, "", nil, err
	}
	if ds.Gap != nil {
		return nil, ds.Quorum, "", d.undecidable(ds.Gap), nil
	}
	allowed, asked := others(ds.Allowed, self), others(ds.Asked, self)
	if n := authz.Distinct(allowed); n < ds.Quorum {
		var rows []string
		for _, m := range ms {
			rows = append(rows, fmt.Sprintf("p2, %s, %s, %d, requester, -", m.Domain, m.Action, ds.Quorum))
		}
		return nil, ds.Quorum, "", d.undecidable(&authz.Gap{
			Reason: fmt.Sprintf("only its requester, %s, could decide it, and a gate from code is decided by someone else (%d other of the %d needed)", self, n, ds.Quorum),
			Rows:   append(rows, "g, PERSON, role:ROLE, "+ms[0].Domain+", _, _"),
			Fix:    "give its action's floor separation from the requester (in place of its p2 row) and a role someone else holds"}), nil
	}
	if authz.Distinct(asked) >= ds.Quorum {
		return asked, ds.Quorum, "", nil, nil
	}
	short := fmt.Sprintf("%s; of them %d may decide %s, and %d must", whomAsked(ask, ms[0].Requester), authz.Distinct(asked), actionsOf(ms), ds.Quorum)
	if to == "" || to == ask.Audience {
		fix := fmt.Sprintf("ask whom policy lets decide it (%s), or name an escalation role (`escalate after … to ROLE`)", names(allowed))
		if self != "" {
			fix = fmt.Sprintf("ask whom policy lets decide it (%s)", names(allowed))
		}
		return nil, ds.Quorum, "", d.undecidable(&authz.Gap{Reason: short + ", and it escalates to nobody", Fix: fix}), nil
	}
	esc, err := d.cfg.Policy.Deciders(ctx, ms, authz.RecipeAsk{Audience: to, Quorum: ask.Quorum})
	if err != nil {
		return nil, 0, "", nil, err
	}
	if escAsked := others(esc.Asked, self); authz.Distinct(escAsked) >= esc.Quorum {
		return escAsked, esc.Quorum, to, nil, nil
	}
	return nil, ds.Quorum, "", d.undecidable(&authz.Gap{Reason: fmt.Sprintf("%s, and in the role %s it escalates to, too few may either", short, to),
		Fix: fmt.Sprintf("ask whom policy lets decide it (%s)", names(allowed))}), nil
}

func (d *Desk) undecidable(g *authz.Gap) *Undecidable {
	return &Undecidable{Reason: g.Reason, Rows: g.Rows, Replaces: g.Replaces, Fix: g.Fix, File: d.cfg.PolicyFile}
}

// others drops self, and anyone acting for self, from ds.
func others(ds []authz.Decision, self string) []authz.Decision {
	if self == "" {
		return ds
	}
	return slices.DeleteFunc(slices.Clone(ds), func(x authz.Decision) bool { return x.Actor == self || x.Via == self })
}

func names(ds []authz.Decision) string {
	if len(ds) == 0 {
		return "nobody"
	}
	var out []string
	for _, x := range ds {
		out = append(out, x.Actor)
	}
	return strings.Join(out, ", ")
}

func actionsOf(ms []authz.Matter) string {
	var out []string
	for _, m := range ms {
		out = append(out, describe(m))
	}
	return strings.Join(out, " and ")
}

func whomAsked(ask authz.RecipeAsk, requester string) string {
	var s string
	switch ask.Audience {
	case "", plan.AudienceRequester:
		s = "it asks the requester, " + requester
	default:
		s = "it asks the role " + ask.Audience
	}
	if len(ask.Approvers) > 0 {
		s += ", approvers " + strings.Join(ask.Approvers, ", ")
	}
	return s
}

// planGate is an approval gate of a plan and the side effects it governs.
type planGate struct {
	sp    *plan.StoppingPoint
	steps []plan.Step
}

// planGates lists p's approval gates, each with the side-effecting steps
// it governs: those in its options' phases, below no nearer gate — as the
// engine indexes them (engine.New).
func planGates(p *plan.Plan) []*planGate {
	var out []*planGate
	var walk func(steps []plan.Step, stops []plan.StoppingPoint, gate *planGate)
	walk = func(steps []plan.Step, stops []plan.StoppingPoint, gate *planGate) {
		for _, st := range steps {
			if st.SideEffect && !st.WithoutAsking && gate != nil {
				gate.steps = append(gate.steps, st)
			}
		}
		for i := range stops {
			sp := &stops[i]
			switch {
			case sp.Type == plan.StopMenu:
				g := &planGate{sp: sp}
				out = append(out, g)
				for _, o := range sp.Options {
					walk(o.Steps, o.StoppingPoints, g)
				}
			case sp.Then != nil:
				walk(sp.Then.Steps, sp.Then.StoppingPoints, gate)
			}
		}
	}
	walk(p.InitialSteps, p.StoppingPoints, nil)
	return slices.DeleteFunc(out, func(g *planGate) bool { return len(g.steps) == 0 })
}

// startMatter is a governed step's matter as known at the start. An
// amount or currency that refers to earlier steps (or inputs) is not
// known yet: deferred, the matter carries the least the amount could be
// (0, in the floor's currency), so a gate nobody could decide at any
// amount is still found now.
func (d *Desk) startMatter(run *engine.Run, st plan.Step) (authz.Matter, bool, error) {
	args, err := plan.DecodeObject(st.Args)
	if err != nil {
		return authz.Matter{}, false, fmt.Errorf("args of %s: %w", st.ID, err)
	}
	deferred := false
	for _, k := range []string{"amount", "currency"} {
		if s, ok := args[k].(string); ok && len(plan.Refs(s)) > 0 {
			deferred = true
		}
	}
	p := engine.Payload{Step: st.ID, Server: st.Server, Tool: st.Tool, Args: st.Args}
	if deferred {
		least := map[string]any{}
		for k, v := range args {
			least[k] = v
		}
		f, _ := d.cfg.Policy.Floor(d.cfg.Domain, st.Server+"."+st.Tool)
		if f.Currency != "" {
			least["amount"], least["currency"] = 0, f.Currency
		} else {
			delete(least, "amount")
			delete(least, "currency")
		}
		b, err := json.Marshal(least)
		if err != nil {
			return authz.Matter{}, false, errors.New("args of " + st.ID + ": " + err.Error())
		}
		p.Args = plan.Object(b)
	}
	m, err := d.matter(run, p)
	return m, deferred, err
}
