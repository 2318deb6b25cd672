package controlplane

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	tollgatev1 "github.com/tollgate-dev/tollgate/gen/tollgate/v1"
	"github.com/tollgate-dev/tollgate/pkg/authz"
	"github.com/tollgate-dev/tollgate/pkg/engine"
	"github.com/tollgate-dev/tollgate/pkg/plan"
)

// Item 3: decision-time authority is one function. This table is every
// decision kind against every type of ask the engine opens, with the
// authority each needs. It is checked against requirement, and it must
// be complete: a decision kind (decisionKinds) or ask type
// (engine.AskTypes) added without a row here fails the test.
func TestItem3_EveryDecisionKindAgainstEveryAskType(t *testing.T) {
	const (
		P  = needPolicy
		RP = needRequesterOrPolicy
		NA = notApplicable
	)
	types := []plan.StopType{plan.StopMenu, plan.StopChoice, plan.StopText, engine.Gate, engine.InDoubt}
	table := map[decisionKind][]need{
		//                        menu choice text gate in_doubt
		decideApprove:         {P, P, NA, P, NA},
		decideReject:          {P, P, P, P, NA},
		decideAmend:           {P, P, P, P, NA},
		decideRequestEvidence: {P, P, P, P, NA},
		decideDelegate:        {P, P, P, P, NA},
		decideException:       {P, NA, NA, NA, NA},
		decideStanding:        {P, NA, NA, NA, NA},
		decideRevoke:          {P, P, P, P, NA},
		decideTextAnswer:      {NA, NA, P, NA, NA},
		decideReply:           {P, P, P, P, RP},
		decideRetry:           {NA, NA, NA, NA, P},
		decideItRan:           {NA, NA, NA, NA, RP},
		decideStop:            {NA, NA, NA, NA, RP},
	}
	if got := engine.AskTypes(); !slices.Equal(got, types) {
		t.Fatalf("the engine opens asks of types %v; this table has columns %v: add a column (and a row entry per kind)", got, types)
	}
	for _, k := range decisionKinds() {
		row, ok := table[k]
		if !ok {
			t.Errorf("decision kind %q has no row: say what authority it needs on each ask type", k)
			continue
		}
		for i, ty := range types {
			if got := requirement(k, ty); got != row[i] {
				t.Errorf("%s on a %s ask: requirement says %q, the table %q", k, ty, got, row[i])
			}
		}
	}
	for k := range table {
		if !slices.Contains(decisionKinds(), k) {
			t.Errorf("row %q is not a decision kind the code knows", k)
		}
	}
	// Unknown types and kinds are nobody's to decide.
	if requirement(decideApprove, "mystery") != NA || requirement("mystery", plan.StopMenu) != NA {
		t.Error("an unknown ask type or decision kind must not be decidable")
	}
	// Approving kinds bind payload and evidence (I6).
	for _, k := range decisionKinds() {
		want := k == decideApprove || k == decideException || k == decideRetry
		if k.approves() != want {
			t.Errorf("%s approves() = %v", k, k.approves())
		}
	}
}

// Every decision the API accepts (each field of DecideRequest's oneof,
// and each in-doubt option) maps to a decision kind: a new one added to
// the proto without a kind fails here (Decide refuses what it cannot
// judge).
func TestItem3_EveryDecideRequestHasAKind(t *testing.T) {
	oneof := (&tollgatev1.DecideRequest{}).ProtoReflect().Descriptor().Oneofs().ByName("decision")
	if oneof == nil {
		t.Fatal("DecideRequest has no oneof decision")
	}
	asks := []*engine.AskRun{
		{Type: plan.StopMenu, Options: []plan.Option{{ID: "1", Label: "Yes"}, {ID: "2", Label: "No"}}},
		{Type: engine.InDoubt, Options: []plan.Option{{ID: engine.DoubtRetry, Label: "retry"}, {ID: engine.DoubtRan, Label: "it ran"}, {ID: engine.DoubtStop, Label: "stop"}}},
	}
	fields := oneof.Fields()
	for i := range fields.Len() {
		f := fields.Get(i)
		typed := &tollgatev1.DecideRequest{}
		m := typed.ProtoReflect()
		m.Set(f, m.NewField(f))
		for _, a := range asks {
			if k := decisionOf(typed, a); k == "" {
				t.Errorf("DecideRequest.%s on a %s ask has no decision kind", f.Name(), a.Type)
			}
		}
	}
	if k := askDecisionKind(asks[1], engine.DoubtRetry); k != decideRetry {
		t.Errorf("retry is %s", k)
	}
	if k := askDecisionKind(asks[1], engine.DoubtRan); k != decideItRan {
		t.Errorf("it ran is %s", k)
	}
	if k := askDecisionKind(asks[1], engine.DoubtStop); k != decideStop {
		t.Errorf("stop is %s", k)
	}
	if k := askDecisionKind(asks[0], "2"); k != decideReject {
		t.Errorf("a gate's No is %s", k)
	}
}

// Item 2 at the function: on an in-doubt ask about a payment alice
// requested (finance, separated from the requester), retrying needs the
// approvers' authority — alice may not, bob (finance up to 100,000) may,
// mallory (in no policy row) may not — while "it ran" and "stop" are the
// requester's to say as well.
func TestItem2_InDoubtAuthorityAtDecisionTime(t *testing.T) {
	s := NewServices(ServiceConfig{Authority: devPolicy(t), Domain: "acme"})
	run := &engine.Run{ID: "r", Requester: "alice"}
	args := plan.Object(`{"vendor":"V-1","invoice":"I-1","amount":5000,"currency":"INR","bank_account":"X"}`)
	a := &engine.AskRun{ID: "doubt_pay_1", Type: engine.InDoubt, Step: "pay", Audience: "finance",
		Payload: []engine.Payload{{Step: "pay", Server: "payments", Tool: "pay", Args: args}}}
	cases := []struct {
		who  string
		kind decisionKind
		ok   bool
	}{
		{"alice", decideRetry, false}, {"bob", decideRetry, true}, {"mallory", decideRetry, false},
		{"alice", decideItRan, true}, {"alice", decideStop, true}, {"bob", decideItRan, true}, {"mallory", decideItRan, false},
		{"alice", decideApprove, false},
	}
	for _, c := range cases {
		auth, err := s.authorize(context.Background(), c.who, run, a, c.kind)
		if err != nil || auth.ok != c.ok {
			t.Errorf("%s %s: ok=%v (%s) err=%v, want ok=%v", c.who, c.kind, auth.ok, auth.why, err, c.ok)
		}
	}
}

// Item 1 at the function: a gate is judged under gate.NAME, and an action
// its requester adds must hold as well — never instead.
func TestItem1_GateActionOnlyRaisesTheBar(t *testing.T) {
	s := NewServices(ServiceConfig{Authority: devPolicy(t), Domain: "acme"})
	run := &engine.Run{ID: "r", Requester: "alice", External: true}
	args := plan.Object(`{"artifacts":{}}`)
	gate := func(also ...string) *engine.AskRun {
		return &engine.AskRun{ID: "claims", Type: engine.Gate, Audience: "reviewer", Also: also,
			Payload: []engine.Payload{{Step: "claims", Server: "gate", Tool: "claims", Args: args}}}
	}
	for _, c := range []struct {
		who  string
		also []string
		ok   bool
	}{
		{"alice", nil, false}, {"alice", []string{"notes.store"}, false}, {"bob", nil, true}, {"bob", []string{"notes.store"}, true},
		{"bob", []string{"payments.pay"}, false}, // bob is a reviewer, but payments.pay needs an amount he can approve
	} {
		auth, err := s.authorize(context.Background(), c.who, run, gate(c.also...), decideApprove)
		if auth.ok != c.ok {
			t.Errorf("%s on claims also %v: ok=%v (%s) %v, want %v", c.who, c.also, auth.ok, auth.why, err, c.ok)
		}
	}
	// Opening: the gate's own action is fixed, whatever the request says.
	ev, err := s.gateEvent(context.Background(), "alice", &tollgatev1.OpenGateRequest{Gate: "claims", Summary: "s", Action: "notes.store"})
	if err != nil || ev.Server+"."+ev.Tool != "gate.claims" || fmt.Sprint(ev.Also) != "[notes.store]" {
		t.Fatalf("open claims naming notes.store: %s.%s also %v, %v", ev.Server, ev.Tool, ev.Also, err)
	}
	if _, err := s.gateEvent(context.Background(), "alice", &tollgatev1.OpenGateRequest{Gate: "anything", Summary: "s", Action: "notes.store"}); err == nil || !strings.Contains(err.Error(), "gate.anything") {
		t.Fatalf("a gate no policy names, opened under notes.store: %v", err)
	}
}

// Item 5: every approving decision binds the evidence its decider was
// shown. On vendor-payment (evidence: the vendor record), dave approving
// with an all-zero evidence digest, or with none, is refused in the style
// of the payload check — by Decide approve, by approve with a standing
// approval, and by an Answer that selects Yes; with the digest he was
// shown it is approved. Rejecting needs no digest.
func TestItem5_ApprovalsBindTheEvidenceShown(t *testing.T) {
	e := newEnv(t, nil, echoTools())
	r := e.start("alice", "vendor-payment")
	askID := r.GetId() + "/ask_1"
	dave := e.rawApprovals("dave")
	packet, err := dave.GetAsk(bg, &tollgatev1.GetAskRequest{AskId: askID})
	if err != nil {
		t.Fatal(err)
	}
	shown := packet.GetAsk().GetEvidenceDigest()
	if shown == "" {
		t.Fatal("vendor-payment's ask shows evidence")
	}
	zero := "sha256:" + strings.Repeat("0", 64)
	pd := packet.GetAsk().GetPayloadDigest() // the payload as shown: this test is of the evidence
	until := timestamppb.New(time.Now().Add(24 * time.Hour))
	for name, req := range map[string]*tollgatev1.DecideRequest{
		"approve, zero evidence": {AskId: askID, ExpectedPayloadDigest: pd, ExpectedEvidenceDigest: zero, Decision: &tollgatev1.DecideRequest_Approve{Approve: &tollgatev1.Approve{}}},
		"approve, no evidence":   {AskId: askID, ExpectedPayloadDigest: pd, Decision: &tollgatev1.DecideRequest_Approve{Approve: &tollgatev1.Approve{}}},
		"exception, zero evidence": {AskId: askID, ExpectedPayloadDigest: pd, ExpectedEvidenceDigest: zero, Decision: &tollgatev1.DecideRequest_ApproveException{ApproveException: &tollgatev1.ApproveException{
			Until: until, Scope: "payments.pay vendor=V-1187 amount<=500000", Reason: "monthly"}}},
	} {
		_, err := dave.Decide(bg, req)
		if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "the ask now shows "+shown) {
			t.Fatalf("%s: %v, want FAILED_PRECONDITION naming %s", name, err, shown)
		}
	}
	if _, err := dave.Answer(bg, &tollgatev1.AnswerRequest{AskId: askID, Text: "1", ExpectedPayloadDigest: pd, ExpectedEvidenceDigest: zero}); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("an answer selecting Yes with a zero evidence digest: %v", err)
	}
	if a, _ := dave.GetAsk(bg, &tollgatev1.GetAskRequest{AskId: askID}); a.GetAsk().GetState() != tollgatev1.AskState_ASK_STATE_PENDING {
		t.Fatalf("refused approvals left it %v", a.GetAsk().GetState())
	}
	if _, err := dave.Decide(bg, &tollgatev1.DecideRequest{AskId: askID, ExpectedPayloadDigest: pd, ExpectedEvidenceDigest: shown, Decision: &tollgatev1.DecideRequest_Approve{Approve: &tollgatev1.Approve{}}}); err != nil {
		t.Fatalf("the evidence dave was shown: %v", err)
	}
}

// Item 1: a policy pattern (gate.*) covers gates without rows of their
// own, and the gate is still decided under it, not under what the
// requester names.
func TestItem1_GatePolicyByPattern(t *testing.T) {
	path := filepath.Join(t.TempDir(), "policy.csv")
	pol := "p, role:reviewer, acme, gate.*, -\np2, acme, gate.*, 1, requester, -\np, role:member, acme, notes.store, -\np2, acme, notes.store, 1, none, -\n" +
		"g, alice, role:reviewer, acme, _, _\ng, bob, role:reviewer, acme, _, _\ng, alice, role:member, acme, _, _\ng, bob, role:member, acme, _, _\n"
	if err := os.WriteFile(path, []byte(pol), 0o600); err != nil {
		t.Fatal(err)
	}
	az, err := authz.New(authz.Config{PolicyPath: path})
	if err != nil {
		t.Fatal(err)
	}
	s := NewServices(ServiceConfig{Authority: az, Domain: "acme"})
	ev, err := s.gateEvent(context.Background(), "alice", &tollgatev1.OpenGateRequest{Gate: "release-42", Summary: "s", Action: "notes.store"})
	if err != nil || ev.Audience != "reviewer" {
		t.Fatalf("a gate under gate.*: audience %q, %v", ev.Audience, err)
	}
	run := &engine.Run{ID: "r", Requester: "alice", External: true}
	a := &engine.AskRun{ID: ev.Gate, Type: engine.Gate, Audience: ev.Audience, Also: ev.Also,
		Payload: []engine.Payload{{Step: ev.Gate, Server: ev.Server, Tool: ev.Tool, Args: plan.Object(`{}`)}}}
	if auth, _ := s.authorize(context.Background(), "alice", run, a, decideApprove); auth.ok {
		t.Fatalf("alice approved her own gate under gate.*: %s", auth.why)
	}
	if auth, err := s.authorize(context.Background(), "bob", run, a, decideApprove); !auth.ok {
		t.Fatalf("bob, a reviewer, under gate.*: %s %v", auth.why, err)
	}
}
