package bench

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/tollgate-dev/tollgate/pkg/authz"
)

// routing measures what opening an ask costs in policy work: routing a
// payment asked of a role (pkg/authz Route) in a domain of 10 people and
// of 10,000, the same two of whom may decide it. Issue 22's goal is
// that the cost does not grow with the people of the domain: routing
// evaluates the roles, not every person. Pure CPU in this process (no
// Redis, no gRPC), so it is measured in time and allocations per call.
func (b *bench) routing(ctx context.Context) ([]Result, error) {
	const calls = 2000
	per := map[int][2]float64{} // people → µs, allocs per call
	for _, people := range []int{10, 10_000} {
		a, err := routingAuthz(b.cfg.dir, people)
		if err != nil {
			return nil, err
		}
		amount := int64(485_000)
		m := authz.Matter{Domain: "acme", Action: "payments.pay", Amount: &amount, Currency: "INR", Requester: "m00001", AgentOwner: "m00001"}
		ask := authz.RecipeAsk{Audience: "finance"}
		r, err := a.Route(ctx, m, ask)
		if err != nil || len(r.Eligible) != 2 {
			return nil, fmt.Errorf("routing with %d people: %d eligible, %v (want finance's 2)", people, len(r.Eligible), err)
		}
		for range calls / 10 { // warm: caches, the first allocations of each size
			if _, err := a.Route(ctx, m, ask); err != nil {
				return nil, err
			}
		}
		runtime.GC()
		var ms0, ms1 runtime.MemStats
		runtime.ReadMemStats(&ms0)
		t0 := time.Now()
		for range calls {
			if _, err := a.Route(ctx, m, ask); err != nil {
				return nil, err
			}
		}
		took := time.Since(t0)
		runtime.ReadMemStats(&ms1)
		// Whole allocations a call: the process's other goroutines (none
		// busy here) could add a fraction.
		per[people] = [2]float64{float64(took.Microseconds()) / calls, math.Round(float64(ms1.Mallocs-ms0.Mallocs) / calls)}
		b.progress("routing: %d people: %.1f µs, %.0f allocations a call", people, per[people][0], per[people][1])
	}
	small, large := per[10], per[10_000]
	return []Result{{Key: "routing", Kind: kindScaling, Runs: calls, Value: large[0] / small[0], MaxValue: large[1] / max(small[1], 1),
		Extra: map[string]float64{"us_10": small[0], "us_10000": large[0], "allocs_10": small[1], "allocs_10000": large[1]},
		Note: fmt.Sprintf("Route of a payment asked of finance, 2 of the domain may decide it: %.1f µs and %.0f allocations a call with 10 people, %.1f µs and %.0f with 10,000",
			small[0], small[1], large[0], large[1])}}, nil
}

// routingAuthz is a policy where three may decide payments (two in
// finance, whom the ask asks, and a controller) and every other person of the domain is a
// member who may only store notes.
func routingAuthz(dir string, people int) (*authz.Authorizer, error) {
	var p strings.Builder
	p.WriteString(`p, role:finance, acme, payments.pay, 500000
p, role:controller, acme, payments.pay, unlimited
p2, acme, payments.pay, 1, requester, INR
p, role:member, acme, notes.store, -
p2, acme, notes.store, 1, none, -
g, fin-a, role:finance, acme, _, _
g, fin-b, role:finance, acme, _, _
g, ctl, role:controller, acme, _, _
`)
	for i := range people {
		fmt.Fprintf(&p, "g, m%05d, role:member, acme, _, _\n", i)
	}
	d, err := os.MkdirTemp(dir, "tollgate-bench-routing-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(d)
	path := filepath.Join(d, "policy.csv")
	if err := os.WriteFile(path, []byte(p.String()), 0o600); err != nil {
		return nil, err
	}
	return authz.New(authz.Config{PolicyPath: path})
}
