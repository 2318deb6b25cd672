package authz

import (
	"math"
	"slices"
	"strings"
	"time"
)

// Routing evaluates roles, not people (issue 22). Who may decide a
// matter is found from the rows that may decide it — the roles — and
// the people who could hold those roles, never by asking about every
// person of the domain; so routing costs what the roles' holders cost,
// however many people the domain names.

// index is who could ever hold what, read from the rows alone when a
// policy is loaded: every link counts, whatever its window, at any
// depth. What casbin finds at a moment — links in force, at most
// maxHierarchy of them, beyond the first hop only where the pair is in
// force in every domain that has it (trap 2) — is part of it, so whoever
// casbin could allow a matter is among its holders. Routing weighs these
// and nobody else, each judged in full.
type index struct {
	// holders: domain → role → the people who reach it (directly, through
	// roles that hold it, or acting for someone who does), sorted.
	holders map[string]map[string][]string
	// delegates: domain → person → the people who reach them (may act for
	// them), sorted; people nobody acts for are absent.
	delegates map[string]map[string][]string
	// deciders: (domain, row action) → the people who reach a role of its
	// rules, sorted, each with the most that role lets them approve.
	deciders map[floorKey][]holder
	// rules: (domain, row action) → its rules in file order, which is the
	// order casbin tries them in (the first that matches explains an
	// allow).
	rules map[floorKey][]rule
	// bands: (domain, row action) → its rules' distinct amount limits,
	// ascending. Amounts with as many limits below them compare alike
	// with every rule: they are one band (answers.go).
	bands map[floorKey][]int64
	// bounds: every window side of every link, ascending, distinct.
	// Between two of them no link comes into or out of force, so every
	// answer stays the same: they are the epochs (answers.go).
	bounds []time.Time
}

// holder is one person who could decide an action, and the largest
// limit among the rules whose roles they reach (math.MaxInt64 for
// unlimited, and for an action that carries no amount).
type holder struct {
	name string
	most int64
}

func buildIndex(p *policy) index {
	x := index{holders: map[string]map[string][]string{}, delegates: map[string]map[string][]string{},
		deciders: map[floorKey][]holder{}, rules: map[floorKey][]rule{}, bands: map[floorKey][]int64{}}
	in := map[string]map[string][]string{} // domain → target → its members
	for _, l := range p.links {
		if in[l.domain] == nil {
			in[l.domain] = map[string][]string{}
		}
		in[l.domain][l.target] = append(in[l.domain][l.target], l.member)
		for _, b := range []time.Time{l.from, l.until} {
			if !b.IsZero() {
				x.bounds = append(x.bounds, b)
			}
		}
	}
	slices.SortFunc(x.bounds, time.Time.Compare)
	x.bounds = slices.CompactFunc(x.bounds, time.Time.Equal)
	// reachers walks the links backwards from name, breadth first: the
	// people (not roles, not groups) with a chain of links to it.
	reachers := func(domain, name string) []string {
		seen := map[string]bool{name: true}
		var out []string
		for queue := []string{name}; len(queue) > 0; queue = queue[1:] {
			for _, m := range in[domain][queue[0]] {
				if seen[m] {
					continue
				}
				seen[m] = true
				queue = append(queue, m)
				if !isRole(m) && !isGroup(m) {
					out = append(out, m)
				}
			}
		}
		slices.Sort(out)
		return out
	}
	for dom, roles := range p.roles {
		x.holders[dom] = map[string][]string{}
		for r := range roles {
			x.holders[dom][r] = reachers(dom, r)
		}
	}
	for dom, people := range p.people {
		x.delegates[dom] = map[string][]string{}
		for _, n := range people {
			if len(in[dom][n]) > 0 {
				x.delegates[dom][n] = reachers(dom, n)
			}
		}
	}
	for _, ru := range p.rules {
		k := floorKey{ru.domain, ru.action}
		x.rules[k] = append(x.rules[k], ru)
		if ru.kind == limitKindAmount {
			x.bands[k] = append(x.bands[k], ru.limit)
		}
	}
	for k, rs := range x.rules {
		most := map[string]int64{}
		for _, ru := range rs {
			lim := int64(math.MaxInt64)
			if ru.kind == limitKindAmount {
				lim = ru.limit
			}
			for _, h := range x.holders[k.domain][ru.role] {
				if cur, ok := most[h]; !ok || lim > cur {
					most[h] = lim
				}
			}
		}
		hs := make([]holder, 0, len(most))
		for n, lim := range most {
			hs = append(hs, holder{n, lim})
		}
		slices.SortFunc(hs, func(a, b holder) int { return strings.Compare(a.name, b.name) })
		x.deciders[k] = hs
		slices.Sort(x.bands[k])
		x.bands[k] = slices.Compact(x.bands[k])
	}
	return x
}

// covering lists, in name order, the people who could be allowed m under
// f at some moment: those who reach a role of f's rules whose limit
// covers m's amount. m is checked (checkMatter): its amount, if any, is
// not negative.
func (p *policy) covering(m Matter, f floorRow) []string {
	hs := p.idx.deciders[floorKey{m.Domain, f.action}]
	out := make([]string, 0, len(hs))
	for _, h := range hs {
		if m.Amount == nil || *m.Amount <= h.most {
			out = append(out, h.name)
		}
	}
	return out
}

// holding lists, in name order, the people who reach a role of f's
// rules in domain, at any amount.
func (p *policy) holding(domain string, f floorRow) []string {
	hs := p.idx.deciders[floorKey{domain, f.action}]
	out := make([]string, len(hs))
	for i, h := range hs {
		out[i] = h.name
	}
	return out
}

// covers reports whether name is among covering(m, f), by a search of
// the sorted holders: what asked checks each person a recipe names
// against.
func (p *policy) covers(name string, m Matter, f floorRow) bool {
	hs := p.idx.deciders[floorKey{m.Domain, f.action}]
	i, ok := slices.BinarySearchFunc(hs, name, func(h holder, n string) int { return strings.Compare(h.name, n) })
	return ok && (m.Amount == nil || *m.Amount <= hs[i].most)
}

// asked lists, in name order, the people among covering(m, f) the recipe
// could admit (admits, without groups: routing sees the people policy
// names): for each name it gives, its holders — the requester's for
// `me`, a role's, a person's and their delegates' — within the audience,
// if any, and within the approvers, if any. all says the ask narrows
// nothing (no audience, no approvers): then everyone covering is asked.
func (p *policy) asked(m Matter, f floorRow, ask RecipeAsk) (names []string, all bool) {
	if ask.Audience == "" && len(ask.Approvers) == 0 {
		return nil, true
	}
	var set []string
	if ask.Audience != "" {
		set = p.named(m, ask.Audience, true)
	}
	if len(ask.Approvers) > 0 {
		var byName []string
		for _, n := range ask.Approvers {
			byName = append(byName, p.named(m, n, false)...)
		}
		slices.Sort(byName)
		byName = slices.Compact(byName)
		if ask.Audience == "" {
			set = byName
		} else {
			set = slices.DeleteFunc(slices.Clone(set), func(n string) bool {
				_, ok := slices.BinarySearch(byName, n)
				return !ok
			})
		}
	}
	out := make([]string, 0, len(set))
	for _, n := range set {
		if p.covers(n, m, f) {
			out = append(out, n)
		}
	}
	return out, false
}

// named is who could ever be the one a recipe name designates (named,
// decide.go), sorted: the requester and their delegates for `me`, the
// holders of a role the domain defines, nobody for an audience naming a
// role it does not, else the person and their delegates.
func (p *policy) named(m Matter, name string, audience bool) []string {
	person := func(n string) []string {
		out := append([]string{n}, p.idx.delegates[m.Domain][n]...)
		slices.Sort(out)
		return slices.Compact(out)
	}
	if name == AudienceMe {
		return person(m.Requester)
	}
	role := RolePrefix + strings.TrimPrefix(name, RolePrefix)
	if p.roles[m.Domain][role] {
		return p.idx.holders[m.Domain][role]
	}
	if audience || isRole(name) {
		return nil
	}
	return person(name)
}

// mayReach reports whether a chain of links (of any window) leads from
// name to target in domain, as far as the index knows: false only when
// none does, and then casbin's g(name, target, domain) is false at every
// moment. Chains from a role or a group are not indexed (true: ask
// casbin).
func (p *policy) mayReach(name, target, domain string) bool {
	if name == target || isRole(name) || isGroup(name) {
		return true
	}
	if isRole(target) {
		_, ok := slices.BinarySearch(p.idx.holders[domain][target], name)
		return ok
	}
	return p.actsFor(name, target, domain)
}

// actsFor reports whether actor is party, or could ever act for party in
// domain (a chain of delegations of any window): when neither, casbin's
// g(actor, party, domain) is false at every moment.
func (p *policy) actsFor(actor, party, domain string) bool {
	if actor == party {
		return true
	}
	_, ok := slices.BinarySearch(p.idx.delegates[domain][party], actor)
	return ok
}

// epoch numbers the stretch of time t falls in between window sides:
// within one, every link is in force or not alike.
func (x *index) epoch(t time.Time) int {
	n, _ := slices.BinarySearchFunc(x.bounds, t, func(b, t time.Time) int {
		if b.After(t) {
			return 1
		}
		return -1 // b ≤ t: counted
	})
	return n
}

// band numbers the amount band of amount among (domain, action)'s rule
// limits: how many limits lie below it; -1 without an amount. Two
// amounts of one band are within exactly the same rules' limits.
func (x *index) band(domain, action string, amount *int64) int {
	if amount == nil {
		return -1
	}
	n, _ := slices.BinarySearchFunc(x.bands[floorKey{domain, action}], *amount, func(l, a int64) int {
		if l < a {
			return -1
		}
		return 1
	})
	return n
}

// within reports whether amount is within the rule's limit, as
// withinLimit judges it for casbin.
func (ru rule) within(amount *int64) bool {
	switch ru.kind {
	case limitKindNone:
		return amount == nil
	case limitKindUnlimited:
		return amount != nil && *amount >= 0
	}
	return amount != nil && *amount >= 0 && *amount <= ru.limit
}

// matches is casbin's answer for one actor under the default model
// (model.conf: snapshot.plain), evaluated without the expression engine:
//
//	r.dom == p.dom && r.act == p.act && g(r.sub, p.sub, r.dom) && withinLimit(r.amt, p.limit)
//	&& !(separate(r.dom, r.act, "requester") && g(r.sub, r.requester, r.dom))
//	&& !(separate(r.dom, r.act, "agent_owner") && g(r.sub, r.owner, r.dom))
//
// over the matter's rules in casbin's order, the first that matches
// explaining the allow as EnforceEx's explain would, with g asked of
// casbin's own role manager (holds), which is what the matcher's g asks.
// Only an allow is worded: a denial comes without a Reason (routing lists
// only whom policy allows). m.Action is f's row.
func (s *snapshot) matches(actor string, m Matter, f floorRow) (Decision, error) {
	d := Decision{Actor: actor, PolicyVersion: s.version}
	for _, party := range f.separate {
		who := m.Requester
		if party == SepAgentOwner {
			who = m.AgentOwner
		}
		if s.holds(actor, who, m.Domain) {
			return d, nil
		}
	}
	for _, ru := range s.pol.idx.rules[floorKey{m.Domain, m.Action}] {
		if ru.within(m.Amount) && s.holds(actor, ru.role, m.Domain) {
			d.Reason = s.explainAllow(&d, actor, "", []string{ru.role, ru.domain, ru.action, ru.raw}, m, f).in(m)
			return d, nil
		}
	}
	return d, nil
}
