package controlplane

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	tollgatev1 "github.com/tollgate-dev/tollgate/gen/tollgate/v1"
	"github.com/tollgate-dev/tollgate/internal/identity"
	"github.com/tollgate-dev/tollgate/internal/store"
	"github.com/tollgate-dev/tollgate/pkg/answer"
	"github.com/tollgate-dev/tollgate/pkg/compiler"
	"github.com/tollgate-dev/tollgate/pkg/engine"
	"github.com/tollgate-dev/tollgate/pkg/plan"
)

var errStalePayload = errors.New("the payload changed since you read it")

// Skills finds a skill's SKILL.md by name.
type Skills interface {
	Skill(name string) (string, bool)
}

// ServiceConfig wires the run, approval and audit handlers.
type ServiceConfig struct {
	Runner  *Runner
	Store   store.Store
	Catalog func() *compiler.Catalog
	Skills  Skills
	// Roles lists the roles each principal holds; an ask for a role may be
	// decided only by its holders. (Policy-based authority comes later.)
	Roles map[string][]string
	// WithoutAsking says whether a starter may approve a `without asking`
	// step by starting the run (I1). Nil refuses every such step.
	WithoutAsking func(starter string, step plan.Step) bool
}

// Services implements RunService, ApprovalService and AuditService.
type Services struct {
	tollgatev1.UnimplementedRunServiceServer
	tollgatev1.UnimplementedApprovalServiceServer
	tollgatev1.UnimplementedAuditServiceServer
	cfg ServiceConfig

	mu       sync.Mutex
	compiled map[compileKey]compiler.Result // plans are immutable once compiled
}

// compileKey is what a compilation depends on.
type compileKey struct {
	catalog *compiler.Catalog
	name    string
	src     string
}

// maxCompiled bounds the compile cache.
const maxCompiled = 1024

// compile compiles a recipe, or returns the plan it compiled from the same
// source, name and catalog before (compiling is a pure function of them).
// Only plans are kept: a recipe that does not compile is compiled again,
// so its diagnostics are always fresh.
func (s *Services) compile(src, name string) compiler.Result {
	k := compileKey{catalog: s.cfg.Catalog(), name: name, src: src}
	s.mu.Lock()
	res, ok := s.compiled[k]
	s.mu.Unlock()
	if ok {
		return res
	}
	res = compiler.Compile(src, compiler.Options{Catalog: k.catalog, Name: name})
	if res.Plan == nil {
		return res
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.compiled == nil || len(s.compiled) >= maxCompiled {
		s.compiled = map[compileKey]compiler.Result{}
	}
	s.compiled[k] = res
	return res
}

// NewServices returns the handlers.
func NewServices(cfg ServiceConfig) *Services { return &Services{cfg: cfg} }

// caller is the authenticated principal; never a request field.
func caller(ctx context.Context) (string, error) {
	p, ok := identity.FromContext(ctx)
	if !ok {
		return "", fmt.Errorf("no authenticated caller: %w", errUnauthenticated)
	}
	return p.Subject, nil
}

// StartRun compiles (a skill or a recipe) and starts a run. A repeated
// request_id returns the run it first created, with created = false.
func (s *Services) StartRun(ctx context.Context, req *tollgatev1.StartRunRequest) (*tollgatev1.StartRunResponse, error) {
	who, err := caller(ctx)
	if err != nil {
		return nil, err
	}
	src, name := req.GetRecipe(), req.GetName()
	if sk := req.GetSkill(); sk != "" {
		text, ok := s.cfg.Skills.Skill(sk)
		if !ok {
			return nil, fmt.Errorf("no skill named %q: %w", sk, errNotFound)
		}
		src, name = text, sk
	}
	if strings.TrimSpace(src) == "" {
		return nil, fmt.Errorf("start: give a skill or a recipe: %w", errInvalid)
	}
	if name == "" {
		name = "recipe"
	}
	res := s.compile(src, name)
	if res.Plan == nil {
		return nil, fmt.Errorf("the recipe does not compile:\n%s%w", compiler.FormatDiagnostics("", res.Diagnostics), errInvalid)
	}
	for _, st := range stepsOf(res.Plan) {
		if st.SideEffect && st.WithoutAsking && (s.cfg.WithoutAsking == nil || !s.cfg.WithoutAsking(who, st)) {
			return nil, fmt.Errorf("%s may not approve %s (%s·%s) by starting the run; remove `without asking` so it asks first: %w", who, st.ID, st.Server, st.Tool, errDenied)
		}
	}
	if d := req.GetExpectedPlanDigest(); d != "" && d != res.Digest {
		return nil, fmt.Errorf("the plan is now %s, not the %s you reviewed: %w", res.Digest, d, errStalePayload)
	}
	run, created, err := s.cfg.Runner.Start(ctx, StartRequest{Plan: res.Plan, Digest: res.Digest, Skill: req.GetSkill(), Requester: who, RequestID: req.GetRequestId()})
	if err != nil {
		return nil, err
	}
	m, err := s.cfg.Runner.machine(ctx, run.PlanDigest)
	if err != nil {
		return nil, err
	}
	return &tollgatev1.StartRunResponse{Run: runToProto(run, m, req.GetSkill()), Created: created}, nil
}

// GetRun returns a run; deadlines that passed are applied first (I4).
func (s *Services) GetRun(ctx context.Context, req *tollgatev1.GetRunRequest) (*tollgatev1.GetRunResponse, error) {
	if _, err := caller(ctx); err != nil {
		return nil, err
	}
	run, m, err := s.cfg.Runner.Get(ctx, req.GetRunId())
	if err != nil {
		return nil, err
	}
	sr, err := s.cfg.Store.GetRun(ctx, run.ID)
	if err != nil {
		return nil, err
	}
	return &tollgatev1.GetRunResponse{Run: runToProto(run, m, sr.Skill)}, nil
}

// ListRuns lists runs newest first.
func (s *Services) ListRuns(ctx context.Context, req *tollgatev1.ListRunsRequest) (*tollgatev1.ListRunsResponse, error) {
	if _, err := caller(ctx); err != nil {
		return nil, err
	}
	q := store.RunQuery{Requester: req.GetRequester(), Limit: int(req.GetPageSize()), PageToken: req.GetPageToken()}
	for _, st := range req.GetStates() {
		es, ok := runStateFromProto[st]
		if !ok {
			return nil, fmt.Errorf("state %v: %w", st, errInvalid)
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
		out.Runs = append(out.Runs, runSummary(sr, run, m.Plan().Name))
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
	run, _, err := s.cfg.Runner.Get(ctx, req.GetRunId())
	if err != nil {
		return nil, err
	}
	if run.Requester != who {
		return nil, fmt.Errorf("only the requester (%s) may cancel run %s: %w", run.Requester, run.ID, errDenied)
	}
	tr, err := s.cfg.Runner.Event(ctx, run.ID, func(now time.Time) engine.Event {
		return engine.Cancel{Actor: who, Reason: req.GetReason(), At: now}
	})
	if err != nil {
		return nil, err
	}
	m, err := s.cfg.Runner.machine(ctx, tr.Run.PlanDigest)
	if err != nil {
		return nil, err
	}
	return &tollgatev1.CancelRunResponse{Run: runToProto(tr.Run, m, ""), Report: report(m, run, tr.Run)}, nil
}

// report says truthfully what did and did not run: every step of the
// plan, whether or not its phase was ever reached. Joins are bookkeeping
// and left out.
func report(m *engine.Machine, before, after *engine.Run) *tollgatev1.CancellationReport {
	r := &tollgatev1.CancellationReport{}
	var ids []string
	for _, st := range stepsOf(m.Plan()) {
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

// audiences is who the caller is, for the inbox.
func (s *Services) audiences(who string) []string {
	out := []string{"user:" + who}
	for _, r := range s.cfg.Roles[who] {
		out = append(out, "role:"+r)
	}
	return out
}

// mayDecide checks the caller against an ask's audience: the requester for
// `ask me`, a holder of the role otherwise. It says why either way.
func (s *Services) mayDecide(who string, run *engine.Run, a *engine.AskRun) (bool, string) {
	if a.Audience == "" || a.Audience == plan.AudienceRequester {
		if who == run.Requester {
			return true, "you started the run and the ask is for the requester"
		}
		return false, fmt.Sprintf("the ask is for the requester, %s", run.Requester)
	}
	if slices.Contains(s.cfg.Roles[who], a.Audience) {
		return true, "you hold the role " + a.Audience
	}
	return false, "the ask is for the role " + a.Audience + ", which you do not hold"
}

// ListAsks is the caller's inbox: asks the caller may decide.
func (s *Services) ListAsks(ctx context.Context, req *tollgatev1.ListAsksRequest) (*tollgatev1.ListAsksResponse, error) {
	who, err := caller(ctx)
	if err != nil {
		return nil, err
	}
	q := store.AskQuery{Audiences: s.audiences(who), RunID: req.GetRunId(), Limit: int(req.GetPageSize()), PageToken: req.GetPageToken()}
	for _, st := range req.GetStates() {
		es, ok := askStateFromProto[st]
		if !ok {
			return nil, fmt.Errorf("state %v: %w", st, errInvalid)
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
	now, err := s.cfg.Store.Now(ctx)
	if err != nil {
		return nil, err
	}
	out := &tollgatev1.ListAsksResponse{NextPageToken: next}
	for _, row := range rows {
		if row.State == string(engine.AskPending) && !now.Before(row.ExpiresAt) {
			// I4: the reader enforces the deadline; Get applies the expiry
			// (and its on expiry) before anyone sees the ask again.
			if _, _, err := s.cfg.Runner.Get(ctx, row.RunID); err != nil {
				return nil, err
			}
			continue
		}
		// The row is the inbox: who it is for was fixed when it opened, so
		// no run needs loading to list it.
		basis, why := tollgatev1.EligibilityBasis_ELIGIBILITY_BASIS_REQUESTER, "you started the run and the ask is for the requester"
		if role, ok := strings.CutPrefix(row.Audience, "role:"); ok {
			basis, why = tollgatev1.EligibilityBasis_ELIGIBILITY_BASIS_ROLE, "you hold the role "+role
		}
		_, stop, _ := splitAskID(row.ID)
		out.Items = append(out.Items, &tollgatev1.InboxItem{Basis: basis, Why: why, Ask: &tollgatev1.AskSummary{
			Id: row.ID, RunId: row.RunID, StoppingPointId: stop, State: askStateToProto[engine.AskState(row.State)], Title: row.Title,
			Requester: row.Requester, Quorum: 1, CreatedAt: ts(row.CreatedAt), ExpiresAt: ts(row.ExpiresAt)}})
	}
	return out, nil
}

func (s *Services) loadAsk(ctx context.Context, id string) (*engine.Run, *engine.AskRun, error) {
	runID, stop, err := splitAskID(id)
	if err != nil {
		return nil, nil, err
	}
	run, _, err := s.cfg.Runner.Get(ctx, runID)
	if err != nil {
		return nil, nil, err
	}
	a, ok := run.Asks[stop]
	if !ok {
		return nil, nil, fmt.Errorf("ask %s: %w", id, errNotFound)
	}
	return run, a, nil
}

// GetAsk returns the whole decision packet and whether the caller may
// decide it.
func (s *Services) GetAsk(ctx context.Context, req *tollgatev1.GetAskRequest) (*tollgatev1.GetAskResponse, error) {
	who, err := caller(ctx)
	if err != nil {
		return nil, err
	}
	run, a, err := s.loadAsk(ctx, req.GetAskId())
	if err != nil {
		return nil, err
	}
	ok, why := s.mayDecide(who, run, a)
	if ok && a.State != engine.AskPending {
		ok, why = false, "it is "+string(a.State)
	}
	return &tollgatev1.GetAskResponse{Ask: askToProto(run, a, ""), MayDecide: ok, Why: why}, nil
}

// decidable loads an ask for the caller to act on: authenticated, allowed
// by its audience now (authority is checked at decision time, not when the
// ask was routed), and — when the caller says what they reviewed — still
// binding that exact payload (I6).
func (s *Services) decidable(ctx context.Context, askID, reviewed string) (string, *engine.Run, *engine.AskRun, error) {
	who, err := caller(ctx)
	if err != nil {
		return "", nil, nil, err
	}
	run, a, err := s.loadAsk(ctx, askID)
	if err != nil {
		return "", nil, nil, err
	}
	if ok, why := s.mayDecide(who, run, a); !ok {
		return "", nil, nil, fmt.Errorf("%s: %w", why, errDenied)
	}
	if reviewed != "" && reviewed != payloadDigest(a) {
		return "", nil, nil, fmt.Errorf("you reviewed %s, the ask now binds %s: %w", reviewed, payloadDigest(a), errStalePayload)
	}
	return who, run, a, nil
}

// Decide records a typed decision by the caller. Authority is checked now,
// at decision time; the deadline is checked by the engine and again by the
// store's commit.
func (s *Services) Decide(ctx context.Context, req *tollgatev1.DecideRequest) (*tollgatev1.DecideResponse, error) {
	who, run, a, err := s.decidable(ctx, req.GetAskId(), req.GetExpectedPayloadDigest())
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
		build = func(now time.Time) engine.Event {
			return engine.Decide{Ask: a.ID, Actor: who, Option: opt, Reason: d.Approve.GetReason(), At: now}
		}
	case *tollgatev1.DecideRequest_Reject:
		build = func(now time.Time) engine.Event {
			return engine.Decide{Ask: a.ID, Actor: who, Reject: true, Reason: d.Reject.GetReason(), At: now}
		}
	case *tollgatev1.DecideRequest_TextAnswer:
		if a.Type != plan.StopText {
			return nil, fmt.Errorf("%q is not a free-text question: %w", a.Title, errInvalid)
		}
		text := d.TextAnswer.GetText()
		if strings.TrimSpace(text) == "" {
			return nil, fmt.Errorf("the answer is empty: %w", errInvalid)
		}
		build = func(now time.Time) engine.Event {
			return engine.Answer{Ask: a.ID, Actor: who, Text: text, Literal: true, At: now}
		}
	case nil:
		return nil, fmt.Errorf("no decision given: %w", errInvalid)
	default:
		return nil, fmt.Errorf("%T decisions: %w", d, errUnimplemented)
	}
	tr, err := s.cfg.Runner.Event(ctx, run.ID, build)
	if err != nil {
		return nil, err
	}
	na := tr.Run.Asks[a.ID]
	out := &tollgatev1.DecideResponse{Ask: askToProto(tr.Run, na, ""), RunState: runStateToProto[tr.Run.State]}
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
	who, run, a, err := s.decidable(ctx, req.GetAskId(), req.GetExpectedPayloadDigest())
	if err != nil {
		return nil, err
	}
	tr, err := s.cfg.Runner.Event(ctx, run.ID, func(now time.Time) engine.Event {
		return engine.Answer{Ask: a.ID, Actor: who, Text: req.GetText(), At: now}
	})
	if err != nil {
		return nil, err
	}
	r := tr.Reply
	out := &tollgatev1.AnswerResponse{Kind: answerKindToProto[r.Kind], ResponseText: r.Message, SelectedOptionId: r.Option.ID,
		MissCount: int32(r.Misses), Ask: askSummary(tr.Run, tr.Run.Asks[a.ID], ""), RunState: runStateToProto[tr.Run.State]}
	if r.Kind == answer.Dropped {
		m, err := s.cfg.Runner.machine(ctx, tr.Run.PlanDigest)
		if err != nil {
			return nil, err
		}
		out.Report = report(m, run, tr.Run)
		out.ResponseText = r.Message + " " + out.Report.Text
	}
	return out, nil
}
