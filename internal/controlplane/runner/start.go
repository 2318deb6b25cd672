package runner

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"

	"github.com/tollgate-dev/tollgate/internal/controlplane/errkind"
	"github.com/tollgate-dev/tollgate/internal/faults"
	"github.com/tollgate-dev/tollgate/internal/store"
	"github.com/tollgate-dev/tollgate/pkg/engine"
	"github.com/tollgate-dev/tollgate/pkg/plan"
)

// StartRequest starts a run of a compiled plan.
type StartRequest struct {
	Plan *plan.Plan
	// Origin is the saved skill version it runs and the schedule that
	// starts it, if any; recorded in the run and its first journal record.
	Origin    engine.Origin
	Requester string // the authenticated caller
	RequestID string // client idempotency key, scoped to the requester
	// Inputs are the run's named inputs (checked by the caller).
	Inputs map[string]string
	// Digest, if set, is what the compiler said Plan's digest is: a hint
	// to find the engine already built from this very *plan.Plan.
	Digest string
	// Admit, if set, judges a new run before it is made (policy: who may
	// decide its gates, its unasked steps); its error refuses the start.
	// A repeated RequestID whose run exists is answered with that run
	// without it: the run was admitted when it started, and a retry must
	// not be refused because policy changed since.
	Admit func(context.Context) error
}

// startMachine returns the engine for a plan to start: engine.New verifies
// it, and it is stored before any run refers to it. A plan this replica
// already verified and stored — the same *plan.Plan, as a compile cache
// hands out — is not verified or stored again.
func (r *Runner) startMachine(ctx context.Context, req StartRequest) (*engine.Machine, error) {
	m, cached, err := r.verified(req)
	if err != nil || cached {
		return m, err
	}
	b, err := plan.Canonical(req.Plan)
	if err != nil {
		return nil, err
	}
	if err := r.store.PutPlan(ctx, m.Digest(), b); err != nil {
		return nil, fmt.Errorf("store plan: %w", err)
	}
	r.machines.Add(m.Digest(), m)
	return m, nil
}

// verified is the engine for the plan to start, verified (engine.New),
// without storing anything: the one this replica already built (and
// stored) from this very *plan.Plan, cached, else a new one.
func (r *Runner) verified(req StartRequest) (m *engine.Machine, cached bool, err error) {
	if req.Digest != "" {
		if m, ok := r.machines.Get(req.Digest); ok && m.Plan() == req.Plan {
			return m, true, nil
		}
	}
	m, err = engine.New(req.Plan, r.engine)
	if err != nil {
		// The plan came from our compiler: a plan it built that fails
		// Verify is our bug, not the caller's.
		return nil, false, fmt.Errorf("start: %w", err)
	}
	return m, false, nil
}

// Start verifies the plan (engine.New), stores it, and creates the run.
// A repeated RequestID returns the run it first created, and created =
// false, when the request is the same one (sameRequest); a different
// request under a used RequestID is errkind.RequestReused, naming that run.
func (r *Runner) Start(ctx context.Context, req StartRequest) (run *engine.Run, created bool, err error) {
	if req.Admit != nil {
		// Before the plan is stored: a refused start leaves nothing. A
		// refused retry of a run already started is answered with that
		// run: it was admitted when it started, and policy may have
		// changed since. Only a refusal looks the request up, so a start
		// that is admitted costs no extra round trip (a retry admitted
		// again is found by its commit, DuplicateError below).
		if err := req.Admit(ctx); err != nil {
			if req.RequestID == "" {
				return nil, false, err
			}
			repeat, lerr := r.store.RequestedRun(ctx, req.Requester+"\x00"+req.RequestID)
			if lerr != nil || repeat == "" {
				return nil, false, err
			}
			// Its digest only: the run it names stored its own plan, and
			// a different request refused here must store nothing.
			m, _, verr := r.verified(req)
			if verr != nil {
				return nil, false, verr
			}
			return r.repeated(ctx, repeat, m.Digest(), req)
		}
	}
	m, err := r.startMachine(ctx, req)
	if err != nil {
		return nil, false, err
	}
	now, err := r.clock(ctx)
	if err != nil {
		return nil, false, err
	}
	id := r.newID()
	tr := m.StartFrom(id, req.Requester, req.Inputs, req.Origin, now)
	c, err := commitFor(nil, store.Run{}, tr, req.Origin.Skill)
	if err != nil {
		return nil, false, err
	}
	if req.RequestID != "" {
		c.RequestKey = req.Requester + "\x00" + req.RequestID
	}
	var owned []string
	c.Enqueue, c.Finish, owned = r.stepWork(m, nil, tr.Run)
	c.Enqueue = append(c.Enqueue, r.outboxWork(tr.Run, tr.Effects)...)
	c.Origin = r.replica
	opening := r.opening(tr)
	r.settling.add(id, opening) // before the run is visible (settling.go)
	if err := r.store.Commit(ctx, c); err != nil {
		r.settling.add(id, -opening)
		var dup *store.DuplicateError
		if errors.As(err, &dup) {
			return r.repeated(ctx, dup.RunID, m.Digest(), req)
		}
		return nil, false, fmt.Errorf("create run: %w", err)
	}
	_ = faults.At(faults.AfterCommit)
	r.handoff.add(owned)
	r.remember(c.Run, tr.Run)
	r.observe(ctx, m, nil, tr.Run, tr.Records)
	r.log.LogAttrs(ctx, slog.LevelInfo, "run started", slog.String("run", id), slog.String("requester", req.Requester), slog.String("plan", m.Digest()))
	r.effects(ctx, id, tr)
	return tr.Run, true, nil
}

// repeated answers a start whose RequestID already made run id: that run
// if it started the same request — the same plan (digest: source, name,
// catalog), skill and inputs — else errkind.RequestReused naming it; and
// store.ErrUnavailable (retry) while the key is claimed for a run that is
// not written yet.
func (r *Runner) repeated(ctx context.Context, id, digest string, req StartRequest) (*engine.Run, bool, error) {
	sr, err := r.store.GetRun(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		// The request_id is claimed for a run not written: the first
		// start with it is still committing, or its outcome was unknown
		// (the store holds the claim until it is orphaned). Neither is a
		// run the caller asked about: it must retry, never read "not
		// found" as "nothing was started" (the fault suite found this).
		return nil, false, fmt.Errorf("a start with this request_id is still in flight or its outcome is not known yet (run %s is not written): retry with the same request_id: %w", id, store.ErrUnavailable)
	}
	if err != nil {
		return nil, false, fmt.Errorf("run %s: %w", id, err)
	}
	run, _, err := r.Get(ctx, id)
	if err != nil {
		return nil, false, err
	}
	if sr.PlanDigest != digest || !run.Origin.Equal(req.Origin) || !maps.Equal(run.Inputs, req.Inputs) {
		return nil, false, fmt.Errorf("this request_id started run %s with another request (another recipe, skill version, schedule tick, name or inputs); use a new request_id for a new run: %w", id, errkind.RequestReused)
	}
	return run, false, nil
}
