package redisstore

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/internal/store"
	"github.com/tollgate-dev/tollgate/internal/store/storetest"
)

// Commits of many runs at once share pipelines, and each gets its own
// answer: the writes that follow what is stored land, the stale ones are
// conflicts, and the prior-read guesses (a store's own last write) hold.
func TestConcurrentCommitsEachGetTheirAnswer(t *testing.T) {
	s, _ := newStore(t, Config{})
	concurrentCommits(t, s)
}

func concurrentCommits(t *testing.T, s *Store) {
	const n = 200
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c1 := storetest.Commit(newRun(fmt.Sprintf("r%d", i), "alice", base), 0, "running", nil, "run.started")
			if err := s.Commit(ctx, c1); err != nil {
				errs <- err
				return
			}
			c2 := storetest.Commit(c1.Run, 1, "parked", []store.Ask{newAsk(c1.Run.ID, "a", "pending", "user:alice", base.Add(time.Duration(i)*time.Hour))}, "ask.opened")
			if err := s.Commit(ctx, c2); err != nil {
				errs <- err
				return
			}
			if err := s.Commit(ctx, c2); !errors.Is(err, store.ErrConflict) {
				errs <- fmt.Errorf("a stale commit: %v", err)
				return
			}
			c3 := storetest.Commit(c2.Run, 2, "complete", []store.Ask{newAsk(c1.Run.ID, "a", "answered", "user:alice", base.Add(time.Duration(i)*time.Hour))}, "ask.answered", "run.completed")
			if err := s.Commit(ctx, c3); err != nil {
				errs <- err
				return
			}
			got, err := s.GetRun(ctx, c1.Run.ID)
			if err != nil {
				errs <- err
				return
			}
			sameRun(t, got, c3.Run)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	checkIndexes(t, s)
}

// A Redis that lost its scripts (a restart, SCRIPT FLUSH) is given the
// commit script again; a closed store answers, and never hangs.
func TestCommitAfterScriptFlushAndClose(t *testing.T) {
	s, srv := newStore(t, Config{})
	c1 := storetest.Commit(newRun("r1", "alice", base), 0, "running", nil, "run.started")
	must(t, s.Commit(ctx, c1))
	if _, err := srv.Do("SCRIPT", "FLUSH"); err != nil {
		t.Fatal(err)
	}
	c2 := storetest.Commit(c1.Run, 1, "complete", nil, "run.completed")
	must(t, s.Commit(ctx, c2))
	got, err := s.GetRun(ctx, "r1")
	must(t, err)
	sameRun(t, got, c2.Run)
	must(t, s.Close())
	if _, err := s.GetRun(ctx, "r1"); err == nil {
		t.Fatal("a closed store read a run")
	}
	_ = s.Close() // again: no panic, no hang
}
