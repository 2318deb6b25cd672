package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/tollgate-dev/tollgate/pkg/freshness"
	"math"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/internal/store"
)

// Run runs the conformance suite. newStore must return an empty store; the
// suite closes it.
func Run(t *testing.T, newStore func(t *testing.T) store.Store) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s store.Store)
	}{
		{"CreateAndGet", testCreateAndGet},
		{"GetRunsReadsSeveral", testGetRuns},
		{"CreateTwiceConflicts", testCreateTwice},
		{"StaleVersionWritesNothing", testStaleVersion},
		{"ConcurrentCommitsOneWins", testConcurrent},
		{"RequestKeyIsIdempotent", testRequestKey},
		{"DeadlineUsesStoreClock", testDeadline},
		{"ListRunsFiltersAndPages", testListRuns},
		{"ListAsksFiltersAndPages", testListAsks},
		{"AskStateChanges", testAskStateChanges},
		{"JournalChains", testJournal},
		{"JournalMustFollowHead", testJournalHead},
		{"JournalStartsAtAGivenHead", testJournalGivenHead},
		{"Plans", testPlans},
		{"NotFound", testNotFound},
		{"InvalidCommit", testInvalid},
		{"Standing", testStanding},
		{"Liveness", testLiveness},
		{"CountsFollowStates", testCounts},
		{"WorkQueues", testWorkQueues},
		{"WorkClaimsRace", testWorkClaimsRace},
		{"Hints", testHints},
		{"Served", testServed},
		{"SkillVersions", testSkillVersions},
		{"SkillsRace", testSkillsRace},
		{"SkillTombstone", testSkillTombstone},
		{"ListSkillsPages", testListSkills},
		{"SkillHistoryPages", testSkillHistoryPages},
		{"Schedules", testSchedules},
		{"SchedulesRace", testSchedulesRace},
		{"SchedulesDoNotAlias", testSchedulesDoNotAlias},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newStore(t)
			defer s.Close()
			tc.fn(t, s)
		})
	}
}

var ctx = context.Background()

// base is a fixed creation time, in the past of any store clock.
var base = time.Date(2026, 1, 2, 3, 4, 5, 600_000_000, time.UTC)

// Commit builds a commit that moves run from version expect to expect+1,
// appending journal records of the given kinds, chained after the run's
// current head (prev).
func Commit(prev store.Run, expect int64, state string, asks []store.Ask, kinds ...string) store.Commit {
	r := prev
	r.Version = expect + 1
	r.State = state
	r.UpdatedAt = r.CreatedAt.Add(time.Duration(r.Version) * time.Second)
	r.Data = []byte(fmt.Sprintf(`{"v":%d}`, r.Version))
	var recs []store.JournalRecord
	for i, k := range kinds {
		recs = append(recs, store.JournalRecord{Time: r.UpdatedAt.Add(time.Duration(i) * time.Millisecond), Actor: "alice", Kind: k,
			Payload: json.RawMessage(fmt.Sprintf(`{"n":%d,"text":"<&>"}`, i))})
	}
	r.JournalSeq, r.JournalHead = store.Chain(r.ID, prev.JournalSeq, prev.JournalHead, recs)
	return store.Commit{Run: r, ExpectVersion: expect, Asks: asks, Journal: recs}
}

func newRun(id, requester string, created time.Time) store.Run {
	return store.Run{ID: id, Requester: requester, Skill: "demo", PlanDigest: "sha256:abc", CreatedAt: created}
}

func ask(run, stop, state, audience string, expires time.Time) store.Ask {
	return store.Ask{ID: store.AskID(run, stop), RunID: run, Title: stop + "?", State: state, Audience: audience,
		Requester: "alice", CreatedAt: base, DueAt: expires}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func sameRun(t *testing.T, got, want store.Run) {
	t.Helper()
	if got.ID != want.ID || got.Version != want.Version || got.State != want.State || got.Requester != want.Requester ||
		got.Skill != want.Skill || got.PlanDigest != want.PlanDigest || !got.CreatedAt.Equal(want.CreatedAt) ||
		!got.UpdatedAt.Equal(want.UpdatedAt) || got.JournalSeq != want.JournalSeq || got.JournalHead != want.JournalHead ||
		string(got.Data) != string(want.Data) {
		t.Fatalf("run differs:\n got %+v\nwant %+v", got, want)
	}
}

func testCreateAndGet(t *testing.T, s store.Store) {
	c := Commit(newRun("r1", "alice", base), 0, "running", []store.Ask{ask("r1", "ask_1", "pending", "user:alice", base.Add(time.Hour))}, "run.started", "ask.opened")
	must(t, s.Commit(ctx, c))
	got, err := s.GetRun(ctx, "r1")
	must(t, err)
	sameRun(t, got, c.Run)
	if v, err := s.RunVersion(ctx, "r1"); err != nil || v != c.Run.Version {
		t.Fatalf("RunVersion: %d, %v; want %d", v, err, c.Run.Version)
	}
	a, err := s.GetAsk(ctx, "r1/ask_1")
	must(t, err)
	if a != c.Asks[0] && !(a.ID == c.Asks[0].ID && a.DueAt.Equal(c.Asks[0].DueAt) && a.State == "pending" && a.Audience == "user:alice" && a.Title == "ask_1?") {
		t.Fatalf("ask differs: %+v vs %+v", a, c.Asks[0])
	}
}

func testCreateTwice(t *testing.T, s store.Store) {
	must(t, s.Commit(ctx, Commit(newRun("r1", "alice", base), 0, "running", nil, "run.started")))
	if err := s.Commit(ctx, Commit(newRun("r1", "bob", base), 0, "running", nil, "run.started")); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("creating an existing run: %v", err)
	}
	got, _ := s.GetRun(ctx, "r1")
	if got.Requester != "alice" {
		t.Fatal("the second create overwrote the first")
	}
}

func testStaleVersion(t *testing.T, s store.Store) {
	c1 := Commit(newRun("r1", "alice", base), 0, "running", []store.Ask{ask("r1", "a", "pending", "user:alice", base.Add(time.Hour))}, "run.started")
	must(t, s.Commit(ctx, c1))
	c2 := Commit(c1.Run, 1, "parked", nil, "x")
	must(t, s.Commit(ctx, c2))
	stale := Commit(c1.Run, 1, "cancelled", []store.Ask{ask("r1", "a", "cancelled", "user:alice", base.Add(time.Hour))}, "run.cancel", "run.ended")
	if err := s.Commit(ctx, stale); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("stale commit: %v", err)
	}
	got, _ := s.GetRun(ctx, "r1")
	sameRun(t, got, c2.Run)
	a, _ := s.GetAsk(ctx, "r1/a")
	if a.State != "pending" {
		t.Fatal("a refused commit changed an ask")
	}
	recs, _ := s.Journal(ctx, "r1", 0, 0)
	if len(recs) != 2 {
		t.Fatalf("a refused commit appended to the journal: %d records", len(recs))
	}
}

func testConcurrent(t *testing.T, s store.Store) {
	c1 := Commit(newRun("r1", "alice", base), 0, "parked", []store.Ask{ask("r1", "a", "pending", "user:alice", base.Add(time.Hour))}, "run.started")
	must(t, s.Commit(ctx, c1))
	const n = 64
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := Commit(c1.Run, 1, fmt.Sprintf("s%d", i), []store.Ask{ask("r1", "a", "approved", "user:alice", base.Add(time.Hour))}, "ask.decided")
			errs[i] = s.Commit(ctx, c)
		}()
	}
	wg.Wait()
	ok := 0
	for _, err := range errs {
		switch {
		case err == nil:
			ok++
		case !errors.Is(err, store.ErrConflict):
			t.Fatalf("unexpected error: %v", err)
		}
	}
	if ok != 1 {
		t.Fatalf("%d of %d concurrent commits on one version succeeded, want exactly 1", ok, n)
	}
	recs, _ := s.Journal(ctx, "r1", 0, 0)
	if len(recs) != 2 {
		t.Fatalf("journal has %d records, want 2", len(recs))
	}
	if seq, err := store.VerifyChain(recs); err != nil {
		t.Fatalf("chain broken at %d: %v", seq, err)
	}
}

func testRequestKey(t *testing.T, s store.Store) {
	c := Commit(newRun("r1", "alice", base), 0, "running", nil, "run.started")
	c.RequestKey = "alice:req-1"
	must(t, s.Commit(ctx, c))
	c2 := Commit(newRun("r2", "alice", base), 0, "running", nil, "run.started")
	c2.RequestKey = "alice:req-1"
	err := s.Commit(ctx, c2)
	var dup *store.DuplicateError
	if !errors.As(err, &dup) || dup.RunID != "r1" || !errors.Is(err, store.ErrDuplicate) {
		t.Fatalf("a second start with the same request id must name r1: %v", err)
	}
	if _, err := s.GetRun(ctx, "r2"); !errors.Is(err, store.ErrNotFound) {
		t.Fatal("the duplicate run was written")
	}
	if id, err := s.RequestedRun(ctx, "alice:req-1"); err != nil || id != "r1" {
		t.Fatalf("RequestedRun(alice:req-1) = %q, %v; want r1", id, err)
	}
	if id, err := s.RequestedRun(ctx, "alice:req-2"); err != nil || id != "" {
		t.Fatalf("RequestedRun of a key never used = %q, %v; want none", id, err)
	}
}

func testDeadline(t *testing.T, s store.Store) {
	now, err := s.Now(ctx)
	must(t, err)
	c1 := Commit(newRun("r1", "alice", base), 0, "parked", []store.Ask{ask("r1", "a", "pending", "user:alice", now.Add(-time.Second))}, "run.started")
	must(t, s.Commit(ctx, c1))
	late := Commit(c1.Run, 1, "running", []store.Ask{ask("r1", "a", "approved", "user:alice", now.Add(-time.Second))}, "ask.decided")
	late.Deadline = now.Add(-time.Second)
	if err := s.Commit(ctx, late); !errors.Is(err, store.ErrDeadline) {
		t.Fatalf("a decision after the deadline must be refused by the store: %v", err)
	}
	if got, _ := s.GetRun(ctx, "r1"); got.Version != 1 {
		t.Fatal("the refused commit was written")
	}
	inTime := Commit(c1.Run, 1, "running", nil, "ask.decided")
	inTime.Deadline = now.Add(time.Hour)
	must(t, s.Commit(ctx, inTime))
}

func testListRuns(t *testing.T, s store.Store) {
	states := []string{"running", "parked", "complete"}
	var want []string
	for i := range 23 {
		id := fmt.Sprintf("r%02d", i)
		req := []string{"alice", "bob"}[i%2]
		must(t, s.Commit(ctx, Commit(newRun(id, req, base.Add(time.Duration(i)*time.Minute)), 0, states[i%3], nil, "run.started")))
		if states[i%3] != "complete" && req == "alice" {
			want = append(want, id)
		}
	}
	// Two runs created at the same instant still page deterministically.
	must(t, s.Commit(ctx, Commit(newRun("r99", "alice", base.Add(22*time.Minute)), 0, "running", nil, "run.started")))
	want = append(want, "r99")
	slices.Reverse(want)
	var got []string
	tok := ""
	pages := 0
	for {
		runs, next, err := s.ListRuns(ctx, store.RunQuery{States: []string{"running", "parked"}, Requester: "alice", Limit: 3, PageToken: tok})
		must(t, err)
		pages++
		for _, r := range runs {
			got = append(got, r.ID)
		}
		if next == "" {
			break
		}
		tok = next
		if pages > 20 {
			t.Fatal("paging does not end")
		}
	}
	slices.SortStableFunc(want, func(a, b string) int { return 0 })
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	// Newest first: r99 and r22 share a time; r99 sorts first (id descending).
	if got[0] != "r99" || got[1] != "r22" || !slices.IsSortedFunc(got[1:], func(a, b string) int { return -cmp(a, b) }) {
		t.Fatalf("order: %v", got)
	}
	all, next, err := s.ListRuns(ctx, store.RunQuery{})
	must(t, err)
	if len(all) != 24 || next != "" {
		t.Fatalf("unfiltered: %d runs, next %q", len(all), next)
	}
	if _, _, err := s.ListRuns(ctx, store.RunQuery{PageToken: "%%%"}); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("bad token: %v", err)
	}
}

func cmp(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func testListAsks(t *testing.T, s store.Store) {
	var asks []store.Ask
	for i := range 17 {
		aud := []string{"user:alice", "role:finance", "user:bob"}[i%3]
		st := []string{"pending", "pending", "approved"}[i%3]
		asks = append(asks, ask(fmt.Sprintf("r%d", i%4), fmt.Sprintf("a%02d", i), st, aud, base.Add(time.Duration(17-i)*time.Hour)))
	}
	for run := range 4 {
		id := fmt.Sprintf("r%d", run)
		var mine []store.Ask
		for _, a := range asks {
			if a.RunID == id {
				mine = append(mine, a)
			}
		}
		must(t, s.Commit(ctx, Commit(newRun(id, "alice", base), 0, "parked", mine, "run.started")))
	}
	var got []store.Ask
	tok := ""
	for {
		page, next, err := s.ListAsks(ctx, store.AskQuery{States: []string{"pending"}, Audiences: []string{"user:alice", "role:finance"}, Limit: 4, PageToken: tok})
		must(t, err)
		got = append(got, page...)
		if next == "" {
			break
		}
		tok = next
	}
	var want []store.Ask
	for _, a := range asks {
		if a.State == "pending" && (a.Audience == "user:alice" || a.Audience == "role:finance") {
			want = append(want, a)
		}
	}
	if len(got) != len(want) {
		t.Fatalf("got %d asks, want %d", len(got), len(want))
	}
	if !slices.IsSortedFunc(got, func(a, b store.Ask) int { return a.DueAt.Compare(b.DueAt) }) {
		t.Fatal("asks must come soonest deadline first")
	}
	due, _, err := s.ListAsks(ctx, store.AskQuery{DueBefore: base.Add(3 * time.Hour)})
	must(t, err)
	for _, a := range due {
		if !a.DueAt.Before(base.Add(3 * time.Hour)) {
			t.Fatalf("due-before filter let %s through", a.ID)
		}
	}
	if len(due) != 2 {
		t.Fatalf("due before 3h: %d asks, want 2", len(due))
	}
	byRun, _, err := s.ListAsks(ctx, store.AskQuery{RunID: "r1"})
	must(t, err)
	for _, a := range byRun {
		if a.RunID != "r1" {
			t.Fatal("run filter")
		}
	}
	if len(byRun) != 4 {
		t.Fatalf("r1 has %d asks, want 4", len(byRun))
	}
}

func testAskStateChanges(t *testing.T, s store.Store) {
	exp := base.Add(time.Hour)
	c1 := Commit(newRun("r1", "alice", base), 0, "parked", []store.Ask{ask("r1", "a", "pending", "user:alice", exp)}, "run.started")
	must(t, s.Commit(ctx, c1))
	must(t, s.Commit(ctx, Commit(c1.Run, 1, "running", []store.Ask{ask("r1", "a", "consumed", "user:alice", exp)}, "ask.decided")))
	pending, _, err := s.ListAsks(ctx, store.AskQuery{States: []string{"pending"}})
	must(t, err)
	if len(pending) != 0 {
		t.Fatalf("a decided ask is still listed as pending: %+v", pending)
	}
	a, _ := s.GetAsk(ctx, "r1/a")
	if a.State != "consumed" {
		t.Fatalf("state %s", a.State)
	}
}

func testJournal(t *testing.T, s store.Store) {
	c1 := Commit(newRun("r1", "alice", base), 0, "running", nil, "run.started", "step.dispatched")
	must(t, s.Commit(ctx, c1))
	c2 := Commit(c1.Run, 1, "complete", nil, "step.succeeded", "run.ended", "x")
	must(t, s.Commit(ctx, c2))
	recs, err := s.Journal(ctx, "r1", 0, 0)
	must(t, err)
	if len(recs) != 5 {
		t.Fatalf("%d records", len(recs))
	}
	if seq, err := store.VerifyChain(recs); err != nil {
		t.Fatalf("chain broken at %d: %v", seq, err)
	}
	if recs[4].Hash != c2.Run.JournalHead || string(recs[0].Payload) != `{"n":0,"text":"<&>"}` && !jsonEqual(recs[0].Payload, `{"n":0,"text":"<&>"}`) {
		t.Fatalf("records not kept as written: %+v", recs[0])
	}
	if !recs[0].Time.Equal(c1.Journal[0].Time) || recs[0].Actor != "alice" || recs[0].Kind != "run.started" {
		t.Fatalf("record 1: %+v", recs[0])
	}
	page, err := s.Journal(ctx, "r1", 2, 2)
	must(t, err)
	if len(page) != 2 || page[0].Seq != 3 || page[1].Seq != 4 {
		t.Fatalf("after 2, limit 2: %+v", page)
	}
	// Tampering is detectable.
	recs[1].Actor = "mallory"
	if seq, err := store.VerifyChain(recs); err == nil || seq != 2 {
		t.Fatalf("a changed record must break the chain at 2: %d %v", seq, err)
	}
}

func jsonEqual(a []byte, b string) bool {
	var x, y any
	return json.Unmarshal(a, &x) == nil && json.Unmarshal([]byte(b), &y) == nil && fmt.Sprint(x) == fmt.Sprint(y)
}

func testJournalHead(t *testing.T, s store.Store) {
	c1 := Commit(newRun("r1", "alice", base), 0, "running", nil, "run.started")
	must(t, s.Commit(ctx, c1))
	forged := Commit(store.Run{ID: "r1", CreatedAt: base, Requester: "alice"}, 1, "complete", nil, "run.ended") // chained from nothing
	if err := s.Commit(ctx, forged); err == nil {
		t.Fatal("a journal that does not follow the stored head must be refused")
	}
}

func testPlans(t *testing.T, s store.Store) {
	must(t, s.PutPlan(ctx, "sha256:1", []byte(`{"name":"a"}`)))
	must(t, s.PutPlan(ctx, "sha256:1", []byte(`{"name":"a"}`)))
	b, err := s.GetPlan(ctx, "sha256:1")
	must(t, err)
	if string(b) != `{"name":"a"}` {
		t.Fatalf("%s", b)
	}
	if _, err := s.GetPlan(ctx, "sha256:2"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("%v", err)
	}
}

func testNotFound(t *testing.T, s store.Store) {
	if _, err := s.GetRun(ctx, "nope"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("GetRun: %v", err)
	}
	if _, err := s.RunVersion(ctx, "nope"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("RunVersion: %v", err)
	}
	if _, err := s.GetAsk(ctx, "nope/x"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("GetAsk: %v", err)
	}
	if err := s.Commit(ctx, Commit(newRun("ghost", "a", base), 3, "running", nil)); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("updating a run that does not exist: %v", err)
	}
	recs, err := s.Journal(ctx, "nope", 0, 0)
	if err != nil || len(recs) != 0 {
		t.Fatalf("journal of nothing: %v %v", recs, err)
	}
}

func testInvalid(t *testing.T, s store.Store) {
	c := Commit(newRun("r1", "alice", base), 0, "running", nil, "run.started")
	c.Run.Version = 5
	if err := s.Commit(ctx, c); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("version jump: %v", err)
	}
	c = Commit(newRun("r1", "alice", base), 0, "running", []store.Ask{ask("other", "a", "pending", "user:x", base)}, "run.started")
	if err := s.Commit(ctx, c); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("foreign ask: %v", err)
	}
}

func testStanding(t *testing.T, s store.Store) {
	if got, err := s.ListStanding(ctx); err != nil || len(got) != 0 {
		t.Fatalf("a new store has no exceptions: %v %v", got, err)
	}
	b := store.Standing{ID: "x2", AskID: "r/ask_1", GrantedBy: "dave", GrantedAt: base, Until: base.Add(time.Hour), Scope: "payments.pay amount<=5"}
	a := b
	a.ID = "x1"
	for _, e := range []store.Standing{b, a} {
		if err := s.PutStanding(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	b.Revoked, b.RevokedBy, b.RevokedAt, b.RevokeReason = true, "carol", base.Add(time.Minute), "vendor under review"
	if err := s.PutStanding(ctx, b); err != nil {
		t.Fatal(err)
	}
	got, err := s.ListStanding(ctx)
	if err != nil || len(got) != 2 || got[0].ID != "x1" || got[1].ID != "x2" {
		t.Fatalf("two exceptions by id: %+v %v", got, err)
	}
	if !got[1].Revoked || got[1].RevokedBy != "carol" || !got[1].RevokedAt.Equal(b.RevokedAt) || !got[0].Until.Equal(a.Until) || got[0].Scope != a.Scope {
		t.Fatalf("stored whole and replaced whole: %+v", got)
	}
	if err := s.PutStanding(ctx, store.Standing{}); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("an exception without an id: %v", err)
	}
}

// testCounts moves runs and asks between states, as runs do, and checks
// the counts after each commit; a refused commit counts nothing.
func testCounts(t *testing.T, s store.Store) {
	check := func(when string, runs, asks map[string]int64) {
		t.Helper()
		c, err := s.Counts(ctx)
		must(t, err)
		for _, x := range []struct {
			what      string
			got, want map[string]int64
		}{{"runs", c.Runs, runs}, {"asks", c.Asks, asks}} {
			for state, n := range x.got {
				if n != x.want[state] {
					t.Fatalf("%s: %s in state %q: %d, want %d (all: %v)", when, x.what, state, n, x.want[state], x.got)
				}
			}
			for state, n := range x.want {
				if x.got[state] != n {
					t.Fatalf("%s: %s in state %q: %d, want %d (all: %v)", when, x.what, state, x.got[state], n, x.got)
				}
			}
		}
	}
	check("empty", nil, nil)
	exp := base.Add(time.Hour)
	var runs []store.Run
	for i := range 5 {
		id := fmt.Sprintf("r%d", i)
		c := Commit(newRun(id, "alice", base.Add(time.Duration(i)*time.Second)), 0, "parked",
			[]store.Ask{ask(id, "a", "pending", "user:alice", exp), ask(id, "b", "pending", "role:finance", exp)}, "run.started")
		must(t, s.Commit(ctx, c))
		runs = append(runs, c.Run)
	}
	check("five parked", map[string]int64{"parked": 5}, map[string]int64{"pending": 10})
	// r0: one ask approved, the run goes on.
	c := Commit(runs[0], 1, "running", []store.Ask{ask("r0", "a", "approved", "user:alice", exp)}, "ask.decided")
	must(t, s.Commit(ctx, c))
	runs[0] = c.Run
	check("one approval", map[string]int64{"parked": 4, "running": 1}, map[string]int64{"pending": 9, "approved": 1})
	// r1: the run changes state, its asks do not.
	c = Commit(runs[1], 1, "blocked", nil, "run.state")
	must(t, s.Commit(ctx, c))
	runs[1] = c.Run
	// r2 ends: both asks cancelled in the same commit.
	c = Commit(runs[2], 1, "cancelled", []store.Ask{ask("r2", "a", "cancelled", "user:alice", exp), ask("r2", "b", "cancelled", "role:finance", exp)}, "run.ended")
	must(t, s.Commit(ctx, c))
	runs[2] = c.Run
	// A stale commit of r3 is refused and counts nothing.
	stale := Commit(runs[3], 7, "complete", []store.Ask{ask("r3", "a", "expired", "user:alice", exp)}, "run.ended")
	if err := s.Commit(ctx, stale); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("stale commit: %v", err)
	}
	check("after moves", map[string]int64{"parked": 2, "running": 1, "blocked": 1, "cancelled": 1},
		map[string]int64{"pending": 7, "approved": 1, "cancelled": 2})
	// r0 completes: its approval consumed, the other ask answered.
	c = Commit(runs[0], 2, "complete", []store.Ask{ask("r0", "a", "consumed", "user:alice", exp), ask("r0", "b", "answered", "role:finance", exp)}, "run.ended")
	must(t, s.Commit(ctx, c))
	check("r0 complete", map[string]int64{"parked": 2, "blocked": 1, "cancelled": 1, "complete": 1},
		map[string]int64{"pending": 6, "cancelled": 2, "consumed": 1, "answered": 1})
}

// testLiveness: a replica is alive while its heartbeat has not lapsed,
// by the store's clock; a replica never heard of is not.
func testLiveness(t *testing.T, s store.Store) {
	if ok, err := s.Alive(ctx, "cp-never"); err != nil || ok {
		t.Fatalf("a replica never heard of: alive %v, %v", ok, err)
	}
	if err := s.Heartbeat(ctx, "cp-a", time.Minute); err != nil {
		t.Fatal(err)
	}
	if ok, err := s.Alive(ctx, "cp-a"); err != nil || !ok {
		t.Fatalf("after a heartbeat: alive %v, %v", ok, err)
	}
	if ok, _ := s.Alive(ctx, "cp-b"); ok {
		t.Fatal("another replica is alive by cp-a's heartbeat")
	}
	if err := s.Heartbeat(ctx, "cp-b", 20*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		ok, err := s.Alive(ctx, "cp-b")
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("a heartbeat of 20ms still alive after 10s")
		}
		runtime.Gosched()
	}
	if ok, _ := s.Alive(ctx, "cp-a"); !ok {
		t.Fatal("cp-a lapsed with cp-b")
	}
	if err := s.Leave(ctx, "cp-a"); err != nil {
		t.Fatal(err)
	}
	if ok, _ := s.Alive(ctx, "cp-a"); ok {
		t.Fatal("cp-a is alive after it left")
	}
	for _, bad := range []struct {
		replica string
		ttl     time.Duration
	}{{"", time.Second}, {"cp-c", 0}} {
		if err := s.Heartbeat(ctx, bad.replica, bad.ttl); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("heartbeat %q for %v: %v, want ErrInvalid", bad.replica, bad.ttl, err)
		}
	}
}

// testJournalGivenHead: a run created with a journal head and seq but no
// records (its chain began elsewhere) reads its later records back with
// their own seqs and the given head as the first's prev hash; and a
// limit as large as an int may be does not overflow a read.
func testJournalGivenHead(t *testing.T, s store.Store) {
	head := freshness.ContentDigest([]byte("the chain so far"))
	r := newRun("r-given-head", "alice", base)
	r.Version, r.State, r.JournalSeq, r.JournalHead = 1, "running", 3, head
	must(t, s.Commit(ctx, store.Commit{Run: r}))
	c := Commit(r, 1, "complete", nil, "step.done", "run.ended")
	must(t, s.Commit(ctx, c))
	got, err := s.Journal(ctx, r.ID, 0, math.MaxInt)
	must(t, err)
	if len(got) != 2 {
		t.Fatalf("journal after the given head: %d records, want 2: %+v", len(got), got)
	}
	for i, want := range c.Journal {
		if g := got[i]; g.Seq != want.Seq || g.PrevHash != want.PrevHash || g.Hash != want.Hash || g.Kind != want.Kind {
			t.Errorf("record %d read back as seq %d prev %q hash %q %s; written as seq %d prev %q hash %q %s",
				i, g.Seq, g.PrevHash, g.Hash, g.Kind, want.Seq, want.PrevHash, want.Hash, want.Kind)
		}
	}
	if got[0].Seq != 4 || got[0].PrevHash != head {
		t.Errorf("the first record after the given head: seq %d prev %q, want 4 and %q", got[0].Seq, got[0].PrevHash, head)
	}
	if got, err := s.Journal(ctx, r.ID, 4, math.MaxInt); err != nil || len(got) != 1 || got[0].Seq != 5 {
		t.Errorf("Journal(after 4, limit MaxInt) = %+v, %v; want record 5", got, err)
	}
}
