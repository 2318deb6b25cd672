package runner

import (
	"context"
	"time"

	"github.com/tollgate-dev/tollgate/internal/store"
	"github.com/tollgate-dev/tollgate/pkg/engine"
)

// The seams of the one road. The Runner asks an Outbox for the work each
// commit enqueues, and calls a Dispatcher, Observers and an AskHook after
// each commit, and hands the dispatcher and the hook
// itself as a Recorder on each call: they report back through it. Neither
// is given the Runner when it is built, so the Runner can be built with
// them and nothing is wired after construction.

// Recorder is what the parts the Runner calls may do to runs: read one
// (deadlines applied, I4) and move it through the engine (I2), committed
// before it returns (I3).
type Recorder interface {
	// Get reads a run, applying any deadline that has passed.
	Get(ctx context.Context, id string) (*engine.Run, *engine.Machine, error)
	// Event applies one event to a run and commits it; build receives the
	// store's clock.
	Event(ctx context.Context, runID string, build func(now time.Time) engine.Event) (engine.Transition, error)
	// Events applies several events in order and commits them together.
	Events(ctx context.Context, runID string, builds ...func(now time.Time) engine.Event) (engine.Transition, error)
	// StoreTime estimates the store's clock without a round trip.
	StoreTime() time.Time
	// Release gives a step this replica claimed, and can no longer lease,
	// back to the store for any replica that serves it.
	Release(ctx context.Context, runID string, d engine.Dispatch)
}

var _ Recorder = (*Runner)(nil)

// Observer hears of every transition this replica commits, after the
// commit, on the committing goroutine: before is the run as it was (nil
// when the run was created), after as it is now, records what happened,
// in order. Several events may share one commit. Observers feed traces
// and metrics: they must not block, fail, or change the run; anything
// slow (export) is handed to a goroutine the observer owns. A crash
// between the commit and the call loses the observation, never the fact.
type Observer interface {
	Committed(ctx context.Context, m *engine.Machine, before, after *engine.Run, records []engine.Record)
}

// AskHook hears of an ask after the commit that opened, noticed or closed
// it: it applies standing approvals and sends notices. It runs on the
// committing goroutine and may apply further events to the run through
// rec. A hook that never ran (a crash right after the commit) leaves the
// ask for a person: the safe side.
type AskHook interface {
	Opened(ctx context.Context, rec Recorder, run *engine.Run, askID string)
	Noticed(ctx context.Context, rec Recorder, run *engine.Run, askID string, kind engine.NoticeKind)
	Closed(ctx context.Context, rec Recorder, run *engine.Run, askID string, state engine.AskState)
}

// Outbox is the transactional outbox: what must follow a transition even
// if this replica dies right after committing it — notices about asks —
// is enqueued as work in the transition's own commit (store.Commit.Enqueue),
// so it exists exactly when the transition does, and any replica may take
// it up (store.WorkQueues). Work is given the run as the commit writes it
// (Version set) and the effects of the events it applies, and returns the
// entries to enqueue. It is called while the commit is built, perhaps
// more than once for one transition (a conflict builds the commit again;
// only the last build commits): it must not block or touch the store,
// and an entry store.CheckWork refuses fails the whole commit.
type Outbox interface {
	Work(run *engine.Run, effects []engine.Effect) []store.Work
}

// outboxWork is what the outbox enqueues for a transition; nil without one.
func (r *Runner) outboxWork(run *engine.Run, effects []engine.Effect) []store.Work {
	if r.outbox == nil || len(effects) == 0 {
		return nil
	}
	return r.outbox.Work(run, effects)
}

// Dispatcher is the seam between the engine and whatever runs steps.
// Offer must not block on the step's work: it accepts the dispatch (and
// later reports the lease and the result of that attempt through rec) or
// refuses it because no executor here offers the tool; the step then goes
// back to the store (work.go). Serves reports whether an executor here
// offers a target now, and so whether a step made runnable here is handed
// to it directly.
type Dispatcher interface {
	Offer(ctx context.Context, rec Recorder, runID string, d engine.Dispatch) bool
	Cancel(ctx context.Context, runID string, c engine.CancelStep)
	Serves(t engine.Target) bool
	// Free is how many steps of t executors here could take at once (the
	// credits of those that offer it): a commit hands off at most that
	// many directly, unless no other replica serves t.
	Free(t engine.Target) int
	// Holding reports whether this dispatcher holds the lease (or has its
	// attempt waiting for a credit): a lease recorded as this replica's
	// that it does not hold is from an earlier process of the same name.
	Holding(leaseID string) bool
}

// NoExecutors is the dispatcher before any executor is connected: every
// runnable step is blocked.
type NoExecutors struct{}

// Offer implements Dispatcher.
func (NoExecutors) Offer(context.Context, Recorder, string, engine.Dispatch) bool { return false }

// Cancel implements Dispatcher.
func (NoExecutors) Cancel(context.Context, string, engine.CancelStep) {}

// Serves implements Dispatcher.
func (NoExecutors) Serves(engine.Target) bool { return false }

// Free implements Dispatcher.
func (NoExecutors) Free(engine.Target) int { return 0 }

// Holding implements Dispatcher.
func (NoExecutors) Holding(string) bool { return false }
