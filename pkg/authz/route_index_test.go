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

// The oracle is routing as it was before the index: every person of the
// domain, each enforced by casbin (routing.everyone). Route, RouteAsked
// and Deciders must answer exactly as it does — the same Eligible,
// EscalateTo, Escalate, Reason, Gap, in the same order — for every
// policy.

func oracleRoute(s *snapshot, m Matter, ask RecipeAsk) (Route, error) {
	return s.routeBy(context.Background(), m, ask, routing{s: s, everyone: true})
}

func oracleDeciders(s *snapshot, ms []Matter, ask RecipeAsk) (Deciders, error) {
	return s.decidersBy(context.Background(), ms, ask, routing{s: s, everyone: true})
}

// sameAsOracle checks s's route, asked route and deciders of m (and of
// m with also) against the oracle's, and says what differs.
func sameAsOracle(t *testing.T, s *snapshot, m Matter, ask RecipeAsk, also *Matter) {
	t.Helper()
	ctx := context.Background()
	want, werr := oracleRoute(s, m, ask)
	got, gerr := s.route(ctx, m, ask)
	if !reflect.DeepEqual(got, want) || fmt.Sprint(gerr) != fmt.Sprint(werr) {
		t.Fatalf("route of %s asked %+v:\n got  %+v (%v)\n want %+v (%v)", show(m), ask, got, gerr, want, werr)
	}
	asked, aerr := s.routeAsked(ctx, m, ask)
	if !want.Escalate {
		want.EscalateTo = nil // RouteAsked leaves them out unless the ask escalates
		asked.EscalateTo = nil
	}
	if !reflect.DeepEqual(asked, want) || fmt.Sprint(aerr) != fmt.Sprint(werr) {
		t.Fatalf("asked route of %s asked %+v:\n got  %+v (%v)\n want %+v (%v)", show(m), ask, asked, aerr, want, werr)
	}
	ms := []Matter{m}
	if also != nil {
		ms = append(ms, *also)
	}
	wd, werr := oracleDeciders(s, ms, ask)
	gd, gerr := s.deciders(ctx, ms, ask)
	if !reflect.DeepEqual(gd, wd) || fmt.Sprint(gerr) != fmt.Sprint(werr) {
		t.Fatalf("deciders of %s and %s asked %+v:\n got  %+v %+v (%v)\n want %+v %+v (%v)", show(m), show(ms[len(ms)-1]), ask, gd, gd.Gap, gerr, wd, wd.Gap, werr)
	}
}

// show is a matter in words, for failures.
func show(m Matter) string {
	return fmt.Sprintf("%s in %s requested by %s (agent owner %s)", Describe(m), m.Domain, m.Requester, m.AgentOwner)
}

// indexPolicy exercises what the index must get right: a role held
// through a role, through a delegation and a chain of two; windows open,
// closed and not yet open; a pair in two domains with different windows
// (where casbin is stricter beyond the first hop); limits; a pattern; a
// group; separation from requester and owner, through delegates.
const indexPolicy = `p, role:finance, acme, payments.pay, 500000
p, role:controller, acme, payments.pay, unlimited
p, role:clerk, acme, payments.pay, 0100
p2, acme, payments.pay, 1, requester+agent_owner, INR
p, role:member, acme, notes.store, -
p2, acme, notes.store, 1, none, -
p, role:reviewer, acme, gate.*, -
p2, acme, gate.*, 2, requester, -
p, role:finance, globex, payments.pay, 100
p2, globex, payments.pay, 1, agent_owner, INR
g, role:senior, role:finance, acme, _, _
g, alice, role:finance, acme, _, _
g, erin, role:finance, acme, _, _
g, sam, role:senior, acme, _, _
g, carol, role:controller, acme, _, _
g, cleo, role:clerk, acme, _, _
g, tess, role:finance, acme, 2026-09-01T00:00:00Z, 2026-09-05T12:00:00Z
g, uma, role:finance, acme, 2026-09-05T12:00:01Z, _
g, frank, erin, acme, 2026-09-01T00:00:00Z, 2026-09-15T00:00:00Z
g, hank, erin, acme, 2026-08-01T00:00:00Z, 2026-08-15T00:00:00Z
g, kim, lee, acme, _, _
g, lee, alice, acme, 2026-09-01T00:00:00Z, _
g, ivan, judy, acme, _, _
g, judy, alice, acme, _, _
g, judy, alice, globex, 2026-01-01T00:00:00Z, 2026-02-01T00:00:00Z
g, alice, role:finance, globex, _, _
g, group:fin, role:finance, acme, _, _
g, bob, role:member, acme, _, _
g, alice, role:member, acme, _, _
g, rita, role:reviewer, acme, _, _
g, ravi, role:reviewer, acme, _, _
g, rosa, ravi, acme, _, _
g, bob, role:reviewer, acme, _, _
`

func TestRouteIndexMatchesOracle(t *testing.T) {
	a, err := New(Config{PolicyPath: writeFile(t, filepath.Join(t.TempDir(), "p.csv"), indexPolicy), Now: newClock(t0).Now})
	if err != nil {
		t.Fatal(err)
	}
	s := a.cur.Load()
	if !s.plain {
		t.Fatal("the default model is not recognised: routing would not use the index")
	}
	pay := func(v int64, requester, owner string) Matter {
		return Matter{Domain: "acme", Action: "payments.pay", Amount: amount(v), Currency: "INR", Requester: requester, AgentOwner: owner}
	}
	notes := Matter{Domain: "acme", Action: "notes.store", Requester: "bob", AgentOwner: "bob"}
	gate := Matter{Domain: "acme", Action: "gate.release", Requester: "bob", AgentOwner: "bob"}
	globex := Matter{Domain: "globex", Action: "payments.pay", Amount: amount(50), Currency: "INR", Requester: "zed", AgentOwner: "zed"}
	for _, c := range []struct {
		name       string
		m          Matter
		ask        RecipeAsk
		eligible   []string // nil: not checked beyond the oracle
		escalateTo []string
	}{
		// Not ivan: his second hop, judy → alice, is also a pair in globex
		// whose window closed, and beyond the first hop casbin holds a pair
		// only while it is in force in every domain that has it (trap 2).
		{name: "finance through a role, delegations and a chain", m: pay(485000, "bob", "olga"), ask: RecipeAsk{Audience: "finance"},
			eligible:   []string{"alice", "erin", "frank(erin)", "judy(alice)", "kim(alice)", "lee(alice)", "sam"},
			escalateTo: []string{"alice", "carol", "erin", "frank(erin)", "judy(alice)", "kim(alice)", "lee(alice)", "sam"}},
		{name: "the clerk's limit written with a leading zero", m: pay(100, "bob", "olga"), ask: RecipeAsk{Audience: "clerk"}, eligible: []string{"cleo"}},
		{name: "one over the clerk's limit", m: pay(101, "bob", "olga"), ask: RecipeAsk{Audience: "clerk"}},
		{name: "over finance: the controller alone", m: pay(500001, "bob", "olga"), ask: RecipeAsk{}, eligible: []string{"carol"}, escalateTo: []string{"carol"}},
		{name: "the requester and everyone acting for her kept out", m: pay(1, "alice", "olga"), ask: RecipeAsk{Audience: "finance"},
			eligible: []string{"erin", "frank(erin)", "sam"}},
		{name: "the owner kept out, through a chain", m: pay(1, "bob", "lee"), ask: RecipeAsk{Audience: "finance"}},
		{name: "ask me: a member's note", m: notes, ask: RecipeAsk{Audience: AudienceMe}, eligible: []string{"bob"}},
		{name: "ask me for a payment: escalates, naming why", m: pay(1, "alice", "olga"), ask: RecipeAsk{Audience: AudienceMe}},
		{name: "ask me where a delegate may: ivan acts for judy", m: pay(1, "judy", "olga"), ask: RecipeAsk{Audience: AudienceMe}},
		{name: "approvers: a person, a role and me", m: pay(1000, "bob", "olga"), ask: RecipeAsk{Approvers: []string{"erin", "controller", "me", "zed"}}},
		{name: "audience and approvers together", m: pay(1000, "bob", "olga"), ask: RecipeAsk{Audience: "finance", Approvers: []string{"alice", "sam"}, Quorum: 2}},
		{name: "a role the domain does not define", m: pay(1, "bob", "olga"), ask: RecipeAsk{Audience: "treasury"}},
		{name: "an approver written as an undefined role", m: pay(1, "bob", "olga"), ask: RecipeAsk{Approvers: []string{"role:treasury"}}},
		{name: "a pattern with a quorum of two", m: gate, ask: RecipeAsk{Audience: "reviewer"}, eligible: []string{"ravi", "rita", "rosa(ravi)"}},
		{name: "a quorum the recipe raises past everyone", m: gate, ask: RecipeAsk{Audience: "reviewer", Quorum: 5}},
		{name: "a chain whose second hop is not in force in every domain that has it", m: globex, ask: RecipeAsk{}, eligible: []string{"alice"}},
		{name: "no floor", m: Matter{Domain: "acme", Action: "payments.refund", Amount: amount(1), Currency: "INR", Requester: "bob", AgentOwner: "bob"}, ask: RecipeAsk{}},
		{name: "the wrong currency", m: Matter{Domain: "acme", Action: "payments.pay", Amount: amount(1), Currency: "USD", Requester: "bob", AgentOwner: "bob"}, ask: RecipeAsk{}},
		{name: "a domain nobody is in", m: Matter{Domain: "initech", Action: "notes.store", Requester: "bob", AgentOwner: "bob"}, ask: RecipeAsk{}},
	} {
		t.Run(c.name, func(t *testing.T) {
			also := notes
			also.Requester, also.AgentOwner = c.m.Requester, c.m.AgentOwner
			sameAsOracle(t, s, c.m, c.ask, &also)
			r, _ := a.Route(t.Context(), c.m, c.ask)
			if c.eligible != nil && !slices.Equal(actors(r.Eligible), c.eligible) {
				t.Errorf("eligible = %v, want %v", actors(r.Eligible), c.eligible)
			}
			if c.escalateTo != nil && !slices.Equal(actors(r.EscalateTo), c.escalateTo) {
				t.Errorf("escalate to = %v, want %v", actors(r.EscalateTo), c.escalateTo)
			}
		})
	}
}

// A model whose matcher is not the default one is not read through the
// index: routing asks casbin about every person, as before, and finds
// whom that matcher allows (here: a stranger the matcher lets in).
func TestRouteUnderAnotherMatcher(t *testing.T) {
	dir := t.TempDir()
	model := strings.Replace(defaultModel, "m = r.dom == p.dom", `m = r.sub == "root" && r.dom == p.dom && r.act == p.act || r.dom == p.dom`, 1)
	pol := "p, role:finance, acme, payments.pay, 500000\np2, acme, payments.pay, 1, requester, INR\ng, alice, role:finance, acme, _, _\ng, root, role:member, acme, _, _\n"
	a, err := New(Config{ModelPath: writeFile(t, filepath.Join(dir, "model.conf"), model), PolicyPath: writeFile(t, filepath.Join(dir, "p.csv"), pol), Now: newClock(t0).Now})
	if err != nil {
		t.Fatal(err)
	}
	s := a.cur.Load()
	if s.plain {
		t.Fatal("another matcher read as the default one")
	}
	m := pay(1)
	sameAsOracle(t, s, m, RecipeAsk{}, nil)
	r, err := a.Route(t.Context(), m, RecipeAsk{})
	if err != nil || !slices.Equal(actors(r.EscalateTo), []string{"alice", "root"}) {
		t.Fatalf("route under another matcher = %v, %v; want alice and root", actors(r.EscalateTo), err)
	}
}

// genPolicy is a random small policy: two domains, a few people, roles
// (some held through roles), limits, delegations (chains, cycles) with
// windows around t0, a pair in both domains, separation settings,
// quorums, a pattern and groups. Every row is valid; repeats are dropped.
func genPolicy(r *rand.Rand) (src string, people []string) {
	people = []string{"ann", "ben", "cat", "dan", "eve", "fay", "gus"}[:3+r.IntN(5)]
	roles := []string{"role:r1", "role:r2", "role:r3"}
	windows := [][2]string{{"_", "_"}, {"_", "_"}, {"_", "_"},
		{"2026-09-01T00:00:00Z", "2026-09-15T00:00:00Z"}, {"2026-08-01T00:00:00Z", "2026-08-15T00:00:00Z"},
		{"_", "2026-09-05T12:00:00Z"}, {"2026-09-05T12:00:00Z", "_"}, {"2026-10-01T00:00:00Z", "_"}}
	seps := []string{"none", "requester", "agent_owner", "requester+agent_owner"}
	limits := []string{"0", "100", "500", "1000", "unlimited"}
	var rows []string
	add := func(format string, args ...any) {
		row := fmt.Sprintf(format, args...)
		if !slices.Contains(rows, row) {
			rows = append(rows, row)
		}
	}
	for _, dom := range []string{"acme", "globex"} {
		add("p2, %s, pay.send, %d, %s, INR", dom, 1+r.IntN(3), seps[r.IntN(4)])
		add("p2, %s, note.put, %d, %s, -", dom, 1+r.IntN(2), seps[r.IntN(4)])
		add("p2, %s, gate.*, %d, %s, -", dom, 1+r.IntN(2), seps[r.IntN(4)])
		for _, role := range roles {
			if r.IntN(3) > 0 {
				add("p, %s, %s, pay.send, %s", role, dom, limits[r.IntN(len(limits))])
			}
			if r.IntN(3) == 0 {
				add("p, %s, %s, note.put, -", role, dom)
			}
			if r.IntN(4) == 0 {
				add("p, %s, %s, gate.*, -", role, dom)
			}
		}
		if r.IntN(3) == 0 {
			add("g, role:r3, role:r1, %s, _, _", dom) // r3 holds r1
		}
		if r.IntN(3) == 0 {
			add("g, group:g1, %s, %s, _, _", roles[r.IntN(3)], dom)
		}
	}
	links := r.IntN(14)
	for range links {
		dom := []string{"acme", "acme", "globex"}[r.IntN(3)]
		w := windows[r.IntN(len(windows))]
		member := people[r.IntN(len(people))]
		target := roles[r.IntN(3)]
		if r.IntN(3) == 0 {
			target = people[r.IntN(len(people))]
		}
		if member == target {
			continue
		}
		add("g, %s, %s, %s, %s, %s", member, target, dom, w[0], w[1])
		if r.IntN(4) == 0 { // the same pair in the other domain, another window
			other := map[string]string{"acme": "globex", "globex": "acme"}[dom]
			w := windows[r.IntN(len(windows))]
			add("g, %s, %s, %s, %s, %s", member, target, other, w[0], w[1])
		}
	}
	return strings.Join(rows, "\n") + "\n", people
}

// genQuestion is a random matter and ask over people (and a stranger).
func genQuestion(r *rand.Rand, people []string) (Matter, RecipeAsk) {
	who := append(slices.Clone(people), "zed")
	pick := func() string { return who[r.IntN(len(who))] }
	m := Matter{Domain: []string{"acme", "globex", "initech"}[r.IntN(3)], Requester: pick(), AgentOwner: pick()}
	switch r.IntN(5) {
	case 0, 1:
		m.Action = "pay.send"
		m.Amount, m.Currency = amount([]int64{0, 99, 100, 101, 500, 999, 1000, 1001, 1 << 40}[r.IntN(9)]), "INR"
	case 2:
		m.Action = "note.put"
	case 3:
		m.Action = "gate.deploy"
	default:
		m.Action = "pay.refund"
		m.Amount, m.Currency = amount(1), "INR"
	}
	var ask RecipeAsk
	switch r.IntN(4) {
	case 1:
		ask.Audience = AudienceMe
	case 2:
		ask.Audience = []string{"r1", "r2", "r3", "r9"}[r.IntN(4)]
	}
	if r.IntN(3) == 0 {
		names := append(slices.Clone(who), "r1", "r2", "role:r3", AudienceMe)
		for range 1 + r.IntN(3) {
			ask.Approvers = append(ask.Approvers, names[r.IntN(len(names))])
		}
	}
	ask.Quorum = r.IntN(4)
	return m, ask
}

// instants are the moments questions are asked at: around every window
// side genPolicy writes.
var instants = []time.Time{t0, t0.Add(-time.Nanosecond), t0.Add(time.Second), t0.Add(-24 * time.Hour * 30), t0.Add(24 * time.Hour * 12), t0.Add(24 * time.Hour * 40)}

// checkIndexedRouting builds the policy seed makes and checks routes,
// asked routes and deciders of random questions at random moments
// against the oracle.
func checkIndexedRouting(t *testing.T, seed uint64) {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	src, people := genPolicy(r)
	pol, err := parsePolicy([]byte(src))
	if err != nil {
		t.Fatalf("seed %d: generated an invalid policy: %v\n%s", seed, err, src)
	}
	c := newClock(t0)
	s, err := newSnapshot([]byte(defaultModel), pol, c.Now)
	if err != nil {
		t.Fatal(err)
	}
	for range 12 {
		c.Set(instants[r.IntN(len(instants))])
		m, ask := genQuestion(r, people)
		also, _ := genQuestion(r, people)
		also.Domain, also.Requester, also.AgentOwner = m.Domain, m.Requester, m.AgentOwner
		t.Run("", func(t *testing.T) {
			defer func() {
				if t.Failed() {
					t.Logf("seed %d at %s, policy:\n%s", seed, c.Now(), src)
				}
			}()
			sameAsOracle(t, s, m, ask, &also)
		})
	}
}

// Property: on random small policies, routing through the index answers
// exactly as asking casbin about every person does.
func TestRouteIndexProperty(t *testing.T) {
	n := uint64(400)
	if testing.Short() {
		n = 60
	}
	for seed := range n {
		checkIndexedRouting(t, seed)
	}
}

func FuzzRouteIndex(f *testing.F) {
	for _, s := range []uint64{0, 1, 7, 42, 1 << 33} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, seed uint64) { checkIndexedRouting(t, seed) })
}

// Routing's cost follows the holders of the roles that may decide, not
// the people of the domain: one route allocates alike in a domain of 10
// and of 10,000 people (BenchmarkRoute measures the time).
func TestRouteCostDoesNotGrowWithPeople(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a policy of 10,000 people")
	}
	allocs := map[int]float64{}
	for _, n := range []int{10, 10000} {
		a, err := New(Config{PolicyPath: writeFile(t, filepath.Join(t.TempDir(), "p.csv"), benchPolicy(n)), Now: newClock(t0).Now})
		if err != nil {
			t.Fatal(err)
		}
		m, ask := pay(485000), RecipeAsk{Audience: "finance"}
		allocs[n] = testing.AllocsPerRun(50, func() {
			if _, err := a.Route(context.Background(), m, ask); err != nil {
				t.Fatal(err)
			}
			if _, err := a.Deciders(context.Background(), []Matter{m}, ask); err != nil {
				t.Fatal(err)
			}
		})
	}
	// Weighing every person would allocate hundreds of thousands more;
	// the slack is casbin's role manager, a hash trie, which may touch a
	// node more among 10,000 names (seen under -race).
	if allocs[10000] > allocs[10]*1.02 {
		t.Fatalf("allocations per route and deciders: %v with 10 people, %v with 10,000", allocs[10], allocs[10000])
	}
}
