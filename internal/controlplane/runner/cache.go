package runner

import (
	"context"
	"fmt"

	"github.com/tollgate-dev/tollgate/internal/store"
	"github.com/tollgate-dev/tollgate/pkg/engine"
)

// maxCachedRuns bounds the runs a replica keeps decoded between
// transitions, and maxEndedRuns the ended runs it keeps for readers; the
// byte bounds weigh each by its encoded size (runs holding large answers
// must not hold what many small ones would), least recently used evicted.
const (
	maxCachedRuns     = 4096
	maxEndedRuns      = 1024
	maxCachedRunBytes = 256 << 20
	maxEndedRunBytes  = 64 << 20
)

// maxReadRuns and maxReadRunBytes bound the runs kept decoded for readers
// of pages (decoded, keepRead): some eighty inbox pages of 50, weighed as
// above.
const (
	maxReadRuns     = 4096
	maxReadRunBytes = 64 << 20
)

type cachedRun struct {
	row  store.Run // without Data: the decoded run is what is kept
	run  *engine.Run
	size int64 // the encoded run's size
}

func runCost(_ string, c cachedRun) int64 { return c.size }

// load returns a run to transition: the one this replica committed last,
// unless fresh is asked for or it has none; the commit's compare-and-set on
// the version catches any staleness.
func (r *Runner) load(ctx context.Context, runID string, fresh bool) (store.Run, *engine.Run, *engine.Machine, error) {
	if !fresh {
		r.mu.Lock()
		c, ok := r.cache.Get(runID)
		r.mu.Unlock()
		if ok {
			m, err := r.Machine(ctx, c.row.PlanDigest)
			if err == nil {
				return c.row, c.run, m, nil
			}
		}
	}
	sr, err := r.store.GetRun(ctx, runID)
	if err != nil {
		return store.Run{}, nil, nil, fmt.Errorf("run %s: %w", runID, err)
	}
	run, m, err := r.decode(ctx, sr)
	if err != nil {
		return store.Run{}, nil, nil, err
	}
	return sr, run, m, nil
}

func (r *Runner) remember(row store.Run, run *engine.Run) {
	c := cachedRun{row: row, run: run, size: int64(len(row.Data))}
	c.row.Data = nil
	r.mu.Lock()
	defer r.mu.Unlock()
	if run.State.Terminal() {
		r.cache.Remove(row.ID)
		r.ended.Add(row.ID, c)
		return
	}
	r.cache.Add(row.ID, c)
}

func (r *Runner) forget(runID string) {
	r.mu.Lock()
	r.cache.Remove(runID)
	r.ended.Remove(runID)
	r.mu.Unlock()
}

// recent is the run this replica committed last, ended or not, if it
// still has it.
func (r *Runner) recent(runID string) (cachedRun, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if c, ok := r.cache.Get(runID); ok {
		return c, true
	}
	return r.ended.Get(runID)
}

// decoded is the run a reader may be handed for the stored row sr without
// decoding it: the one this replica committed, or one it decoded for a
// reader before, if it is of sr's version. Runs handed out are shared:
// readers never change them.
func (r *Runner) decoded(sr store.Run) (cachedRun, bool) {
	if c, ok := r.recent(sr.ID); ok && c.run.Version == sr.Version {
		return c, true
	}
	if c, ok := r.paged.Get(sr.ID); ok && c.run.Version == sr.Version {
		return c, true
	}
	return cachedRun{}, false
}

// keepRead keeps a run decoded for a reader, for the next read of its
// version.
func (r *Runner) keepRead(sr store.Run, run *engine.Run) {
	c := cachedRun{row: sr, run: run, size: int64(len(sr.Data))}
	c.row.Data = nil
	r.paged.Add(sr.ID, c)
}
