package storetest

import (
	"fmt"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/internal/store"
)

// testGetRuns: GetRuns answers, at each place, what GetRun answers for
// that id — runs of every shard, at their latest version, Data included —
// and the zero Run where GetRun answers ErrNotFound; ids may repeat and
// come in any order.
func testGetRuns(t *testing.T, s store.Store) {
	if runs, err := s.GetRuns(ctx, nil); err != nil || len(runs) != 0 {
		t.Fatalf("GetRuns(nil) = %v, %v; want nothing and no error", runs, err)
	}
	// Enough runs to land in every shard of a sharded store (and on every
	// node of a cluster); some moved on since they were created.
	const n = 40
	want := map[string]store.Run{}
	for i := range n {
		id := fmt.Sprintf("gr-%02d", i)
		c := Commit(newRun(id, "alice", base.Add(time.Duration(i)*time.Second)), 0, "running", nil, "run.started")
		must(t, s.Commit(ctx, c))
		if i%3 == 0 {
			c = Commit(c.Run, 1, "parked", []store.Ask{ask(id, "a", "pending", "user:bob", base.Add(time.Hour))}, "ask.opened")
			must(t, s.Commit(ctx, c))
		}
		want[id] = c.Run
	}
	var ids []string
	for i := n - 1; i >= 0; i -= 2 { // not in creation order
		ids = append(ids, fmt.Sprintf("gr-%02d", i))
	}
	for i := 0; i < n; i += 2 {
		ids = append(ids, fmt.Sprintf("gr-%02d", i))
	}
	ids = append(ids, "gr-missing", "gr-03", "", "gr-03") // absent, repeated, empty
	runs, err := s.GetRuns(ctx, ids)
	must(t, err)
	if len(runs) != len(ids) {
		t.Fatalf("GetRuns of %d ids gave %d runs", len(ids), len(runs))
	}
	for i, id := range ids {
		w, ok := want[id]
		if !ok {
			if runs[i].ID != "" || runs[i].Version != 0 || runs[i].Data != nil {
				t.Fatalf("runs[%d] for absent %q = %+v, want the zero Run", i, id, runs[i])
			}
			if _, err := s.GetRun(ctx, id); err == nil {
				t.Fatalf("GetRun(%q) found a run GetRuns did not", id)
			}
			continue
		}
		sameRun(t, runs[i], w)
		one, err := s.GetRun(ctx, id)
		must(t, err)
		sameRun(t, runs[i], one)
	}

	// The runs returned are the caller's: changing one changes neither
	// the store nor a later read.
	runs[0].Data[0] = 'X'
	again, err := s.GetRuns(ctx, ids[:1])
	must(t, err)
	sameRun(t, again[0], want[ids[0]])

	// A later commit is what a later GetRuns reads.
	moved := Commit(want["gr-01"], want["gr-01"].Version, "completed", nil, "run.completed")
	must(t, s.Commit(ctx, moved))
	again, err = s.GetRuns(ctx, []string{"gr-00", "gr-01"})
	must(t, err)
	sameRun(t, again[0], want["gr-00"])
	sameRun(t, again[1], moved.Run)
}
