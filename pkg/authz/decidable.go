package authz

import (
	"context"
	"fmt"
	"slices"
	"strings"
)

// Deciders is who could decide an ask governing several matters under
// the current policy: an approval is allowed only if its approver may
// decide every matter (as Authorize is asked once per matter), so the
// deciders are those allowed all of them.
type Deciders struct {
	// Quorum is the largest quorum of the matters' routes (≥ 1).
	Quorum int
	// Asked are the people the recipe asks who may decide every matter;
	// Allowed are those policy alone allows for every matter (the
	// recipe's narrowing dropped: whom an escalation may reach). Each is
	// sorted by actor; a Decision is that person's for the first matter.
	Asked, Allowed []Decision
	// Gap, when set, says why fewer than Quorum distinct people of Allowed
	// could decide: then nobody can, whoever is asked.
	Gap *Gap
	// PolicyVersion is the version this was computed by.
	PolicyVersion string
}

// Gap is why a set of matters cannot be decided, and what would change
// that.
type Gap struct {
	// Reason says why, in words.
	Reason string
	// Rows are policy rows that would let someone decide (PERSON stands
	// for a person to choose: anyone but those Reason names as kept out).
	// Empty when no row helps: then Fix says what to change instead.
	Rows []string
	// Replaces, when set, is the row of the policy the Rows take the
	// place of (a role's limit raised), not rows to add beside it.
	Replaces string
	// Fix is what to change in the request itself (its args), when the
	// matter cannot be judged as it is.
	Fix string
}

// Deciders computes who could decide the matters together, as asked and
// by policy alone. Matters policy cannot judge (no floor, an amount
// without its currency, the wrong currency) are Gaps, not errors; an
// error is a malformed request (a missing principal, a role name as one),
// a policy evaluation failure or ctx's.
func (a *Authorizer) Deciders(ctx context.Context, ms []Matter, ask RecipeAsk) (Deciders, error) {
	return a.cur.Load().deciders(ctx, ms, ask)
}

func (s *snapshot) deciders(ctx context.Context, ms []Matter, ask RecipeAsk) (Deciders, error) {
	return s.decidersBy(ctx, ms, ask, s.routing())
}

// decidersBy is deciders weighing people as rt does.
func (s *snapshot) decidersBy(ctx context.Context, ms []Matter, ask RecipeAsk, rt routing) (Deciders, error) {
	out := Deciders{PolicyVersion: s.version, Quorum: max(ask.Quorum, 1)}
	var asked, allowed map[string]Decision
	var actions []string
	for i, m := range ms {
		if gap := s.unjudgeable(m); gap != nil {
			out.Gap = gap
			return out, nil
		}
		r, err := s.routeBy(ctx, m, ask, rt)
		if err != nil {
			return out, err
		}
		f, _ := s.pol.lookup(m.Domain, m.Action)
		out.Quorum = max(out.Quorum, r.Quorum)
		actions = append(actions, Describe(m))
		if n := Distinct(r.EscalateTo); n < r.Quorum {
			out.Gap = s.shortfall(m, f, r, n, rt)
			return out, nil
		}
		asked, allowed = keep(asked, r.Eligible, i == 0), keep(allowed, r.EscalateTo, i == 0)
	}
	out.Asked, out.Allowed = sorted(asked), sorted(allowed)
	if n := Distinct(out.Allowed); n < out.Quorum {
		// Each matter alone has deciders; no one enough has them all.
		g := &Gap{Reason: fmt.Sprintf("policy lets %d distinct people decide all of %s together; %d must", n, strings.Join(actions, " and "), out.Quorum)}
		for _, m := range ms {
			f, _ := s.pol.lookup(m.Domain, m.Action)
			if role := coveringRole(f, s.pol.rules, m); role != "" {
				g.Rows = append(g.Rows, fmt.Sprintf("g, PERSON, %s, %s, _, _", role, m.Domain))
			}
		}
		g.Rows = slices.Compact(g.Rows)
		out.Gap = g
	}
	return out, nil
}

// keep intersects the deciders found so far with those of one more matter.
func keep(so map[string]Decision, ds []Decision, first bool) map[string]Decision {
	if first {
		so = map[string]Decision{}
		for _, d := range ds {
			so[d.Actor] = d
		}
		return so
	}
	next := map[string]Decision{}
	for _, d := range ds {
		if prev, ok := so[d.Actor]; ok {
			next[d.Actor] = prev
		}
	}
	return next
}

func sorted(m map[string]Decision) []Decision {
	out := make([]Decision, 0, len(m))
	for _, d := range m {
		out = append(out, d)
	}
	slices.SortFunc(out, func(x, y Decision) int { return strings.Compare(x.Actor, y.Actor) })
	return out
}

// Describe names a matter as a person reads it: "payments.pay (90000 INR)",
// "payments.pay (90000, no currency)", or the action alone without an
// amount: how refusals and plan cards name what is decided.
func Describe(m Matter) string {
	switch {
	case m.Amount == nil:
		return m.Action
	case m.Currency == "":
		return fmt.Sprintf("%s (%d, no currency)", m.Action, *m.Amount)
	}
	return fmt.Sprintf("%s (%d %s)", m.Action, *m.Amount, m.Currency)
}

// unjudgeable is the Gap of a matter policy cannot judge as it is: no
// floor covers its action, or its amount and currency do not fit the
// floor. nil when it can be judged.
func (s *snapshot) unjudgeable(m Matter) *Gap {
	f, ok := s.pol.lookup(m.Domain, m.Action)
	if checkAction(m.Action) != nil {
		return &Gap{Reason: fmt.Sprintf("%q is not an action (server.tool)", m.Action), Fix: "name the action as SERVER.TOOL"}
	}
	if !ok {
		sep, lim, cur := SepRequester+"+"+SepAgentOwner, limitNone, limitNone
		if strings.HasPrefix(m.Action, "gate.") {
			sep = SepRequester // a script's identity owns itself
		}
		if m.Amount != nil {
			lim, cur = fmt.Sprint(*m.Amount), m.Currency
			if cur == "" {
				cur = "CUR"
			}
		}
		g := &Gap{Reason: fmt.Sprintf("no policy row covers %s in %s, so nobody may decide it", m.Action, m.Domain),
			Rows: []string{fmt.Sprintf("p, role:ROLE, %s, %s, %s", m.Domain, m.Action, lim), fmt.Sprintf("p2, %s, %s, 1, %s, %s", m.Domain, m.Action, sep, cur),
				fmt.Sprintf("g, PERSON, role:ROLE, %s, _, _", m.Domain)}}
		if srv, tool, _ := strings.Cut(m.Action, "."); !strings.Contains(tool, ".") {
			g.Reason += fmt.Sprintf(" (a row for %s.* would cover every %s action without rows of its own)", srv, srv)
		}
		return g
	}
	switch {
	case m.Amount != nil && *m.Amount < 0:
		return &Gap{Reason: fmt.Sprintf("the amount of %s is negative (%d)", m.Action, *m.Amount), Fix: "give a non-negative amount in minor units"}
	case m.Amount != nil && m.Currency == "" && f.currency != "":
		return &Gap{Reason: fmt.Sprintf("missing currency for amount %d: policy limits %s in %s in %s", *m.Amount, m.Action, m.Domain, f.currency),
			Fix: fmt.Sprintf(`add "currency": %q to its args`, f.currency)}
	case m.Amount != nil && f.currency == "":
		return &Gap{Reason: fmt.Sprintf("policy says %s in %s carries no amount, but this one carries %d %s", m.Action, m.Domain, *m.Amount, m.Currency),
			Fix: "drop the amount from its args, or give its floor a currency in the policy"}
	case m.Amount == nil && m.Currency != "":
		return &Gap{Reason: fmt.Sprintf("a currency (%s) without an amount", m.Currency), Fix: `add "amount" (minor units) to its args, or drop "currency"`}
	case m.Amount == nil && f.currency != "":
		return &Gap{Reason: fmt.Sprintf("missing amount: policy limits %s in %s in %s", m.Action, m.Domain, f.currency), Fix: `add "amount" (minor units) and "currency" to its args`}
	case m.Amount != nil && m.Currency != f.currency:
		return &Gap{Reason: fmt.Sprintf("the amount is in %s; policy limits %s in %s in %s", m.Currency, m.Action, m.Domain, f.currency),
			Fix: fmt.Sprintf("give the amount in %s", f.currency)}
	}
	return nil
}

// maxKeptOut is how many people a shortfall says why of.
const maxKeptOut = 10

// shortfall is the Gap of a matter policy alone lets only n of the
// route's quorum decide: who is kept out and why (of those rt finds
// holding a role that may decide it), and the rows that would let enough
// people decide.
func (s *snapshot) shortfall(m Matter, f floorRow, r Route, n int, rt routing) *Gap {
	g := &Gap{}
	var b strings.Builder
	fmt.Fprintf(&b, "policy lets %d distinct people decide %s in %s; %d must", n, Describe(m), m.Domain, r.Quorum)
	if f.action != m.Action {
		fmt.Fprintf(&b, " (it falls under %s)", f.action)
	}
	m.Action = f.action
	var why []string
	t := s.now()
	for _, p := range rt.holding(m.Domain, f) {
		reach := s.reach(p, m.Domain, t)
		holds := slices.ContainsFunc(s.pol.rules, func(ru rule) bool {
			_, ok := reach[ru.role]
			return ok && ru.domain == m.Domain && ru.action == f.action
		})
		if !holds || slices.ContainsFunc(r.EscalateTo, func(d Decision) bool { return d.Actor == p }) {
			continue
		}
		why = append(why, s.whyNot(p, m, f).in(m))
	}
	if len(why) > maxKeptOut {
		// A reason must not grow with the policy: it is sent in a refusal
		// and stored with a run that fails for it.
		why = append(why[:maxKeptOut], fmt.Sprintf("and %d more", len(why)-maxKeptOut))
	}
	if len(why) > 0 {
		fmt.Fprintf(&b, ": %s", strings.Join(why, "; "))
	}
	var rules []rule
	for _, ru := range s.pol.rules {
		if ru.domain == m.Domain && ru.action == f.action {
			rules = append(rules, ru)
		}
	}
	kept := keptOut(m, f)
	switch role := coveringRole(f, rules, m); {
	case len(rules) == 0:
		lim := limitNone
		if m.Amount != nil {
			lim = fmt.Sprint(*m.Amount)
		}
		b.WriteString("; no role may decide it")
		g.Rows = []string{fmt.Sprintf("p, role:ROLE, %s, %s, %s", m.Domain, f.action, lim), fmt.Sprintf("g, PERSON, role:ROLE, %s, _, _", m.Domain)}
	case role == "":
		top := rules[0]
		for _, ru := range rules {
			if ru.limit > top.limit {
				top = ru
			}
		}
		fmt.Fprintf(&b, "; no role's limit reaches %d (the highest is %s's, %d): raise it", *m.Amount, strings.TrimPrefix(top.role, RolePrefix), top.limit)
		g.Rows = []string{fmt.Sprintf("p, %s, %s, %s, %d", top.role, m.Domain, f.action, *m.Amount)}
		g.Replaces = fmt.Sprintf("p, %s, %s, %s, %d", top.role, m.Domain, f.action, top.limit)
	default:
		for i := n; i < r.Quorum; i++ {
			g.Rows = append(g.Rows, fmt.Sprintf("g, PERSON, %s, %s, _, _", role, m.Domain))
		}
	}
	if len(kept) > 0 && g.Rows != nil && strings.Contains(strings.Join(g.Rows, "\n"), "PERSON") {
		fmt.Fprintf(&b, " (PERSON: anyone but %s, nor acting for them)", strings.Join(kept, " or "))
	}
	g.Reason = b.String()
	return g
}

// keptOut names whom the floor's separation of duties keeps out of m.
func keptOut(m Matter, f floorRow) []string {
	var out []string
	for _, p := range f.separate {
		who := m.Requester
		if p == SepAgentOwner {
			who = m.AgentOwner
		}
		if !slices.Contains(out, who) {
			out = append(out, who)
		}
	}
	return out
}

// coveringRole is a role (with its prefix) whose rule for f's action
// covers m's amount, "" when none does.
func coveringRole(f floorRow, rules []rule, m Matter) string {
	for _, ru := range rules {
		if ru.domain != m.Domain || ru.action != f.action {
			continue
		}
		if ru.kind != limitKindAmount || m.Amount == nil || *m.Amount <= ru.limit {
			return ru.role
		}
	}
	return ""
}
