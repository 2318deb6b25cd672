package gatesvc

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	tollgatev1 "github.com/tollgate-dev/tollgate/gen/tollgate/v1"
	"github.com/tollgate-dev/tollgate/internal/controlplane/api"
	"github.com/tollgate-dev/tollgate/internal/controlplane/approvals"
	"github.com/tollgate-dev/tollgate/internal/controlplane/errkind"
	"github.com/tollgate-dev/tollgate/internal/controlplane/runner"
	"github.com/tollgate-dev/tollgate/internal/faults"
	"github.com/tollgate-dev/tollgate/internal/wire"
	"github.com/tollgate-dev/tollgate/pkg/engine"
	"github.com/tollgate-dev/tollgate/pkg/freshness"
	"github.com/tollgate-dev/tollgate/pkg/grant"
	"github.com/tollgate-dev/tollgate/pkg/limits"
	"github.com/tollgate-dev/tollgate/pkg/plan"
)

// DefaultGateGrantTTL is how long an approved gate's grant stays valid:
// the work after a gate is the script's, and may take a while.
const DefaultGateGrantTTL = time.Hour

// maxGateArtifact bounds one artifact's bytes (the message limit bounds
// them all).
const maxGateArtifact = 4 << 20

// OpenGate opens a gate on an external run, creating the run when none is
// named. A gate already on the run is returned as it is.
func (s *Service) OpenGate(ctx context.Context, req *tollgatev1.OpenGateRequest) (*tollgatev1.OpenGateResponse, error) {
	who, err := api.Caller(ctx)
	if err != nil {
		return nil, err
	}
	ev, err := s.gateEvent(ctx, who, req)
	if err != nil {
		return nil, err
	}
	runID := req.GetRunId()
	if runID == "" {
		if req.GetRequestId() == "" {
			return nil, fmt.Errorf("request_id is required to create a run (a retry must not create a second one): %w", errkind.Invalid)
		}
		run, _, err := s.startExternal(ctx, who, req.GetRequestId(), req.GetRunName())
		if err != nil {
			return nil, err
		}
		runID = run.ID
	}
	run, _, err := s.cfg.Readers.VisibleRun(ctx, who, runID)
	if err != nil {
		return nil, err
	}
	if run.Requester != who {
		return nil, fmt.Errorf("only the run's requester (%s) opens gates on %s: %w", run.Requester, run.ID, errkind.Denied)
	}
	if !run.External {
		return nil, fmt.Errorf("run %s runs a recipe; its gates are the recipe's: %w", run.ID, engine.ErrNotExternal)
	}
	if _, ok := run.Asks[ev.Gate]; ok {
		return &tollgatev1.OpenGateResponse{RunId: run.ID, Gate: s.gateToProto(ctx, run, run.Asks[ev.Gate])}, nil
	}
	tr, err := s.cfg.Runner.Event(ctx, run.ID, func(now time.Time) engine.Event {
		e := ev
		e.At = now
		return e
	})
	if errors.Is(err, engine.ErrAlreadyDecided) {
		// Opened by a concurrent retry: the gate as it is now.
		if run, _, err = s.cfg.Runner.Get(ctx, run.ID); err != nil {
			return nil, err
		}
		return &tollgatev1.OpenGateResponse{RunId: run.ID, Gate: s.gateToProto(ctx, run, run.Asks[ev.Gate])}, nil
	}
	if err != nil {
		return nil, err
	}
	return &tollgatev1.OpenGateResponse{RunId: run.ID, Gate: s.gateToProto(ctx, tr.Run, tr.Run.Asks[ev.Gate]), Created: true}, nil
}

// CreateRun creates an external run (idempotent on request_id).
func (s *Service) CreateRun(ctx context.Context, req *tollgatev1.CreateRunRequest) (*tollgatev1.CreateRunResponse, error) {
	who, err := api.Caller(ctx)
	if err != nil {
		return nil, err
	}
	if req.GetRequestId() == "" {
		return nil, fmt.Errorf("request_id is required (a re-run script finds its run by it): %w", errkind.Invalid)
	}
	run, created, err := s.startExternal(ctx, who, req.GetRequestId(), req.GetName())
	if err != nil {
		return nil, err
	}
	m, err := s.cfg.Runner.Machine(ctx, run.PlanDigest)
	if err != nil {
		return nil, err
	}
	return &tollgatev1.CreateRunResponse{Run: s.cfg.Views.Run(run, m), Created: created}, nil
}

func (s *Service) startExternal(ctx context.Context, who, requestID, name string) (*engine.Run, bool, error) {
	if name == "" {
		name = "script"
	}
	return s.cfg.Runner.Start(ctx, runner.StartRequest{Plan: &plan.Plan{Name: name, External: true}, Requester: who, RequestID: requestID})
}

// gateEvent checks a request and builds the event (without its time).
func (s *Service) gateEvent(ctx context.Context, who string, req *tollgatev1.OpenGateRequest) (engine.OpenGate, error) {
	ev := engine.OpenGate{Gate: req.GetGate(), Actor: who, Title: strings.TrimSpace(req.GetSummary()), Quorum: int(req.GetQuorum())}
	if err := engine.CheckName("gate", ev.Gate); err != nil {
		return ev, err
	}
	if ev.Title == "" {
		return ev, fmt.Errorf("gate %s: a summary is required (what the approver decides): %w", ev.Gate, errkind.Invalid)
	}
	// The gate is decided under its own action, gate.NAME, whatever the
	// request says: the requester does not choose the policy its gate is
	// judged by. A named action raises the bar — its policy must hold too
	// — and never replaces the gate's.
	action := grant.GateAction(ev.Gate)
	ev.Server, ev.Tool = "gate", ev.Gate
	if also := req.GetAction(); also != "" && also != action {
		if server, tool, ok := strings.Cut(also, "."); !ok || server == "" || tool == "" {
			return ev, fmt.Errorf("action %q is not SERVER.TOOL: %w", also, errkind.Invalid)
		}
		ev.Also = []string{also}
	}
	digests := map[string]string{}
	for i, a := range req.GetArtifacts() {
		if a.GetName() == "" {
			return ev, fmt.Errorf("artifact %d has no name: %w", i+1, errkind.Invalid)
		}
		if _, dup := digests[a.GetName()]; dup {
			return ev, fmt.Errorf("two artifacts are named %q: %w", a.GetName(), errkind.Invalid)
		}
		if len(a.GetContent()) > maxGateArtifact {
			return ev, fmt.Errorf("artifact %q is %d bytes; at most %d: %w", a.GetName(), len(a.GetContent()), maxGateArtifact, errkind.Invalid)
		}
		mt := a.GetMediaType()
		if mt == "" {
			mt = "application/octet-stream"
		}
		d := freshness.ContentDigest(a.GetContent())
		digests[a.GetName()] = d
		ev.Evidence = append(ev.Evidence, engine.Evidence{Name: a.GetName(), MediaType: mt, Content: a.GetContent(), Digest: d})
	}
	if p := strings.TrimSpace(req.GetPayloadJson()); p != "" {
		if _, err := plan.DecodeObject(plan.Object(p)); err != nil || !strings.HasPrefix(p, "{") {
			return ev, fmt.Errorf("payload_json is not a JSON object (%v): %w", err, errkind.Invalid)
		}
		ev.Args = plan.Object(p)
	} else {
		ev.Args = grant.ArtifactsPayload(digests)
	}
	if d := req.GetExpires(); d != nil {
		if d.AsDuration() <= 0 {
			return ev, fmt.Errorf("expires %s: must be positive: %w", d.AsDuration(), errkind.Invalid)
		}
		ev.Expires = d.AsDuration()
	}
	switch req.GetOnExpiry() {
	case tollgatev1.OnExpiry_ON_EXPIRY_REJECT:
		ev.OnExpiry = "reject"
	case tollgatev1.OnExpiry_ON_EXPIRY_CANCEL:
		ev.OnExpiry = "cancel"
	case tollgatev1.OnExpiry_ON_EXPIRY_ESCALATE:
		// A gate names nobody to escalate to; taking it as the default
		// would do what the caller did not ask for.
		return ev, fmt.Errorf("on expiry escalate: a gate has nobody to escalate to; use reject, cancel or the default (the run ends expired): %w", errkind.Invalid)
	}
	aud, approvers, err := s.cfg.Approvals.RouteGate(ctx, approvals.GateRequest{Gate: ev.Gate, Requester: who, Action: action, Also: ev.Also,
		Approvers: req.GetApprovers(), Quorum: ev.Quorum, Args: ev.Args})
	if err != nil {
		return ev, err
	}
	ev.Audience, ev.Approvers = aud, approvers
	return ev, nil
}

// GetGate returns a gate and, once approved, its grant.
func (s *Service) GetGate(ctx context.Context, req *tollgatev1.GetGateRequest) (*tollgatev1.GetGateResponse, error) {
	who, run, _, err := s.cfg.Readers.CallersRun(ctx, req.GetRunId())
	if err != nil {
		return nil, err
	}
	a, ok := run.Asks[req.GetGate()]
	if !ok || a.Type != engine.Gate {
		return nil, fmt.Errorf("run %s has no gate %q: %w", run.ID, limits.Short(req.GetGate()), errkind.NotFound)
	}
	g := s.gateToProto(ctx, run, a)
	if who != run.Requester {
		g.Grant = nil // the grant performs the action: it is the script's alone
	}
	return &tollgatev1.GetGateResponse{Gate: g}, nil
}

// RecordStep journals a step the script ran.
func (s *Service) RecordStep(ctx context.Context, req *tollgatev1.RecordStepRequest) (*tollgatev1.RecordStepResponse, error) {
	who, _, _, err := s.cfg.Readers.CallersRun(ctx, req.GetRunId())
	if err != nil {
		return nil, err
	}
	if !strings.HasPrefix(req.GetOutputDigest(), "sha256:") && req.GetOutputDigest() != "" {
		return nil, fmt.Errorf("output_digest %q is not sha256:HEX: %w", limits.Short(req.GetOutputDigest()), errkind.Invalid)
	}
	tr, err := s.cfg.Runner.Event(ctx, req.GetRunId(), func(now time.Time) engine.Event {
		end := now
		if f := req.GetFinishedAt(); f != nil && !f.AsTime().After(now) {
			end = f.AsTime()
		}
		start := end
		if st := req.GetStartedAt(); st != nil && !st.AsTime().After(end) {
			start = st.AsTime()
		}
		return engine.ScriptStep{Step: req.GetStep(), Actor: who, Exit: int(req.GetExitStatus()), OutputDigest: req.GetOutputDigest(),
			StartedAt: start, FinishedAt: end, At: now}
	})
	if err != nil {
		return nil, err
	}
	m, err := s.cfg.Runner.Machine(ctx, tr.Run.PlanDigest)
	if err != nil {
		return nil, err
	}
	for _, st := range s.cfg.Views.Run(tr.Run, m).GetSteps() {
		if st.GetStepId() == req.GetStep() {
			return &tollgatev1.RecordStepResponse{Step: st}, nil
		}
	}
	return nil, fmt.Errorf("step %s was recorded but is not in the run", limits.Short(req.GetStep()))
}

// FinishRun ends an external run as its script says.
func (s *Service) FinishRun(ctx context.Context, req *tollgatev1.FinishRunRequest) (*tollgatev1.FinishRunResponse, error) {
	who, _, _, err := s.cfg.Readers.CallersRun(ctx, req.GetRunId())
	if err != nil {
		return nil, err
	}
	tr, err := s.cfg.Runner.Event(ctx, req.GetRunId(), func(now time.Time) engine.Event {
		return engine.Finish{Actor: who, Failed: req.GetFailed(), Reason: req.GetReason(), At: now}
	})
	if err != nil {
		return nil, err
	}
	m, err := s.cfg.Runner.Machine(ctx, tr.Run.PlanDigest)
	if err != nil {
		return nil, err
	}
	return &tollgatev1.FinishRunResponse{Run: s.cfg.Views.Run(tr.Run, m)}, nil
}

// gateToProto renders a gate with its outcome; an approved gate carries
// its grant, signed afresh on each read (Ed25519 is deterministic, so the
// grant is the same bytes every time: a verifier's replay check holds).
func (s *Service) gateToProto(ctx context.Context, run *engine.Run, a *engine.AskRun) *tollgatev1.Gate {
	// A gate's artifacts are its own (attached with it): no machine reads them.
	out := &tollgatev1.Gate{Ask: wire.Ask(run, nil, a, false), RunState: wire.RunState(run.State), RunReason: run.Reason}
	if a.State.Open() {
		out.Ask.AuthorityRequired = api.AuthorityRequired(ctx, s.cfg.Approvals, run, a)
	}
	var last engine.Decision
	if n := len(a.Decisions); n > 0 {
		last = a.Decisions[n-1]
		out.DecidedAt = timestamppb.New(last.At)
	}
	switch a.State {
	case engine.AskConsumed:
		out.Outcome, out.DecidedBy = tollgatev1.GateOutcome_GATE_OUTCOME_APPROVED, last.Actor
		out.Grant = s.gateGrant(run, a, last.At)
	case engine.AskRejected:
		out.Outcome, out.DecidedBy, out.Reason = tollgatev1.GateOutcome_GATE_OUTCOME_REJECTED, last.Actor, last.Reason
	case engine.AskExpired:
		out.Outcome, out.Reason = tollgatev1.GateOutcome_GATE_OUTCOME_EXPIRED, run.Reason
	case engine.AskCancelled:
		out.Outcome, out.Reason = tollgatev1.GateOutcome_GATE_OUTCOME_CANCELLED, run.Reason
	default:
		out.Outcome, out.DecidedAt = tollgatev1.GateOutcome_GATE_OUTCOME_PENDING, nil
	}
	return out
}

// gateGrant signs the grant for an approved gate's one action: step and
// ask are the gate, action gate.NAME (what it was decided under), fence 1
// (a gate is approved once), valid for GateGrantTTL from the approval.
// nil without a signing key.
func (s *Service) gateGrant(run *engine.Run, a *engine.AskRun, approved time.Time) *tollgatev1.Grant {
	if s.cfg.SigningKey == nil || len(a.Payload) != 1 {
		return nil
	}
	g := &grant.Grant{RunID: run.ID, StepID: a.ID, Action: grant.GateAction(a.ID), AskID: a.ID, PayloadDigest: a.Payload[0].Digest, Fence: 1, ExpiresAt: approved.Add(s.cfg.GateGrantTTL)}
	grant.Sign(g, s.cfg.KeyID, s.cfg.SigningKey)
	if faults.At(faults.AfterGrantSigned) != nil {
		return nil // as if unsigned: approved, no grant
	}
	return wire.Grant(g)
}
