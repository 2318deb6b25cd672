package authz

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/csv"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"
)

// RolePrefix marks a role in the policy file. Permissions (`p` rows) are
// granted to roles only, and a name with this prefix is never accepted as a
// principal, so a role name cannot pass as the actor, requester or agent
// owner (casbin treats g(x, x) as true, so "role:finance" acting would hold
// role:finance). The public API speaks bare role names ("finance").
const RolePrefix = "role:"

// Separation-of-duties parties, as written in a floor row and in Floor.SeparateFrom.
const (
	SepRequester  = "requester"
	SepAgentOwner = "agent_owner"
)

// Limit keywords of a `p` row.
const (
	limitNone      = "-"         // the action carries no amount
	limitUnlimited = "unlimited" // any non-negative amount
	openBound      = "_"         // a window side that is open
)

// maxHierarchy mirrors casbin's role manager depth (10): links beyond it are
// not followed, so a longer chain denies.
const maxHierarchy = 10

// ErrPolicy is wrapped by every error about the model or policy files.
var ErrPolicy = errors.New("invalid policy")

// rule is one `p` row: role may decide action in domain up to limit.
type rule struct {
	role, domain, action string
	kind                 limitKind
	limit                int64  // when kind == limitAmount
	raw                  string // the limit as written: what casbin's explain names
}

type limitKind int

const (
	limitKindNone limitKind = iota
	limitKindUnlimited
	limitKindAmount
)

// link is one `g` row: member holds target (a role, or a delegator's
// authority) in domain while from <= now < until.
type link struct {
	member, target, domain string
	from, until            time.Time // zero = open
}

func (l link) inForce(t time.Time) bool {
	return (l.from.IsZero() || !t.Before(l.from)) && (l.until.IsZero() || t.Before(l.until))
}

// floorRow is one `p2` row: the bar an action type sets in a domain.
type floorRow struct {
	domain, action string
	quorum         int
	separate       []string // subset of {requester, agent_owner}, in that order
	currency       string   // "" when the action carries no amount
}

type floorKey struct{ domain, action string }

// policy is a parsed, validated policy file.
type policy struct {
	rows   [][]string // as loaded, for casbin and the version digest
	rules  []rule
	links  []link
	floors map[floorKey]floorRow
	roles  map[string]map[string]bool   // domain → role names (with prefix) defined there
	people map[string][]string          // domain → every principal named in its g rows, sorted
	out    map[string]map[string][]link // domain → member → its links
	idx    index                        // who could ever hold what (index.go)
}

func isRole(name string) bool { return strings.HasPrefix(name, RolePrefix) }

// GroupPrefix marks a group of the identity provider as a policy member:
// `g, group:finance-emea, role:finance-1m, acme, _, _` gives that role to
// everyone whose sign-in token lists the group finance-emea. The provider
// owns membership, policy owns authority: a group only ever holds roles.
const GroupPrefix = "group:"

func isGroup(name string) bool { return strings.HasPrefix(name, GroupPrefix) }

// parsePolicy reads a casbin CSV policy and validates it strictly: every row
// has all its fields, every value parses, and the rows agree with each other.
// Anything it does not understand is an error, so a typo never loads as a
// wider grant.
func parsePolicy(src []byte) (*policy, error) {
	r := csv.NewReader(bytes.NewReader(src))
	r.Comment = '#'
	r.TrimLeadingSpace = true
	r.FieldsPerRecord = -1
	p := &policy{floors: map[floorKey]floorRow{}, roles: map[string]map[string]bool{}, people: map[string][]string{}}
	seen := map[string]int{}
	for {
		rec, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrPolicy, err)
		}
		line, _ := r.FieldPos(0)
		for i := range rec {
			rec[i] = strings.TrimSpace(rec[i])
		}
		if len(rec) == 1 && rec[0] == "" {
			continue
		}
		key := strings.Join(rec, "\x00")
		if prev, dup := seen[key]; dup {
			return nil, fmt.Errorf("%w: line %d repeats line %d", ErrPolicy, line, prev)
		}
		seen[key] = line
		if err := p.addRow(rec); err != nil {
			return nil, fmt.Errorf("%w: line %d: %w", ErrPolicy, line, err)
		}
		p.rows = append(p.rows, rec)
	}
	if err := p.check(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrPolicy, err)
	}
	return p, nil
}

func (p *policy) addRow(rec []string) error {
	for i, f := range rec {
		if f == "" {
			return fmt.Errorf("field %d is empty", i+1)
		}
	}
	want := map[string]int{"p": 5, "p2": 6, "g": 6}
	n, ok := want[rec[0]]
	if !ok {
		return fmt.Errorf("unknown row type %q (want p, p2 or g)", rec[0])
	}
	if len(rec) != n {
		return fmt.Errorf("a %s row has %d fields, got %d", rec[0], n, len(rec))
	}
	switch rec[0] {
	case "p":
		ru := rule{role: rec[1], domain: rec[2], action: rec[3], raw: rec[4]}
		if !isRole(ru.role) || len(ru.role) == len(RolePrefix) {
			return fmt.Errorf("permissions are granted to roles only: %q does not start with %q", ru.role, RolePrefix)
		}
		if err := checkRowAction(ru.action); err != nil {
			return err
		}
		switch lim := rec[4]; lim {
		case limitNone:
			ru.kind = limitKindNone
		case limitUnlimited:
			ru.kind = limitKindUnlimited
		default:
			v, err := parseMinor(lim)
			if err != nil {
				return fmt.Errorf("limit: %w", err)
			}
			ru.kind, ru.limit = limitKindAmount, v
		}
		p.rules = append(p.rules, ru)
		p.defineRole(ru.domain, ru.role)
	case "p2":
		f := floorRow{domain: rec[1], action: rec[2]}
		if err := checkRowAction(f.action); err != nil {
			return err
		}
		q, err := strconv.Atoi(rec[3])
		if err != nil || q < 1 || q > 100 || strconv.Itoa(q) != rec[3] {
			return fmt.Errorf("quorum %q is not a whole number from 1 to 100", rec[3])
		}
		f.quorum = q
		if rec[4] != "none" {
			for _, s := range strings.Split(rec[4], "+") {
				if s != SepRequester && s != SepAgentOwner || slices.Contains(f.separate, s) {
					return fmt.Errorf("separation %q: want none, requester, agent_owner or requester+agent_owner", rec[4])
				}
				f.separate = append(f.separate, s)
			}
			// canonical order: the requester first
			slices.SortFunc(f.separate, func(a, b string) int { return strings.Compare(b, a) })
		}
		if rec[5] != limitNone {
			if !isCurrency(rec[5]) {
				return fmt.Errorf("currency %q: want an ISO 4217 code such as INR, or - for an action without an amount", rec[5])
			}
			f.currency = rec[5]
		}
		k := floorKey{f.domain, f.action}
		if _, dup := p.floors[k]; dup {
			return fmt.Errorf("a second floor for %s in %s", f.action, f.domain)
		}
		p.floors[k] = f
	case "g":
		l := link{member: rec[1], target: rec[2], domain: rec[3]}
		if l.member == l.target {
			return fmt.Errorf("%q is linked to itself", l.member)
		}
		if isRole(l.member) && !isRole(l.target) {
			return fmt.Errorf("role %q cannot hold a person's authority (%q)", l.member, l.target)
		}
		if isGroup(l.target) {
			return fmt.Errorf("%q: membership of the identity provider's group %q comes from the provider, not from policy", l.member, l.target)
		}
		if isGroup(l.member) && !isRole(l.target) {
			return fmt.Errorf("group %q may only hold roles, not %q", l.member, l.target)
		}
		var err error
		if l.from, err = parseBound(rec[4]); err != nil {
			return fmt.Errorf("from: %w", err)
		}
		if l.until, err = parseBound(rec[5]); err != nil {
			return fmt.Errorf("until: %w", err)
		}
		if !l.from.IsZero() && !l.until.IsZero() && !l.from.Before(l.until) {
			return fmt.Errorf("window from %s until %s is empty", rec[4], rec[5])
		}
		p.links = append(p.links, l)
		for _, n := range []string{l.member, l.target} {
			if isRole(n) {
				p.defineRole(l.domain, n)
			} else if !isGroup(n) {
				// A group is nobody in particular: routing lists people.
				// Repeats are dropped once all rows are read (check): a
				// search here would make loading quadratic in the people.
				p.people[l.domain] = append(p.people[l.domain], n)
			}
		}
	}
	return nil
}

// check validates what only the whole file can say.
func (p *policy) check() error {
	for _, ru := range p.rules {
		f, ok := p.floors[floorKey{ru.domain, ru.action}]
		if !ok {
			return fmt.Errorf("%s in %s has rules but no floor (p2) row", ru.action, ru.domain)
		}
		if (f.currency == "") != (ru.kind == limitKindNone) {
			if f.currency == "" {
				return fmt.Errorf("%s in %s carries no amount (floor currency -), so role %s's limit must be -", ru.action, ru.domain, ru.role)
			}
			return fmt.Errorf("%s in %s carries an amount in %s, so role %s needs a limit (a number or unlimited), not -", ru.action, ru.domain, f.currency, ru.role)
		}
	}
	type rk struct{ role, domain, action string }
	ruled := map[rk]bool{}
	for _, ru := range p.rules {
		k := rk{ru.role, ru.domain, ru.action}
		if ruled[k] {
			return fmt.Errorf("role %s has two rules for %s in %s", ru.role, ru.action, ru.domain)
		}
		ruled[k] = true
	}
	p.inherit()
	for d := range p.people {
		slices.Sort(p.people[d])
		p.people[d] = slices.Compact(p.people[d])
	}
	p.out = map[string]map[string][]link{}
	for _, l := range p.links {
		if p.out[l.domain] == nil {
			p.out[l.domain] = map[string][]link{}
		}
		p.out[l.domain][l.member] = append(p.out[l.domain][l.member], l)
	}
	p.idx = buildIndex(p)
	return nil
}

func (p *policy) defineRole(domain, role string) {
	if p.roles[domain] == nil {
		p.roles[domain] = map[string]bool{}
	}
	p.roles[domain][role] = true
}

// checkRowAction accepts what a policy row names: an action, or a
// pattern "server.prefix*" (one '*', last) covering every action of the
// server whose tool starts with prefix and has no further dot — e.g.
// gate.* for every gate (covers).
func checkRowAction(a string) error {
	if pre, ok := strings.CutSuffix(a, "*"); ok {
		if srv, _, found := strings.Cut(pre, "."); found && srv != "" && !strings.ContainsAny(pre, " \t*") {
			return nil
		}
		return fmt.Errorf("action pattern %q is not server.prefix*", a)
	}
	return checkAction(a)
}

// lookup finds the floor an action falls under: its own row, else the
// longest pattern that covers it. The floor's action is the row's, which
// casbin matches as written (r.act == p.act: no keyMatch, whose '*' would
// match anything, dots and slashes included). Its separation and quorum
// are the row's own raised by every broader pattern (inherit).
func (p *policy) lookup(domain, action string) (floorRow, bool) {
	if f, ok := p.floors[floorKey{domain, action}]; ok {
		return f, true
	}
	var best floorRow
	found := false
	for k, f := range p.floors {
		if k.domain == domain && covers(k.action, action) && (!found || len(k.action) > len(best.action)) {
			best, found = f, true
		}
	}
	return best, found
}

// covers reports whether the pattern row pat ("server.prefix*") covers
// name: an action, or a narrower pattern. The '*' stands for the rest of
// one tool name and never for a dot, so gate.* covers gate.deploy but
// not gate.deploy.prod (that needs gate.deploy.* or its own row): a
// pattern never reaches past the level it was written for.
func covers(pat, name string) bool {
	pre, ok := strings.CutSuffix(pat, "*")
	if !ok || pat == name {
		return false
	}
	stem := strings.TrimSuffix(name, "*")
	rest, ok := strings.CutPrefix(stem, pre)
	return ok && !strings.Contains(rest, ".")
}

// below reports whether name (an action or a pattern) lies anywhere under
// the pattern pat, at any depth: gate.deploy.prod and gate.deploy.* lie
// below gate.*. Which row decides reaches one level only (covers); the
// bars a broader pattern sets reach every level below it, so a name with
// more dots never escapes them.
func below(name, pat string) bool {
	pre, ok := strings.CutSuffix(pat, "*")
	return ok && pat != name && strings.HasPrefix(strings.TrimSuffix(name, "*"), pre)
}

// inherit raises each floor's bars by every broader pattern above it:
// separation of duties is the union of theirs, the quorum the largest. A
// narrower row (an exact action, a longer pattern) says which roles decide
// and up to what limits — it wins that — but it cannot take away an
// exclusion or a quorum a broader row set: `p2, acme, gate.*, 1,
// requester, -` keeps the requester off every gate, whatever a row for
// gate.scratch-* or gate.deploy.* says.
func (p *policy) inherit() {
	raised := map[floorKey]floorRow{}
	for k, f := range p.floors {
		for qk, q := range p.floors {
			if qk.domain != k.domain || !below(k.action, qk.action) {
				continue
			}
			f.quorum = max(f.quorum, q.quorum)
			for _, s := range q.separate {
				if !slices.Contains(f.separate, s) {
					f.separate = append(slices.Clone(f.separate), s)
				}
			}
		}
		slices.SortFunc(f.separate, func(a, b string) int { return strings.Compare(b, a) })
		raised[k] = f
	}
	p.floors = raised
}

// checkAction accepts "server.tool": both parts non-empty, no spaces.
func checkAction(a string) error {
	srv, tool, ok := strings.Cut(a, ".")
	if !ok || srv == "" || tool == "" || strings.ContainsAny(a, " \t*") {
		return fmt.Errorf("action %q is not server.tool", a)
	}
	return nil
}

// parseMinor parses a non-negative amount in minor units: decimal digits
// only (no sign, exponent or separators), within int64.
func parseMinor(s string) (int64, error) {
	if s == "" || strings.TrimLeft(s, "0123456789") != "" {
		return 0, fmt.Errorf("%q is not a whole number of minor units", s)
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%q: %w", s, err)
	}
	return v, nil
}

func isCurrency(s string) bool {
	if len(s) != 3 {
		return false
	}
	for _, c := range s {
		if c < 'A' || c > 'Z' {
			return false
		}
	}
	return true
}

func parseBound(s string) (time.Time, error) {
	if s == openBound {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("%q is not an RFC 3339 time or _: %w", s, err)
	}
	return t, nil
}

// policyVersion is the hex SHA-256 over the model file's bytes and the
// sorted policy rows, each field length-prefixed. Comments, blank lines,
// spacing and row order do not change it; any field does. (casbin's
// Model.ToText is not stable, so it is not used.)
func policyVersion(model []byte, rows [][]string) string {
	sorted := slices.Clone(rows)
	slices.SortFunc(sorted, func(a, b []string) int { return slices.Compare(a, b) })
	h := sha256.New()
	lp := func(b []byte) {
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(b)))
		h.Write(n[:])
		h.Write(b)
	}
	lp([]byte("tollgate-authz-v1"))
	lp(model)
	for _, r := range sorted {
		h.Write([]byte{'R', byte(len(r))})
		for _, f := range r {
			lp([]byte(f))
		}
	}
	return hex.EncodeToString(h.Sum(nil))
}

// groupsIn reports whether any g row of domain gives a group a role.
func (p *policy) groupsIn(domain string) bool {
	for member := range p.out[domain] {
		if isGroup(member) {
			return true
		}
	}
	return false
}
