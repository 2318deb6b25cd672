package controlplane

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"

	tollgatev1 "github.com/tollgate-dev/tollgate/gen/tollgate/v1"
	"github.com/tollgate-dev/tollgate/internal/controlplane/runner"
	"github.com/tollgate-dev/tollgate/pkg/engine"
)

// watchPoll is how often a watcher re-reads a run to see commits made by
// other replicas.
const watchPoll = time.Second

// WatchRun streams the run: a snapshot first, then the run each time it
// changes, until it reaches an outcome (or the caller goes away).
func (s *Services) WatchRun(req *tollgatev1.WatchRunRequest, stream tollgatev1.RunService_WatchRunServer) error {
	ctx := stream.Context()
	who, err := caller(ctx)
	if err != nil {
		return err
	}
	release, err := s.watchSlot(ctx)
	if err != nil {
		return err
	}
	defer release()
	w := s.cfg.Runner.Follow(req.GetRunId())
	defer w.Stop()
	tick := time.NewTicker(watchPoll)
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
		if !s.sees(ctx, who, run) {
			// Checked on every event: a watcher who loses sight of the run
			// (a role revoked) stops receiving it.
			return notVisible(req.GetRunId())
		}
		if run.Version > last {
			last = run.Version
			if err := sendEvent(stream, s.runEvent(run, m, kind)); err != nil {
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

// inboxCoalesce is the least time between two re-reads of a watched inbox:
// a busy replica commits far more often than a person can read.
const inboxCoalesce = 100 * time.Millisecond

// WatchAsks streams the caller's inbox: every ask they may decide now
// (ADDED), then SYNCED, then each change — an ask added, updated (a vote,
// an escalation, a reminder) or removed (decided, expired, no longer
// theirs). It re-reads on every commit of this replica, and every
// watchPoll for other replicas' commits.
func (s *Services) WatchAsks(req *tollgatev1.WatchAsksRequest, stream tollgatev1.ApprovalService_WatchAsksServer) error {
	ctx := stream.Context()
	if _, err := caller(ctx); err != nil {
		return err
	}
	release, err := s.watchSlot(ctx)
	if err != nil {
		return err
	}
	defer release()
	ch, stop := s.cfg.Runner.Watch(runner.AnyRun)
	defer stop()
	tick := time.NewTicker(watchPoll)
	defer tick.Stop()
	var last map[string]string // ask id → fingerprint
	for {
		items := map[string]*tollgatev1.InboxItem{}
		tok := ""
		for {
			resp, err := s.ListAsks(ctx, &tollgatev1.ListAsksRequest{States: req.GetStates(), RunId: req.GetRunId(), PageSize: 500, PageToken: tok})
			if err != nil {
				return err
			}
			for _, it := range resp.GetItems() {
				items[it.GetAsk().GetId()] = it
			}
			if tok = resp.GetNextPageToken(); tok == "" {
				break
			}
		}
		now := map[string]string{}
		for _, id := range slices.Sorted(maps.Keys(items)) {
			it := items[id]
			a := it.GetAsk()
			now[id] = fmt.Sprint(a.GetState(), a.GetApprovals(), a.GetExpiresAt().AsTime().UnixNano(), it.GetBasis(), it.GetWhy())
			kind := tollgatev1.InboxChangeKind_INBOX_CHANGE_KIND_ADDED
			if old, ok := last[id]; ok {
				if old == now[id] {
					continue
				}
				kind = tollgatev1.InboxChangeKind_INBOX_CHANGE_KIND_UPDATED
			}
			if err := stream.Send(&tollgatev1.WatchAsksResponse{Kind: kind, Item: it}); err != nil {
				return err
			}
		}
		for _, id := range slices.Sorted(maps.Keys(last)) {
			if _, ok := now[id]; !ok {
				gone := &tollgatev1.InboxItem{Ask: &tollgatev1.AskSummary{Id: id}}
				if err := stream.Send(&tollgatev1.WatchAsksResponse{Kind: tollgatev1.InboxChangeKind_INBOX_CHANGE_KIND_REMOVED, Item: gone}); err != nil {
					return err
				}
			}
		}
		if last == nil {
			if err := stream.Send(&tollgatev1.WatchAsksResponse{Kind: tollgatev1.InboxChangeKind_INBOX_CHANGE_KIND_SYNCED}); err != nil {
				return err
			}
		}
		last = now
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-ch:
		case <-tick.C:
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(inboxCoalesce):
		}
	}
}
