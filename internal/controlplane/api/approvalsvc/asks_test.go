package approvalsvc_test

import (
	"context"
	"fmt"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/examples"
	tollgatev1 "github.com/tollgate-dev/tollgate/gen/tollgate/v1"
	"github.com/tollgate-dev/tollgate/internal/controlplane/api"
	"github.com/tollgate-dev/tollgate/internal/controlplane/api/approvalsvc"
	"github.com/tollgate-dev/tollgate/internal/controlplane/approvals"
	"github.com/tollgate-dev/tollgate/internal/controlplane/runner"
	"github.com/tollgate-dev/tollgate/internal/identity"
	"github.com/tollgate-dev/tollgate/internal/redistest"
	"github.com/tollgate-dev/tollgate/internal/store"
	"github.com/tollgate-dev/tollgate/internal/store/memstore"
	"github.com/tollgate-dev/tollgate/internal/store/redisstore"
	"github.com/tollgate-dev/tollgate/internal/store/storetest"
	"github.com/tollgate-dev/tollgate/pkg/authz"
	"github.com/tollgate-dev/tollgate/pkg/compiler"
	"github.com/tollgate-dev/tollgate/pkg/engine"
	"github.com/tollgate-dev/tollgate/pkg/plan"
)

// askRecipe parks on an `ask me` gate (alice, a member, approves her own
// notes under the dev policy) that expires after the given time.
func askRecipe(expires string) string {
	return "ask me:\n  go ahead?\n  expires: " + expires + "\n  on expiry: cancel\nsave: notes.store {\"text\": \"inbox\"}\n"
}

// clock is a store clock the test moves.
type clock struct {
	mu sync.Mutex
	at time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.at }

func (c *clock) add(d time.Duration) { c.mu.Lock(); c.at = c.at.Add(d); c.mu.Unlock() }

// inbox is a control plane's approval service over a store, as the server
// wires it (server.go), without the network.
type inbox struct {
	runner *runner.Runner
	svc    *approvalsvc.Service
}

func newInbox(tb testing.TB, st store.Store, pol *authz.Authorizer) inbox {
	tb.Helper()
	desk := approvals.New(approvals.Config{Policy: pol, Domain: "acme", Store: st})
	r := runner.New(runner.Config{Store: st, Asks: desk})
	svc := approvalsvc.New(approvalsvc.Config{Runner: r, Store: st, Approvals: desk, Readers: api.Readers{Runner: r, Desk: desk}})
	return inbox{runner: r, svc: svc}
}

func devPolicy(tb testing.TB) *authz.Authorizer {
	tb.Helper()
	a, err := authz.New(authz.Config{PolicyPath: "../../../../examples/policy.csv"})
	if err != nil {
		tb.Fatal(err)
	}
	return a
}

func askPlan(tb testing.TB, expires string) *plan.Plan {
	tb.Helper()
	cat, err := compiler.ParseCatalog(examples.Catalog)
	if err != nil {
		tb.Fatal(err)
	}
	res := compiler.Compile(askRecipe(expires), compiler.Options{Catalog: cat, Name: "inbox"})
	if res.Plan == nil {
		tb.Fatalf("the recipe does not compile: %v", res.Diagnostics)
	}
	return res.Plan
}

// park starts a run of each plan as alice, and returns their ids.
func park(tb testing.TB, r *runner.Runner, plans ...*plan.Plan) []string {
	tb.Helper()
	ids := make([]string, len(plans))
	for i, p := range plans {
		run, _, err := r.Start(context.Background(), runner.StartRequest{Plan: p, Requester: "alice"})
		if err != nil {
			tb.Fatal(err)
		}
		if run.State != engine.Parked {
			tb.Fatalf("run %d is %s, want parked", i, run.State)
		}
		ids[i] = run.ID
	}
	return ids
}

// times is n times p.
func times(n int, p *plan.Plan) []*plan.Plan {
	out := make([]*plan.Plan, n)
	for i := range out {
		out[i] = p
	}
	return out
}

func as(who string) context.Context {
	return identity.WithPrincipal(context.Background(), identity.Principal{Subject: who, Kind: identity.KindPerson})
}

// shown is an inbox item as the test compares it.
type shown struct {
	Run   string
	State tollgatev1.AskState
	Basis tollgatev1.EligibilityBasis
}

func items(resp *tollgatev1.ListAsksResponse) []shown {
	var out []shown
	for _, it := range resp.GetItems() {
		out = append(out, shown{it.GetAsk().GetRunId(), it.GetAsk().GetState(), it.GetBasis()})
	}
	return out
}

// A page whose first run's ask fell due since (and no deadline pass ran)
// shows that ask as the deadline left it — expired, its run cancelled —
// never as still pending, and the reader's expiry is committed once; the
// runs not yet due show pending. Whether the replica reading committed
// the runs itself (it holds them decoded) or not makes no difference.
func TestListAsksShowsADueAskAsTheDeadlineLeftIt(t *testing.T) {
	pending, expired := tollgatev1.AskState_ASK_STATE_PENDING, tollgatev1.AskState_ASK_STATE_EXPIRED
	requester := tollgatev1.EligibilityBasis_ELIGIBILITY_BASIS_REQUESTER
	pol := devPolicy(t)
	plans := []*plan.Plan{askPlan(t, "1h"), askPlan(t, "2h"), askPlan(t, "3h")}
	for _, tc := range []struct {
		name      string
		elsewhere bool // read through another replica than the one that started the runs
		states    []tollgatev1.AskState
		want      func(ids []string) []shown
	}{
		{"pending only", false, nil, func(ids []string) []shown {
			return []shown{{ids[1], pending, requester}, {ids[2], pending, requester}}
		}},
		{"pending and expired", false, []tollgatev1.AskState{pending, expired}, func(ids []string) []shown {
			return []shown{{ids[0], expired, requester}, {ids[1], pending, requester}, {ids[2], pending, requester}}
		}},
		{"pending and expired, another replica", true, []tollgatev1.AskState{pending, expired}, func(ids []string) []shown {
			return []shown{{ids[0], expired, requester}, {ids[1], pending, requester}, {ids[2], pending, requester}}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := &clock{at: time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)}
			st := memstore.New(memstore.Config{Now: clk.now})
			here := newInbox(t, st, pol)
			ids := park(t, here.runner, plans...)
			clk.add(90 * time.Minute) // the first is due, the others not
			reader := here
			if tc.elsewhere {
				reader = newInbox(t, st, pol)
			}
			resp, err := reader.svc.ListAsks(as("alice"), &tollgatev1.ListAsksRequest{States: tc.states})
			if err != nil {
				t.Fatal(err)
			}
			if got, want := items(resp), tc.want(ids); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("inbox shows\n %v\nwant\n %v", got, want)
			}
			first, err := st.GetRun(context.Background(), ids[0])
			if err != nil {
				t.Fatal(err)
			}
			if first.State != string(engine.Cancelled) {
				t.Fatalf("the due run is %s in the store, want %s: the reader did not commit the expiry", first.State, engine.Cancelled)
			}
			if n := reader.runner.Expiries(); n != 1 {
				t.Fatalf("the reader saw %d expiries, want 1", n)
			}
			// Read again: the expiry is not applied a second time.
			if _, err := reader.svc.ListAsks(as("alice"), &tollgatev1.ListAsksRequest{States: tc.states}); err != nil {
				t.Fatal(err)
			}
			if n := reader.runner.Expiries(); n != 1 {
				t.Fatalf("after a second read the reader saw %d expiries, want 1", n)
			}
		})
	}
}

// A page of asks costs one read of its runs from the store (GetRuns) and
// at most one read of the store's clock, whatever its size and whichever
// replica reads it: never a round trip per row. The page keeps the
// store's order.
func TestListAsksReadsAPageInOneRoundTrip(t *testing.T) {
	pol := devPolicy(t)
	st := &storetest.Reads{Store: memstore.New(memstore.Config{})}
	here := newInbox(t, st, pol)
	ids := park(t, here.runner, times(30, askPlan(t, "1h"))...)
	for _, tc := range []struct {
		name   string
		reader inbox
		size   int32
	}{
		{"the replica that committed them", here, 25},
		{"another replica", newInbox(t, st, pol), 25},
		{"every row, another replica", newInbox(t, st, pol), 50},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for round := range 2 { // cold, then again
				st.Reset()
				resp, err := tc.reader.svc.ListAsks(as("alice"), &tollgatev1.ListAsksRequest{PageSize: tc.size})
				if err != nil {
					t.Fatal(err)
				}
				want := min(int(tc.size), len(ids))
				if got := len(resp.GetItems()); got != want {
					t.Fatalf("round %d: %d items, want %d", round, got, want)
				}
				if g, gs, v, n := st.GetRunCalls.Load(), st.GetRunsCalls.Load(), st.RunVersionCalls.Load(), st.NowCalls.Load(); g != 0 || gs != 1 || v != 0 || n > 1 {
					t.Fatalf("round %d: a page of %d read the store with %d GetRun, %d GetRuns, %d RunVersion and %d Now; want one GetRuns and at most one Now",
						round, want, g, gs, v, n)
				}
				rows, _, err := st.ListAsks(context.Background(), store.AskQuery{Audiences: []string{"user:alice"}, States: []string{string(engine.AskPending)}, Limit: int(tc.size)})
				if err != nil {
					t.Fatal(err)
				}
				for i, it := range resp.GetItems() {
					if it.GetAsk().GetId() != rows[i].ID {
						t.Fatalf("round %d: item %d is ask %s, the store lists %s there", round, i, it.GetAsk().GetId(), rows[i].ID)
					}
				}
			}
		})
	}
}

// Pages read at once by several callers share the runs a replica keeps
// decoded: each gets the whole page, the same, and none changes a shared
// run (run with -race).
func TestListAsksConcurrentReadersShareRuns(t *testing.T) {
	pol := devPolicy(t)
	st := memstore.New(memstore.Config{})
	park(t, newInbox(t, st, pol).runner, times(20, askPlan(t, "1h"))...)
	reader := newInbox(t, st, pol) // decodes the runs, and keeps them
	want, err := reader.svc.ListAsks(as("alice"), &tollgatev1.ListAsksRequest{})
	if err != nil {
		t.Fatal(err)
	}
	const callers = 4
	got := make([][]shown, callers)
	errs := make([]error, callers)
	var wg sync.WaitGroup
	for i := range callers {
		wg.Go(func() {
			for range 3 {
				resp, err := reader.svc.ListAsks(as("alice"), &tollgatev1.ListAsksRequest{})
				if err != nil {
					errs[i] = err
					return
				}
				got[i] = items(resp)
			}
		})
	}
	wg.Wait()
	for i := range callers {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		if fmt.Sprint(got[i]) != fmt.Sprint(items(want)) || len(got[i]) != 20 {
			t.Fatalf("caller %d saw %v, want %v", i, got[i], items(want))
		}
	}
}

// BenchmarkListAsksPage is one page of 50 of alice's pending asks through
// the service (no network), each run's ask due later than now: the
// store's query, the page's runs, visibility and policy, the response.
// Runs read by the replica that committed them are held decoded there;
// another replica decodes them. With Redis (a private redis-server on a
// unix socket, appendfsync everysec as tollgate-bench runs it),
// cpu-µs/page is this process's CPU per page, Redis's not included.
func BenchmarkListAsksPage(b *testing.B) {
	pol, p := devPolicy(b), askPlan(b, "1h")
	stores := []struct {
		name string
		open func(b *testing.B) store.Store
	}{
		{"memstore", func(*testing.B) store.Store { return memstore.New(memstore.Config{}) }},
		{"redis", func(b *testing.B) store.Store {
			srv := redistest.Start(b, redistest.Args("--appendfsync", "everysec"))
			s, err := redisstore.New(context.Background(), redisstore.Config{URL: srv.URL()})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { s.Close() })
			return s
		}},
	}
	for _, sc := range stores {
		b.Run(sc.name, func(b *testing.B) {
			st := sc.open(b)
			here := newInbox(b, st, pol)
			park(b, here.runner, times(200, p)...)
			for _, rc := range []struct {
				name   string
				reader inbox
			}{{"committed-here", here}, {"elsewhere", newInbox(b, st, pol)}} {
				b.Run(rc.name, func(b *testing.B) {
					ctx := as("alice")
					req := &tollgatev1.ListAsksRequest{PageSize: 50}
					b.ReportAllocs()
					cpu0 := processCPU()
					for b.Loop() {
						resp, err := rc.reader.svc.ListAsks(ctx, req)
						if err != nil {
							b.Fatal(err)
						}
						if len(resp.GetItems()) != 50 {
							b.Fatalf("%d items", len(resp.GetItems()))
						}
					}
					b.ReportMetric(float64((processCPU()-cpu0).Microseconds())/float64(b.N), "cpu-µs/page")
				})
			}
		})
	}
}

// processCPU is this process's user + system CPU time.
func processCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
