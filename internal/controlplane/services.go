package controlplane

import (
	"context"
	"crypto/ed25519"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"time"

	tollgatev1 "github.com/tollgate-dev/tollgate/gen/tollgate/v1"
	"github.com/tollgate-dev/tollgate/internal/controlplane/approvals"
	"github.com/tollgate-dev/tollgate/internal/controlplane/errkind"
	"github.com/tollgate-dev/tollgate/internal/controlplane/runner"
	"github.com/tollgate-dev/tollgate/internal/identity"
	"github.com/tollgate-dev/tollgate/internal/lru"
	"github.com/tollgate-dev/tollgate/internal/store"
	"github.com/tollgate-dev/tollgate/internal/wire"
	"github.com/tollgate-dev/tollgate/pkg/answer"
	"github.com/tollgate-dev/tollgate/pkg/compiler"
	"github.com/tollgate-dev/tollgate/pkg/engine"
	"github.com/tollgate-dev/tollgate/pkg/limits"
	"github.com/tollgate-dev/tollgate/pkg/plan"
)

// Skills finds a skill's SKILL.md by name.
type Skills interface {
	Skill(name string) (string, bool)
}

// ServiceConfig wires the run, approval and audit handlers.
type ServiceConfig struct {
	Runner  *runner.Runner
	Store   store.Store
	Catalog func() *compiler.Catalog
	Skills  Skills
	// Approvals judges every decision at decision time (I9), routes asks
	// and shows who may decide them; the handlers ask it, never policy.
	// nil: a desk with no policy.
	Approvals *approvals.Desk
	Log       *slog.Logger
	// SigningKey and KeyID sign the grant an approved gate yields (the
	// key that signs executors' grants); GateGrantTTL is how long such a
	// grant stays valid after the approval (default DefaultGateGrantTTL).
	SigningKey   ed25519.PrivateKey
	KeyID        string
	GateGrantTTL time.Duration
	// PlanCache bounds the compile and plan-view caches in entries
	// (0: DefaultPlanCache).
	PlanCache int
	// MaxWatchesPerCaller bounds one caller's open watch streams
	// (0: DefaultMaxWatchesPerCaller); beyond it a watch is refused
	// with RESOURCE_EXHAUSTED.
	MaxWatchesPerCaller int
}

// Services implements RunService, ApprovalService and AuditService.
type Services struct {
	tollgatev1.UnimplementedRunServiceServer
	tollgatev1.UnimplementedApprovalServiceServer
	tollgatev1.UnimplementedAuditServiceServer
	tollgatev1.UnimplementedGateServiceServer
	cfg ServiceConfig

	compiled *lru.Cache[compileKey, compiler.Result] // plans are immutable once compiled
	views    *wire.Views                             // runs as responses show them, plan parts shared
	watches  *watchLimit
	events   *lru.Cache[eventKey, *sharedEvent] // watch events, shared by watchers
}

// compileKey is what a compilation depends on.
type compileKey struct {
	catalog *compiler.Catalog
	name    string
	src     string
	inputs  string // the run inputs' names (inputsKey)
}

// maxCompiledBytes bounds the recipe sources the compile cache holds as
// keys, on top of its bound in entries (ServiceConfig.PlanCache): a few
// large recipes must not hold what many small ones would.
const maxCompiledBytes = 32 << 20

// compile compiles a recipe, or returns the plan it compiled from the same
// source, name and catalog before (compiling is a pure function of them).
// Only plans are kept: a recipe that does not compile is compiled again,
// so its diagnostics are always fresh.
func (s *Services) compile(src, name string) compiler.Result {
	return s.compileWith(src, name, nil)
}

// compileWith is compile for a run with inputs: their names are what
// {NAME} may read.
func (s *Services) compileWith(src, name string, inputs map[string]string) compiler.Result {
	k := compileKey{catalog: s.cfg.Catalog(), name: name, src: src, inputs: inputsKey(inputs)}
	if res, ok := s.compiled.Get(k); ok {
		return res
	}
	res := compiler.Compile(src, compiler.Options{Catalog: k.catalog, Name: name, Inputs: inputNames(inputs)})
	if res.Plan == nil {
		return res
	}
	s.compiled.Add(k, res)
	return res
}

// NewServices returns the handlers.
func NewServices(cfg ServiceConfig) *Services {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.GateGrantTTL <= 0 {
		cfg.GateGrantTTL = DefaultGateGrantTTL
	}
	if cfg.PlanCache <= 0 {
		cfg.PlanCache = runner.DefaultPlanCache
	}
	if cfg.Approvals == nil {
		// No policy: only the requester decides `ask me` asks.
		cfg.Approvals = approvals.New(approvals.Config{Store: cfg.Store, Log: cfg.Log})
	}
	return &Services{cfg: cfg, compiled: lru.NewWeighted(cfg.PlanCache, maxCompiledBytes,
		func(k compileKey, _ compiler.Result) int64 { return int64(len(k.src) + len(k.name) + len(k.inputs)) }),
		views: wire.NewViews(cfg.PlanCache), watches: newWatchLimit(cfg.MaxWatchesPerCaller), events: newEventCache()}
}

func (s *Services) log() *slog.Logger { return s.cfg.Log }

// caller is the authenticated principal; never a request field.
//
// Executors are not callers of this API: an executor identity is refused
// here even though the API listener never authenticates one (defence in
// depth should a listener ever serve both).
func caller(ctx context.Context) (string, error) {
	p, ok := identity.FromContext(ctx)
	if !ok {
		return "", fmt.Errorf("no authenticated caller: %w", errkind.Unauthenticated)
	}
	if p.Kind == identity.KindExecutor {
		return "", fmt.Errorf("executor %s may not call the approver api: %w", p.Subject, errkind.Denied)
	}
	return p.Subject, nil
}

// StartRun compiles (a skill or a recipe) and starts a run. A repeated
// request_id returns the run it first created, with created = false, if
// the request is the same (Runner.Start); ALREADY_EXISTS if not.
func (s *Services) StartRun(ctx context.Context, req *tollgatev1.StartRunRequest) (*tollgatev1.StartRunResponse, error) {
	who, err := caller(ctx)
	if err != nil {
		return nil, err
	}
	if err := inputsTooLarge(req.GetInputs()); err != nil {
		return nil, err
	}
	src, name := req.GetRecipe(), req.GetName()
	if sk := req.GetSkill(); sk != "" {
		text, ok := s.cfg.Skills.Skill(sk)
		if !ok {
			return nil, fmt.Errorf("no skill named %q: %w", limits.Short(sk), errkind.NotFound)
		}
		src, name = text, sk
	}
	if strings.TrimSpace(src) == "" {
		return nil, fmt.Errorf("start: give a skill or a recipe: %w", errkind.Invalid)
	}
	if name == "" {
		name = "recipe"
	}
	if err := checkInputNames(req.GetInputs()); err != nil {
		return nil, err
	}
	res := s.compileWith(src, name, req.GetInputs())
	if res.Plan == nil {
		return nil, fmt.Errorf("the recipe does not compile:\n%s%w", compiler.FormatDiagnostics("", res.Diagnostics), errkind.Invalid)
	}
	for _, st := range res.Plan.AllSteps() {
		if st.SideEffect && st.WithoutAsking {
			if why, ok := s.cfg.Approvals.MayStartUnasked(ctx, who, st); !ok {
				return nil, fmt.Errorf("%s may not approve %s (%s·%s) by starting the run (%s); remove `without asking` so it asks first: %w", who, st.ID, st.Server, st.Tool, why, errkind.Denied)
			}
		}
	}
	if d := req.GetExpectedPlanDigest(); d != "" && d != res.Digest {
		return nil, fmt.Errorf("the plan is now %s, not the %s you reviewed: %w", res.Digest, d, errkind.StalePayload)
	}
	run, created, err := s.cfg.Runner.Start(ctx, runner.StartRequest{Plan: res.Plan, Digest: res.Digest, Skill: req.GetSkill(), Requester: who, RequestID: req.GetRequestId(), Inputs: req.GetInputs()})
	if err != nil {
		return nil, err
	}
	m, err := s.cfg.Runner.Machine(ctx, run.PlanDigest)
	if err != nil {
		return nil, err
	}
	return &tollgatev1.StartRunResponse{Run: s.views.Run(run, m, req.GetSkill()), Created: created}, nil
}

// GetRun returns a run; deadlines that passed are applied first (I4).
func (s *Services) GetRun(ctx context.Context, req *tollgatev1.GetRunRequest) (*tollgatev1.GetRunResponse, error) {
	who, err := caller(ctx)
	if err != nil {
		return nil, err
	}
	run, m, err := s.visibleRun(ctx, who, req.GetRunId())
	if err != nil {
		return nil, err
	}
	sr, err := s.cfg.Store.GetRun(ctx, run.ID)
	if err != nil {
		return nil, err
	}
	return &tollgatev1.GetRunResponse{Run: s.views.Run(run, m, sr.Skill)}, nil
}

// ListRuns lists the runs the caller may see, newest first; a page may
// hold fewer runs than asked for (visibility.go).
func (s *Services) ListRuns(ctx context.Context, req *tollgatev1.ListRunsRequest) (*tollgatev1.ListRunsResponse, error) {
	who, err := caller(ctx)
	if err != nil {
		return nil, err
	}
	q := store.RunQuery{Requester: req.GetRequester(), Limit: int(req.GetPageSize()), PageToken: req.GetPageToken()}
	for _, st := range req.GetStates() {
		es, ok := wire.RunStateFromProto(st)
		if !ok {
			return nil, fmt.Errorf("state %v: %w", st, errkind.Invalid)
		}
		q.States = append(q.States, string(es))
	}
	runs, next, err := s.cfg.Store.ListRuns(ctx, q)
	if err != nil {
		return nil, err
	}
	out := &tollgatev1.ListRunsResponse{NextPageToken: next}
	for _, sr := range runs {
		if req.GetSkill() != "" && sr.Skill != req.GetSkill() {
			continue
		}
		run, m, err := s.cfg.Runner.Get(ctx, sr.ID)
		if err != nil {
			return nil, err
		}
		if !s.sees(ctx, who, run) {
			continue
		}
		out.Runs = append(out.Runs, wire.RunSummary(sr, run, m.Plan().Name))
	}
	return out, nil
}

// CancelRun cancels a run and closes its asks in the same commit (I3).
// Only the requester may cancel.
func (s *Services) CancelRun(ctx context.Context, req *tollgatev1.CancelRunRequest) (*tollgatev1.CancelRunResponse, error) {
	who, err := caller(ctx)
	if err != nil {
		return nil, err
	}
	run, _, err := s.visibleRun(ctx, who, req.GetRunId())
	if err != nil {
		return nil, err
	}
	if run.Requester != who {
		return nil, fmt.Errorf("only the requester (%s) may cancel run %s: %w", run.Requester, run.ID, errkind.Denied)
	}
	tr, err := s.cfg.Runner.Event(ctx, run.ID, func(now time.Time) engine.Event {
		return engine.Cancel{Actor: who, Reason: req.GetReason(), At: now}
	})
	if err != nil {
		return nil, err
	}
	m, err := s.cfg.Runner.Machine(ctx, tr.Run.PlanDigest)
	if err != nil {
		return nil, err
	}
	return &tollgatev1.CancelRunResponse{Run: s.views.Run(tr.Run, m, ""), Report: report(m, run, tr.Run)}, nil
}

// report says truthfully what did and did not run: every step of the
// plan, whether or not its phase was ever reached. Joins are bookkeeping
// and left out.
func report(m *engine.Machine, before, after *engine.Run) *tollgatev1.CancellationReport {
	r := &tollgatev1.CancellationReport{}
	var ids []string
	for _, st := range m.Plan().AllSteps() {
		if st.Kind != plan.KindJoin {
			ids = append(ids, st.ID)
		}
	}
	slices.Sort(ids)
	for _, id := range ids {
		s, old := after.Steps[id], before.Steps[id]
		switch {
		case s == nil:
			r.NotRun = append(r.NotRun, id)
		case s.Status == engine.StatusSucceeded || s.Status == engine.StatusFailed:
			r.Ran = append(r.Ran, id)
		case old != nil && old.Status.InFlight():
			r.Interrupted = append(r.Interrupted, id)
		default:
			r.NotRun = append(r.NotRun, id)
		}
	}
	for _, id := range slices.Sorted(maps.Keys(after.Asks)) {
		if old, ok := before.Asks[id]; ok && old.State == engine.AskPending && after.Asks[id].State != engine.AskPending {
			r.ClosedAsks = append(r.ClosedAsks, store.AskID(after.ID, id))
		}
	}
	list := func(xs []string) string {
		if len(xs) == 0 {
			return "nothing"
		}
		return strings.Join(xs, ", ")
	}
	r.Text = fmt.Sprintf("Ran: %s. Interrupted: %s. Did not run: %s.", list(r.Ran), list(r.Interrupted), list(r.NotRun))
	return r
}

// ListAsks is the caller's inbox: asks the caller may decide.
func (s *Services) ListAsks(ctx context.Context, req *tollgatev1.ListAsksRequest) (*tollgatev1.ListAsksResponse, error) {
	who, err := caller(ctx)
	if err != nil {
		return nil, err
	}
	q := store.AskQuery{Audiences: s.cfg.Approvals.Audiences(who), RunID: req.GetRunId(), Limit: int(req.GetPageSize()), PageToken: req.GetPageToken()}
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
	out := &tollgatev1.ListAsksResponse{NextPageToken: next}
	for _, row := range rows {
		// Get applies whatever rung of the ladder is due (I4: the reader
		// enforces the deadline) before anyone sees the ask.
		run, _, err := s.cfg.Runner.Get(ctx, row.RunID)
		if err != nil {
			return nil, err
		}
		if !s.sees(ctx, who, run) {
			continue
		}
		_, stop, _ := splitAskID(row.ID)
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
		out.Items = append(out.Items, &tollgatev1.InboxItem{Basis: basis, Why: v.Why, Ask: wire.AskSummary(run, a, "")})
	}
	return out, nil
}

// callerAsk is the authenticated caller and the ask they name, read with
// every due deadline applied.
func (s *Services) callerAsk(ctx context.Context, id string) (string, *engine.Run, *engine.AskRun, error) {
	who, err := caller(ctx)
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
// found whether or not it exists (visibility.go).
func (s *Services) loadAsk(ctx context.Context, who, id string) (*engine.Run, *engine.AskRun, error) {
	runID, stop, err := splitAskID(id)
	if err != nil {
		return nil, nil, err
	}
	run, _, err := s.visibleRun(ctx, who, runID)
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
func (s *Services) GetAsk(ctx context.Context, req *tollgatev1.GetAskRequest) (*tollgatev1.GetAskResponse, error) {
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
	out := wire.Ask(run, a)
	out.AuthorityRequired = s.authorityRequired(ctx, run, a)
	return &tollgatev1.GetAskResponse{Ask: out, MayDecide: v.OK, Why: v.Why}, nil
}

// authorityRequired says who may decide the ask now, as policy routes it
// (approvals.Desk.Requirement).
func (s *Services) authorityRequired(ctx context.Context, run *engine.Run, a *engine.AskRun) *tollgatev1.AuthorityRequirement {
	r := s.cfg.Approvals.Requirement(ctx, run, a)
	return &tollgatev1.AuthorityRequirement{Description: r.Description, Roles: r.Roles, Principals: r.Principals,
		Quorum: int32(r.Quorum), Excluded: r.Excluded, PolicyRule: r.PolicyRule}
}

// decidable loads an ask for the caller to act on: authenticated, allowed
// now to make the decision kindOf says (authority is checked at decision
// time, not when the ask was routed), and — for a decision that lets an
// action run — quoting the exact payload and evidence the caller was
// shown (I6). The Judged it returns pins the decision to the copy of the
// ask all this was judged on: the engine refuses the decision's event on
// any other (engine.AskRun.StillAsJudged), so no check here is ever of
// another state than the one the decision commits on.
func (s *Services) decidable(ctx context.Context, askID string, kindOf func(*engine.AskRun) approvals.Kind, reviewed, evidence string) (string, *engine.Run, *engine.AskRun, approvals.Verdict, engine.Judged, error) {
	who, run, a, err := s.callerAsk(ctx, askID)
	if err != nil {
		return "", nil, nil, approvals.Verdict{}, engine.Judged{}, err
	}
	kind := kindOf(a)
	v, err := s.cfg.Approvals.Authorize(ctx, who, run, a, kind)
	if err != nil {
		return "", nil, nil, v, engine.Judged{}, fmt.Errorf("%s: %w: %w", v.Why, errkind.Denied, err)
	}
	if !v.OK {
		return "", nil, nil, v, engine.Judged{}, fmt.Errorf("%s: %w", v.Why, errkind.Denied)
	}
	judged := engine.JudgedOn(a, reviewed, evidence, kind.Approves())
	if err := a.StillAsJudged(judged); err != nil {
		return "", nil, nil, v, engine.Judged{}, err
	}
	return who, run, a, v, judged, nil
}

// Decide records a typed decision by the caller. Authority is checked now,
// at decision time; the deadline is checked by the engine and again by the
// store's commit.
func (s *Services) Decide(ctx context.Context, req *tollgatev1.DecideRequest) (*tollgatev1.DecideResponse, error) {
	if req.GetDecision() == nil {
		return nil, fmt.Errorf("no decision given: %w", errkind.Invalid)
	}
	kindOf := func(a *engine.AskRun) approvals.Kind { return decisionOf(req, a) }
	who, run, a, auth, judged, err := s.decidable(ctx, req.GetAskId(), kindOf, req.GetExpectedPayloadDigest(), req.GetExpectedEvidenceDigest())
	if err != nil {
		return nil, err
	}
	var build func(now time.Time) engine.Event
	switch d := req.GetDecision().(type) {
	case *tollgatev1.DecideRequest_Approve:
		opt := d.Approve.GetOptionId()
		if opt == "" {
			opt = "1"
		}
		if err := s.cfg.Approvals.RecheckVotes(ctx, s.cfg.Runner, run, a, who); err != nil {
			return nil, err
		}
		build = func(now time.Time) engine.Event {
			return engine.Decide{Ask: a.ID, Actor: who, Option: opt, Reason: d.Approve.GetReason(), Why: auth.Why, Policy: auth.Policy, Quorum: auth.Quorum, Judged: judged, At: now}
		}
	case *tollgatev1.DecideRequest_Reject:
		build = func(now time.Time) engine.Event {
			return engine.Decide{Ask: a.ID, Actor: who, Reject: true, Reason: d.Reject.GetReason(), Why: auth.Why, Policy: auth.Policy, Judged: judged, At: now}
		}
	case *tollgatev1.DecideRequest_Amend:
		v, err := approvals.ParseMinorUnits(d.Amend.GetNewValueJson())
		if err != nil {
			return nil, fmt.Errorf("amend %s: %w: %w", d.Amend.GetField(), err, errkind.Invalid)
		}
		build = func(now time.Time) engine.Event {
			return engine.Amend{Ask: a.ID, Actor: who, Field: d.Amend.GetField(), Value: v, Judged: judged, At: now}
		}
	case *tollgatev1.DecideRequest_RequestEvidence:
		build = func(now time.Time) engine.Event {
			return engine.RequestEvidence{Ask: a.ID, Actor: who, What: d.RequestEvidence.GetWhat(), Judged: judged, At: now}
		}
	case *tollgatev1.DecideRequest_Delegate:
		to := d.Delegate.GetTo()
		if err := s.cfg.Approvals.MayDelegate(ctx, who, to, run, a); err != nil {
			return nil, err
		}
		build = func(now time.Time) engine.Event {
			return engine.Delegate{Ask: a.ID, Actor: who, To: to, Reason: d.Delegate.GetReason(), Judged: judged, At: now}
		}
	case *tollgatev1.DecideRequest_ApproveException:
		return s.approveStanding(ctx, who, run, a, auth, judged, d.ApproveException)
	case *tollgatev1.DecideRequest_Revoke:
		if strings.TrimSpace(d.Revoke.GetReason()) == "" {
			return nil, fmt.Errorf("revoke: a reason is required: %w", errkind.Invalid)
		}
		build = func(now time.Time) engine.Event {
			return engine.Revoke{Ask: a.ID, Actor: who, Reason: d.Revoke.GetReason(), Judged: judged, At: now}
		}
	case *tollgatev1.DecideRequest_TextAnswer:
		if a.Type != plan.StopText {
			return nil, fmt.Errorf("%q is not a free-text question: %w", a.Title, errkind.Invalid)
		}
		text := d.TextAnswer.GetText()
		if strings.TrimSpace(text) == "" {
			return nil, fmt.Errorf("the answer is empty: %w", errkind.Invalid)
		}
		build = func(now time.Time) engine.Event {
			return engine.Answer{Ask: a.ID, Actor: who, Text: text, Literal: true, Why: auth.Why, Policy: auth.Policy, Judged: judged, At: now}
		}
	case nil:
		return nil, fmt.Errorf("no decision given: %w", errkind.Invalid)
	default:
		return nil, fmt.Errorf("%T decisions: %w", d, errkind.Unimplemented)
	}
	tr, err := s.cfg.Runner.Event(ctx, run.ID, build)
	if err != nil {
		return nil, err
	}
	na := tr.Run.Asks[a.ID]
	out := &tollgatev1.DecideResponse{Ask: wire.Ask(tr.Run, na), RunState: wire.RunState(tr.Run.State)}
	if n := len(out.Ask.Decisions); n > 0 {
		out.Decision = out.Ask.Decisions[n-1]
	}
	return out, nil
}

var answerKindToProto = map[answer.Kind]tollgatev1.AnswerKind{
	answer.Selected: tollgatev1.AnswerKind_ANSWER_KIND_SELECTED, answer.Reshown: tollgatev1.AnswerKind_ANSWER_KIND_RESHOWN,
	answer.NoMatch: tollgatev1.AnswerKind_ANSWER_KIND_NO_MATCH, answer.EscapeHint: tollgatev1.AnswerKind_ANSWER_KIND_ESCAPE_HINT,
	answer.Dropped: tollgatev1.AnswerKind_ANSWER_KIND_DROPPED,
}

// Answer interprets a free-text reply with the one matcher (package
// answer). Every reply gets a typed, non-empty response.
func (s *Services) Answer(ctx context.Context, req *tollgatev1.AnswerRequest) (*tollgatev1.AnswerResponse, error) {
	// The reply is judged as the decision it makes (the same matcher the
	// engine applies).
	kindOf := func(a *engine.AskRun) approvals.Kind {
		if r := a.Reply(req.GetText(), false); r.Kind == answer.Selected {
			return approvals.OptionKind(a, r.Option.ID)
		}
		return approvals.Reply
	}
	who, run, a, auth, judged, err := s.decidable(ctx, req.GetAskId(), kindOf, req.GetExpectedPayloadDigest(), req.GetExpectedEvidenceDigest())
	if err != nil {
		return nil, err
	}
	if kindOf(a) == approvals.Retry {
		if err := s.cfg.Approvals.RecheckVotes(ctx, s.cfg.Runner, run, a, who); err != nil {
			return nil, err
		}
	}
	tr, err := s.cfg.Runner.Event(ctx, run.ID, func(now time.Time) engine.Event {
		return engine.Answer{Ask: a.ID, Actor: who, Text: req.GetText(), Why: auth.Why, Policy: auth.Policy, Quorum: auth.Quorum, Judged: judged, At: now}
	})
	if err != nil {
		return nil, err
	}
	r := tr.Reply
	out := &tollgatev1.AnswerResponse{Kind: answerKindToProto[r.Kind], ResponseText: r.Message, SelectedOptionId: r.Option.ID,
		MissCount: int32(r.Misses), Ask: wire.AskSummary(tr.Run, tr.Run.Asks[a.ID], ""), RunState: wire.RunState(tr.Run.State)}
	if r.Kind == answer.Dropped {
		m, err := s.cfg.Runner.Machine(ctx, tr.Run.PlanDigest)
		if err != nil {
			return nil, err
		}
		out.Report = report(m, run, tr.Run)
		out.ResponseText = r.Message + " " + out.Report.Text
	}
	return out, nil
}

// maxEvidence bounds what one AttachEvidence may carry.
const (
	maxArtifacts     = 10
	maxArtifactBytes = 1 << 20
)

// AttachEvidence adds the requester's artifacts to an ask that asked for
// them; it is pending again with a new evidence digest.
func (s *Services) AttachEvidence(ctx context.Context, req *tollgatev1.AttachEvidenceRequest) (*tollgatev1.AttachEvidenceResponse, error) {
	who, run, a, err := s.callerAsk(ctx, req.GetAskId())
	if err != nil {
		return nil, err
	}
	if n := len(req.GetArtifacts()); n == 0 || n > maxArtifacts {
		return nil, fmt.Errorf("attach 1 to %d artifacts, not %d: %w", maxArtifacts, n, errkind.Invalid)
	}
	var arts []engine.Evidence
	for _, u := range req.GetArtifacts() {
		if u.GetName() == "" || len(u.GetContent()) > maxArtifactBytes {
			return nil, fmt.Errorf("artifact %q: a name and at most %d bytes: %w", u.GetName(), maxArtifactBytes, errkind.Invalid)
		}
		arts = append(arts, engine.Evidence{Name: u.GetName(), MediaType: u.GetMediaType(), Content: u.GetContent()})
	}
	tr, err := s.cfg.Runner.Event(ctx, run.ID, func(now time.Time) engine.Event {
		return engine.AttachEvidence{Ask: a.ID, Actor: who, Artifacts: arts, Note: req.GetNote(), At: now}
	})
	if err != nil {
		return nil, err
	}
	return &tollgatev1.AttachEvidenceResponse{Ask: wire.Ask(tr.Run, tr.Run.Asks[a.ID])}, nil
}
