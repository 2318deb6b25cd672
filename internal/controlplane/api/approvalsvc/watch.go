package approvalsvc

import (
	"fmt"
	"maps"
	"slices"
	"time"

	tollgatev1 "github.com/tollgate-dev/tollgate/gen/tollgate/v1"
	"github.com/tollgate-dev/tollgate/internal/controlplane/api"
	"github.com/tollgate-dev/tollgate/internal/controlplane/runner"
)

// inboxCoalesce is the least time between two re-reads of a watched inbox:
// a busy replica commits far more often than a person can read.
const inboxCoalesce = 100 * time.Millisecond

// WatchAsks streams the caller's inbox: every ask they may decide now
// (ADDED), then SYNCED, then each change — an ask added, updated (a vote,
// an escalation, a reminder) or removed (decided, expired, no longer
// theirs). It re-reads on every commit of this replica, and every
// api.WatchPoll for other replicas' commits.
func (s *Service) WatchAsks(req *tollgatev1.WatchAsksRequest, stream tollgatev1.ApprovalService_WatchAsksServer) error {
	ctx := stream.Context()
	if _, err := api.Caller(ctx); err != nil {
		return err
	}
	release, err := s.cfg.Watches.Slot(ctx)
	if err != nil {
		return err
	}
	defer release()
	ch, stop := s.cfg.Runner.Watch(runner.AnyRun)
	defer stop()
	tick := time.NewTicker(api.WatchPoll)
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
