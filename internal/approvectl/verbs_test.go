package approvectl

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	tollgatev1 "github.com/tollgate-dev/tollgate/gen/tollgate/v1"
)

var update = flag.Bool("update", false, "rewrite testdata/verbs.golden from what the verbs print now")

// The verbs' bytes are the CLI's contract (scripts parse -o json, people
// and the e2e tests read the text, exit codes drive scripts): this test
// runs every verb that talks to the control plane against canned answers
// and compares stdout, stderr and the exit code with testdata/verbs.golden.
// Change the golden file only with a change of the CLI (go test -update).

var base = time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)

func tsAt(d time.Duration) *timestamppb.Timestamp { return timestamppb.New(base.Add(d)) }

// fakePlane answers every call with fixed data; a few ids fail the way a
// control plane would: nope (NOT_FOUND), taken (FAILED_PRECONDITION),
// down (UNAVAILABLE).
type fakePlane struct {
	tollgatev1.UnimplementedRunServiceServer
	tollgatev1.UnimplementedApprovalServiceServer
	tollgatev1.UnimplementedAuditServiceServer
	tollgatev1.UnimplementedGateServiceServer
	tollgatev1.UnimplementedSkillServiceServer
	tollgatev1.UnimplementedScheduleServiceServer
}

func failFor(id string) error {
	switch {
	case strings.Contains(id, "nope"):
		return status.Error(codes.NotFound, "no such thing "+id)
	case strings.Contains(id, "taken"):
		return status.Error(codes.FailedPrecondition, "already decided")
	case strings.Contains(id, "down"):
		return status.Error(codes.Unavailable, "the store is away")
	}
	return nil
}

func fakeAsk(id string) *tollgatev1.Ask {
	return &tollgatev1.Ask{Id: id, RunId: "r1", StoppingPointId: "approve_payment", State: tollgatev1.AskState_ASK_STATE_PENDING,
		StateReason: "waiting for finance", Title: "Pay invoice 1187?", Consequence: "pays V-1187 4,000.00 EUR", Requester: "alice",
		AuthorityRequired: &tollgatev1.AuthorityRequirement{Description: "role finance", Principals: []string{"dave"}, Quorum: 2, Excluded: []string{"alice"}},
		Actions:           []*tollgatev1.Action{{StepId: "pay", Server: "payments", Tool: "pay", ArgsJson: `{"amount":400000}`, PayloadDigest: "sha256:p1"}},
		PayloadDigest:     "sha256:p1", EvidenceDigest: "sha256:e1", ResourceVersion: "v7",
		Evidence: []*tollgatev1.EvidenceArtifact{{Name: "invoice.pdf", MediaType: "application/pdf", Content: []byte("pdf"), Digest: "sha256:i1", Size: 3},
			{Ref: "match", StepId: "match", MediaType: "application/json", Content: []byte(`"line 1\nline 2"`), Digest: "sha256:m1", Size: 16},
			{Ref: "vendor", StepId: "vendor", MediaType: "application/json", Content: []byte(`{"id":"V-1187","ba`), Digest: "sha256:v1", Size: 70000, Truncated: true,
				Note: "truncated at 64 KiB of 68 KiB; full content: approvectl asks show r1/ask_1 --full"}},
		MaterialFields: map[string]string{"vendor": "V-1187", "amount": "400000"}, Options: []*tollgatev1.AskOption{{Id: "1", Label: "Yes"}, {Id: "2", Label: "No"}},
		Amendable: []*tollgatev1.AmendBound{{Field: "amount", Min: 1, Max: 500000}}, CreatedAt: tsAt(0), RemindAt: tsAt(2 * time.Hour), EscalateAt: tsAt(4 * time.Hour),
		ExpiresAt: tsAt(8 * time.Hour), EscalatedTo: "cfo", AnswerCommand: "approvectl approve " + id,
		Summary: "two-way match of I-991", AmendableValues: map[string]string{"amount": "400000"}, Changes: []string{"amount 485000 → 400000 by dave"},
		Ladder: []*tollgatev1.LadderRung{{Kind: "remind", At: tsAt(2 * time.Hour), To: "finance", Done: true}, {Kind: "escalate", At: tsAt(4 * time.Hour), To: "cfo", Done: true},
			{Kind: "expire", At: tsAt(8 * time.Hour), To: "reject"}},
		Decisions: []*tollgatev1.Decision{{Kind: tollgatev1.DecisionKind_DECISION_KIND_APPROVE, Actor: "bob", Time: tsAt(time.Minute), Reason: "fine", OptionId: "1", Authority: "role finance"}}}
}

// standingAsk is fakeAsk as a standing approval decided it when it opened.
func standingAsk(id string) *tollgatev1.Ask {
	a := fakeAsk(id)
	a.State, a.AnswerCommand = tollgatev1.AskState_ASK_STATE_CONSUMED, ""
	a.Decisions = []*tollgatev1.Decision{{Kind: tollgatev1.DecisionKind_DECISION_KIND_APPROVE, Actor: "dave", Time: tsAt(time.Second), OptionId: "1",
		Authority: "automatically, by standing approval sx_1 (payments.pay vendor=V-1187) granted by dave until 2026-12-31T00:00:00Z; role finance"}}
	return a
}

func fakeSummary(id string) *tollgatev1.AskSummary {
	return &tollgatev1.AskSummary{Id: id, RunId: "r1", StoppingPointId: "approve_payment", State: tollgatev1.AskState_ASK_STATE_PENDING,
		Title: "Pay invoice 1187?", Requester: "alice", CreatedAt: tsAt(0), ExpiresAt: tsAt(8 * time.Hour), AnswerCommand: "approvectl approve " + id}
}

func fakeRun(id string, state tollgatev1.RunState) *tollgatev1.Run {
	return &tollgatev1.Run{Id: id, PlanDigest: "sha256:plan", PlanCard: "plan pay-invoice\n  1. read the invoice\n  2. ask finance\n", Requester: "alice",
		State: state, StateReason: "waiting at approve_payment", CreatedAt: tsAt(0), ResumeCommand: "approvectl approve " + id + "/ask_1",
		Steps: []*tollgatev1.StepState{
			{StepId: "read", State: tollgatev1.StepStatus_STEP_STATUS_SUCCEEDED, BranchTime: durationpb.New(300 * time.Millisecond),
				Attempts: []*tollgatev1.Attempt{{N: 1, Executor: "x1", LeaseId: "l1", QueuedAt: tsAt(time.Second), LeasedAt: tsAt(2 * time.Second), StartedAt: tsAt(2 * time.Second), FinishedAt: tsAt(3 * time.Second)}}},
			{StepId: "a", State: tollgatev1.StepStatus_STEP_STATUS_FAILED, ParallelGroup: "probes", BranchTime: durationpb.New(time.Second),
				Attempts: []*tollgatev1.Attempt{{N: 1, Executor: "x2", QueuedAt: tsAt(4 * time.Second), LeasedAt: tsAt(4 * time.Second), FinishedAt: tsAt(5 * time.Second), Error: &tollgatev1.StepError{Message: "boom"}}}},
			{StepId: "b", State: tollgatev1.StepStatus_STEP_STATUS_SUCCEEDED, ParallelGroup: "probes", BranchTime: durationpb.New(time.Second),
				Attempts: []*tollgatev1.Attempt{{N: 1, Executor: "x1", QueuedAt: tsAt(4 * time.Second), LeasedAt: tsAt(4 * time.Second), FinishedAt: tsAt(5 * time.Second)}}},
			{StepId: "pay", State: tollgatev1.StepStatus_STEP_STATUS_RUNNABLE, GoverningAskId: "ask_1"},
		},
		Fans: []*tollgatev1.FanTiming{{Group: "probes", Branches: 2, Steps: []string{"a", "b"}, Start: tsAt(4 * time.Second), End: tsAt(5 * time.Second),
			Wall: durationpb.New(time.Second), BranchSum: durationpb.New(2 * time.Second), BranchMax: durationpb.New(time.Second)}},
		Asks: []*tollgatev1.AskSummary{fakeSummary(id + "/ask_1")}}
}

// fakeRunOf is fakeRun with what its id says: "blocked" runs wait for an
// executor; in "standing" runs a standing approval decided the ask, and
// the run moves on (version is the run's version).
func fakeRunOf(id string, state tollgatev1.RunState, version uint64) *tollgatev1.Run {
	r := fakeRun(id, state)
	r.Version = version
	switch {
	case strings.Contains(id, "blocked") && state == tollgatev1.RunState_RUN_STATE_BLOCKED:
		r.StateReason, r.ResumeCommand, r.Asks = "waiting for an executor that offers payments·pay (label bank)", "", nil
		r.Blocked = []*tollgatev1.BlockedStep{
			{StepId: "pay", Server: "payments", Tool: "pay", Label: "bank", Reason: "no connected executor labelled bank offers payments·pay (x1 offers it without the label)"},
			{StepId: "check~ask_1", Server: "erp", Tool: "get_vendor", CheckOfAskId: id + "/ask_1", Reason: "no connected executor offers erp·get_vendor (connected to this replica: x1, x2)"}}
		r.Executors = []*tollgatev1.ConnectedExecutor{{Id: "x1", Labels: []string{"edge"}, Tools: []string{"payments.pay"}}, {Id: "x2", Prose: true}}
	case strings.Contains(id, "standing") && state != tollgatev1.RunState_RUN_STATE_PARKED:
		r.ResumeCommand = ""
		r.Asks[0].State, r.Asks[0].AnswerCommand, r.Asks[0].ClosedAt = tollgatev1.AskState_ASK_STATE_CONSUMED, "", tsAt(time.Second)
	case strings.Contains(id, "verifying") && state == tollgatev1.RunState_RUN_STATE_PARKED:
		// Approved (by a standing approval), still parked while the facts
		// are read again before the approval is consumed: no one to ask.
		r.ResumeCommand, r.StateReason = "", "approved; checking facts for ask_1"
		r.Asks[0].State, r.Asks[0].AnswerCommand = tollgatev1.AskState_ASK_STATE_APPROVED, ""
	case strings.Contains(id, "verifying"):
		r.ResumeCommand = ""
		r.Asks[0].State, r.Asks[0].AnswerCommand, r.Asks[0].ClosedAt = tollgatev1.AskState_ASK_STATE_CONSUMED, "", tsAt(time.Second)
	}
	return r
}

func (fakePlane) ListAsks(context.Context, *tollgatev1.ListAsksRequest) (*tollgatev1.ListAsksResponse, error) {
	return &tollgatev1.ListAsksResponse{Items: []*tollgatev1.InboxItem{{Ask: fakeSummary("r1/ask_1"), Why: "you are in finance"},
		{Ask: fakeSummary("r2/ask_1"), Why: "named approver"}}}, nil
}

func (fakePlane) GetAsk(_ context.Context, r *tollgatev1.GetAskRequest) (*tollgatev1.GetAskResponse, error) {
	if err := failFor(r.GetAskId()); err != nil && !strings.Contains(r.GetAskId(), "taken") {
		return nil, err
	}
	if strings.Contains(r.GetAskId(), "standing") {
		return &tollgatev1.GetAskResponse{Ask: standingAsk(r.GetAskId()), Why: "you started the run"}, nil
	}
	return &tollgatev1.GetAskResponse{Ask: fakeAsk(r.GetAskId()), MayDecide: true, Why: "you are in finance"}, nil
}

func (fakePlane) Decide(_ context.Context, r *tollgatev1.DecideRequest) (*tollgatev1.DecideResponse, error) {
	if err := failFor(r.GetAskId()); err != nil {
		return nil, err
	}
	a := fakeAsk(r.GetAskId())
	a.PayloadDigest = "sha256:p2"
	return &tollgatev1.DecideResponse{Ask: a, RunState: tollgatev1.RunState_RUN_STATE_RUNNING,
		Decision: &tollgatev1.Decision{Kind: tollgatev1.DecisionKind_DECISION_KIND_REJECT, Actor: "dave", Time: tsAt(time.Hour), Reason: r.GetReject().GetReason()}}, nil
}

func (fakePlane) Answer(_ context.Context, r *tollgatev1.AnswerRequest) (*tollgatev1.AnswerResponse, error) {
	if err := failFor(r.GetAskId()); err != nil {
		return nil, err
	}
	if r.GetText() == "menu" {
		return &tollgatev1.AnswerResponse{Kind: tollgatev1.AnswerKind_ANSWER_KIND_RESHOWN, ResponseText: "1) Yes\n2) No", RunState: tollgatev1.RunState_RUN_STATE_PARKED}, nil
	}
	if r.GetText() == "zebra" {
		return &tollgatev1.AnswerResponse{Kind: tollgatev1.AnswerKind_ANSWER_KIND_NO_MATCH, ResponseText: "That matched no option.\n1) Yes\n2) No", MissCount: 1, RunState: tollgatev1.RunState_RUN_STATE_PARKED}, nil
	}
	return &tollgatev1.AnswerResponse{Kind: tollgatev1.AnswerKind_ANSWER_KIND_SELECTED, ResponseText: "You chose Yes.", SelectedOptionId: "1", RunState: tollgatev1.RunState_RUN_STATE_RUNNING}, nil
}

func (fakePlane) WatchAsks(r *tollgatev1.WatchAsksRequest, s grpc.ServerStreamingServer[tollgatev1.WatchAsksResponse]) error {
	if err := failFor(r.GetRunId()); err != nil {
		return err
	}
	for _, m := range []*tollgatev1.WatchAsksResponse{
		{Kind: tollgatev1.InboxChangeKind_INBOX_CHANGE_KIND_ADDED, Item: &tollgatev1.InboxItem{Ask: fakeSummary("r1/ask_1"), Why: "you are in finance"}},
		{Kind: tollgatev1.InboxChangeKind_INBOX_CHANGE_KIND_SYNCED},
		{Kind: tollgatev1.InboxChangeKind_INBOX_CHANGE_KIND_REMOVED, Item: &tollgatev1.InboxItem{Ask: fakeSummary("r1/ask_1")}},
	} {
		if err := s.Send(m); err != nil {
			return err
		}
	}
	return nil
}

func (fakePlane) AttachEvidence(_ context.Context, r *tollgatev1.AttachEvidenceRequest) (*tollgatev1.AttachEvidenceResponse, error) {
	if err := failFor(r.GetAskId()); err != nil {
		return nil, err
	}
	a := fakeAsk(r.GetAskId())
	a.EvidenceDigest = fmt.Sprintf("sha256:e%d", len(r.GetArtifacts()))
	return &tollgatev1.AttachEvidenceResponse{Ask: a}, nil
}

func (fakePlane) ListExceptions(_ context.Context, r *tollgatev1.ListExceptionsRequest) (*tollgatev1.ListExceptionsResponse, error) {
	out := []*tollgatev1.StandingException{{Id: "sx_1", AskId: "r1/ask_1", GrantedBy: "dave", Until: tsAt(720 * time.Hour), Scope: "payments.pay vendor=V-1187"}}
	if r.GetIncludeInactive() {
		out = append(out, &tollgatev1.StandingException{Id: "sx_0", AskId: "r0/ask_1", GrantedBy: "dave", Until: tsAt(-time.Hour), Scope: "payments.pay"},
			&tollgatev1.StandingException{Id: "sx_9", AskId: "r9/ask_1", GrantedBy: "dave", Until: tsAt(time.Hour), Scope: "x", Revoked: true, RevokedBy: "carol"})
	}
	return &tollgatev1.ListExceptionsResponse{Exceptions: out}, nil
}

func (fakePlane) RevokeException(_ context.Context, r *tollgatev1.RevokeExceptionRequest) (*tollgatev1.RevokeExceptionResponse, error) {
	if err := failFor(r.GetExceptionId()); err != nil {
		return nil, err
	}
	return &tollgatev1.RevokeExceptionResponse{Exception: &tollgatev1.StandingException{Id: r.GetExceptionId(), Revoked: true, RevokedBy: "dave"}}, nil
}

func (fakePlane) VerifyJournal(_ context.Context, r *tollgatev1.VerifyJournalRequest) (*tollgatev1.VerifyJournalResponse, error) {
	if err := failFor(r.GetRunId()); err != nil {
		return nil, err
	}
	out := []*tollgatev1.JournalVerification{{RunId: "r1", Ok: true}, {RunId: "r2", Ok: true}}
	if r.GetRunId() == "bad" {
		out = append(out, &tollgatev1.JournalVerification{RunId: "bad", FirstBrokenSeq: 4, Reason: "hash mismatch"})
	}
	return &tollgatev1.VerifyJournalResponse{Results: out}, nil
}

func (fakePlane) CheckInvariants(_ context.Context, r *tollgatev1.CheckInvariantsRequest) (*tollgatev1.CheckInvariantsResponse, error) {
	out := &tollgatev1.CheckInvariantsResponse{RunsChecked: 2, Queries: []*tollgatev1.AuditQuery{
		{Name: "questions on finished runs", Label: "I3", Invariant: tollgatev1.Invariant_INVARIANT_OPEN_ASK_ON_TERMINAL_RUN, Description: "an ask pending on an ended run"},
		{Name: "side effects before their approval", Label: "I1", Invariant: tollgatev1.Invariant_INVARIANT_EFFECT_BEFORE_CONSUMED_APPROVAL, Description: "an effect before its approval"}}}
	if r.GetRunId() == "bad" {
		out.Violations = []*tollgatev1.InvariantViolation{{Invariant: tollgatev1.Invariant_INVARIANT_EFFECT_BEFORE_CONSUMED_APPROVAL, RunId: "bad", StepId: "pay", Detail: "started before its approval"}}
		out.Queries[1].Rows = 1
	}
	return out, nil
}

func (fakePlane) StartRun(_ context.Context, r *tollgatev1.StartRunRequest) (*tollgatev1.StartRunResponse, error) {
	if err := failFor(r.GetSkill()); err != nil {
		return nil, err
	}
	id := "r1"
	switch r.GetSkill() {
	case "fail", "blocked", "standing", "verifying":
		id = "r_" + r.GetSkill()
	}
	run := fakeRun(id, tollgatev1.RunState_RUN_STATE_RUNNING)
	run.Skill, run.SkillVersion = r.GetSkill(), r.GetSkillVersion()
	return &tollgatev1.StartRunResponse{Run: run, Created: r.GetRequestId() == ""}, nil
}

func (fakePlane) GetRun(_ context.Context, r *tollgatev1.GetRunRequest) (*tollgatev1.GetRunResponse, error) {
	if err := failFor(r.GetRunId()); err != nil {
		return nil, err
	}
	state, version := tollgatev1.RunState_RUN_STATE_PARKED, uint64(0)
	switch id := r.GetRunId(); {
	case strings.Contains(id, "live"):
		state = tollgatev1.RunState_RUN_STATE_RUNNING
	case strings.Contains(id, "blocked"):
		state = tollgatev1.RunState_RUN_STATE_BLOCKED
	case strings.Contains(id, "verifying"):
		// Read while parked with the ask approved: nothing newer yet.
		version = 2
	case strings.Contains(id, "standing"):
		// The standing approval decided the ask after the run parked.
		state, version = tollgatev1.RunState_RUN_STATE_COMPLETE, 3
	}
	run := fakeRunOf(r.GetRunId(), state, version)
	if strings.Contains(r.GetRunId(), "sched") {
		run.Skill, run.SkillVersion, run.Schedule, run.ScheduleTick = "greet", 3, "nightly", tsAt(-24*time.Hour)
	}
	return &tollgatev1.GetRunResponse{Run: run}, nil
}

func (fakePlane) ListRuns(_ context.Context, r *tollgatev1.ListRunsRequest) (*tollgatev1.ListRunsResponse, error) {
	if err := failFor(r.GetRequester()); err != nil {
		return nil, err
	}
	runs := []*tollgatev1.RunSummary{
		{Id: "r1", PlanName: "pay-invoice", Requester: "alice", State: tollgatev1.RunState_RUN_STATE_PARKED, OpenAsks: 1, CreatedAt: tsAt(-3 * time.Hour)},
		{Id: "r2", Skill: "greet", SkillVersion: 3, Schedule: "nightly", PlanName: "greet", Requester: "bob", State: tollgatev1.RunState_RUN_STATE_COMPLETE, CreatedAt: tsAt(-50 * time.Hour)}}
	if sc := r.GetSchedule(); sc != "" {
		runs = slices.DeleteFunc(runs, func(s *tollgatev1.RunSummary) bool { return s.GetSchedule() != sc })
	}
	return &tollgatev1.ListRunsResponse{NextPageToken: "p2", Runs: runs}, nil
}

func (fakePlane) WatchRun(r *tollgatev1.WatchRunRequest, s grpc.ServerStreamingServer[tollgatev1.WatchRunResponse]) error {
	if err := failFor(r.GetRunId()); err != nil {
		return err
	}
	states := []tollgatev1.RunState{tollgatev1.RunState_RUN_STATE_RUNNING, tollgatev1.RunState_RUN_STATE_PARKED}
	switch id := r.GetRunId(); {
	case strings.Contains(id, "fail"):
		states[1] = tollgatev1.RunState_RUN_STATE_FAILED
	case strings.Contains(id, "blocked"):
		states[1] = tollgatev1.RunState_RUN_STATE_BLOCKED
	case strings.Contains(id, "standing"), strings.Contains(id, "verifying"):
		// Parked for one commit: a standing approval decides the ask in
		// the next, and the run completes. ("verifying": parked with the
		// ask approved, the newest version when the CLI reads it again.)
		states = append(states, tollgatev1.RunState_RUN_STATE_COMPLETE)
	}
	for i, st := range states {
		run := fakeRunOf(r.GetRunId(), st, uint64(i+1))
		if err := s.Send(&tollgatev1.WatchRunResponse{Event: &tollgatev1.RunEvent{Time: tsAt(time.Duration(i) * time.Second), Run: run}}); err != nil {
			return err
		}
	}
	return nil
}

func (fakePlane) CancelRun(_ context.Context, r *tollgatev1.CancelRunRequest) (*tollgatev1.CancelRunResponse, error) {
	if err := failFor(r.GetRunId()); err != nil {
		return nil, err
	}
	return &tollgatev1.CancelRunResponse{Run: fakeRun(r.GetRunId(), tollgatev1.RunState_RUN_STATE_CANCELLED),
		Report: &tollgatev1.CancellationReport{Text: "ran read; did not run pay."}}, nil
}

func (fakePlane) CreateRun(_ context.Context, r *tollgatev1.CreateRunRequest) (*tollgatev1.CreateRunResponse, error) {
	if err := failFor(r.GetRequestId()); err != nil {
		return nil, err
	}
	return &tollgatev1.CreateRunResponse{Run: &tollgatev1.Run{Id: "r_ext"}, Created: r.GetName() != "again"}, nil
}

func (fakePlane) OpenGate(_ context.Context, r *tollgatev1.OpenGateRequest) (*tollgatev1.OpenGateResponse, error) {
	if err := failFor(r.GetGate()); err != nil {
		return nil, err
	}
	a := fakeAsk("r_ext/" + r.GetGate())
	a.StoppingPointId = r.GetGate()
	g := &tollgatev1.Gate{Ask: a, Outcome: tollgatev1.GateOutcome_GATE_OUTCOME_APPROVED, DecidedBy: "dave", DecidedAt: tsAt(time.Hour)}
	switch {
	case r.GetGate() == "nowait":
		g.Outcome = tollgatev1.GateOutcome_GATE_OUTCOME_PENDING
	case r.GetGate() == "no":
		g.Outcome, g.Reason = tollgatev1.GateOutcome_GATE_OUTCOME_REJECTED, "not this month"
	}
	return &tollgatev1.OpenGateResponse{RunId: "r_ext", Gate: g, Created: true}, nil
}

func (fakePlane) RecordStep(_ context.Context, r *tollgatev1.RecordStepRequest) (*tollgatev1.RecordStepResponse, error) {
	return &tollgatev1.RecordStepResponse{}, nil
}

func (fakePlane) FinishRun(_ context.Context, r *tollgatev1.FinishRunRequest) (*tollgatev1.FinishRunResponse, error) {
	if err := failFor(r.GetRunId()); err != nil {
		return nil, err
	}
	st := tollgatev1.RunState_RUN_STATE_COMPLETE
	if r.GetFailed() {
		st = tollgatev1.RunState_RUN_STATE_FAILED
	}
	return &tollgatev1.FinishRunResponse{Run: &tollgatev1.Run{Id: r.GetRunId(), State: st, StateReason: r.GetReason()}}, nil
}

// The skills the fake plane keeps: greet, at versions 1 to 3, whose
// cards differ (skills diff); stale, which no longer compiles; gone,
// removed at version 2.

func fakeDigest(name string, v int64) string {
	return fmt.Sprintf("sha256:%x%d1b2c3d4e5f60718293a4b5c6d7e8f9", len(name), v)
}

func fakeSkill(name string, v int64) *tollgatev1.Skill {
	s := &tollgatev1.Skill{Name: name, Version: v, Description: "Say hello to someone.", PlanDigest: fakeDigest(name, v),
		Author: []string{"alice", "bob", "alice"}[(v-1)%3], PublishedAt: tsAt(-24 * time.Duration(3-min(v, 3)) * time.Hour), Origin: "api"}
	if v == 1 {
		s.PublishedAt, s.Origin = tsAt(-48*time.Hour), "dir"
	}
	if v == 3 {
		s.PublishedAt = tsAt(-time.Hour)
	}
	return s
}

func fakeSource(name string, v int64) string {
	src := "---\nname: " + name + "\ndescription: Say hello to someone.\n---\nhello: say hello to {who}\n"
	if v < 3 {
		src += "log: notes.store {\"text\": \"{hello}\"}\n"
	}
	return src + "ask me:\n  keep it?\nkeep: notes.store {\"text\": \"{hello}\"}\n"
}

func fakeCard(name string, v int64) string {
	hello := "    hello  prose: say hello to {who}\n"
	if v >= 3 {
		hello = "    hello  prose: say hello to {who}, kindly\n"
	}
	log := "    log    notes·store {\"text\":\"{hello}\"}\n           side effect: runs without asking\n"
	if v >= 3 {
		log = ""
	}
	keep := "        ⚠ keep  notes·store {\"text\":\"{hello}\"}\n"
	if v >= 3 {
		keep += "                side effect: the run stops and asks \"keep it?\" (ask_1) before this runs, whoever started it\n"
	}
	return "plan " + name + "  " + fakeDigest(name, v) + "\nSay hello to someone.\n\n" + hello + log + "  ? ask_1 · gate ask me: keep it?\n      1) Yes →\n" + keep +
		"      2) No → nothing more runs; the run ends rejected\n\nNothing runs until the plan is started.\n"
}

func (fakePlane) PutSkill(_ context.Context, r *tollgatev1.PutSkillRequest) (*tollgatev1.PutSkillResponse, error) {
	name := r.GetName()
	if name == "" {
		name = frontMatterName(r.GetSource())
	}
	if err := failFor(name); err != nil {
		return nil, err
	}
	if e := r.GetExpectedVersion(); e != 0 && e != 3 {
		return nil, status.Errorf(codes.FailedPrecondition, "%s is at version 3, not %d", name, e)
	}
	if strings.Contains(r.GetSource(), "notes.stor ") {
		return &tollgatev1.PutSkillResponse{Diagnostics: []*tollgatev1.Diagnostic{
			{Line: 5, Column: 7, Severity: tollgatev1.DiagnosticSeverity_DIAGNOSTIC_SEVERITY_ERROR, Code: "unknown-tool", Message: "`notes.stor` is not a tool of the catalog",
				SubjectId: "keep", Hint: "did you mean notes.store?"},
			{Line: 2, Column: 1, Severity: tollgatev1.DiagnosticSeverity_DIAGNOSTIC_SEVERITY_ERROR, Code: "undecidable-gate", Message: "nobody could decide ask_1 \x1b[2J under the policy"}}}, nil
	}
	unchanged := strings.Contains(r.GetSource(), "same")
	resp := &tollgatev1.PutSkillResponse{Saved: true, Unchanged: unchanged, Skill: fakeSkill(name, 3), PlanDigest: fakeDigest(name, 3), PlanCard: fakeCard(name, 3)}
	if name == "morning" {
		resp.Diagnostics = []*tollgatev1.Diagnostic{{Line: 1, Column: 1, Severity: tollgatev1.DiagnosticSeverity_DIAGNOSTIC_SEVERITY_WARNING, Code: "write-declared-read-only",
			Message: "notes.store is declared read-only"}}
	}
	return resp, nil
}

func (fakePlane) GetSkill(_ context.Context, r *tollgatev1.GetSkillRequest) (*tollgatev1.GetSkillResponse, error) {
	if err := failFor(r.GetName()); err != nil {
		return nil, err
	}
	v := r.GetVersion()
	if v == 0 {
		v = 3
	}
	if v > 3 {
		return nil, status.Errorf(codes.NotFound, "%s has no version %d", r.GetName(), v)
	}
	s := fakeSkill(r.GetName(), v)
	s.Source = fakeSource(r.GetName(), v)
	resp := &tollgatev1.GetSkillResponse{Skill: s, LatestVersion: 3, Plan: &tollgatev1.Plan{Name: r.GetName(), Digest: fakeDigest(r.GetName(), v)},
		PlanCard: fakeCard(r.GetName(), v)}
	switch r.GetName() {
	case "stale":
		resp.Plan, resp.PlanCard = nil, ""
		resp.Diagnostics = []*tollgatev1.Diagnostic{{Line: 7, Column: 7, Severity: tollgatev1.DiagnosticSeverity_DIAGNOSTIC_SEVERITY_ERROR, Code: "unknown-tool",
			Message: "`notes.store` is not a tool of the catalog", Hint: "the catalog has no server notes; is its executor connected?"}}
	case "gone":
		if v == 3 {
			s.Deleted, s.Source, s.PlanDigest, s.Author = true, "", "", "dave"
			resp.Plan, resp.PlanCard = nil, ""
		}
	}
	return resp, nil
}

func (fakePlane) ListSkills(_ context.Context, r *tollgatev1.ListSkillsRequest) (*tollgatev1.ListSkillsResponse, error) {
	if r.GetPageToken() == "" { // two pages: the verb reads both
		return &tollgatev1.ListSkillsResponse{Skills: []*tollgatev1.Skill{fakeSkill("greet", 3)}, NextPageToken: "p2"}, nil
	}
	m := fakeSkill("morning-briefing", 1)
	m.Description = "Brief me every morning:\tcalendar, mail and the weather, in one note that is long enough to be cut"
	return &tollgatev1.ListSkillsResponse{Skills: []*tollgatev1.Skill{m}}, nil
}

func (fakePlane) SkillHistory(_ context.Context, r *tollgatev1.SkillHistoryRequest) (*tollgatev1.SkillHistoryResponse, error) {
	if err := failFor(r.GetName()); err != nil {
		return nil, err
	}
	if r.GetPageToken() == "" {
		return &tollgatev1.SkillHistoryResponse{Versions: []*tollgatev1.Skill{fakeSkill(r.GetName(), 1), fakeSkill(r.GetName(), 2)}, NextPageToken: "p2"}, nil
	}
	tomb := fakeSkill(r.GetName(), 4)
	tomb.Deleted, tomb.PlanDigest, tomb.Author, tomb.PublishedAt = true, "", "dave", tsAt(0)
	return &tollgatev1.SkillHistoryResponse{Versions: []*tollgatev1.Skill{fakeSkill(r.GetName(), 3), tomb}}, nil
}

func (fakePlane) DeleteSkill(_ context.Context, r *tollgatev1.DeleteSkillRequest) (*tollgatev1.DeleteSkillResponse, error) {
	if err := failFor(r.GetName()); err != nil {
		return nil, err
	}
	if e := r.GetExpectedVersion(); e != 0 && e != 3 {
		return nil, status.Errorf(codes.FailedPrecondition, "%s is at version 3, not %d", r.GetName(), e)
	}
	tomb := fakeSkill(r.GetName(), 4)
	tomb.Deleted, tomb.PlanDigest, tomb.Author, tomb.PublishedAt = true, "", "dave", tsAt(90*time.Minute)
	return &tollgatev1.DeleteSkillResponse{Tombstone: tomb}, nil
}

// The schedules the fake plane keeps: nightly (active) and weekly (paused,
// its latest start failed); any other name is NOT_FOUND.

func fakeSchedule(name string) *tollgatev1.Schedule {
	s := &tollgatev1.Schedule{Spec: &tollgatev1.ScheduleSpec{Name: name, Skill: "greet", SkillVersion: 3, Cron: "0 9 * * 1-5", TimeZone: "Europe/Berlin",
		Inputs: map[string]string{"who": "bob", "tone": "warm\x1b[31m"}, RunAs: "alice", Concurrency: "wait", Grace: durationpb.New(90 * time.Second)},
		CreatedBy: "alice", CreatedAt: tsAt(-48 * time.Hour), UpdatedBy: "bob", UpdatedAt: tsAt(-24 * time.Hour), Version: 4,
		NextTicks: []*timestamppb.Timestamp{tsAt(24 * time.Hour), tsAt(48 * time.Hour)}, LastTick: tsAt(0), LastRun: "r_sched", LastRunTick: tsAt(-24 * time.Hour),
		WaitingTick: tsAt(0),
		Started:     12, Skipped: 1, Missed: 2, LastSkip: "r_sched was still running"}
	if name == "weekly" {
		s.Spec = &tollgatev1.ScheduleSpec{Name: name, Skill: "morning-briefing", Cron: "@weekly"}
		s.Paused, s.PausedBy, s.PausedAt, s.NextTicks = true, "dave", tsAt(-time.Hour), nil
		s.LastRun, s.LastRunTick, s.LastTick, s.Started, s.Skipped, s.Missed, s.LastSkip = "", nil, tsAt(-24*time.Hour), 0, 0, 1, ""
		s.WaitingTick = nil
		s.LastError = "skill morning-briefing does not compile: `notes.store` is not a tool of the catalog"
	}
	return s
}

func (fakePlane) PutSchedule(_ context.Context, r *tollgatev1.PutScheduleRequest) (*tollgatev1.PutScheduleResponse, error) {
	sp := r.GetSpec()
	if err := failFor(sp.GetSkill()); err != nil {
		return nil, err
	}
	switch {
	case strings.Contains(sp.GetCron(), "bad"):
		return nil, status.Errorf(codes.InvalidArgument, "cron %q: want 5 fields, 6 with seconds, or a descriptor such as @daily", sp.GetCron())
	case (sp.GetName() == "nightly" || sp.GetName() == "taken") && r.GetExpectedVersion() == 0:
		return nil, status.Errorf(codes.FailedPrecondition, "schedule %s exists", sp.GetName())
	}
	s := fakeSchedule(sp.GetName())
	s.Spec, s.Version, s.Paused, s.PausedBy, s.PausedAt = sp, r.GetExpectedVersion()+1, false, "", nil
	s.NextTicks = []*timestamppb.Timestamp{tsAt(24 * time.Hour)}
	if r.GetExpectedVersion() == 0 {
		s.UpdatedBy, s.UpdatedAt, s.LastTick, s.LastRun, s.LastRunTick, s.Started, s.Skipped, s.Missed, s.LastSkip = "", nil, nil, "", nil, 0, 0, 0, ""
	}
	return &tollgatev1.PutScheduleResponse{Schedule: s}, nil
}

func fakeScheduleNamed(name string) (*tollgatev1.Schedule, error) {
	if err := failFor(name); err != nil {
		return nil, err
	}
	if name != "nightly" && name != "weekly" {
		return nil, status.Errorf(codes.NotFound, "no schedule %s", name)
	}
	return fakeSchedule(name), nil
}

func (fakePlane) GetSchedule(_ context.Context, r *tollgatev1.GetScheduleRequest) (*tollgatev1.GetScheduleResponse, error) {
	s, err := fakeScheduleNamed(r.GetName())
	if err == nil && r.GetNext() > 2 && !s.GetPaused() {
		for i := int32(2); i < r.GetNext(); i++ {
			s.NextTicks = append(s.NextTicks, tsAt(time.Duration(i+1)*24*time.Hour))
		}
	}
	return &tollgatev1.GetScheduleResponse{Schedule: s}, err
}

func (fakePlane) ListSchedules(_ context.Context, r *tollgatev1.ListSchedulesRequest) (*tollgatev1.ListSchedulesResponse, error) {
	out := []*tollgatev1.Schedule{fakeSchedule("nightly"), fakeSchedule("weekly")}
	out = slices.DeleteFunc(out, func(s *tollgatev1.Schedule) bool { return r.GetSkill() != "" && s.GetSpec().GetSkill() != r.GetSkill() })
	for _, s := range out {
		s.NextTicks = s.NextTicks[:min(1, len(s.NextTicks))]
	}
	return &tollgatev1.ListSchedulesResponse{Schedules: out}, nil
}

func (fakePlane) PauseSchedule(_ context.Context, r *tollgatev1.PauseScheduleRequest) (*tollgatev1.PauseScheduleResponse, error) {
	s, err := fakeScheduleNamed(r.GetName())
	if err == nil {
		s.Paused, s.PausedBy, s.PausedAt, s.NextTicks = true, "dave", tsAt(90*time.Minute), nil
	}
	return &tollgatev1.PauseScheduleResponse{Schedule: s}, err
}

func (fakePlane) ResumeSchedule(_ context.Context, r *tollgatev1.ResumeScheduleRequest) (*tollgatev1.ResumeScheduleResponse, error) {
	s, err := fakeScheduleNamed(r.GetName())
	if err == nil {
		s.Paused, s.PausedBy, s.PausedAt, s.NextTicks = false, "", nil, []*timestamppb.Timestamp{tsAt(24 * time.Hour)}
	}
	return &tollgatev1.ResumeScheduleResponse{Schedule: s}, err
}

func (fakePlane) DeleteSchedule(_ context.Context, r *tollgatev1.DeleteScheduleRequest) (*tollgatev1.DeleteScheduleResponse, error) {
	if _, err := fakeScheduleNamed(r.GetName()); err != nil {
		return nil, err
	}
	return &tollgatev1.DeleteScheduleResponse{}, nil
}

func TestVerbsGolden(t *testing.T) {
	// Some verbs print times in the local zone: the golden file has them
	// in UTC, whatever the machine's zone.
	var local []string
	for _, d := range []time.Duration{-48 * time.Hour, -24 * time.Hour, -time.Hour, 0, time.Second, time.Hour, 90 * time.Minute, 8 * time.Hour,
		24 * time.Hour, 48 * time.Hour, 72 * time.Hour, 96 * time.Hour, 120 * time.Hour, 144 * time.Hour, 720 * time.Hour} {
		for _, layout := range []string{"2006-01-02 15:04", "15:04:05"} {
			local = append(local, base.Add(d).Local().Format(layout), base.Add(d).Format(layout))
		}
	}
	inUTC := strings.NewReplacer(local...)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	f := fakePlane{}
	tollgatev1.RegisterRunServiceServer(srv, f)
	tollgatev1.RegisterApprovalServiceServer(srv, f)
	tollgatev1.RegisterAuditServiceServer(srv, f)
	tollgatev1.RegisterGateServiceServer(srv, f)
	tollgatev1.RegisterSkillServiceServer(srv, f)
	tollgatev1.RegisterScheduleServiceServer(srv, f)
	go srv.Serve(lis)
	t.Cleanup(srv.Stop)
	addr := lis.Addr().String()
	dir := t.TempDir()
	evidence := filepath.Join(dir, "note.txt")
	if err := os.WriteFile(evidence, []byte("the invoice, signed"), 0o600); err != nil {
		t.Fatal(err)
	}
	// Skills to push (skills/: two that save, one that does not compile;
	// a hidden folder and a README that push leaves alone), a file too big
	// to push, a folder with no skill, and schedule files.
	for name, content := range map[string]string{
		"skills/greet/SKILL.md":   fakeSource("greet", 3),
		"skills/morning/SKILL.md": "brief: write the morning brief (same as before)\n",
		"skills/broken/SKILL.md":  "---\nname: broken\n---\nhello: say hello\nkeep: notes.stor {}\n",
		"skills/.git/SKILL.md":    "not a skill",
		"skills/README.md":        "the team's skills",
		"big/SKILL.md":            strings.Repeat("x", 1<<20+1),
		"empty/notes.txt":         "no skill here",
		"unavail/a/SKILL.md":      "hello: say hello\n",
		"unavail/down/SKILL.md":   "hello: say hello\n",
		"unavail/z/SKILL.md":      "hello: say hello\n",
		"nightly.yaml":            "name: nightly\nskill: greet@3\ncron: 0 9 * * 1-5\ntime_zone: Europe/Berlin\ninputs:\n  who: bob\n  count: 3\nconcurrency: skip\ngrace: 2m\n",
		"bad.yaml":                "name: nightly\nskill: greet\ncrom: 0 9 * * *\n",
		"badtype.yaml":            "name: nightly\nskill: greet\ncron: '@daily'\ninputs: [who, bob]\n",
		"badversion.yaml":         "name: nightly\nskill: greet\nskill_version: three\ncron: '@daily'\n",
	} {
		path := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}

	type verbCase struct{ args, stdin string }
	cases := []verbCase{
		{args: "asks"}, {args: "asks -o json"},
		{args: "asks show r1/ask_1"}, {args: "asks show r1/ask_1 -o json"}, {args: "asks show r1/nope"}, {args: "asks show r1/down"}, {args: "asks show foo"}, {args: "approve /ask_1"},
		{args: "approve r1/ask_1"}, {args: "approve r1/ask_1 -o json"}, {args: "approve r1/taken --payload sha256:p1 --evidence sha256:e1"},
		{args: "approve r1/nope"}, {args: "approve r1/ask_1 --until 720h --scope s --reason r"}, {args: "approve r1/ask_1 --until 720h"},
		{args: "reject r1/ask_1 --reason no"}, {args: "reject r1/ask_1"}, {args: "reject r1/taken --reason no -o json"},
		{args: "revoke r1/ask_1 --reason oops"}, {args: "request-evidence r1/ask_1 --what receipts"},
		{args: "delegate r1/ask_1 --to carol --reason away"}, {args: "delegate r1/ask_1 --to carol"},
		{args: "amend r1/ask_1 amount 300000"}, {args: "amend r1/ask_1 amount 300000 -o json"}, {args: "amend r1/taken amount 1"},
		{args: "standing"}, {args: "standing --all -o json"}, {args: "standing revoke sx_1 --reason done"},
		{args: "standing revoke sx_1 --reason done -o json"}, {args: "standing revoke sx_1"}, {args: "standing revoke nope --reason x"},
		{args: "evidence r1/ask_1 " + evidence}, {args: "evidence r1/ask_1 " + evidence + " -o json"}, {args: "evidence r1/ask_1 /does/not/exist"},
		{args: "answer r1/ask_1 1"}, {args: "answer r1/ask_1 1 -o json"}, {args: "answer r1/ask_1", stdin: "menu\n1\n"},
		{args: "answer r1/ask_1 -o json", stdin: "menu\n"}, {args: "answer r1/nope 1"},
		{args: "answer r1/ask_1 zebra"}, {args: "answer r1/ask_1", stdin: "zebra\n"}, {args: "answer r1/ask_1", stdin: ""},
		{args: "audit"}, {args: "audit -o json"}, {args: "audit --run bad"}, {args: "audit --run bad -o json"}, {args: "audit --run down"},
		{args: "watch"}, {args: "watch -o json"}, {args: "watch --run r1"},
		{args: "runs"}, {args: "runs -o json"}, {args: "runs --state parked --state nosuch"}, {args: "runs --requester down"},
		{args: "runs show r1"}, {args: "runs show r1 -o json"}, {args: "runs show nope"},
		{args: "runs cancel r1 --reason stop"}, {args: "runs cancel r1 -o json"}, {args: "runs cancel taken"},
		{args: "run greet"}, {args: "run greet -o json"}, {args: "run greet --request-id k1"}, {args: "run greet --wait"},
		{args: "run greet --wait -o json"}, {args: "run fail --wait"}, {args: "run down"},
		{args: "run blocked --wait"}, {args: "run blocked --wait -o json"}, {args: "runs show r_blocked"}, {args: "runs show r_blocked -o json"},
		{args: "run standing --wait"}, {args: "runs show r_standing"}, {args: "run verifying --wait"},
		{args: "begin --request-id k1"}, {args: "begin --request-id k1 --name again -o json"}, {args: "begin"}, {args: "begin --request-id down"},
		{args: "finish --run r_ext"}, {args: "finish --run r_ext --failed broke -o json"}, {args: "finish"}, {args: "finish --run taken"},
		{args: "gate claims --summary s --run r_ext"}, {args: "gate claims --summary s --run r_ext -o json"}, {args: "gate no --summary s --run r_ext"},
		{args: "gate nowait --summary s --run r_ext --no-wait"}, {args: "gate claims --run r_ext"}, {args: "gate nope --summary s --run r_ext"},
		{args: "step extract --run r1 -- true"}, {args: "step extract --run live1 -- sh -c exit\\ 3"}, {args: "step read --run live1 -- true"},
		{args: "step extract --run live1 -- echo hi"}, {args: "step extract -- true"}, {args: "step extract --run nope -- true"},
		{args: "login"}, {args: "login --issuer http://127.0.0.1:1 --timeout 0s"}, {args: "whoami"},
		{args: "runs --schedule nightly"}, {args: "runs --schedule Nightly!"}, {args: "runs show r_sched"}, {args: "runs show r_sched -o json"},
		{args: "run greet@3 -o json"}, {args: "run greet@x"},
		{args: "skills"}, {args: "skills list -o json"}, {args: "skills frob"},
		{args: "skills push " + dir + "/skills/greet"}, {args: "skills push " + dir + "/skills/greet/SKILL.md -o json"},
		{args: "skills push " + dir + "/skills"}, {args: "skills push " + dir + "/skills -o json"},
		{args: "skills push " + dir + "/skills --expect-version 2"}, {args: "skills push " + dir + "/skills/greet --expect-version 2"},
		{args: "skills push " + dir + "/skills/broken"}, {args: "skills push " + dir + "/big"}, {args: "skills push " + dir + "/empty"},
		{args: "skills push " + dir + "/nothing"}, {args: "skills push " + dir + "/unavail"},
		{args: "skills show greet"}, {args: "skills show greet@2 --source"}, {args: "skills show greet -o json"}, {args: "skills show stale"},
		{args: "skills show gone@3"}, {args: "skills show nope"}, {args: "skills show greet@x"}, {args: "skills show ./greet"},
		{args: "skills history greet"}, {args: "skills history greet -o json"}, {args: "skills history nope"},
		{args: "skills diff greet 2 3"}, {args: "skills diff greet 2 3 --width 60"}, {args: "skills diff greet 3 3"},
		{args: "skills diff greet 2 3 --source"}, {args: "skills diff greet 2 3 -o json"}, {args: "skills diff stale 2 3"},
		{args: "skills diff greet 2 9"}, {args: "skills diff greet 2 x"}, {args: "skills diff greet 2"},
		{args: "skills rm greet"}, {args: "skills rm greet -o json"}, {args: "skills rm greet --expect-version 2"}, {args: "skills rm nope"},
		{args: "schedules"}, {args: "schedules list --skill greet -o json"}, {args: "schedules list --skill nope"},
		{args: "schedules show nightly"}, {args: "schedules show nightly --next 4 -o json"}, {args: "schedules show weekly"},
		{args: "schedules show nope"}, {args: "schedules show nightly --next 0"},
		{args: "schedules add daily --skill greet@3 --cron 0\\ 9\\ *\\ *\\ 1-5 --tz Europe/Berlin --input who=bob --input note=a=b --run-as alice --catch-up none --concurrency wait --grace 90s"},
		{args: "schedules add daily --skill greet --cron @daily -o json"},
		{args: "schedules add nightly --skill greet --cron @daily --replace"}, {args: "schedules add nightly --skill greet --cron @daily"},
		{args: "schedules add daily --skill nope --cron @daily"}, {args: "schedules add daily --skill greet --cron bad\\ cron"},
		{args: "schedules add daily --skill greet"}, {args: "schedules add daily --cron @daily"}, {args: "schedules add --skill greet --cron @daily"},
		{args: "schedules add daily --skill greet --cron @daily --input who"}, {args: "schedules add daily --skill greet --cron @daily --concurrency sometimes"},
		{args: "schedules add daily --skill greet --cron @daily --grace soon"}, {args: "schedules add daily --skill greet@0 --cron @daily"},
		{args: "schedules add -f " + dir + "/nightly.yaml --replace"}, {args: "schedules add -f " + dir + "/nightly.yaml"},
		{args: "schedules add other -f " + dir + "/nightly.yaml"}, {args: "schedules add -f " + dir + "/nightly.yaml --cron @daily"},
		{args: "schedules add -f " + dir + "/bad.yaml"}, {args: "schedules add -f " + dir + "/badtype.yaml"}, {args: "schedules add -f " + dir + "/badversion.yaml"}, {args: "schedules add -f " + dir + "/none.yaml"},
		{args: "schedules pause nightly"}, {args: "schedules pause nightly -o json"}, {args: "schedules resume weekly"},
		{args: "schedules rm nightly"}, {args: "schedules rm nightly -o json"}, {args: "schedules rm nope"}, {args: "schedules pause Bad"},
	}
	for _, verb := range []string{"", "asks", "asks show", "approve", "reject", "revoke", "request-evidence", "delegate", "amend", "standing",
		"standing revoke", "evidence", "answer", "audit", "watch", "runs", "runs show", "runs cancel", "run", "begin", "finish", "gate", "step",
		"grant", "grant verify", "plan", "login", "whoami", "logout", "mcp",
		"skills", "skills push", "skills list", "skills show", "skills history", "skills diff", "skills rm",
		"schedules", "schedules add", "schedules list", "schedules show", "schedules pause", "schedules resume", "schedules rm"} {
		cases = append(cases, verbCase{args: strings.TrimSpace(verb + " --help")})
	}
	var got bytes.Buffer
	for _, c := range cases {
		for _, who := range []string{"--token tok", ""} {
			if who == "" && c.args != "asks" && c.args != "run greet" {
				continue // one verb each way is enough to pin the no-token path
			}
			args := append(strings.Fields(strings.ReplaceAll(c.args, `\ `, "\x00")), "--server", addr)
			args = append(args, strings.Fields(who)...)
			for i := range args {
				args[i] = strings.ReplaceAll(args[i], "\x00", " ")
			}
			var stdout, stderr bytes.Buffer
			cfg := Config{Stdout: &stdout, Stderr: &stderr, Getenv: func(k string) string {
				if k == "TOLLGATE_HOME" {
					return dir
				}
				return ""
			}, Now: func() time.Time { return base.Add(90 * time.Minute) }, Terminal: func(io.Writer) bool { return false }, ConfigDir: dir}
			if c.stdin != "" {
				cfg.Stdin = strings.NewReader(c.stdin)
			}
			err := Run(context.Background(), args, cfg)
			out := inUTC.Replace(strings.ReplaceAll(stdout.String()+"\x01"+stderr.String(), addr, "ADDR"))
			out = strings.ReplaceAll(out, dir, "DIR")
			so, se, _ := strings.Cut(out, "\x01")
			fmt.Fprintf(&got, "=== approvectl %s %s\nexit %d\n--- stdout\n%s--- stderr\n%s", strings.ReplaceAll(c.args, dir, "DIR"), who, ExitCode(err), so, se)
		}
	}
	golden := filepath.Join("testdata", "verbs.golden")
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(golden, got.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Bytes(), want) {
		g, w := strings.Split(got.String(), "\n"), strings.Split(string(want), "\n")
		for i := 0; i < max(len(g), len(w)); i++ {
			if i >= len(g) || i >= len(w) || g[i] != w[i] {
				lo := max(0, i-8)
				t.Fatalf("verbs print otherwise than testdata/verbs.golden from line %d:\n got:\n%s\n want:\n%s", i+1,
					strings.Join(g[lo:min(len(g), i+4)], "\n"), strings.Join(w[lo:min(len(w), i+4)], "\n"))
			}
		}
	}
}
