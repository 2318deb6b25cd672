package runsvc

import (
	"strconv"
	"time"

	tollgatev1 "github.com/tollgate-dev/tollgate/gen/tollgate/v1"
	"github.com/tollgate-dev/tollgate/internal/controlplane/api"
	"github.com/tollgate-dev/tollgate/internal/controlplane/runner"
	"github.com/tollgate-dev/tollgate/pkg/engine"
)

// WatchRun streams the run: a snapshot first, then the run each time it
// changes, until it reaches an outcome (or the caller goes away).
func (s *Service) WatchRun(req *tollgatev1.WatchRunRequest, stream tollgatev1.RunService_WatchRunServer) error {
	ctx := stream.Context()
	who, err := api.Caller(ctx)
	if err != nil {
		return err
	}
	release, err := s.cfg.Watches.Slot(ctx)
	if err != nil {
		return err
	}
	defer release()
	w := s.cfg.Runner.Follow(req.GetRunId())
	defer w.Stop()
	tick := time.NewTicker(api.WatchPoll)
	defer tick.Stop()
	// A cursor is the run version an event showed: resuming from it sends
	// nothing until the run moves past it (then the whole run, as a
	// snapshot: the events in between are not kept). Without one, or with
	// one that is not ours, the snapshot comes first.
	var last int64 = -1
	if c, err := strconv.ParseInt(req.GetCursor(), 10, 64); err == nil && c >= 0 {
		last = c
	}
	kind := tollgatev1.RunEventKind_RUN_EVENT_KIND_SNAPSHOT
	local := false // woken by this replica's commit
	for {
		var run *engine.Run
		var m *engine.Machine
		var err error
		if lr := w.Latest(); local && lr != nil && lr.Version > last && !runner.OpenAsk(lr) {
			// What this replica just committed is durable and the newest it
			// knows: no need to read it back. (A run holding an ask is read
			// through Get, which applies a deadline that has passed, I4.)
			run = lr
			m, err = s.cfg.Runner.Machine(ctx, lr.PlanDigest)
		} else {
			run, m, err = s.cfg.Runner.Get(ctx, req.GetRunId())
		}
		if err != nil {
			return err
		}
		if !s.cfg.Readers.Sees(ctx, who, run) {
			// Checked on every event: a watcher who loses sight of the run
			// (a role revoked) stops receiving it.
			return api.NotVisible(req.GetRunId())
		}
		if run.Version > last && !(run.State == engine.Parked && s.cfg.Runner.Settling(run.ID)) {
			// (A run parked while its ask hook runs is sent once the hook
			// is done, which wakes this watcher: it may not wait for a
			// person at all, runner.Settling.)
			last = run.Version
			if err := api.SendEvent(stream, s.cfg.Watches.RunEvent(run, m, kind)); err != nil {
				return err
			}
			kind = tollgatev1.RunEventKind_RUN_EVENT_KIND_RUN_STATE_CHANGED
			if run.State.Terminal() {
				return nil
			}
		} else if run.State.Terminal() {
			return nil // resumed after the last event
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-w.C():
			local = true
		case <-tick.C:
			local = false
		}
	}
}
