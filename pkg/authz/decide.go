package authz

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// AudienceMe is the recipe's `ask me`: the requester. Same value as
// plan.AudienceRequester.
const AudienceMe = "me"

// Errors wrapped by Authorize and Route. A decision returned with an error
// is always a denial.
var (
	// ErrInvalidRequest: a required field is missing or malformed, or a
	// principal is a role name. The caller has a bug, or is under attack.
	ErrInvalidRequest = errors.New("invalid authorization request")
	// ErrEnforce: casbin could not evaluate the policy.
	ErrEnforce = errors.New("policy evaluation failed")
)

// Matter is what is to be decided: one action of one run.
type Matter struct {
	Domain string // tenant, e.g. "acme"
	Action string // action type "server.tool", e.g. "payments.pay"
	// Amount is in minor units of Currency (485000 INR = ₹4,850.00); nil
	// when the action carries none. Compared exactly, as int64.
	Amount *int64
	// Currency is the ISO 4217 code of Amount; required with an Amount and
	// must be the policy's currency for the action.
	Currency   string
	Requester  string // the authenticated principal who started the run
	AgentOwner string // the principal who owns the executing agent
}

// RecipeAsk is whom the recipe asks, as compiled into the plan's stopping
// point (plan.StoppingPoint.Audience, Approvers, Quorum). It can only
// narrow who may decide; policy sets the floor and wins.
type RecipeAsk struct {
	// Audience is AudienceMe (`ask me`), a role name (`ask finance`), or ""
	// (no narrowing).
	Audience string
	// Approvers are the names in `approvers:`: a name that is a role in the
	// domain's policy means its holders, any other name is a person. The
	// decider must match one of them (and the Audience, if set).
	Approvers []string
	// Quorum is K of `approvers: K of …`; 0 when not set. The effective
	// quorum is the larger of this and the policy's.
	Quorum int
}

// Request asks whether Actor may decide a Matter, now.
type Request struct {
	// Actor is the authenticated principal deciding — from the transport's
	// authentication, never from a request body. Role names are refused.
	Actor string
	Matter
	// Ask is what the recipe asked. The zero value narrows nothing: policy
	// alone decides (as after an escalation to the policy's roles).
	Ask RecipeAsk
	// Groups are Actor's groups at the identity provider (bare names), as
	// the Actor's own authenticated token lists them: each counts as the
	// member GroupPrefix+name, so Actor also holds what those groups hold.
	// Separation of duties is still judged on Actor: a requester in the
	// group is still the requester.
	Groups []string
}

// Decision is the answer to a Request, or one eligible person in a Route.
type Decision struct {
	Allowed bool
	Actor   string
	// Role is the bare name of the role whose rule allowed it.
	Role string
	// Via is the principal whose authority the actor exercised by
	// delegation (the holder of Role at the end of the chain); "" when the
	// actor holds Role directly.
	Via string
	// Reason says why, in words for the inbox and the journal: e.g. "role
	// finance in acme; limit 500000 ≥ 485000 INR", or why not.
	Reason string
	// PolicyVersion is the version of the policy this was evaluated by.
	PolicyVersion string
	// Quorum is how many distinct people must approve the matter, by this
	// policy version: the larger of the policy's and the recipe's (≥ 1),
	// as Route.Quorum. An Authorize caller counts this decision toward it
	// (I9: policy wins; the recipe can only raise it). 0 when the matter
	// could not be judged.
	Quorum int
}

// Authorize decides, at decision time and by the current policy, whether
// req.Actor may decide req.Matter, within what req.Ask asked. It never
// blocks on I/O. A non-nil error (ErrInvalidRequest, ErrEnforce, or ctx's
// error) always comes with Allowed=false.
func (a *Authorizer) Authorize(ctx context.Context, req Request) (Decision, error) {
	d, err := a.cur.Load().authorize(ctx, req)
	if err != nil {
		d.Allowed = false
	}
	return d, err
}

func (s *snapshot) authorize(ctx context.Context, req Request) (Decision, error) {
	d, f, done, err := s.admit(ctx, req)
	if done {
		return d, err
	}
	req.Matter.Action = f.action // the row it falls under: itself or a pattern
	d, why, err := s.judge(req, f)
	d.Reason = why.in(req.Matter)
	return d, err
}

// admit checks req and finds the floor its matter falls under; done when
// d is the answer already: a malformed request (with its error, ctx's
// included) or a refusal policy words without judging anyone.
func (s *snapshot) admit(ctx context.Context, req Request) (d Decision, f floorRow, done bool, err error) {
	d = Decision{Actor: req.Actor, PolicyVersion: s.version}
	if err := ctx.Err(); err != nil {
		d.Reason = "not evaluated: " + err.Error()
		return d, f, true, fmt.Errorf("authz: %w", err)
	}
	if err := checkPrincipal("actor", req.Actor); err != nil {
		d.Reason = unjudged(err)
		return d, f, true, err
	}
	for _, g := range req.Groups {
		if g == "" || isRole(g) || isGroup(g) {
			d.Reason = fmt.Sprintf("cannot be judged: group %q", g)
			return d, f, true, fmt.Errorf("authz: %w: group %q of %s is empty or prefixed", ErrInvalidRequest, g, req.Actor)
		}
	}
	if req.Ask.Quorum < 0 {
		d.Reason = "negative quorum"
		return d, f, true, fmt.Errorf("authz: %w: negative quorum", ErrInvalidRequest)
	}
	f, refusal, err := s.checkMatter(req.Matter)
	if err != nil || refusal != "" {
		d.Reason = refusal
		if err != nil {
			d.Reason = unjudged(err)
		}
		return d, f, true, err
	}
	return d, f, false, nil
}

// judge is the answer to a request admit let through, whose matter's
// action is f's row: the Decision, with its Reason left as a reason for
// the matter to word (so an answer can be kept for an amount band). Only
// casbin's allow allows (enforceWhy, enforceGroups); the recipe's ask
// can only narrow it (admits).
func (s *snapshot) judge(req Request, f floorRow) (Decision, reason, error) {
	d, why, err := s.enforceWhy(req.Actor, req.Matter, f)
	if err != nil {
		return d, why, err
	}
	if !d.Allowed && len(req.Groups) > 0 {
		if d, why, err = s.enforceGroups(req.Actor, req.Groups, req.Matter, f, d, why); err != nil {
			return d, why, err
		}
	}
	d.Quorum = max(f.quorum, req.Ask.Quorum, 1)
	if !d.Allowed {
		return d, why, nil
	}
	if ok, w := s.admits(req.Actor, req.Matter, req.Ask, req.Groups...); !ok {
		d.Allowed, d.Role, d.Via = false, "", ""
		why = said(w)
	}
	return d, why, nil
}

// unjudged is a request's error as a Reason: what was wrong, said once,
// without the wrapping the error carries for errors.Is.
func unjudged(err error) string {
	s := strings.TrimPrefix(err.Error(), "authz: ")
	for _, e := range []error{ErrInvalidRequest, ErrEnforce} {
		s = strings.TrimPrefix(s, e.Error()+": ")
	}
	return "cannot be judged: " + s
}

func checkPrincipal(field, name string) error {
	if name == "" {
		return fmt.Errorf("authz: %w: missing %s", ErrInvalidRequest, field)
	}
	if isRole(name) {
		return fmt.Errorf("authz: %w: %s %q is a role name, not a principal", ErrInvalidRequest, field, name)
	}
	if isGroup(name) {
		return fmt.Errorf("authz: %w: %s %q is a group name, not a principal", ErrInvalidRequest, field, name)
	}
	return nil
}

// checkMatter validates m and finds its floor. An error means the request
// is malformed; a refusal means it is well-formed and denied.
func (s *snapshot) checkMatter(m Matter) (f floorRow, refusal string, err error) {
	inv := func(format string, args ...any) error {
		return fmt.Errorf("authz: %w: "+format, append([]any{ErrInvalidRequest}, args...)...)
	}
	switch {
	case m.Domain == "":
		return f, "", inv("missing domain")
	case m.Action == "":
		return f, "", inv("missing action")
	}
	if err := checkAction(m.Action); err != nil {
		return f, "", inv("%w", err)
	}
	if err := checkPrincipal("requester", m.Requester); err != nil {
		return f, "", err
	}
	if err := checkPrincipal("agent owner", m.AgentOwner); err != nil {
		return f, "", err
	}
	if m.Amount != nil && *m.Amount < 0 {
		return f, "", inv("negative amount %d", *m.Amount)
	}
	if (m.Amount == nil) != (m.Currency == "") {
		if m.Amount == nil {
			return f, "", inv("a currency without an amount")
		}
		return f, "", inv("missing currency for amount %d", *m.Amount)
	}
	f, ok := s.pol.lookup(m.Domain, m.Action)
	switch {
	case !ok:
		return f, fmt.Sprintf("no policy for %s in %s: nobody may decide it", m.Action, m.Domain), nil
	case f.currency != "" && m.Amount == nil:
		return f, "", inv("missing amount: %s in %s is limited in %s", m.Action, m.Domain, f.currency)
	case f.currency == "" && m.Amount != nil:
		return f, fmt.Sprintf("policy says %s in %s carries no amount, but this one carries %d %s", m.Action, m.Domain, *m.Amount, m.Currency), nil
	case f.currency != m.Currency:
		return f, fmt.Sprintf("amount is in %s; policy limits %s in %s in %s", m.Currency, m.Action, m.Domain, f.currency), nil
	}
	return f, "", nil
}

// enforce asks casbin. Only casbin's answer allows; the rest explains it.
func (s *snapshot) enforce(actor string, m Matter, f floorRow) (Decision, error) {
	d, why, err := s.enforceWhy(actor, m, f)
	d.Reason = why.in(m)
	return d, err
}

// enforceWhy is enforce with the Reason left as a reason.
func (s *snapshot) enforceWhy(actor string, m Matter, f floorRow) (Decision, reason, error) {
	d := Decision{Actor: actor, PolicyVersion: s.version}
	amt := amountArg{}
	if m.Amount != nil {
		amt = amountArg{set: true, minor: *m.Amount}
	}
	ok, explain, err := s.enf.EnforceEx(actor, m.Domain, m.Action, amt, m.Requester, m.AgentOwner)
	if err != nil {
		return d, said("policy evaluation failed"), fmt.Errorf("authz: %w: %w", ErrEnforce, err)
	}
	if !ok {
		return d, s.whyNot(actor, m, f), nil
	}
	if len(explain) != 4 || explain[1] != m.Domain || explain[2] != m.Action {
		return d, said("policy evaluation failed"), fmt.Errorf("authz: %w: allowed by no readable rule (%q)", ErrEnforce, explain)
	}
	return d, s.explainAllow(&d, actor, "", explain, m, f), nil
}

// reason is a Decision's Reason with the matter's amount left as a
// slot: an answer kept for an amount band (answers.go) is worded for
// each amount it serves exactly as it would have been for that amount.
// A reason is not changed once built (answers share them).
type reason []reasonPart

type reasonPart struct {
	text   string
	amount bool // the matter's amount and currency: "485000 INR"
}

func said(text string) reason { return reason{{text: text}} }

func (r reason) then(text string) reason {
	if text == "" {
		return r
	}
	return append(r, reasonPart{text: text})
}

func (r reason) amount() reason { return append(r, reasonPart{amount: true}) }

// in words r for m.
func (r reason) in(m Matter) string {
	if len(r) == 1 && !r[0].amount {
		return r[0].text
	}
	var b strings.Builder
	for _, p := range r {
		switch {
		case !p.amount:
			b.WriteString(p.text)
		case m.Amount != nil:
			b.WriteString(strconv.FormatInt(*m.Amount, 10))
			b.WriteByte(' ')
			b.WriteString(m.Currency)
		}
	}
	return b.String()
}

// explainAllow fills d for a casbin allow of subject (the actor, or one of
// the actor's groups, then named in group) by the rule explain, and says
// why.
func (s *snapshot) explainAllow(d *Decision, subject, group string, explain []string, m Matter, f floorRow) reason {
	d.Allowed = true
	d.Role = strings.TrimPrefix(explain[0], RolePrefix)
	var b strings.Builder
	fmt.Fprintf(&b, "role %s in %s", d.Role, m.Domain)
	if group != "" {
		fmt.Fprintf(&b, " through the identity provider's group %s", group)
	}
	if path := s.path(subject, explain[0], m.Domain, s.now()); len(path) > 2 {
		for _, n := range path[1 : len(path)-1] {
			if !isRole(n) {
				d.Via = n
			}
		}
		if d.Via != "" {
			fmt.Fprintf(&b, " by delegation from %s (%s)", d.Via, strings.Join(path, " → "))
		}
	}
	var why reason
	if m.Amount != nil {
		if explain[3] == limitUnlimited {
			b.WriteString("; no limit for ")
		} else {
			fmt.Fprintf(&b, "; limit %s ≥ ", explain[3])
		}
		why = why.then(b.String()).amount()
		b.Reset()
	}
	if len(f.separate) > 0 {
		fmt.Fprintf(&b, "; not %s, nor acting for them", strings.Join(partyNames(f.separate), " or "))
	}
	return why.then(b.String())
}

// enforceGroups asks casbin for each of actor's groups in turn, after
// casbin denied actor by name (denied is that answer, why its reason). A
// group's rule allows only when actor is none of the parties the floor
// separates, nor acts for one by delegation: casbin judges separation on
// its subject, and here the subject is the group, so it is judged on
// actor first.
func (s *snapshot) enforceGroups(actor string, groups []string, m Matter, f floorRow, denied Decision, why reason) (Decision, reason, error) {
	for _, party := range f.separate {
		who := m.Requester
		if party == SepAgentOwner {
			who = m.AgentOwner
		}
		if s.holds(actor, who, m.Domain) {
			return denied, why, nil // whyNot already says why: separation of duties
		}
	}
	amt := amountArg{}
	if m.Amount != nil {
		amt = amountArg{set: true, minor: *m.Amount}
	}
	for _, g := range groups {
		sub := GroupPrefix + g
		ok, explain, err := s.enf.EnforceEx(sub, m.Domain, m.Action, amt, m.Requester, m.AgentOwner)
		if err != nil {
			return denied, said("policy evaluation failed"), fmt.Errorf("authz: %w: %w", ErrEnforce, err)
		}
		if !ok {
			continue
		}
		if len(explain) != 4 || explain[1] != m.Domain || explain[2] != m.Action {
			return denied, said("policy evaluation failed"), fmt.Errorf("authz: %w: allowed by no readable rule (%q)", ErrEnforce, explain)
		}
		d := Decision{Actor: actor, PolicyVersion: s.version}
		return d, s.explainAllow(&d, sub, g, explain, m, f), nil
	}
	more := false
	for _, g := range groups {
		// Words only, as whyNot: why each group that holds a role here
		// still does not reach this matter (a limit, mostly). Whether it
		// holds none is in words no amount changes.
		if r := s.whyNot(GroupPrefix+g, m, f); !strings.Contains(r.in(m), " holds no role in ") {
			why = append(why.then("; through the identity provider's group "+g+": "), r...)
			more = true
		}
	}
	if !more && s.pol.groupsIn(m.Domain) {
		why = why.then(fmt.Sprintf("; nor do %s's groups at the identity provider (%s)", actor, strings.Join(groups, ", ")))
	}
	return denied, why, nil
}

func partyNames(parties []string) []string {
	out := make([]string, len(parties))
	for i, p := range parties {
		out[i] = strings.ReplaceAll("the "+p, "_", " ")
	}
	return out
}

// whyNot explains a denial. It reads the parsed rows, not casbin, so it
// only words the reason; it never decides.
func (s *snapshot) whyNot(actor string, m Matter, f floorRow) reason {
	t := s.now()
	reach := s.reach(actor, m.Domain, t)
	for _, party := range f.separate {
		who := m.Requester
		if party == SepAgentOwner {
			who = m.AgentOwner
		}
		label := partyNames([]string{party})[0]
		if actor == who {
			return said(fmt.Sprintf("separation of duties: %s is %s", actor, label))
		}
		if _, ok := reach[who]; ok {
			return said(fmt.Sprintf("separation of duties: %s acts for %s %s by delegation (%s)", actor, label, who, strings.Join(s.path(actor, who, m.Domain, t), " → ")))
		}
	}
	var may, held []string
	for _, r := range s.pol.rules {
		if r.domain != m.Domain || r.action != m.Action {
			continue
		}
		name := strings.TrimPrefix(r.role, RolePrefix)
		may = append(may, name)
		if _, ok := reach[r.role]; ok {
			lim := "no limit"
			if r.kind == limitKindAmount {
				lim = fmt.Sprintf("limit %d", r.limit)
			}
			held = append(held, name+": "+lim)
		}
	}
	slices.Sort(may)
	if len(held) == 0 {
		return said(fmt.Sprintf("%s holds no role in %s that may decide %s (roles that may: %s)", actor, m.Domain, m.Action, strings.Join(may, ", ")))
	}
	if m.Amount != nil {
		return said("amount ").amount().then(fmt.Sprintf(" is over what %s may approve (%s)", actor, strings.Join(held, "; ")))
	}
	return said(fmt.Sprintf("denied by policy for %s in %s", m.Action, m.Domain))
}

// reach walks the links in force at t from name within domain, breadth
// first and as deep as casbin goes, and returns each node reached with its
// predecessor. Explanations only.
func (s *snapshot) reach(name, domain string, t time.Time) map[string]string {
	prev := map[string]string{name: ""}
	frontier := []string{name}
	for depth := 0; depth < maxHierarchy && len(frontier) > 0; depth++ {
		var next []string
		for _, n := range frontier {
			for _, l := range s.pol.out[domain][n] {
				if !l.inForce(t) {
					continue
				}
				if _, seen := prev[l.target]; !seen {
					prev[l.target] = n
					next = append(next, l.target)
				}
			}
		}
		frontier = next
	}
	return prev
}

// path is the chain from name to target (both included), or nil.
func (s *snapshot) path(name, target, domain string, t time.Time) []string {
	prev := s.reach(name, domain, t)
	if _, ok := prev[target]; !ok {
		return nil
	}
	var out []string
	for n := target; n != ""; n = prev[n] {
		out = append(out, n)
	}
	slices.Reverse(out)
	return out
}

// holds reports whether name is target or holds target in domain now
// (as a role or by delegation), as casbin's role manager sees it.
func (s *snapshot) holds(name, target, domain string) bool {
	if name == target {
		return true
	}
	if !s.pol.mayReach(name, target, domain) {
		return false // no chain of links at all, whatever their windows
	}
	lk := s.enf.GetLock() // the role manager is not locked by the enforcer (trap 4)
	lk.RLock()
	defer lk.RUnlock()
	ok, err := s.crm.HasLink(name, target, domain)
	return err == nil && ok
}

// holdsAny is holds for actor or any of actor's groups (bare names).
func (s *snapshot) holdsAny(actor string, groups []string, target, domain string) bool {
	if s.holds(actor, target, domain) {
		return true
	}
	for _, g := range groups {
		if g != "" && !isRole(g) && !isGroup(g) && s.holds(GroupPrefix+g, target, domain) {
			return true
		}
	}
	return false
}

// admits reports whether the recipe asked actor (in groups), and if not,
// why.
func (s *snapshot) admits(actor string, m Matter, ask RecipeAsk, groups ...string) (bool, string) {
	if ask.Audience != "" && !s.named(actor, m, ask.Audience, true, groups...) {
		if ask.Audience == AudienceMe {
			return false, fmt.Sprintf("the recipe asks the requester (%s); %s is not the requester", m.Requester, actor)
		}
		return false, fmt.Sprintf("the recipe asks %s; %s does not hold it in %s", ask.Audience, actor, m.Domain)
	}
	if len(ask.Approvers) > 0 && !slices.ContainsFunc(ask.Approvers, func(n string) bool { return s.named(actor, m, n, false, groups...) }) {
		return false, fmt.Sprintf("the recipe's approvers are %s; %s is none of them", strings.Join(ask.Approvers, ", "), actor)
	}
	return true, ""
}

// named reports whether actor is who a recipe name designates: the
// requester for "me", the holders of a role, or a person (or that person's
// delegate, while the delegation is in force). A role actor's groups hold
// counts; the requester is actor alone.
func (s *snapshot) named(actor string, m Matter, name string, audience bool, groups ...string) bool {
	if name == AudienceMe {
		return s.holds(actor, m.Requester, m.Domain)
	}
	role := RolePrefix + strings.TrimPrefix(name, RolePrefix)
	if s.pol.roles[m.Domain][role] {
		return s.holdsAny(actor, groups, role, m.Domain)
	}
	if audience || isRole(name) {
		return false // `ask ROLE` naming a role the domain does not define: nobody
	}
	return s.holds(actor, name, m.Domain)
}

// Route is where an ask goes: the recipe's request combined with the
// policy's floor.
type Route struct {
	Floor Floor
	// Quorum is the larger of the policy's and the recipe's (≥ 1).
	Quorum int
	// Eligible are the people the recipe asks who may decide, each with
	// why, sorted by actor. The inbox shows the ask to them.
	Eligible []Decision
	// Escalate is true when Eligible holds fewer distinct authorities than
	// Quorum: the ask escalates; it is never approved by default.
	Escalate bool
	// Reason explains Escalate.
	Reason string
	// EscalateTo are the people policy alone allows (the recipe's narrowing
	// dropped): whom an escalation may go to. It may be short of Quorum too.
	EscalateTo []Decision
	// PolicyVersion is the version this route was computed by.
	PolicyVersion string
}

// Route computes who may decide m as the recipe asked, under the current
// policy. Authority is checked again by Authorize when the decision is
// made. An error (ErrInvalidRequest, ErrEnforce, ctx's) comes with
// Escalate=true and no Eligible.
func (a *Authorizer) Route(ctx context.Context, m Matter, ask RecipeAsk) (Route, error) {
	s := a.cur.Load()
	r, err := s.route(ctx, m, ask)
	if err != nil {
		r.Eligible, r.Escalate = nil, true
		if r.Reason == "" {
			r.Reason = unjudged(err)
		}
	}
	return r, err
}

// RouteAsked is Route for callers that need whom the ask reaches and
// whether it escalates, not everyone policy alone allows: EscalateTo may
// be left out (nil) unless the ask escalates (then its Reason names
// them, as Route's does); every other field is Route's. Its cost follows the people the recipe names —
// the requester and their delegates for `ask me`, a role's holders —
// where Route's follows everyone who holds a role that may decide.
func (a *Authorizer) RouteAsked(ctx context.Context, m Matter, ask RecipeAsk) (Route, error) {
	s := a.cur.Load()
	r, err := s.routeAsked(ctx, m, ask)
	if err != nil {
		r.Eligible, r.Escalate = nil, true
		if r.Reason == "" {
			r.Reason = unjudged(err)
		}
	}
	return r, err
}

func (s *snapshot) route(ctx context.Context, m Matter, ask RecipeAsk) (Route, error) {
	return s.routeBy(ctx, m, ask, s.routing())
}

// routing is how a route weighs people: among whom, in name order, and
// judged how. The index's way (index.go): only the people who could hold
// a role that may decide the matter (a superset of whom policy allows),
// each judged by the default matcher (matches). Every person of the
// domain, each enforced by casbin (everyone): the way it was before the
// index, kept for a model whose matcher is not the default one (which
// the index cannot read) and as the tests' oracle.
type routing struct {
	s        *snapshot
	everyone bool
}

func (s *snapshot) routing() routing { return routing{s: s, everyone: !s.plain} }

// among is whom a route weighs for m under f.
func (rt routing) among(m Matter, f floorRow) []string {
	if rt.everyone {
		return rt.s.pol.people[m.Domain]
	}
	return rt.s.pol.covering(m, f)
}

// holding is whom a shortfall weighs: who holds a role of f's rules.
func (rt routing) holding(domain string, f floorRow) []string {
	if rt.everyone {
		return rt.s.pol.people[domain]
	}
	return rt.s.pol.holding(domain, f)
}

// judge is policy's answer for one person. Routing reads only an allow
// (its Decision and Reason); a denial's Reason may be empty.
func (rt routing) judge(actor string, m Matter, f floorRow) (Decision, error) {
	if rt.everyone {
		return rt.s.enforce(actor, m, f)
	}
	return rt.s.matches(actor, m, f)
}

// routeStart checks m and ask and begins their route; done when r is the
// answer already (a refusal) or err is set.
func (s *snapshot) routeStart(m Matter, ask RecipeAsk) (r Route, f floorRow, done bool, err error) {
	r = Route{PolicyVersion: s.version, Quorum: max(ask.Quorum, 1)}
	if ask.Quorum < 0 {
		return r, f, true, fmt.Errorf("authz: %w: negative quorum", ErrInvalidRequest)
	}
	f, refusal, err := s.checkMatter(m)
	if err != nil {
		return r, f, true, err
	}
	if refusal != "" {
		r.Escalate, r.Reason = true, refusal
		return r, f, true, nil
	}
	r.Floor, _ = s.floor(m.Domain, f.action)
	r.Quorum = max(f.quorum, ask.Quorum, 1)
	return r, f, false, nil
}

// routeBy is route weighing people as rt does.
func (s *snapshot) routeBy(ctx context.Context, m Matter, ask RecipeAsk, rt routing) (Route, error) {
	r, f, done, err := s.routeStart(m, ask)
	if done {
		return r, err
	}
	m.Action = f.action // the row it falls under: itself or a pattern
	for _, p := range rt.among(m, f) {
		if err := ctx.Err(); err != nil {
			return r, fmt.Errorf("authz: %w", err)
		}
		d, err := rt.judge(p, m, f)
		if err != nil {
			return r, err
		}
		if !d.Allowed {
			continue
		}
		r.EscalateTo = append(r.EscalateTo, d)
		if ok, _ := s.admits(p, m, ask); ok {
			r.Eligible = append(r.Eligible, d)
		}
	}
	n := Distinct(r.Eligible)
	if n >= r.Quorum {
		return r, nil
	}
	r.Escalate = true
	var b strings.Builder
	fmt.Fprintf(&b, "%d of the people the recipe asks may decide %s in %s; quorum is %d", n, m.Action, m.Domain, r.Quorum)
	if ask.Audience == AudienceMe && n == 0 {
		if d, err := s.enforce(m.Requester, m, f); err == nil && !d.Allowed {
			fmt.Fprintf(&b, " (%s)", d.Reason)
		}
	}
	if e := Distinct(r.EscalateTo); e < r.Quorum {
		fmt.Fprintf(&b, "; policy alone allows %d: escalate beyond the policy's roles", e)
	} else {
		names := make([]string, len(r.EscalateTo))
		for i, d := range r.EscalateTo {
			names[i] = d.Actor
		}
		fmt.Fprintf(&b, "; policy allows %s", strings.Join(names, ", "))
	}
	r.Reason = b.String()
	return r, nil
}

// routeAsked is RouteAsked: Eligible found among the people the ask
// could admit (policy.asked, a superset of whom it admits); when they
// are too few, or the ask narrows nothing, the whole route.
func (s *snapshot) routeAsked(ctx context.Context, m Matter, ask RecipeAsk) (Route, error) {
	if !s.plain {
		return s.route(ctx, m, ask)
	}
	r, f, done, err := s.routeStart(m, ask)
	if done {
		return r, err
	}
	whole := m
	m.Action = f.action
	names, all := s.pol.asked(m, f, ask)
	if all {
		return s.route(ctx, whole, ask)
	}
	for _, p := range names {
		if err := ctx.Err(); err != nil {
			return r, fmt.Errorf("authz: %w", err)
		}
		d, err := s.matches(p, m, f)
		if err != nil {
			return r, err
		}
		if ok, _ := s.admits(p, m, ask); d.Allowed && ok {
			r.Eligible = append(r.Eligible, d)
		}
	}
	if Distinct(r.Eligible) >= r.Quorum {
		return r, nil
	}
	return s.route(ctx, whole, ask)
}

// Distinct counts the distinct authorities among approvals: an actor and
// the principal whose authority they exercised (Via) count once, so a
// person and their delegate cannot make a quorum of two.
func Distinct(approvals []Decision) int {
	parent := map[string]string{}
	var find func(string) string
	find = func(x string) string {
		if p, ok := parent[x]; ok && p != x {
			r := find(p)
			parent[x] = r
			return r
		}
		parent[x] = x
		return x
	}
	for _, d := range approvals {
		a := find(d.Actor)
		if d.Via != "" {
			parent[a] = find(d.Via)
		}
	}
	roots := map[string]bool{}
	for _, d := range approvals {
		roots[find(d.Actor)] = true
	}
	return len(roots)
}

// Holds reports whether actor holds role (a bare name, as recipes write
// it) in domain now, directly or by a delegation in force. It is the
// authority of an ask that governs no action (a question), where no rule
// of an action applies. A role the domain does not define, or an actor
// that is itself a role name, holds nothing.
//
// groups are actor's groups at the identity provider (bare names, from
// actor's own token): a role one of them holds counts.
func (a *Authorizer) Holds(actor, role, domain string, groups ...string) bool {
	if checkPrincipal("actor", actor) != nil {
		return false
	}
	s := a.cur.Load()
	r := RolePrefix + strings.TrimPrefix(role, RolePrefix)
	return s.pol.roles[domain][r] && s.holdsAny(actor, groups, r, domain)
}

// RolesOf lists the roles (bare names, sorted) actor holds in domain now,
// directly or by a delegation in force: the audiences of the asks the
// inbox may show actor, before each is authorized in full.
// As with Holds, the roles actor's groups hold count.
func (a *Authorizer) RolesOf(actor, domain string, groups ...string) []string {
	if checkPrincipal("actor", actor) != nil {
		return nil
	}
	s := a.cur.Load()
	var out []string
	for r := range s.pol.roles[domain] {
		if s.holdsAny(actor, groups, r, domain) {
			out = append(out, strings.TrimPrefix(r, RolePrefix))
		}
	}
	slices.Sort(out)
	return out
}
