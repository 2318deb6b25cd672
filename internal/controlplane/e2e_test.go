package controlplane

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	tollgatev1 "github.com/tollgate-dev/tollgate/gen/tollgate/v1"
	"github.com/tollgate-dev/tollgate/internal/store"
)

var bg = context.Background()

func stepState(r *tollgatev1.Run, id string) tollgatev1.StepStatus {
	for _, s := range r.GetSteps() {
		if s.GetStepId() == id {
			return s.GetState()
		}
	}
	return tollgatev1.StepStatus_STEP_STATUS_UNSPECIFIED
}

func TestRunParksAndAnApprovalContinuesTheSameRun(t *testing.T) {
	e := newEnv(t, nil, echoTools())
	r := e.start("alice", "graph-ask-demo")
	if r.GetState() != tollgatev1.RunState_RUN_STATE_PARKED {
		t.Fatalf("want parked, got %v (%s)", r.GetState(), r.GetStateReason())
	}
	askID := r.GetId() + "/ask_1"
	if !strings.Contains(r.GetResumeCommand(), "approvectl approve "+askID) {
		t.Fatalf("the run names the command that answers it: %q", r.GetResumeCommand())
	}
	// bob is not the requester, and the ask is alice's: to him it does
	// not exist (api/readers.go).
	_, err := e.approvals("bob").Decide(bg, &tollgatev1.DecideRequest{AskId: askID, Decision: &tollgatev1.DecideRequest_Approve{Approve: &tollgatev1.Approve{}}})
	if status.Code(err) != codes.NotFound {
		t.Fatalf("bob approving alice's ask: %v", err)
	}
	inbox, err := e.approvals("alice").ListAsks(bg, &tollgatev1.ListAsksRequest{})
	if err != nil || len(inbox.GetItems()) != 1 || inbox.GetItems()[0].GetAsk().GetId() != askID {
		t.Fatalf("alice's inbox: %v %v", inbox, err)
	}
	if other, _ := e.approvals("bob").ListAsks(bg, &tollgatev1.ListAsksRequest{}); len(other.GetItems()) != 0 {
		t.Fatal("bob's inbox must not list alice's ask")
	}
	packet, err := e.approvals("alice").GetAsk(bg, &tollgatev1.GetAskRequest{AskId: askID})
	if err != nil || !packet.GetMayDecide() || len(packet.GetAsk().GetActions()) != 1 || packet.GetAsk().GetActions()[0].GetServer() != "notes" {
		t.Fatalf("packet: %v %v", packet, err)
	}
	dec, err := e.approvals("alice").Decide(bg, &tollgatev1.DecideRequest{AskId: askID, ExpectedPayloadDigest: packet.GetAsk().GetPayloadDigest(),
		Decision: &tollgatev1.DecideRequest_Approve{Approve: &tollgatev1.Approve{OptionId: "1"}}})
	if err != nil {
		t.Fatal(err)
	}
	if d := dec.GetDecision(); d.GetActor() != "alice" || d.GetTime() == nil {
		t.Fatalf("the decision records the authenticated actor and time: %v", d)
	}
	e.settle()
	r = e.get("alice", r.GetId())
	if r.GetState() != tollgatev1.RunState_RUN_STATE_COMPLETE || stepState(r, "save") != tollgatev1.StepStatus_STEP_STATUS_SUCCEEDED {
		t.Fatalf("after approval the same run completes: %v %s", r.GetState(), r.GetStateReason())
	}
	audit, err := e.audit("alice").CheckInvariants(bg, &tollgatev1.CheckInvariantsRequest{})
	if err != nil || len(audit.GetViolations()) != 0 {
		t.Fatalf("audit: %v %v", audit, err)
	}
	v, err := e.audit("alice").VerifyJournal(bg, &tollgatev1.VerifyJournalRequest{})
	if err != nil || !v.GetOk() {
		t.Fatalf("journal: %v %v", v, err)
	}
}

// 1,000 concurrent approvals of one ask over gRPC: exactly one is
// consumed, every other caller is told "already decided", and the journal
// holds one decision.
func TestConcurrentApprovalsConsumeOnce(t *testing.T) {
	concurrentApprovals(t, newEnv(t, nil, echoTools()))
}

func concurrentApprovals(t *testing.T, e *env) {
	t.Helper()
	r := e.start("alice", "graph-ask-demo")
	askID := r.GetId() + "/ask_1"
	client := e.approvals("alice")
	const n = 1000
	var wg sync.WaitGroup
	codesSeen := make([]codes.Code, n)
	msgs := make([]string, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := client.Decide(bg, &tollgatev1.DecideRequest{AskId: askID, Decision: &tollgatev1.DecideRequest_Approve{Approve: &tollgatev1.Approve{}}})
			codesSeen[i] = status.Code(err)
			if err != nil {
				msgs[i] = status.Convert(err).Message()
			}
		}()
	}
	wg.Wait()
	e.settle()
	ok := 0
	for i, c := range codesSeen {
		switch {
		case c == codes.OK:
			ok++
		case c == codes.FailedPrecondition && strings.Contains(msgs[i], "already decided"):
		default:
			t.Fatalf("caller %d: %v %q", i, c, msgs[i])
		}
	}
	if ok != 1 {
		t.Fatalf("%d approvals succeeded, want exactly 1", ok)
	}
	recs, err := e.store.Journal(bg, r.GetId(), 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	decided, consumed := 0, 0
	for _, rec := range recs {
		switch rec.Kind {
		case "ask.decided":
			decided++
		case "approval.consumed":
			consumed++
		}
	}
	if decided != 1 || consumed != 1 {
		t.Fatalf("journal: %d decisions, %d consumptions; want 1 and 1", decided, consumed)
	}
	if n := e.exec.calls(r.GetId() + "/save"); n != 1 {
		t.Fatalf("save ran %d times", n)
	}
}

func TestNoExecutorMeansBlocked(t *testing.T) {
	e := newEnv(t, nil, nil)
	r := e.start("alice", "graph-ask-demo")
	if r.GetState() != tollgatev1.RunState_RUN_STATE_BLOCKED {
		t.Fatalf("nobody offers mcp-monitor: want blocked, got %v", r.GetState())
	}
}

func TestCancelClosesAsksAndAuditIsClean(t *testing.T) {
	e := newEnv(t, nil, echoTools())
	r := e.start("alice", "pr-review")
	if r.GetState() != tollgatev1.RunState_RUN_STATE_PARKED {
		t.Fatalf("%v", r.GetState())
	}
	if _, err := e.runs("bob").CancelRun(bg, &tollgatev1.CancelRunRequest{RunId: r.GetId()}); status.Code(err) != codes.NotFound {
		t.Fatalf("bob cancelling alice's run, which he may not see: %v", err)
	}
	if _, err := e.runs("otto").CancelRun(bg, &tollgatev1.CancelRunRequest{RunId: r.GetId()}); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("the operator, who sees the run, cancelling it: %v", err)
	}
	resp, err := e.runs("alice").CancelRun(bg, &tollgatev1.CancelRunRequest{RunId: r.GetId(), Reason: "wrong PR"})
	if err != nil {
		t.Fatal(err)
	}
	if resp.GetRun().GetState() != tollgatev1.RunState_RUN_STATE_CANCELLED || len(resp.GetReport().GetClosedAsks()) != 1 {
		t.Fatalf("%v %v", resp.GetRun().GetState(), resp.GetReport())
	}
	if !strings.Contains(resp.GetReport().GetText(), "Ran: claims, diff, pr") {
		t.Fatalf("the report says what ran: %q", resp.GetReport().GetText())
	}
	asks, _, err := e.store.ListAsks(bg, store.AskQuery{RunID: r.GetId(), States: []string{"pending"}})
	if err != nil || len(asks) != 0 {
		t.Fatalf("pending asks after cancel: %v %v", asks, err)
	}
	audit, err := e.audit("alice").CheckInvariants(bg, &tollgatev1.CheckInvariantsRequest{})
	if err != nil || len(audit.GetViolations()) != 0 {
		t.Fatalf("%v %v", audit, err)
	}
}

func TestAnswerScriptOverGRPC(t *testing.T) {
	e := newEnv(t, nil, echoTools())
	r := e.start("alice", "uml-diagram")
	askID := r.GetId() + "/kind"
	var kinds []tollgatev1.AnswerKind
	for _, text := range []string{"pick the right one", "did it run?", "help", "what now", "cancel"} {
		resp, err := e.approvals("alice").Answer(bg, &tollgatev1.AnswerRequest{AskId: askID, Text: text})
		if err != nil {
			t.Fatalf("%q: %v", text, err)
		}
		if resp.GetResponseText() == "" {
			t.Fatalf("%q: empty reply", text)
		}
		kinds = append(kinds, resp.GetKind())
		if resp.GetKind() == tollgatev1.AnswerKind_ANSWER_KIND_DROPPED && !strings.Contains(resp.GetResponseText(), "Ran: source") {
			t.Fatalf("dropping says what ran: %q", resp.GetResponseText())
		}
	}
	want := []tollgatev1.AnswerKind{tollgatev1.AnswerKind_ANSWER_KIND_NO_MATCH, tollgatev1.AnswerKind_ANSWER_KIND_NO_MATCH,
		tollgatev1.AnswerKind_ANSWER_KIND_ESCAPE_HINT, tollgatev1.AnswerKind_ANSWER_KIND_ESCAPE_HINT, tollgatev1.AnswerKind_ANSWER_KIND_DROPPED}
	for i := range want {
		if kinds[i] != want[i] {
			t.Fatalf("kinds %v", kinds)
		}
	}
	if got := e.get("alice", r.GetId()).GetState(); got != tollgatev1.RunState_RUN_STATE_CANCELLED {
		t.Fatalf("%v", got)
	}
}

func TestRoleAskNeedsTheRole(t *testing.T) {
	e := newEnv(t, nil, echoTools())
	r := e.start("alice", "vendor-payment")
	askID := r.GetId() + "/ask_1"
	for _, who := range []string{"alice", "bob"} {
		if _, err := e.approvals(who).Decide(bg, &tollgatev1.DecideRequest{AskId: askID, Decision: &tollgatev1.DecideRequest_Approve{Approve: &tollgatev1.Approve{}}}); status.Code(err) != codes.PermissionDenied {
			t.Fatalf("%s is not in finance: %v", who, err)
		}
	}
	inbox, _ := e.approvals("carol").ListAsks(bg, &tollgatev1.ListAsksRequest{})
	if len(inbox.GetItems()) != 1 || !strings.Contains(inbox.GetItems()[0].GetWhy(), "finance") {
		t.Fatalf("carol's inbox: %v", inbox)
	}
	if _, err := e.approvals("carol").Decide(bg, &tollgatev1.DecideRequest{AskId: askID, Decision: &tollgatev1.DecideRequest_Approve{Approve: &tollgatev1.Approve{}}}); err != nil {
		t.Fatal(err)
	}
	e.settle()
	r = e.get("alice", r.GetId())
	if r.GetState() != tollgatev1.RunState_RUN_STATE_COMPLETE {
		t.Fatalf("%v %s", r.GetState(), r.GetStateReason())
	}
	for _, s := range r.GetSteps() {
		if s.GetStepId() == "pay" {
			var out map[string]any
			_ = json.Unmarshal([]byte(s.GetAttempts()[0].GetOutputJson()), &out)
			if !strings.Contains(s.GetAttempts()[0].GetOutputJson(), `"bank_account"`) {
				t.Fatalf("pay ran with the resolved bank account: %s", s.GetAttempts()[0].GetOutputJson())
			}
		}
	}
}

func TestUnauthenticatedIsRefusedOnUnaryAndStream(t *testing.T) {
	e := newEnv(t, nil, echoTools())
	r := e.start("alice", "graph-ask-demo")
	if _, err := e.runs("").GetRun(bg, &tollgatev1.GetRunRequest{RunId: r.GetId()}); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("unary without a token: %v", err)
	}
	stream, err := e.runs("").WatchRun(bg, &tollgatev1.WatchRunRequest{RunId: r.GetId()})
	if err == nil {
		_, err = stream.Recv()
	}
	if status.Code(err) != codes.Unauthenticated {
		t.Fatalf("stream without a token: %v", err)
	}
	// With a token the stream starts with a snapshot.
	stream, err = e.runs("alice").WatchRun(bg, &tollgatev1.WatchRunRequest{RunId: r.GetId()})
	if err != nil {
		t.Fatal(err)
	}
	ev, err := stream.Recv()
	if err != nil || ev.GetEvent().GetKind() != tollgatev1.RunEventKind_RUN_EVENT_KIND_SNAPSHOT {
		t.Fatalf("%v %v", ev, err)
	}
}

func TestStartIsIdempotentPerRequestID(t *testing.T) {
	e := newEnv(t, nil, echoTools())
	req := &tollgatev1.StartRunRequest{RequestId: "req-1", Source: &tollgatev1.StartRunRequest_Skill{Skill: "graph-ask-demo"}}
	a, err := e.runs("alice").StartRun(bg, req)
	if err != nil || !a.GetCreated() {
		t.Fatalf("%v %v", a, err)
	}
	b, err := e.runs("alice").StartRun(bg, req)
	if err != nil || b.GetCreated() || b.GetRun().GetId() != a.GetRun().GetId() {
		t.Fatalf("the same request id must return the same run: %v %v", b, err)
	}
	c, err := e.runs("bob").StartRun(bg, req)
	if err != nil || c.GetRun().GetId() == a.GetRun().GetId() {
		t.Fatalf("request ids are scoped to the requester: %v", err)
	}
	e.settle()
}

// I6 at the API: an approval binds the payload the approver reviewed.
func TestApprovalBindsTheReviewedPayload(t *testing.T) {
	e := newEnv(t, nil, echoTools())
	r := e.start("alice", "graph-ask-demo")
	_, err := e.approvals("alice").Decide(bg, &tollgatev1.DecideRequest{AskId: r.GetId() + "/ask_1", ExpectedPayloadDigest: "sha256:something-else",
		Decision: &tollgatev1.DecideRequest_Approve{Approve: &tollgatev1.Approve{}}})
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "does not match the ask's") { // a digest it never bound: not "changed" (issue 16)
		t.Fatalf("approving another payload: %v", err)
	}
	if got := e.get("alice", r.GetId()); got.GetState() != tollgatev1.RunState_RUN_STATE_PARKED {
		t.Fatalf("nothing ran: %v", got.GetState())
	}
}

// I1: `without asking` is allowed only where policy lets the starter
// approve the action; otherwise the start is refused and nothing runs.
func TestWithoutAskingNeedsPolicy(t *testing.T) {
	e := newEnv(t, nil, echoTools())
	start := func(who, recipe string) error {
		_, err := e.runs(who).StartRun(bg, &tollgatev1.StartRunRequest{Source: &tollgatev1.StartRunRequest_Recipe{Recipe: recipe}})
		return err
	}
	for _, tc := range []struct{ who, recipe, why string }{
		{"alice", `w: payments.pay {"vendor": "V", "invoice": "I", "amount": 5, "currency": "INR", "bank_account": "X"} without asking` + "\n", "separation of duties"},
		{"erin", `w: notes.store {"text":"x"} without asking` + "\n", "erin holds no role"},
	} {
		if err := start(tc.who, tc.recipe); status.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), tc.why) {
			t.Fatalf("%s: want permission denied (%s): %v", tc.who, tc.why, err)
		}
	}
	runs, _, _ := e.store.ListRuns(bg, store.RunQuery{})
	if len(runs) != 0 {
		t.Fatal("no run was created")
	}
	// Args that read an earlier step are not known at the start: the
	// compiler refuses them, with where and the fix, before policy is asked.
	err := start("alice", "a: notes.search {}\nw: notes.store {\"text\":\"{a}\"} without asking\n")
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "2:25") || !strings.Contains(err.Error(), "not known at the start") || !strings.Contains(err.Error(), "remove `without asking`") {
		t.Fatalf("want the compiler's refusal at 2:25: %v", err)
	}
	runs, _, _ = e.store.ListRuns(bg, store.RunQuery{})
	if len(runs) != 0 {
		t.Fatal("no run was created")
	}
	// Policy lets a member approve their own notes.
	if err := start("alice", `w: notes.store {"text":"x"} without asking`+"\n"); err != nil {
		t.Fatalf("alice may store her own note unasked: %v", err)
	}
	// The run's inputs are known at the start: judged with them put in,
	// and the step runs with them.
	r, err := e.runs("alice").StartRun(bg, &tollgatev1.StartRunRequest{Source: &tollgatev1.StartRunRequest_Recipe{Recipe: `w: notes.store {"text":"for {who}"} without asking` + "\n"},
		Inputs: map[string]string{"who": "bob"}})
	if err != nil {
		t.Fatalf("a without-asking step may read the run's inputs: %v", err)
	}
	e.settle()
	if got := e.get("alice", r.GetRun().GetId()); got.GetState() != tollgatev1.RunState_RUN_STATE_COMPLETE {
		t.Fatalf("the step ran: %v", got.GetState())
	}
}
