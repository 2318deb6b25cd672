package authz

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// Property: on random small policies, random questions asked again and
// again at random moments — other amounts, requesters, groups, asks —
// are answered from the kept answers exactly as Authorize answers them
// afresh, Reason and all; and answers are kept and shared.
func TestAnswersMatchAuthorize(t *testing.T) {
	n := uint64(300)
	if testing.Short() {
		n = 40
	}
	var asked, kept int
	for seed := range n {
		a, k := checkAnswers(t, seed)
		asked, kept = asked+a, kept+k
	}
	if kept*2 > asked {
		t.Fatalf("%d questions kept %d answers: nothing is shared", asked, kept)
	}
}

func FuzzAnswers(f *testing.F) {
	for _, s := range []uint64{0, 3, 99} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, seed uint64) { checkAnswers(t, seed) })
}

func checkAnswers(t *testing.T, seed uint64) (asked, kept int) {
	t.Helper()
	r := rand.New(rand.NewPCG(seed, seed*31+7))
	src, people := genPolicy(r)
	pol, err := parsePolicy([]byte(src))
	if err != nil {
		t.Fatalf("seed %d: %v", seed, err)
	}
	c := newClock(t0)
	s, err := newSnapshot([]byte(defaultModel), pol, c.Now)
	if err != nil {
		t.Fatal(err)
	}
	type question struct {
		req Request
		at  time.Time
	}
	var qs []question
	for range 8 {
		m, ask := genQuestion(r, people)
		req := Request{Actor: append(slices.Clone(people), "zed")[r.IntN(len(people)+1)], Matter: m, Ask: ask}
		for _, g := range []string{"g1", "g2"} {
			if r.IntN(3) == 0 {
				req.Groups = append(req.Groups, g)
			}
		}
		qs = append(qs, question{req, instants[r.IntN(len(instants))]})
	}
	for range 40 {
		q := qs[r.IntN(len(qs))]
		// The same question, or one a little different: another amount,
		// requester, agent owner or moment.
		if q.req.Matter.Amount != nil && r.IntN(2) == 0 {
			q.req.Matter.Amount = amount([]int64{0, 1, 99, 100, 101, 499, 500, 501, 1000, 1001, 7 << 40}[r.IntN(11)])
		}
		if r.IntN(3) == 0 {
			q.req.Matter.Requester = append(slices.Clone(people), "zed", "yan")[r.IntN(len(people)+2)]
		}
		if r.IntN(4) == 0 {
			q.req.Matter.AgentOwner = append(slices.Clone(people), "zed")[r.IntN(len(people)+1)]
		}
		if r.IntN(4) == 0 {
			q.at = instants[r.IntN(len(instants))]
		}
		if r.IntN(4) == 0 {
			_, q.req.Ask = genQuestion(r, people)
		}
		if r.IntN(5) == 0 {
			q.req.Groups = [][]string{nil, {"g1"}, {"g2", "g1"}}[r.IntN(3)]
		}
		c.Set(q.at)
		want, werr := s.authorize(context.Background(), q.req)
		got, gerr := s.authorizeCached(context.Background(), q.req)
		asked++
		if !reflect.DeepEqual(got, want) || fmt.Sprint(gerr) != fmt.Sprint(werr) {
			t.Fatalf("seed %d at %s: %s asked about %s by %s (owner %s), groups %v, ask %+v:\n kept  %+v (%v)\n fresh %+v (%v)\npolicy:\n%s",
				seed, q.at, q.req.Actor, Describe(q.req.Matter), q.req.Matter.Requester, q.req.Matter.AgentOwner, q.req.Groups, q.req.Ask, got, gerr, want, werr, src)
		}
	}
	return asked, s.answers.Len()
}

const answersPolicy = `p, role:finance, acme, payments.pay, 500000
p, role:controller, acme, payments.pay, unlimited
p2, acme, payments.pay, 1, requester+agent_owner, INR
g, alice, role:finance, acme, _, _
g, carol, role:controller, acme, _, _
g, dave, alice, acme, 2026-09-01T00:00:00Z, 2026-09-15T00:00:00Z
`

func newAnswersAuthz(t *testing.T, c *clock) *Authorizer {
	t.Helper()
	a, err := New(Config{PolicyPath: writeFile(t, filepath.Join(t.TempDir(), "p.csv"), answersPolicy), Now: c.Now})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// Amounts in different bands (with a limit between them) never share an
// answer; amounts in one band do, each worded with its own amount.
func TestAnswersAmountBands(t *testing.T) {
	a := newAnswersAuthz(t, newClock(t0))
	ask := func(v int64) Decision {
		t.Helper()
		d, err := a.AuthorizeCached(t.Context(), Request{Actor: "alice", Matter: pay(v)})
		if err != nil {
			t.Fatal(err)
		}
		fresh, _ := a.Authorize(t.Context(), Request{Actor: "alice", Matter: pay(v)})
		if !reflect.DeepEqual(d, fresh) {
			t.Fatalf("%d: kept %+v, fresh %+v", v, d, fresh)
		}
		return d
	}
	for _, c := range []struct {
		first, then int64
		allowed     [2]bool
		oneBand     bool
	}{
		{400000, 600000, [2]bool{true, false}, false},
		{600000, 400000, [2]bool{false, true}, false},
		{500000, 500001, [2]bool{true, false}, false},
		{0, 500000, [2]bool{true, true}, true},
		{500001, 1 << 62, [2]bool{false, false}, true},
	} {
		s := a.cur.Load()
		s.answers = newAnswerCache() // each pair starts with none kept
		d1, d2 := ask(c.first), ask(c.then)
		if [2]bool{d1.Allowed, d2.Allowed} != c.allowed {
			t.Errorf("%d then %d: allowed %v %v, want %v", c.first, c.then, d1.Allowed, d2.Allowed, c.allowed)
		}
		if kept := s.answers.Len(); (kept == 1) != c.oneBand {
			t.Errorf("%d then %d: %d answers kept; one band: %v", c.first, c.then, kept, c.oneBand)
		}
		if !strings.Contains(d2.Reason, fmt.Sprint(c.then)+" INR") {
			t.Errorf("%d then %d: the second is worded %q", c.first, c.then, d2.Reason)
		}
	}
}

// A reload changes the answer at once: no kept yes outlives the role it
// came from.
func TestAnswersReload(t *testing.T) {
	a := newAnswersAuthz(t, newClock(t0))
	req := Request{Actor: "alice", Matter: pay(1000)}
	if d, err := a.AuthorizeCached(t.Context(), req); err != nil || !d.Allowed {
		t.Fatalf("before: %+v %v", d, err)
	}
	writeFile(t, a.cfg.PolicyPath, strings.Replace(answersPolicy, "g, alice, role:finance, acme, _, _\n", "g, alice, role:controller, acme, 2026-01-01T00:00:00Z, 2026-02-01T00:00:00Z\n", 1))
	if err := a.Reload(); err != nil {
		t.Fatal(err)
	}
	if d, err := a.AuthorizeCached(t.Context(), req); err != nil || d.Allowed || d.PolicyVersion != a.Version() {
		t.Fatalf("after alice lost finance: %+v %v", d, err)
	}
}

// A delegation window that ends is honoured at the instant it ends, and
// one that starts at the instant it starts, whatever was kept before.
func TestAnswersDelegationWindow(t *testing.T) {
	c := newClock(t0)
	a := newAnswersAuthz(t, c)
	start := time.Date(2026, 9, 1, 0, 0, 0, 0, time.UTC)
	end := time.Date(2026, 9, 15, 0, 0, 0, 0, time.UTC)
	for _, step := range []struct {
		at    time.Time
		allow bool
	}{
		{start.Add(-time.Nanosecond), false}, {start, true}, {end.Add(-time.Nanosecond), true}, {end, false}, {end.Add(-time.Nanosecond), true}, {end, false},
	} {
		c.Set(step.at)
		for range 2 { // fresh, then kept
			d, err := a.AuthorizeCached(t.Context(), Request{Actor: "dave", Matter: pay(1000)})
			if err != nil || d.Allowed != step.allow {
				t.Fatalf("at %s: dave allowed=%v (%s) %v, want %v", step.at, d.Allowed, d.Reason, err, step.allow)
			}
		}
	}
}

// The requester and agent owner are part of an answer only for someone
// who is, or could act for, them: to anyone else one answer serves every
// run, whoever started it.
func TestAnswersSeparation(t *testing.T) {
	a := newAnswersAuthz(t, newClock(t0))
	s := a.cur.Load()
	for _, c := range []struct {
		actor, requester, owner string
		allow                   bool
	}{
		{"carol", "bob", "bob", true},
		{"carol", "zed", "yan", true}, // the same answer as bob's
		{"carol", "carol", "bob", false},
		{"dave", "alice", "bob", false}, // dave acts for alice
		{"dave", "bob", "alice", false},
		{"dave", "bob", "zed", true},
	} {
		m := pay(1000)
		m.Requester, m.AgentOwner = c.requester, c.owner
		d, err := a.AuthorizeCached(t.Context(), Request{Actor: c.actor, Matter: m})
		if err != nil || d.Allowed != c.allow {
			t.Errorf("%s on %s's run (owner %s): %+v %v, want allowed=%v", c.actor, c.requester, c.owner, d, err, c.allow)
		}
	}
	if n := s.answers.Len(); n != 5 {
		t.Errorf("%d answers kept, want 5 (carol's two unrelated runs share one)", n)
	}
}

// Lists that join alike would share answers: joinExact never joins two
// different lists alike.
func TestJoinExact(t *testing.T) {
	lists := [][]string{nil, {""}, {"", ""}, {"abc"}, {"ab", "c"}, {"a", "bc"}, {"a", "b", "c"}, {"1:a"}, {"a", "1:b"}, {"a1:b"}}
	seen := map[string]int{}
	for i, l := range lists {
		k := joinExact(l)
		if j, dup := seen[k]; dup && !slices.Equal(lists[j], l) && !(len(lists[j]) == 0 && len(l) == 0) {
			t.Errorf("%q and %q join alike: %q", lists[j], l, k)
		}
		seen[k] = i
	}
}
