package approvalsvc

import (
	"context"
	"fmt"
	"slices"

	tollgatev1 "github.com/tollgate-dev/tollgate/gen/tollgate/v1"
	"github.com/tollgate-dev/tollgate/internal/controlplane/api"
	"github.com/tollgate-dev/tollgate/internal/controlplane/approvals"
	"github.com/tollgate-dev/tollgate/internal/controlplane/errkind"
	"github.com/tollgate-dev/tollgate/internal/store"
	"github.com/tollgate-dev/tollgate/internal/wire"
	"github.com/tollgate-dev/tollgate/pkg/engine"
	"github.com/tollgate-dev/tollgate/pkg/limits"
	"github.com/tollgate-dev/tollgate/pkg/plan"
)

// ListAsks is the caller's inbox: asks the caller may decide.
func (s *Service) ListAsks(ctx context.Context, req *tollgatev1.ListAsksRequest) (*tollgatev1.ListAsksResponse, error) {
	who, err := api.Caller(ctx)
	if err != nil {
		return nil, err
	}
	q := store.AskQuery{Audiences: s.cfg.Approvals.Audiences(ctx, who), RunID: req.GetRunId(), Limit: int(req.GetPageSize()), PageToken: req.GetPageToken()}
	for _, st := range req.GetStates() {
		es, ok := wire.AskStateFromProto(st)
		if !ok {
			return nil, fmt.Errorf("state %v: %w", st, errkind.Invalid)
		}
		q.States = append(q.States, string(es))
	}
	if len(q.States) == 0 {
		q.States = []string{string(engine.AskPending)}
	}
	rows, next, err := s.cfg.Store.ListAsks(ctx, q)
	if err != nil {
		return nil, err
	}
	// The page's runs in one round trip; GetRuns applies whatever rung of
	// the ladder is due (I4: the reader enforces the deadline) before
	// anyone sees the ask, as Get does for one.
	ids := make([]string, len(rows))
	for i, row := range rows {
		ids[i] = row.RunID
	}
	runs, err := s.cfg.Runner.GetRuns(ctx, ids)
	if err != nil {
		return nil, err
	}
	out := &tollgatev1.ListAsksResponse{NextPageToken: next}
	for i, row := range rows {
		run := runs[i]
		if !s.cfg.Readers.Sees(ctx, who, run) {
			continue
		}
		_, stop, _ := api.SplitAskID(row.ID)
		a := run.Asks[stop]
		if a == nil || !slices.Contains(q.States, string(a.State)) {
			continue
		}
		// The row's audience made it a candidate; policy decides now
		// whether the caller may decide it (limits, separation of duties,
		// delegation windows), and says why.
		var v approvals.Verdict
		if a.State == engine.AskPending {
			if v, err = s.cfg.Approvals.MayDecide(ctx, who, run, a); err != nil || !v.OK {
				continue
			}
		}
		basis := tollgatev1.EligibilityBasis_ELIGIBILITY_BASIS_REQUESTER
		switch {
		case v.Delegated:
			basis = tollgatev1.EligibilityBasis_ELIGIBILITY_BASIS_DELEGATED
		case a.EscalatedTo != "":
			basis = tollgatev1.EligibilityBasis_ELIGIBILITY_BASIS_ESCALATED
		case a.Audience != "" && a.Audience != plan.AudienceRequester:
			basis = tollgatev1.EligibilityBasis_ELIGIBILITY_BASIS_ROLE
		}
		out.Items = append(out.Items, &tollgatev1.InboxItem{Basis: basis, Why: v.Why, Ask: wire.AskSummary(run, a)})
	}
	return out, nil
}

// callerAsk is the authenticated caller and the ask they name, read with
// every due deadline applied.
func (s *Service) callerAsk(ctx context.Context, id string) (string, *engine.Run, *engine.AskRun, error) {
	who, err := api.Caller(ctx)
	if err != nil {
		return "", nil, nil, err
	}
	run, a, err := s.loadAsk(ctx, who, id)
	if err != nil {
		return "", nil, nil, err
	}
	return who, run, a, nil
}

// loadAsk reads an ask of a run who may see; of any other run, it is not
// found whether or not it exists (api/readers.go).
func (s *Service) loadAsk(ctx context.Context, who, id string) (*engine.Run, *engine.AskRun, error) {
	runID, stop, err := api.SplitAskID(id)
	if err != nil {
		return nil, nil, err
	}
	run, _, err := s.cfg.Readers.VisibleRun(ctx, who, runID)
	if err != nil {
		return nil, nil, err
	}
	a, ok := run.Asks[stop]
	if !ok {
		return nil, nil, fmt.Errorf("ask %s: %w", limits.Short(id), errkind.NotFound)
	}
	return run, a, nil
}

// GetAsk returns the whole decision packet and whether the caller may
// decide it.
func (s *Service) GetAsk(ctx context.Context, req *tollgatev1.GetAskRequest) (*tollgatev1.GetAskResponse, error) {
	who, run, a, err := s.callerAsk(ctx, req.GetAskId())
	if err != nil {
		return nil, err
	}
	v, err := s.cfg.Approvals.MayDecide(ctx, who, run, a)
	if err != nil {
		v = approvals.Verdict{Why: "policy could not be evaluated: " + err.Error()}
	}
	if v.OK && a.State != engine.AskPending {
		v = approvals.Verdict{Why: "it is " + string(a.State)}
	}
	out := s.packet(ctx, run, a, req.GetFullContent())
	out.AuthorityRequired = api.AuthorityRequired(ctx, s.cfg.Approvals, run, a)
	return &tollgatev1.GetAskResponse{Ask: out, MayDecide: v.OK, Why: v.Why}, nil
}

// packet is the decision packet of ask a of run (wire.Ask), its `show:`
// artifacts read through the run's machine. A plan that cannot be loaded
// shows digests without content rather than failing the read.
func (s *Service) packet(ctx context.Context, run *engine.Run, a *engine.AskRun, full bool) *tollgatev1.Ask {
	m, err := s.cfg.Runner.Machine(ctx, run.PlanDigest)
	if err != nil {
		m = nil
	}
	return wire.Ask(run, m, a, full)
}

// Packet is the decision packet of ask id as a notice shows it, read for
// the control plane's own notifiers (Slack): there is no caller, so no
// visibility rule applies, and who may see the notice is the operator's
// choice of where it goes. Never serve it to a caller.
func (s *Service) Packet(ctx context.Context, id string) (*tollgatev1.Ask, error) {
	runID, stop, err := api.SplitAskID(id)
	if err != nil {
		return nil, err
	}
	run, _, err := s.cfg.Runner.Get(ctx, runID)
	if err != nil {
		return nil, err
	}
	a, ok := run.Asks[stop]
	if !ok {
		return nil, fmt.Errorf("ask %s: %w", limits.Short(id), errkind.NotFound)
	}
	out := s.packet(ctx, run, a, false)
	out.AuthorityRequired = api.AuthorityRequired(ctx, s.cfg.Approvals, run, a)
	return out, nil
}
