package authz

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/casbin/casbin/v2"
	"github.com/casbin/casbin/v2/model"
	"github.com/casbin/casbin/v2/persist"
	"github.com/casbin/casbin/v2/rbac"

	"github.com/tollgate-dev/tollgate/pkg/lru"
)

// snapshot is one loaded policy: an enforcer fully configured before it is
// published, and never mutated after. A decision reads one snapshot, so it
// never sees half a reload, and its PolicyVersion is the version it was
// evaluated against.
type snapshot struct {
	version string
	raw     [32]byte // digest of the raw file bytes, to notice changes cheaply
	enf     *casbin.SyncedEnforcer
	pol     *policy
	now     func() time.Time
	crm     rbac.ConditionalRoleManager // g's role manager, for recipe names
	// plain: the model's matcher and effect are the default model's, so
	// routing may find who may decide through the index and judge them
	// by that matcher (matches, index.go); with any other model it asks
	// casbin about every person, as the model may read anything.
	plain bool
	// answers are this policy's Authorize answers kept for the inbox
	// (answers.go): a new policy is a new snapshot, with none.
	answers *lru.Cache[answerKey, answer]
}

// amountArg is the request's amount as the matcher sees it: an opaque Go
// value that only withinLimit reads. Passing a number would let the
// expression engine turn it into a float64 (2^53+1 would compare equal to
// 2^53: casbin trap 3).
type amountArg struct {
	set   bool
	minor int64
}

// The tokens a model must define, in order.
const (
	wantR  = "r_sub, r_dom, r_act, r_amt, r_requester, r_owner"
	wantP  = "p_sub, p_dom, p_act, p_limit"
	wantP2 = "p2_dom, p2_act, p2_quorum, p2_separate, p2_currency"
)

// newSnapshot builds and configures a SyncedEnforcer for pol. Not the cached
// enforcer: SyncedCachedEnforcer serves decisions cached before a window
// closed (trap 4).
//
// Reload safety (trap 1): casbin's LoadPolicy on a live enforcer clears the
// role manager, and until conditions are registered again a link counts as
// valid. Here a reload never touches a live enforcer: each load builds a new
// one, registers every function and link condition on it under its own lock,
// and only then is it published (atomically) to readers. A failed build
// publishes nothing, so the old policy stays.
func newSnapshot(modelText []byte, pol *policy, now func() time.Time) (*snapshot, error) {
	md, err := model.NewModelFromString(string(modelText))
	if err != nil {
		return nil, fmt.Errorf("%w: model: %w", ErrPolicy, err)
	}
	if err := checkModelShape(md); err != nil {
		return nil, fmt.Errorf("%w: model: %w", ErrPolicy, err)
	}
	enf, err := casbin.NewSyncedEnforcer(md, rowsAdapter(pol.rows))
	if err != nil {
		return nil, fmt.Errorf("%w: casbin: %w", ErrPolicy, err)
	}
	enf.EnableLog(false)
	s := &snapshot{enf: enf, pol: pol, now: now, version: policyVersion(modelText, pol.rows),
		plain: sameMatcher(md), answers: newAnswerCache()}

	// Nobody else can reach enf yet; the lock is held anyway, as casbin
	// requires for registration, and the unsynced methods are called inside
	// it (the synced ones would take the lock again and deadlock).
	lk := enf.GetLock()
	lk.Lock()
	defer lk.Unlock()
	enf.Enforcer.AddFunction("withinLimit", withinLimit)
	enf.Enforcer.AddFunction("separate", s.separate)
	s.registerConditions()
	g, ok := enf.Enforcer.GetModel()["g"]["g"]
	if !ok || g.CondRM == nil {
		return nil, fmt.Errorf("%w: model: g has no conditional role manager", ErrPolicy)
	}
	s.crm = g.CondRM
	return s, nil
}

// registerConditions gives every g link its validity window.
//
// The domain condition (user, target, domain) is what casbin checks on the
// first hop. Beyond the first hop casbin checks the domainless condition of
// (user, target) instead (trap 2: an expired second hop counted as valid),
// so every pair gets one too. casbin keeps that one per pair across all
// domains, so it holds only while the pair is in force in every domain that
// has it: a pair with different windows in two domains may deny a chain it
// could allow, never the reverse.
func (s *snapshot) registerConditions() {
	type pair struct{ member, target string }
	byDomain := map[pair]map[string][]link{}
	for _, l := range s.pol.links {
		k := pair{l.member, l.target}
		if byDomain[k] == nil {
			byDomain[k] = map[string][]link{}
		}
		byDomain[k][l.domain] = append(byDomain[k][l.domain], l)
	}
	for k, doms := range byDomain {
		for dom, ls := range doms {
			s.enf.Enforcer.AddNamedDomainLinkConditionFunc("g", k.member, k.target, dom, s.window(ls))
		}
		all := make([][]link, 0, len(doms))
		for _, ls := range doms {
			all = append(all, ls)
		}
		s.enf.Enforcer.AddNamedLinkConditionFunc("g", k.member, k.target, func(...string) (bool, error) {
			t := s.now()
			for _, ls := range all {
				if !anyInForce(ls, t) {
					return false, nil
				}
			}
			return true, nil
		})
	}
}

// window is a link condition over the rows of one pair in one domain:
// valid while any of them is in force. It ignores casbin's params and
// reads the windows parsed at load, so a row cannot be read two ways.
func (s *snapshot) window(ls []link) func(...string) (bool, error) {
	return func(...string) (bool, error) { return anyInForce(ls, s.now()), nil }
}

func anyInForce(ls []link, t time.Time) bool {
	for _, l := range ls {
		if l.inForce(t) {
			return true
		}
	}
	return false
}

// withinLimit(r.amt, p.limit) compares the amount with a rule's limit as
// int64. An argument of the wrong type is an error, and an error denies.
func withinLimit(args ...any) (any, error) {
	if len(args) != 2 {
		return false, fmt.Errorf("withinLimit: want 2 arguments, got %d", len(args))
	}
	amt, ok := args[0].(amountArg)
	if !ok {
		return false, fmt.Errorf("withinLimit: amount is %T, not an authz amount", args[0])
	}
	lim, ok := args[1].(string)
	if !ok {
		return false, fmt.Errorf("withinLimit: limit is %T, not a string", args[1])
	}
	switch lim {
	case limitNone:
		return !amt.set, nil
	case limitUnlimited:
		return amt.set && amt.minor >= 0, nil
	}
	l, err := parseMinor(lim)
	if err != nil {
		return false, fmt.Errorf("withinLimit: %w", err)
	}
	return amt.set && amt.minor >= 0 && amt.minor <= l, nil
}

// separate(r.dom, r.act, party) says whether the floor of the action
// separates duties from party. An action without a floor separates from
// everyone.
func (s *snapshot) separate(args ...any) (any, error) {
	if len(args) != 3 {
		return true, fmt.Errorf("separate: want 3 arguments, got %d", len(args))
	}
	dom, ok1 := args[0].(string)
	act, ok2 := args[1].(string)
	party, ok3 := args[2].(string)
	if !ok1 || !ok2 || !ok3 {
		return true, errors.New("separate: arguments must be strings")
	}
	if party != SepRequester && party != SepAgentOwner {
		return true, fmt.Errorf("separate: unknown party %q", party)
	}
	f, ok := s.pol.floors[floorKey{dom, act}]
	if !ok {
		return true, nil
	}
	return slices.Contains(f.separate, party), nil
}

// sameMatcher reports whether md's matcher and effect are the default
// model's, as casbin reads them.
func sameMatcher(md model.Model) bool {
	def, err := model.NewModelFromString(defaultModel)
	if err != nil {
		return false
	}
	value := func(md model.Model, sec, key string) (string, bool) {
		a, ok := md[sec][key]
		if !ok {
			return "", false
		}
		return a.Value, true
	}
	for _, k := range [][2]string{{"m", "m"}, {"e", "e"}} {
		got, ok1 := value(md, k[0], k[1])
		want, ok2 := value(def, k[0], k[1])
		if !ok1 || !ok2 || got != want {
			return false
		}
	}
	return len(md["m"]) == 1 && len(md["e"]) == 1
}

func checkModelShape(md model.Model) error {
	tok := func(sec, key string) string {
		if a, ok := md[sec][key]; ok {
			return strings.Join(a.Tokens, ", ")
		}
		return ""
	}
	if got := tok("r", "r"); got != wantR {
		return fmt.Errorf("request_definition r must be %q, got %q", wantR, got)
	}
	if got := tok("p", "p"); got != wantP {
		return fmt.Errorf("policy_definition p must be %q, got %q", wantP, got)
	}
	if got := tok("p", "p2"); got != wantP2 {
		return fmt.Errorf("policy_definition p2 must be %q, got %q", wantP2, got)
	}
	g, ok := md["g"]["g"]
	if !ok || len(g.Tokens) != 3 || len(g.ParamsTokens) != 2 {
		return errors.New("role_definition g must be `_, _, _, (_, _)`: member, target, domain, (from, until)")
	}
	if len(md["g"]) != 1 || len(md["p"]) != 2 || len(md["r"]) != 1 {
		return errors.New("the model defines exactly r, p, p2 and g")
	}
	return nil
}

// rowsAdapter feeds casbin the rows already read, parsed and hashed, so what
// is enforced is exactly what the version digest covers (no second read of
// the file). Saving is refused: policy changes come from the file.
type rowsAdapter [][]string

func (a rowsAdapter) LoadPolicy(m model.Model) error {
	for _, r := range a {
		if err := persist.LoadPolicyArray(r, m); err != nil {
			return err
		}
	}
	return nil
}

var errReadOnly = errors.New("authz policy is read-only: edit the policy file")

func (rowsAdapter) SavePolicy(model.Model) error                              { return errReadOnly }
func (rowsAdapter) AddPolicy(string, string, []string) error                  { return errReadOnly }
func (rowsAdapter) RemovePolicy(string, string, []string) error               { return errReadOnly }
func (rowsAdapter) RemoveFilteredPolicy(string, string, int, ...string) error { return errReadOnly }

// selfCheck runs canary requests against a model with a fixed probe policy
// and refuses the model if any answer is wrong. A model file is operator
// input that reloads on change: a matcher that lost a clause, an effect
// that allows by default, or a casbin upgrade that changed trap 2 would
// otherwise fail open silently.
func selfCheck(modelText []byte) error {
	pol, err := parsePolicy([]byte(probePolicy))
	if err != nil {
		return fmt.Errorf("probe policy: %w", err)
	}
	at := time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC)
	s, err := newSnapshot(modelText, pol, func() time.Time { return at })
	if err != nil {
		return err
	}
	const big = "probe.big"
	for _, c := range []struct {
		sub, act        string
		amt             int64
		requester, ownr string
		dom             string
		want            bool
		what            string
	}{
		{"alice", "probe.act", 100, "x", "y", "probe", true, "a role holder within the limit"},
		{"bob", "probe.act", 100, "x", "y", "probe", true, "a delegate within the window"},
		{"alice", "probe.act", 101, "x", "y", "probe", false, "one over the limit"},
		{"alice", "probe.act", -1, "x", "y", "probe", false, "a negative amount"},
		{"alice", "probe.act", 100, "alice", "y", "probe", false, "self-approval"},
		{"bob", "probe.act", 100, "alice", "y", "probe", false, "self-approval through a delegate"},
		{"alice", "probe.act", 100, "x", "alice", "probe", false, "the agent owner"},
		{"carol", "probe.act", 100, "x", "y", "probe", false, "an expired role"},
		{"dan", "probe.act", 100, "x", "y", "probe", false, "an expired second hop"},
		{"mallory", "probe.act", 100, "x", "y", "probe", false, "a stranger"},
		{"alice", "probe.other", 100, "x", "y", "probe", false, "another action"},
		{"alice", "probe.act", 100, "x", "y", "other", false, "a role held in another domain"},
		{"olive", "probe.act", 100, "x", "y", "probe", false, "a rule of another domain"},
		{"gina", big, 1 << 53, "x", "y", "probe", true, "2^53 at a limit of 2^53"},
		{"gina", big, 1<<53 + 1, "x", "y", "probe", false, "2^53+1 at a limit of 2^53"},
	} {
		got, err := s.enf.Enforce(c.sub, c.dom, c.act, amountArg{true, c.amt}, c.requester, c.ownr)
		if err != nil {
			return fmt.Errorf("%w: model self-check (%s): %w", ErrPolicy, c.what, err)
		}
		if got != c.want {
			return fmt.Errorf("%w: model self-check failed: %s gave allowed=%v", ErrPolicy, c.what, got)
		}
	}
	return nil
}

// probePolicy is the fixed policy the self-check runs; its clock is 2001-01-01.
const probePolicy = `
p, role:r, probe, probe.act, 100
p2, probe, probe.act, 1, requester+agent_owner, XXX
p, role:big, probe, probe.big, ` + "9007199254740992" + `
p2, probe, probe.big, 1, none, XXX
g, alice, role:r, probe, _, _
g, bob, alice, probe, 2000-01-01T00:00:00Z, 2002-01-01T00:00:00Z
g, carol, role:r, probe, 2000-01-01T00:00:00Z, 2000-01-02T00:00:00Z
g, dan, frank, probe, _, _
g, frank, alice, probe, 2000-01-01T00:00:00Z, 2000-01-02T00:00:00Z
g, gina, role:big, probe, _, _
p, role:o, other, probe.act, 100
p2, other, probe.act, 1, none, XXX
g, olive, role:o, probe, _, _
`
