package runner

import (
	"context"
	"fmt"

	"github.com/tollgate-dev/tollgate/internal/store"
	"github.com/tollgate-dev/tollgate/pkg/engine"
	"github.com/tollgate-dev/tollgate/pkg/limits"
)

// read reads a run from the store. When this replica committed the
// version the store holds, that is the run it keeps decoded: reading the
// version alone saves reading and decoding the rest.
func (r *Runner) read(ctx context.Context, id string) (*engine.Run, *engine.Machine, error) {
	if c, ok := r.recent(id); ok {
		v, err := r.store.RunVersion(ctx, id)
		if err != nil {
			return nil, nil, fmt.Errorf("run %s: %w", limits.Short(id), err)
		}
		if v == c.run.Version {
			m, err := r.Machine(ctx, c.row.PlanDigest)
			if err != nil {
				return nil, nil, err
			}
			return c.run, m, nil
		}
	}
	sr, err := r.store.GetRun(ctx, id)
	if err != nil {
		return nil, nil, fmt.Errorf("run %s: %w", limits.Short(id), err)
	}
	return r.decode(ctx, sr)
}

// readRuns is read for several distinct runs in one round trip: the
// store's rows of all of them at once (store.GetRuns). A row whose version
// this replica holds decoded (decoded) is not decoded again — what read
// learns from RunVersion, the row's version says here — and a row it
// decodes is kept for the next page that shows it (keepRead). runs[i] is
// ids[i]'s; a run the store does not hold fails the call as read fails for
// it (ErrNotFound, naming the run), and so does any other error, the first
// in ids' order.
func (r *Runner) readRuns(ctx context.Context, ids []string) ([]*engine.Run, error) {
	rows, err := r.store.GetRuns(ctx, ids)
	if err != nil {
		return nil, fmt.Errorf("read %d runs: %w", len(ids), err)
	}
	runs := make([]*engine.Run, len(ids))
	for i, sr := range rows {
		if sr.ID == "" {
			return nil, fmt.Errorf("run %s: %w", limits.Short(ids[i]), store.ErrNotFound)
		}
		if c, ok := r.decoded(sr); ok {
			// As read does, the run's plan must still load.
			if _, err := r.Machine(ctx, c.row.PlanDigest); err != nil {
				return nil, err
			}
			runs[i] = c.run
			continue
		}
		if runs[i], _, err = r.decode(ctx, sr); err != nil {
			return nil, err
		}
		r.keepRead(sr, runs[i])
	}
	return runs, nil
}

func (r *Runner) decode(ctx context.Context, sr store.Run) (*engine.Run, *engine.Machine, error) {
	// Any form the store holds: the compact one, or JSON written before it.
	run, err := engine.DecodeStored(sr.Data)
	if err != nil {
		return nil, nil, fmt.Errorf("decode run %s: %w", sr.ID, err)
	}
	run.Version = sr.Version
	m, err := r.Machine(ctx, sr.PlanDigest)
	if err != nil {
		return nil, nil, err
	}
	return run, m, nil
}
