package decidable

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/tollgate-dev/tollgate/pkg/authz"
	"github.com/tollgate-dev/tollgate/pkg/plan"
)

// Policy is what the checks read of policy (pkg/authz's Authorizer): who
// could decide matters together, and an action's floor (its currency,
// for the least amount a deferred one could be).
type Policy interface {
	Deciders(ctx context.Context, ms []authz.Matter, ask authz.RecipeAsk) (authz.Deciders, error)
	Floor(domain, action string) (authz.Floor, bool)
}

var _ Policy = (*authz.Authorizer)(nil)

// Config is what a Checker needs.
type Config struct {
	// Policy is the policy in force; nil: no policy is loaded, and only
	// Matter may be asked (PlanAuthority says nothing).
	Policy Policy
	// Domain is the policy domain of the runs judged. Owners maps an agent
	// principal that starts runs to the person who owns it (separation of
	// duties keeps out both); a principal not listed owns itself.
	Domain string
	Owners map[string]string
	// PolicyFile is the policy's file, named where an Undecidable says
	// which rows to add ("": "the policy file").
	PolicyFile string
	// EscalateTo is the role an ask goes to when too few of those asked
	// may decide it and its recipe names no escalation ("": none).
	EscalateTo string
}

// Checker says who could decide an ask, or why nobody could, from policy
// in memory and the inputs it is handed; it keeps no state of its own.
type Checker struct {
	cfg Config
}

// New returns a Checker.
func New(cfg Config) *Checker { return &Checker{cfg: cfg} }

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

// PlanAuthority is who may decide each approval gate of p if requester
// starts it now: one GateAuthority per gate governing a side effect, in
// plan order. Gates whose amounts are known only later are judged at the
// least they could be (Deferred), to be judged again when they open. Nil
// without a policy; an error is policy's (a malformed request, an
// evaluation failure) or ctx's, never a gate nobody could decide.
func (c *Checker) PlanAuthority(ctx context.Context, requester string, p *plan.Plan) ([]GateAuthority, error) {
	if c.cfg.Policy == nil {
		return nil, nil
	}
	var out []GateAuthority
	for _, g := range planGates(p) {
		ga := GateAuthority{Gate: g.sp.ID, Title: g.sp.Title}
		var ms []authz.Matter
		for _, st := range g.steps {
			m, deferred, err := c.startMatter(requester, st)
			if err != nil {
				ga.Problem = c.undecidable(&authz.Gap{Reason: err.Error(), Fix: "give step " + st.ID + " an amount in whole minor units"})
				break
			}
			ga.Deferred = ga.Deferred || deferred
			if deferred {
				ga.Actions = append(ga.Actions, m.Action+" (amount known when the ask opens)")
			} else {
				ga.Actions = append(ga.Actions, authz.Describe(m))
			}
			ms = append(ms, m)
		}
		if ga.Problem == nil {
			ask := authz.RecipeAsk{Audience: g.sp.Audience, Approvers: g.sp.Approvers, Quorum: g.sp.Quorum}
			if ask.Audience == "" {
				ask.Audience = plan.AudienceRequester
			}
			j, err := c.Judge(ctx, ms, ask, cmp.Or(g.sp.EscalateTo, c.cfg.EscalateTo), "")
			if err != nil {
				return nil, err
			}
			ga.Quorum, ga.Escalates, ga.Problem = j.Quorum, j.Escalates, j.Problem
			for _, dec := range j.Who {
				ga.Deciders = append(ga.Deciders, deciderName(dec))
			}
			if j.Problem != nil && ga.Deferred {
				j.Problem.Reason += " (judged at the least its amount could be: none of its amounts is known before earlier steps run)"
			}
		}
		out = append(out, ga)
	}
	return out, nil
}

func deciderName(d authz.Decision) string {
	if d.Via != "" {
		return fmt.Sprintf("%s (%s, for %s)", d.Actor, d.Role, d.Via)
	}
	return fmt.Sprintf("%s (%s)", d.Actor, d.Role)
}

// Judgement is who could decide an ask's matters together, or why nobody
// could.
type Judgement struct {
	// Who may decide it as asked, or (Escalates set) once escalated to
	// the role Escalates; Quorum of them must.
	Who       []authz.Decision
	Quorum    int
	Escalates string
	// Problem, when set, is why nobody could decide it (Who is empty).
	Problem *Undecidable
}

// Judge is who could decide matters ms together as ask asks — through
// an escalation to the role to ("": none), when the asked are too few —
// and the quorum; or why nobody could. A gate from code is someone else's
// check on a script: self, when set, is its requester, who never counts,
// nor anyone acting for them. It needs a Policy; an error is policy's or
// ctx's, never an ask nobody could decide.
func (c *Checker) Judge(ctx context.Context, ms []authz.Matter, ask authz.RecipeAsk, to, self string) (Judgement, error) {
	ds, err := c.cfg.Policy.Deciders(ctx, ms, ask)
	if err != nil {
		return Judgement{}, err
	}
	if ds.Gap != nil {
		return Judgement{Quorum: ds.Quorum, Problem: c.undecidable(ds.Gap)}, nil
	}
	allowed, asked := others(ds.Allowed, self), others(ds.Asked, self)
	if n := authz.Distinct(allowed); n < ds.Quorum {
		var rows []string
		for _, m := range ms {
			rows = append(rows, fmt.Sprintf("p2, %s, %s, %d, requester, -", m.Domain, m.Action, ds.Quorum))
		}
		return Judgement{Quorum: ds.Quorum, Problem: c.undecidable(&authz.Gap{
			Reason: fmt.Sprintf("only its requester, %s, could decide it, and a gate from code is decided by someone else (%d other of the %d needed)", self, n, ds.Quorum),
			Rows:   append(rows, "g, PERSON, role:ROLE, "+ms[0].Domain+", _, _"),
			Fix:    "give its action's floor separation from the requester (in place of its p2 row) and a role someone else holds"})}, nil
	}
	if authz.Distinct(asked) >= ds.Quorum {
		return Judgement{Who: asked, Quorum: ds.Quorum}, nil
	}
	short := fmt.Sprintf("%s; of them %d may decide %s, and %d must", whomAsked(ask, ms[0].Requester), authz.Distinct(asked), actionsOf(ms), ds.Quorum)
	if to == "" || to == ask.Audience {
		fix := fmt.Sprintf("ask whom policy lets decide it (%s), or name an escalation role (`escalate after … to ROLE`)", names(allowed))
		if self != "" {
			fix = fmt.Sprintf("ask whom policy lets decide it (%s)", names(allowed))
		}
		return Judgement{Quorum: ds.Quorum, Problem: c.undecidable(&authz.Gap{Reason: short + ", and it escalates to nobody", Fix: fix})}, nil
	}
	esc, err := c.cfg.Policy.Deciders(ctx, ms, authz.RecipeAsk{Audience: to, Quorum: ask.Quorum})
	if err != nil {
		return Judgement{}, err
	}
	if escAsked := others(esc.Asked, self); authz.Distinct(escAsked) >= esc.Quorum {
		return Judgement{Who: escAsked, Quorum: esc.Quorum, Escalates: to}, nil
	}
	return Judgement{Quorum: ds.Quorum, Problem: c.undecidable(&authz.Gap{Reason: fmt.Sprintf("%s, and in the role %s it escalates to, too few may either", short, to),
		Fix: fmt.Sprintf("ask whom policy lets decide it (%s)", names(allowed))})}, nil
}

func (c *Checker) undecidable(g *authz.Gap) *Undecidable {
	return &Undecidable{Reason: g.Reason, Rows: g.Rows, Replaces: g.Replaces, Fix: g.Fix, File: c.cfg.PolicyFile}
}

// others drops self, and anyone acting for self, from ds.
func others(ds []authz.Decision, self string) []authz.Decision {
	if self == "" {
		return ds
	}
	return slices.DeleteFunc(slices.Clone(ds), func(x authz.Decision) bool { return x.Actor == self || x.Via == self })
}

// maxNamed is how many people a reason names: it is stored with a run
// that fails for it and sent in a refusal, so it must not grow with the
// policy.
const maxNamed = 10

// names lists the people of ds, the first maxNamed of them and how many
// more.
func names(ds []authz.Decision) string {
	if len(ds) == 0 {
		return "nobody"
	}
	var out []string
	for _, x := range ds[:min(len(ds), maxNamed)] {
		out = append(out, x.Actor)
	}
	if len(ds) > maxNamed {
		out = append(out, fmt.Sprintf("and %d more", len(ds)-maxNamed))
	}
	return strings.Join(out, ", ")
}

func actionsOf(ms []authz.Matter) string {
	var out []string
	for _, m := range ms {
		out = append(out, authz.Describe(m))
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
func (c *Checker) startMatter(requester string, st plan.Step) (authz.Matter, bool, error) {
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
	if deferred {
		least := map[string]any{}
		for k, v := range args {
			least[k] = v
		}
		f, _ := c.cfg.Policy.Floor(c.cfg.Domain, st.Server+"."+st.Tool)
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
		st.Args = plan.Object(b)
	}
	m, err := c.Matter(requester, st)
	return m, deferred, err
}
