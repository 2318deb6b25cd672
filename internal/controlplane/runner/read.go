package runner

import (
	"context"
	"encoding/json"
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

func (r *Runner) decode(ctx context.Context, sr store.Run) (*engine.Run, *engine.Machine, error) {
	var run engine.Run
	if err := json.Unmarshal(sr.Data, &run); err != nil {
		return nil, nil, fmt.Errorf("decode run %s: %w", sr.ID, err)
	}
	run.Version = sr.Version
	m, err := r.Machine(ctx, sr.PlanDigest)
	if err != nil {
		return nil, nil, err
	}
	return &run, m, nil
}
