package wire

import (
	tollgatev1 "github.com/tollgate-dev/tollgate/gen/tollgate/v1"
	"github.com/tollgate-dev/tollgate/pkg/compiler"
	"github.com/tollgate-dev/tollgate/pkg/engine"
	"github.com/tollgate-dev/tollgate/pkg/lru"
)

// Views renders runs for responses (Run). The plan part of a run — its
// proto and its card — is the same for every run of a plan and costly to
// build, so Views builds it once per plan and shares it between the
// responses that carry it, which only read it. It is safe for concurrent
// use.
type Views struct {
	// plans holds plan views by digest (plans are immutable), least
	// recently used evicted: memory follows the bound, not the number of
	// plans ever shown.
	plans *lru.Cache[string, planView]
	// Connected, if set, lists the executors connected to this replica
	// (dispatch.Dispatcher.Connected): a blocked run's view says what
	// they offer and why none takes its steps. Set it before the Views
	// are used; nil: the view names what the steps need, and no executor.
	Connected func() []Executor
}

// planView is a plan as every run of it shows it.
type planView struct {
	plan *tollgatev1.Plan
	card string
}

// NewViews returns Views that keep the views of at most size plans (at
// least one).
func NewViews(size int) *Views {
	return &Views{plans: lru.New[string, planView](size)}
}

// Stats reports the plan-view cache's figures, for metrics.
func (v *Views) Stats() lru.Stats { return v.plans.Stats() }

func (v *Views) of(m *engine.Machine) planView {
	if pv, ok := v.plans.Get(m.Digest()); ok {
		return pv
	}
	pv := planView{plan: Plan(m.Plan(), m.Digest()), card: compiler.RunCard(m.Plan(), m.Digest(), nil)}
	v.plans.Add(m.Digest(), pv)
	return pv
}
