package authz

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// benchPolicy is a domain of people where a fixed few may decide
// payments.pay (two in finance, one controller, one delegate of a finance
// holder, one expired delegate) and everyone else is a member who may
// only store notes: what routing a payment costs must not depend on how
// many members there are.
func benchPolicy(people int) string {
	var b strings.Builder
	b.WriteString(`p, role:finance, acme, payments.pay, 500000
p, role:controller, acme, payments.pay, unlimited
p2, acme, payments.pay, 1, requester+agent_owner, INR
p, role:member, acme, notes.store, -
p2, acme, notes.store, 1, none, -
g, alice, role:finance, acme, _, _
g, erin, role:finance, acme, _, _
g, carol, role:controller, acme, _, _
g, dave, alice, acme, 2026-09-01T00:00:00Z, 2026-09-15T00:00:00Z
g, hank, erin, acme, 2026-08-01T00:00:00Z, 2026-08-15T00:00:00Z
`)
	for i := range people {
		fmt.Fprintf(&b, "g, m%05d, role:member, acme, _, _\n", i)
	}
	return b.String()
}

func benchAuthz(b *testing.B, people int) *Authorizer {
	b.Helper()
	a, err := New(Config{PolicyPath: writeFile(b, filepath.Join(b.TempDir(), "p.csv"), benchPolicy(people)), Now: newClock(t0).Now})
	if err != nil {
		b.Fatal(err)
	}
	return a
}

// BenchmarkRoute routes a payment asked of finance in a domain of 10 and
// of 10,000 people: ns/op and allocs/op must be the same for both.
func BenchmarkRoute(b *testing.B) {
	for _, n := range []int{10, 10000} {
		b.Run(fmt.Sprintf("people=%d", n), func(b *testing.B) {
			a := benchAuthz(b, n)
			m := pay(485000)
			ask := RecipeAsk{Audience: "finance"}
			if r, err := a.Route(b.Context(), m, ask); err != nil || len(r.Eligible) != 3 {
				b.Fatalf("route = %+v, %v", r, err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := a.Route(b.Context(), m, ask); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkDeciders is the start-time check of one payment, as asked and
// by policy alone, in domains of 10 and 10,000 people; and of a payment
// too large for anyone but the controller with a quorum of two (a Gap:
// the shortfall names who is kept out and why).
func BenchmarkDeciders(b *testing.B) {
	for _, n := range []int{10, 10000} {
		for _, c := range []struct {
			name string
			m    Matter
			ask  RecipeAsk
			gap  bool
		}{
			{"decidable", pay(485000), RecipeAsk{Audience: "finance"}, false},
			{"gap", pay(600000), RecipeAsk{Audience: "finance", Quorum: 2}, true},
		} {
			b.Run(fmt.Sprintf("people=%d/%s", n, c.name), func(b *testing.B) {
				a := benchAuthz(b, n)
				ms := []Matter{c.m}
				if ds, err := a.Deciders(b.Context(), ms, c.ask); err != nil || (ds.Gap != nil) != c.gap {
					b.Fatalf("deciders = %+v, %v", ds, err)
				}
				b.ReportAllocs()
				for b.Loop() {
					if _, err := a.Deciders(b.Context(), ms, c.ask); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// BenchmarkAuthorize is one person asked about a payment, afresh
// (Authorize, casbin evaluates it) and from the kept answers
// (AuthorizeCached, as the inbox asks): amounts vary within a band,
// requesters vary among people unrelated to the actor.
func BenchmarkAuthorize(b *testing.B) {
	a := benchAuthz(b, 10)
	reqs := make([]Request, 16)
	for i := range reqs {
		m := pay(int64(1000 * (i + 1)))
		m.Requester = fmt.Sprintf("m%05d", i%10)
		reqs[i] = Request{Actor: "alice", Matter: m, Ask: RecipeAsk{Audience: "finance"}}
	}
	for _, c := range []struct {
		name string
		ask  func(context.Context, Request) (Decision, error)
	}{{"fresh", a.Authorize}, {"kept", a.AuthorizeCached}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if d, err := c.ask(b.Context(), reqs[i%len(reqs)]); err != nil || !d.Allowed {
					b.Fatal(d, err)
				}
				i++
			}
		})
	}
}

// BenchmarkRouteAskMe routes a member's `ask me` note, which every
// member may decide, as an ask opens (RouteAsked: the requester and
// their delegates are weighed) and in full (Route: everyone policy
// allows is listed, so it grows with the members — what RouteAsked is
// for).
func BenchmarkRouteAskMe(b *testing.B) {
	for _, n := range []int{10, 10000} {
		a := benchAuthz(b, n)
		m := Matter{Domain: "acme", Action: "notes.store", Requester: "m00003", AgentOwner: "m00003"}
		ask := RecipeAsk{Audience: AudienceMe}
		for _, c := range []struct {
			name  string
			route func(context.Context, Matter, RecipeAsk) (Route, error)
		}{{"asked", a.RouteAsked}, {"full", a.Route}} {
			b.Run(fmt.Sprintf("people=%d/%s", n, c.name), func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if r, err := c.route(b.Context(), m, ask); err != nil || r.Escalate || len(r.Eligible) != 1 {
						b.Fatal(r, err)
					}
				}
			})
		}
	}
}
