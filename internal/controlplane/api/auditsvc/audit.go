package auditsvc

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"

	tollgatev1 "github.com/tollgate-dev/tollgate/gen/tollgate/v1"
	"github.com/tollgate-dev/tollgate/internal/controlplane/api"
	"github.com/tollgate-dev/tollgate/internal/controlplane/errkind"
	"github.com/tollgate-dev/tollgate/internal/store"
	"github.com/tollgate-dev/tollgate/internal/wire"
	"github.com/tollgate-dev/tollgate/pkg/engine"
)

// journal reads a run's whole journal.
func (s *Service) journal(ctx context.Context, runID string) ([]store.JournalRecord, error) {
	var all []store.JournalRecord
	for {
		page, err := s.cfg.Store.Journal(ctx, runID, int64(len(all)), 1000)
		if err != nil {
			return nil, err
		}
		all = append(all, page...)
		if len(page) < 1000 {
			return all, nil
		}
	}
}

// forRuns calls f for one run who may see (api/readers.go), or for every
// run in the store when who is an auditor or operator; anyone else's
// audit of "every run" covers the runs they requested, found by the
// store's requester index, so its cost follows what they may see and not
// the size of the store. An audit covers, and counts, only those.
func (s *Service) forRuns(ctx context.Context, who, runID string, f func(store.Run) error) (int, error) {
	visible := func(sr store.Run) (bool, error) {
		if s.cfg.Readers.SeesEverything(ctx, who) {
			return true, nil
		}
		var run engine.Run
		if err := json.Unmarshal(sr.Data, &run); err != nil {
			return false, fmt.Errorf("decode run %s: %w", sr.ID, err)
		}
		return s.cfg.Readers.Sees(ctx, who, &run), nil
	}
	if runID != "" {
		sr, err := s.cfg.Store.GetRun(ctx, runID)
		if err != nil {
			return 0, fmt.Errorf("run %s: %w", runID, err)
		}
		if ok, err := visible(sr); err != nil {
			return 0, err
		} else if !ok {
			return 0, api.NotVisible(runID)
		}
		return 1, f(sr)
	}
	q := store.RunQuery{Limit: 500}
	if !s.cfg.Readers.SeesEverything(ctx, who) {
		q.Requester = who
	}
	n, tok := 0, ""
	for {
		q.PageToken = tok
		runs, next, err := s.cfg.Store.ListRuns(ctx, q)
		if err != nil {
			return n, err
		}
		for _, row := range runs {
			sr, err := s.cfg.Store.GetRun(ctx, row.ID) // listings may omit Data
			if err != nil {
				return n, err
			}
			if ok, err := visible(sr); err != nil {
				return n, err
			} else if !ok {
				continue
			}
			n++
			if err := f(sr); err != nil {
				return n, err
			}
		}
		if next == "" {
			return n, nil
		}
		tok = next
	}
}

// VerifyJournal checks every hash chain (or one run's): each record
// follows the one before and matches its hash, and the run row's head is
// the last record.
func (s *Service) VerifyJournal(ctx context.Context, req *tollgatev1.VerifyJournalRequest) (*tollgatev1.VerifyJournalResponse, error) {
	who, err := api.Caller(ctx)
	if err != nil {
		return nil, err
	}
	out := &tollgatev1.VerifyJournalResponse{Ok: true}
	_, err = s.forRuns(ctx, who, req.GetRunId(), func(sr store.Run) error {
		recs, err := s.journal(ctx, sr.ID)
		if err != nil {
			return err
		}
		v := &tollgatev1.JournalVerification{RunId: sr.ID, Ok: true, Records: uint64(len(recs))}
		if seq, err := store.VerifyChain(recs); err != nil {
			v.Ok, v.FirstBrokenSeq, v.Reason = false, uint64(seq), err.Error()
		} else if n := len(recs); n == 0 || recs[n-1].Hash != sr.JournalHead || recs[n-1].Seq != sr.JournalSeq {
			v.Ok, v.Reason = false, "the run's recorded head is not the journal's last record"
		}
		out.Ok = out.Ok && v.Ok
		out.Results = append(out.Results, v)
		return nil
	})
	return out, err
}

// CheckInvariants runs the two audit queries of the field notes over the
// store and returns the offending rows: asks still pending on terminal
// runs (I3), and side-effecting steps started before their governing
// approval was consumed (I1); and every query it ran with its count of
// rows (auditQueries), zero included.
func (s *Service) CheckInvariants(ctx context.Context, req *tollgatev1.CheckInvariantsRequest) (*tollgatev1.CheckInvariantsResponse, error) {
	who, err := api.Caller(ctx)
	if err != nil {
		return nil, err
	}
	out := &tollgatev1.CheckInvariantsResponse{}
	n, err := s.forRuns(ctx, who, req.GetRunId(), func(sr store.Run) error {
		var run engine.Run
		if err := json.Unmarshal(sr.Data, &run); err != nil {
			return fmt.Errorf("decode run %s: %w", sr.ID, err)
		}
		state := engine.State(sr.State)
		// I3, from the ask rows the inbox reads as well as the run itself.
		rows, _, err := s.cfg.Store.ListAsks(ctx, store.AskQuery{RunID: sr.ID, States: []string{string(engine.AskPending)}, Limit: 500})
		if err != nil {
			return err
		}
		if state.Terminal() {
			for _, row := range rows {
				out.Violations = append(out.Violations, &tollgatev1.InvariantViolation{Invariant: tollgatev1.Invariant_INVARIANT_OPEN_ASK_ON_TERMINAL_RUN,
					RunId: sr.ID, RunState: wire.RunState(state), AskId: row.ID, AskState: tollgatev1.AskState_ASK_STATE_PENDING,
					Detail: fmt.Sprintf("run is %s but ask %q is still pending", state, row.Title)})
			}
			for _, id := range slices.Sorted(maps.Keys(run.Asks)) {
				if a := run.Asks[id]; a.State == engine.AskPending && !slices.ContainsFunc(rows, func(r store.Ask) bool { return r.ID == store.AskID(sr.ID, id) }) {
					out.Violations = append(out.Violations, &tollgatev1.InvariantViolation{Invariant: tollgatev1.Invariant_INVARIANT_OPEN_ASK_ON_TERMINAL_RUN,
						RunId: sr.ID, RunState: wire.RunState(state), AskId: store.AskID(sr.ID, id), AskState: tollgatev1.AskState_ASK_STATE_PENDING,
						Detail: "the run record holds a pending ask on a terminal run"})
				}
			}
		}
		// I1, from the journal: every side-effecting dispatch and start
		// names a grant that was consumed (or the start) before it.
		recs, err := s.journal(ctx, sr.ID)
		if err != nil {
			return err
		}
		m, err := s.cfg.Runner.Machine(ctx, sr.PlanDigest)
		if err != nil {
			return err
		}
		effects := map[string]bool{}
		for _, st := range m.Plan().AllSteps() {
			if st.SideEffect {
				effects[st.ID] = true
			}
		}
		consumed := map[string]store.JournalRecord{}
		grants := map[string]string{}
		for _, rec := range recs {
			var p map[string]any
			_ = json.Unmarshal(rec.Payload, &p)
			step, _ := p["step"].(string)
			switch engine.JournalKind(rec.Kind) {
			case engine.JournalApprovalConsumed:
				consumed[fmt.Sprint(p["ask"])] = rec
			case engine.JournalStepDispatched:
				grants[step], _ = p["grant"].(string)
			case engine.JournalStepStarted:
				if !effects[step] {
					continue
				}
				g := grants[step]
				if engine.AttemptAuthorized(g, func(ask string) bool { _, ok := consumed[ask]; return ok }) {
					continue
				}
				out.Violations = append(out.Violations, &tollgatev1.InvariantViolation{Invariant: tollgatev1.Invariant_INVARIANT_EFFECT_BEFORE_CONSUMED_APPROVAL,
					RunId: sr.ID, RunState: wire.RunState(state), StepId: step, StepStartedAt: wire.Time(rec.Time), AskId: store.AskID(sr.ID, g),
					Detail: fmt.Sprintf("side-effecting step %s started (journal seq %d) with no consumed approval before it", step, rec.Seq)})
			}
		}
		return nil
	})
	out.RunsChecked = uint64(n)
	out.Queries = queriesRun(out.GetViolations())
	return out, err
}

// auditQueries are the queries CheckInvariants runs, in the order it
// reports them: each names what it looks for and the invariant it checks.
// Passing is zero rows.
var auditQueries = []*tollgatev1.AuditQuery{
	{Name: "questions on finished runs", Invariant: tollgatev1.Invariant_INVARIANT_OPEN_ASK_ON_TERMINAL_RUN, Label: "I3",
		Description: "an ask still pending on a run that has ended: a person looking at a question nobody will take an answer to"},
	{Name: "side effects before their approval", Invariant: tollgatev1.Invariant_INVARIANT_EFFECT_BEFORE_CONSUMED_APPROVAL, Label: "I1",
		Description: "a side-effecting step that started with no approval consumed before it (nor the starter's, for `without asking`)"},
}

// queriesRun is every audit query with the rows it found among vs.
func queriesRun(vs []*tollgatev1.InvariantViolation) []*tollgatev1.AuditQuery {
	out := make([]*tollgatev1.AuditQuery, len(auditQueries))
	for i, q := range auditQueries {
		c := &tollgatev1.AuditQuery{Name: q.Name, Invariant: q.Invariant, Label: q.Label, Description: q.Description}
		for _, v := range vs {
			if v.GetInvariant() == q.Invariant {
				c.Rows++
			}
		}
		out[i] = c
	}
	return out
}

// ListJournal returns a run's journal records after a sequence number:
// NOT_FOUND for a run that does not exist or that the caller may not see.
func (s *Service) ListJournal(ctx context.Context, req *tollgatev1.ListJournalRequest) (*tollgatev1.ListJournalResponse, error) {
	_, _, _, err := s.cfg.Readers.CallersRun(ctx, req.GetRunId())
	if err != nil {
		return nil, err
	}
	limit := store.Limit(int(req.GetPageSize()))
	after := int64(req.GetAfterSeq())
	if tok := req.GetPageToken(); tok != "" {
		// The token is the seq of the last record of the previous page.
		n, err := strconv.ParseInt(tok, 10, 64)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("page token %q: %w", tok, errkind.Invalid)
		}
		after = max(after, n)
	}
	recs, err := s.cfg.Store.Journal(ctx, req.GetRunId(), after, limit+1)
	if err != nil {
		return nil, err
	}
	out := &tollgatev1.ListJournalResponse{}
	if len(recs) > limit {
		recs = recs[:limit]
		out.NextPageToken = fmt.Sprint(recs[limit-1].Seq)
	}
	for _, r := range recs {
		out.Records = append(out.Records, &tollgatev1.JournalRecord{RunId: r.RunID, Seq: uint64(r.Seq), Time: wire.Time(r.Time), Actor: r.Actor,
			Kind: r.Kind, PayloadJson: string(r.Payload), PrevHash: r.PrevHash, Hash: r.Hash})
	}
	return out, nil
}
