package runner

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/tollgate-dev/tollgate/pkg/engine"
	"github.com/tollgate-dev/tollgate/pkg/plan"
)

// Machine returns the engine for a plan, loading it from the store once.
func (r *Runner) Machine(ctx context.Context, digest string) (*engine.Machine, error) {
	if m, ok := r.machines.Get(digest); ok {
		return m, nil
	}
	b, err := r.store.GetPlan(ctx, digest)
	if err != nil {
		return nil, fmt.Errorf("load plan %s: %w", digest, err)
	}
	var p plan.Plan
	if err := json.Unmarshal(b, &p); err != nil {
		return nil, fmt.Errorf("decode plan %s: %w", digest, err)
	}
	m, err := engine.New(&p, r.engine)
	if err != nil {
		return nil, err
	}
	r.machines.Add(digest, m)
	return m, nil
}
