package controlplane

import (
	"time"

	tollgatev1 "github.com/tollgate-dev/tollgate/gen/tollgate/v1"
	"github.com/tollgate-dev/tollgate/pkg/engine"
)

// watchPoll is how often a watcher re-reads a run to see commits made by
// other replicas.
const watchPoll = time.Second

// WatchRun streams the run: a snapshot first, then the run each time it
// changes, until it reaches an outcome (or the caller goes away).
func (s *Services) WatchRun(req *tollgatev1.WatchRunRequest, stream tollgatev1.RunService_WatchRunServer) error {
	ctx := stream.Context()
	if _, err := caller(ctx); err != nil {
		return err
	}
	w := s.cfg.Runner.Follow(req.GetRunId())
	defer w.Stop()
	tick := time.NewTicker(watchPoll)
	defer tick.Stop()
	var last int64 = -1
	kind := tollgatev1.RunEventKind_RUN_EVENT_KIND_SNAPSHOT
	local := false // woken by this replica's commit
	for {
		var run *engine.Run
		var m *engine.Machine
		var err error
		if lr := w.Latest(); local && lr != nil && lr.Version > last && !openAsk(lr) {
			// What this replica just committed is durable and the newest it
			// knows: no need to read it back. (A run holding an ask is read
			// through Get, which applies a deadline that has passed, I4.)
			run = lr
			m, err = s.cfg.Runner.machine(ctx, lr.PlanDigest)
		} else {
			run, m, err = s.cfg.Runner.Get(ctx, req.GetRunId())
		}
		if err != nil {
			return err
		}
		if run.Version > last {
			last = run.Version
			pr := runToProto(run, m, "")
			if kind != tollgatev1.RunEventKind_RUN_EVENT_KIND_SNAPSHOT {
				// The plan does not change: it goes with the snapshot only.
				pr.Plan, pr.PlanCard = nil, ""
			}
			ev := &tollgatev1.RunEvent{Kind: kind, Time: ts(run.UpdatedAt), RunId: run.ID, RunVersion: uint64(run.Version),
				RunState: pr.State, StateReason: run.Reason, Run: pr}
			if err := stream.Send(&tollgatev1.WatchRunResponse{Event: ev}); err != nil {
				return err
			}
			kind = tollgatev1.RunEventKind_RUN_EVENT_KIND_RUN_STATE_CHANGED
			if run.State.Terminal() {
				return nil
			}
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
