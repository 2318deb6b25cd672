package storetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/internal/store"
)

func ids(ws []store.Work) []string {
	out := make([]string, len(ws))
	for i, w := range ws {
		out[i] = w.ID
	}
	return out
}

// testWorkQueues: work enqueued by a commit waits until one claimer takes
// it; an owned entry is claimed at once; release gives back only the
// owner's claims; finish removes waiting and claimed entries alike.
func testWorkQueues(t *testing.T, s store.Store) {
	r := newRun("wq1", "alice", base)
	c := Commit(r, 0, "running", nil, "run.created")
	c.Enqueue = []store.Work{
		{Queue: "tool:a.b", ID: "wq1/s1/1", RunID: "wq1", Body: []byte("one")},
		{Queue: "tool:a.b", ID: "wq1/s2/1", RunID: "wq1"},
		{Queue: "tool:c.d", ID: "wq1/s3/1", RunID: "wq1", Owner: "cp-a"},
	}
	must(t, s.Commit(ctx, c))
	r = c.Run
	// A second run in (probably) another shard, enqueued later.
	r2 := newRun("wq2-other", "bob", base)
	c2 := Commit(r2, 0, "running", nil, "run.created")
	c2.Run.UpdatedAt = c.Run.UpdatedAt.Add(time.Second)
	c2.Enqueue = []store.Work{{Queue: "tool:a.b", ID: "wq2-other/s1/1", RunID: "wq2-other"}}
	must(t, s.Commit(ctx, c2))

	waiting, err := s.WaitingWork(ctx, "tool:a.b", 10)
	must(t, err)
	if got := ids(waiting); len(got) != 3 {
		t.Fatalf("waiting in tool:a.b: %v, want 3 entries", got)
	}
	if w, _ := s.WaitingWork(ctx, "tool:c.d", 10); len(w) != 0 {
		t.Fatalf("an entry enqueued with an owner waits: %v", ids(w))
	}
	claimed, err := s.ClaimedWork(ctx)
	must(t, err)
	if len(claimed) != 1 || claimed[0].ID != "wq1/s3/1" || claimed[0].Owner != "cp-a" || claimed[0].Queue != "tool:c.d" || claimed[0].RunID != "wq1" {
		t.Fatalf("claimed after the commit: %+v, want wq1/s3/1 owned by cp-a", claimed)
	}

	got, err := s.ClaimWork(ctx, "tool:a.b", "cp-b", 2)
	must(t, err)
	if len(got) != 2 {
		t.Fatalf("claimed %v, want 2", ids(got))
	}
	for _, w := range got {
		if w.Owner != "cp-b" || w.Queue != "tool:a.b" || w.RunID == "" {
			t.Fatalf("claimed entry %+v", w)
		}
		if w.ID == "wq1/s1/1" && string(w.Body) != "one" {
			t.Fatalf("body %q, want one", w.Body)
		}
	}
	rest, err := s.ClaimWork(ctx, "tool:a.b", "cp-c", 10)
	must(t, err)
	all := append(ids(got), ids(rest)...)
	slices.Sort(all)
	if want := []string{"wq1/s1/1", "wq1/s2/1", "wq2-other/s1/1"}; !slices.Equal(all, want) {
		t.Fatalf("the two claims took %v, want each of %v once", all, want)
	}
	if more, _ := s.ClaimWork(ctx, "tool:a.b", "cp-c", 10); len(more) != 0 {
		t.Fatalf("claimed twice: %v", ids(more))
	}

	// Release: only the owner's claim goes back.
	refs := []store.WorkRef{got[0].Ref(), got[1].Ref()}
	must(t, s.ReleaseWork(ctx, "cp-c", refs))
	if w, _ := s.WaitingWork(ctx, "tool:a.b", 10); len(w) != 0 {
		t.Fatalf("another replica released cp-b's claims: %v", ids(w))
	}
	must(t, s.ReleaseWork(ctx, "cp-b", refs[:1]))
	if w, _ := s.WaitingWork(ctx, "tool:a.b", 10); len(w) != 1 || w[0].ID != got[0].ID {
		t.Fatalf("after cp-b released %s: waiting %v", got[0].ID, ids(w))
	}

	// A commit finishes a waiting and a claimed entry; enqueuing an id
	// the run holds changes nothing.
	c = Commit(r, r.Version, "running", nil, "step.leased")
	c.Finish = []store.WorkRef{{Queue: "tool:a.b", ID: "wq1/s1/1", RunID: "wq1"}, {Queue: "tool:a.b", ID: "wq1/s2/1", RunID: "wq1"}}
	c.Enqueue = []store.Work{{Queue: "tool:c.d", ID: "wq1/s3/1", RunID: "wq1"}}
	must(t, s.Commit(ctx, c))
	r = c.Run
	claimed, err = s.ClaimedWork(ctx)
	must(t, err)
	var left []string
	for _, w := range claimed {
		left = append(left, w.Owner+":"+w.ID)
	}
	slices.Sort(left)
	want := []string{"cp-a:wq1/s3/1"}
	if !slices.Contains(ids(got), "wq2-other/s1/1") {
		want = append(want, "cp-c:wq2-other/s1/1")
	} else if got[0].ID != "wq2-other/s1/1" {
		want = append(want, "cp-b:wq2-other/s1/1")
	}
	slices.Sort(want)
	if !slices.Equal(left, want) {
		t.Fatalf("claimed after finishing: %v, want %v", left, want)
	}
	if w, _ := s.WaitingWork(ctx, "tool:a.b", 10); len(w) != 0 && (len(w) != 1 || w[0].ID != "wq2-other/s1/1") {
		t.Fatalf("finished entries still wait: %v", ids(w))
	}
	must(t, s.FinishWork(ctx, []store.WorkRef{{Queue: "tool:c.d", ID: "wq1/s3/1", RunID: "wq1"}, {Queue: "tool:a.b", ID: "wq2-other/s1/1", RunID: "wq2-other"}}))
	if claimed, _ := s.ClaimedWork(ctx); len(claimed) != 0 {
		t.Fatalf("claimed after FinishWork: %+v", claimed)
	}
	if w, _ := s.WaitingWork(ctx, "tool:a.b", 10); len(w) != 0 {
		t.Fatalf("waiting after FinishWork: %v", ids(w))
	}

	// Finishing an id and enqueuing it in the same commit moves it: to
	// another queue, with another owner.
	c = Commit(r, r.Version, "running", nil, "x")
	c.Enqueue = []store.Work{{Queue: "tool:a.b", ID: "wq1/mv/1", RunID: "wq1", Owner: "cp-a"}}
	must(t, s.Commit(ctx, c))
	r = c.Run
	c = Commit(r, r.Version, "running", nil, "y")
	c.Finish = []store.WorkRef{{Queue: "tool:a.b", ID: "wq1/mv/1", RunID: "wq1"}}
	c.Enqueue = []store.Work{{Queue: "lease", ID: "wq1/mv/1", RunID: "wq1", Owner: "cp-b"}}
	must(t, s.Commit(ctx, c))
	r = c.Run
	claimed, err = s.ClaimedWork(ctx)
	must(t, err)
	if len(claimed) != 1 || claimed[0].Queue != "lease" || claimed[0].Owner != "cp-b" {
		t.Fatalf("a moved entry: %+v, want wq1/mv/1 in lease owned by cp-b", claimed)
	}
	must(t, s.FinishWork(ctx, []store.WorkRef{claimed[0].Ref()}))

	// EnsureWork adds what the run does not hold, and leaves the rest.
	if _, err := s.EnsureWork(ctx, []store.Work{{Queue: "tool:a.b", ID: "wq1/old/1", RunID: "wq1"}}); err != nil {
		t.Fatal(err)
	}
	n, err := s.EnsureWork(ctx, []store.Work{{Queue: "tool:a.b", ID: "wq1/old/1", RunID: "wq1", Owner: "cp-z"}, {Queue: "lease", ID: "wq1/old2/1", RunID: "wq1", Owner: "cp-a"}})
	must(t, err)
	if n != 1 {
		t.Fatalf("EnsureWork added %d, want 1 (one was there)", n)
	}
	if w, _ := s.WaitingWork(ctx, "tool:a.b", 10); len(w) != 1 || w[0].ID != "wq1/old/1" {
		t.Fatalf("an ensured entry waits: %v", ids(w))
	}
	must(t, s.FinishWork(ctx, []store.WorkRef{{Queue: "tool:a.b", ID: "wq1/old/1", RunID: "wq1"}, {Queue: "lease", ID: "wq1/old2/1", RunID: "wq1"}}))

	// Bad entries are refused, and the commit writes nothing.
	for _, bad := range []store.Work{
		{Queue: "", ID: "wq1/x/1", RunID: "wq1"},
		{Queue: "q", ID: "", RunID: "wq1"},
		{Queue: "q\nr", ID: "wq1/x/1", RunID: "wq1"},
		{Queue: "q", ID: "wq1/x/1", RunID: "another"},
	} {
		c := Commit(r, r.Version, "running", nil)
		c.Enqueue = []store.Work{bad}
		if err := s.Commit(ctx, c); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("enqueue %+v: %v, want ErrInvalid", bad, err)
		}
	}
	if _, err := s.ClaimWork(ctx, "tool:a.b", "", 1); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("a claim with no owner: %v, want ErrInvalid", err)
	}
}

// testWorkClaimsRace: many claimers at once never take one entry twice.
func testWorkClaimsRace(t *testing.T, s store.Store) {
	const runs, claimers = 40, 8
	for i := range runs {
		id := fmt.Sprintf("race%02d", i)
		c := Commit(newRun(id, "alice", base), 0, "running", nil, "run.created")
		c.Enqueue = []store.Work{{Queue: "tool:x.y", ID: id + "/s/1", RunID: id}}
		must(t, s.Commit(ctx, c))
	}
	var mu sync.Mutex
	seen := map[string]string{}
	var wg sync.WaitGroup
	errs := make(chan error, claimers)
	for k := range claimers {
		wg.Go(func() {
			owner := fmt.Sprintf("cp-%d", k)
			for {
				ws, err := s.ClaimWork(ctx, "tool:x.y", owner, 3)
				if err != nil {
					errs <- err
					return
				}
				if len(ws) == 0 {
					return
				}
				mu.Lock()
				for _, w := range ws {
					if prev, ok := seen[w.ID]; ok {
						errs <- fmt.Errorf("%s claimed by %s and %s", w.ID, prev, owner)
					}
					seen[w.ID] = owner
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if len(seen) != runs {
		t.Fatalf("claimed %d entries, want %d", len(seen), runs)
	}
}

// testHints: a commit hints its run and version; work enqueued without an
// owner, and work released, hints its queue.
func testHints(t *testing.T, s store.Store) {
	hctx, cancel := context.WithCancel(ctx)
	got := make(chan store.Hint, 64)
	done := make(chan error, 1)
	go func() { done <- s.Hints(hctx, func(h store.Hint) { got <- h }) }()
	defer func() {
		cancel()
		if err := <-done; err == nil {
			t.Error("Hints returned nil after its context ended")
		}
	}()
	want := func(what string, ok func(store.Hint) bool, again func()) {
		t.Helper()
		deadline := time.After(10 * time.Second)
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case h := <-got:
				if ok(h) {
					return
				}
			case <-tick.C:
				// The subscription may not be live yet: commit again.
				if again != nil {
					again()
				}
			case <-deadline:
				t.Fatalf("no hint of %s", what)
			}
		}
	}
	r := newRun("hint1", "alice", base)
	var mu sync.Mutex
	commit := func(enqueue ...store.Work) {
		mu.Lock()
		defer mu.Unlock()
		c := Commit(r, r.Version, "running", nil, "x")
		c.Enqueue = enqueue
		c.Origin = "cp-x"
		must(t, s.Commit(ctx, c))
		r = c.Run
	}
	commit()
	want("run hint1 committed", func(h store.Hint) bool { return h.Run == "hint1" && h.Version >= 1 && h.Origin == "cp-x" }, func() { commit() })
	n := 0
	enq := func() {
		n++
		commit(store.Work{Queue: "tool:h.q", ID: fmt.Sprintf("hint1/s/%d", n), RunID: "hint1"})
	}
	enq()
	want("work waiting in tool:h.q", func(h store.Hint) bool { return h.Queue == "tool:h.q" }, enq)
	ws, err := s.ClaimWork(ctx, "tool:h.q", "cp-a", 1)
	must(t, err)
	if len(ws) != 1 {
		t.Fatalf("claimed %v", ids(ws))
	}
	must(t, s.ReleaseWork(ctx, "cp-a", []store.WorkRef{ws[0].Ref()}))
	want("work released to tool:h.q", func(h store.Hint) bool { return h.Queue == "tool:h.q" }, nil)
}

// testServed: what a live replica announced is listed until its ttl
// lapses by the store's clock.
func testServed(t *testing.T, s store.Store) {
	must(t, s.Announce(ctx, "cp-a", []string{"tool:a.b", "prose"}, time.Minute))
	must(t, s.Announce(ctx, "cp-b", nil, time.Minute))
	must(t, s.Announce(ctx, "cp-c", []string{"tool:c.d"}, 20*time.Millisecond))
	got, err := s.Served(ctx)
	must(t, err)
	names := func(rs []store.Replica) []string {
		var out []string
		for _, r := range rs {
			out = append(out, r.Name)
		}
		return out
	}
	if len(got) < 2 || got[0].Name != "cp-a" || !slices.Equal(got[0].Queues, []string{"tool:a.b", "prose"}) || got[1].Name != "cp-b" || len(got[1].Queues) != 0 {
		t.Fatalf("served: %+v", got)
	}
	deadline := time.Now().Add(10 * time.Second)
	for slices.Contains(names(got), "cp-c") {
		if time.Now().After(deadline) {
			t.Fatal("an announcement of 20ms is listed after 10s")
		}
		got, err = s.Served(ctx)
		must(t, err)
	}
	must(t, s.Announce(ctx, "cp-a", []string{"tool:x.y"}, time.Minute))
	got, _ = s.Served(ctx)
	if len(got) == 0 || !slices.Equal(got[0].Queues, []string{"tool:x.y"}) {
		t.Fatalf("a new announcement does not replace the old: %+v", got)
	}
	if err := s.Announce(ctx, "", nil, time.Second); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("announce with no replica: %v, want ErrInvalid", err)
	}
}
