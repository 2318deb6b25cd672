package controlplane

import (
	"context"
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	tollgatev1 "github.com/tollgate-dev/tollgate/gen/tollgate/v1"
	"github.com/tollgate-dev/tollgate/internal/store/memstore"
	"github.com/tollgate-dev/tollgate/pkg/authz"
)

func approve(askID string) *tollgatev1.DecideRequest {
	return &tollgatev1.DecideRequest{AskId: askID, Decision: &tollgatev1.DecideRequest_Approve{Approve: &tollgatev1.Approve{}}}
}

func wantDenied(t *testing.T, who string, err error, reason string) {
	t.Helper()
	if status.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), reason) {
		t.Fatalf("%s: %v, want permission denied saying %q", who, err, reason)
	}
}

// vendor-payment under the dev policy: authority is checked at decision
// time, by policy, with separation of duties and limits (I9).
func TestVendorPaymentAuthority(t *testing.T) {
	e := newEnv(t, nil, echoTools())
	r := e.start("alice", "vendor-payment")
	askID := r.GetId() + "/ask_1"
	_, err := e.approvals("alice").Decide(bg, approve(askID))
	wantDenied(t, "alice approving her own payment", err, "separation of duties: alice is the requester")
	_, err = e.approvals("bob").Decide(bg, approve(askID))
	wantDenied(t, "bob approving 485000", err, "over what bob may approve")
	for _, who := range []string{"alice", "bob", "erin"} {
		inbox, err := e.approvals(who).ListAsks(bg, &tollgatev1.ListAsksRequest{})
		if err != nil || len(inbox.GetItems()) != 0 {
			t.Fatalf("%s may not decide it, so it is not in their inbox: %v %v", who, inbox.GetItems(), err)
		}
	}
	inbox, err := e.approvals("dave").ListAsks(bg, &tollgatev1.ListAsksRequest{})
	if err != nil || len(inbox.GetItems()) != 1 || !strings.Contains(inbox.GetItems()[0].GetWhy(), "limit 1000000 ≥ 485000 INR") {
		t.Fatalf("dave's inbox says why: %v %v", inbox.GetItems(), err)
	}
	resp, err := e.approvals("dave").Decide(bg, approve(askID))
	if err != nil {
		t.Fatal(err)
	}
	e.settle()
	if got := e.get("alice", r.GetId()).GetState(); got != tollgatev1.RunState_RUN_STATE_COMPLETE {
		t.Fatalf("after dave's approval: %v", got)
	}
	_ = resp
	// The journal names the authority and the policy version.
	var found bool
	for _, rec := range journal(t, e, r.GetId()) {
		if rec.GetKind() == "ask.decided" && rec.GetActor() == "dave" && strings.Contains(rec.GetPayloadJson(), "finance-1m") &&
			strings.Contains(rec.GetPayloadJson(), `"policy":"`) {
			found = true
		}
	}
	if !found {
		t.Fatal("the decision's journal record carries the authority and the policy version")
	}
}

// carol acts for dave only within her delegation's window; a changed
// policy file applies at the next decision.
func TestDelegationWindow(t *testing.T) {
	dir := t.TempDir()
	base, err := os.ReadFile("../../examples/policy.csv")
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	window := func(from, until time.Time) {
		text := strings.Replace(string(base), "g, carol, dave, acme, 2026-11-01T00:00:00Z, 2030-12-31T00:00:00Z",
			"g, carol, dave, acme, "+from.Format(time.RFC3339)+", "+until.Format(time.RFC3339), 1)
		if text == string(base) {
			t.Fatal("the dev policy no longer has carol's delegation line")
		}
		if err := os.WriteFile(filepath.Join(dir, "policy.csv"), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	window(now.Add(-48*time.Hour), now.Add(-24*time.Hour)) // over yesterday
	az, err := authz.New(authz.Config{PolicyPath: filepath.Join(dir, "policy.csv")})
	if err != nil {
		t.Fatal(err)
	}
	e := newEnvWith(t, az, echoTools())
	r := e.start("alice", "vendor-payment")
	askID := r.GetId() + "/ask_1"
	_, err = e.approvals("carol").Decide(bg, approve(askID))
	wantNotVisible(t, "carol after her window (nothing else makes alice's run hers to see)", err, r.GetId())
	window(now.Add(-time.Hour), now.Add(time.Hour))
	if err := az.Reload(); err != nil {
		t.Fatal(err)
	}
	resp, err := e.approvals("carol").Decide(bg, approve(askID))
	if err != nil {
		t.Fatalf("carol within her window: %v", err)
	}
	if d := resp.GetDecision(); d.GetActor() != "carol" {
		t.Fatalf("the decision is carol's: %v", d)
	}
}

// approvers: 2 of 3 — one person approving five times leaves it pending;
// a second distinct approver completes it.
func TestQuorumOfDistinctPeople(t *testing.T) {
	e := newEnv(t, nil, echoTools())
	resp, err := e.runs("alice").StartRun(bg, &tollgatev1.StartRunRequest{Source: &tollgatev1.StartRunRequest_Recipe{Recipe: `a: notes.search {"q": "x"}
ask member:
  store it?
  approvers: 2 of bob, carol, dave
b: notes.store {"text": "{a}"}
`}})
	if err != nil {
		t.Fatal(err)
	}
	e.settle()
	id := resp.GetRun().GetId()
	askID := ""
	for _, a := range e.get("alice", id).GetAsks() {
		askID = a.GetId()
	}
	if _, err := e.approvals("bob").Decide(bg, approve(askID)); err != nil {
		t.Fatal(err)
	}
	for range 4 {
		if _, err := e.approvals("bob").Decide(bg, approve(askID)); status.Code(err) != codes.FailedPrecondition {
			t.Fatalf("bob again: %v", err)
		}
	}
	_, err = e.approvals("alice").Decide(bg, approve(askID))
	wantDenied(t, "alice, not a named approver", err, "approvers are bob, carol, dave")
	e.settle()
	if st := e.get("alice", id).GetState(); st != tollgatev1.RunState_RUN_STATE_PARKED || e.exec.calls(id+"/b") != 0 {
		t.Fatalf("one person's approvals leave it pending: %v, store ran %d", st, e.exec.calls(id+"/b"))
	}
	if _, err := e.approvals("dave").Decide(bg, approve(askID)); err != nil {
		t.Fatal(err)
	}
	e.settle()
	if st := e.get("alice", id).GetState(); st != tollgatev1.RunState_RUN_STATE_COMPLETE || e.exec.calls(id+"/b") != 1 {
		t.Fatalf("two distinct approvals: %v, store ran %d", st, e.exec.calls(id+"/b"))
	}
}

// Amend within bounds: pay runs with the amended amount and the packet
// shows the new digest; out of bounds is refused.
func TestAmendThroughTheAPI(t *testing.T) {
	e := newEnv(t, nil, echoTools())
	r := e.start("alice", "vendor-payment")
	askID := r.GetId() + "/ask_1"
	before, err := e.approvals("dave").GetAsk(bg, &tollgatev1.GetAskRequest{AskId: askID})
	if err != nil {
		t.Fatal(err)
	}
	amend := func(v string) (*tollgatev1.DecideResponse, error) {
		return e.approvals("dave").Decide(bg, &tollgatev1.DecideRequest{AskId: askID, Decision: &tollgatev1.DecideRequest_Amend{Amend: &tollgatev1.Amend{Field: "amount", NewValueJson: v, Reason: "partial payment"}}})
	}
	if _, err := amend("500000"); status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "out of bounds 0..485000") {
		t.Fatalf("amend to 500000: %v", err)
	}
	if _, err := amend("400000.5"); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("amend to a fraction: %v", err)
	}
	resp, err := amend("400000")
	if err != nil {
		t.Fatal(err)
	}
	if d := resp.GetAsk().GetPayloadDigest(); d == "" || d == before.GetAsk().GetPayloadDigest() {
		t.Fatalf("the packet shows a new payload digest: %q (was %q)", d, before.GetAsk().GetPayloadDigest())
	}
	if _, err := e.approvals("dave").Decide(bg, &tollgatev1.DecideRequest{AskId: askID, ExpectedPayloadDigest: before.GetAsk().GetPayloadDigest(),
		Decision: &tollgatev1.DecideRequest_Approve{Approve: &tollgatev1.Approve{}}}); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("approving the digest reviewed before the amendment: %v", err)
	}
	if _, err := e.approvals("dave").Decide(bg, approve(askID)); err != nil {
		t.Fatal(err)
	}
	e.settle()
	run := e.get("alice", r.GetId())
	for _, s := range run.GetSteps() {
		if s.GetStepId() == "pay" && !strings.Contains(s.GetAttempts()[0].GetOutputJson(), `"amount":400000`) {
			t.Fatalf("pay ran with %s", s.GetAttempts()[0].GetOutputJson())
		}
	}
}

// Two control planes share a store and a policy file: a role revoked in
// the file is enforced by the other plane within a second.
func TestRevokedRoleReachesEveryReplica(t *testing.T) {
	dir := t.TempDir()
	base, err := os.ReadFile("../../examples/policy.csv")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "policy.csv")
	if err := os.WriteFile(path, base, 0o644); err != nil {
		t.Fatal(err)
	}
	st := memstore.New(memstore.Config{})
	var planes []*env
	for range 2 {
		az, err := authz.New(authz.Config{PolicyPath: path})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); _ = az.Watch(ctx) }()
		t.Cleanup(func() { cancel(); <-done })
		planes = append(planes, newEnvOn(t, st, az, echoTools()))
	}
	r := planes[0].start("alice", "vendor-payment")
	askID := r.GetId() + "/ask_1"
	if resp, err := planes[1].approvals("dave").GetAsk(bg, &tollgatev1.GetAskRequest{AskId: askID}); err != nil || !resp.GetMayDecide() {
		t.Fatalf("dave may decide before the change: %v %v", resp, err)
	}
	revoked := strings.Replace(string(base), "g, dave,  role:finance-1m,   acme, _, _\n", "", 1)
	if revoked == string(base) {
		t.Fatal("the dev policy no longer has dave's finance line")
	}
	// "Revoke on one plane": the operator edits the file the replicas share.
	if err := os.WriteFile(path, []byte(revoked), 0o644); err != nil {
		t.Fatal(err)
	}
	changed := time.Now()
	for {
		resp, err := planes[1].approvals("dave").GetAsk(bg, &tollgatev1.GetAskRequest{AskId: askID})
		if status.Code(err) == codes.NotFound {
			break // no longer his to decide, nor to see (api/readers.go)
		}
		if err != nil {
			t.Fatal(err)
		}
		if !resp.GetMayDecide() {
			break
		}
		if time.Since(changed) > time.Second {
			t.Fatal("a second after the revocation the other replica still lets dave decide")
		}
		<-time.After(20 * time.Millisecond)
	}
	t.Logf("the other replica denies %v after the change", time.Since(changed).Round(time.Millisecond))
	_, err = planes[1].approvals("dave").Decide(bg, approve(askID))
	wantNotVisible(t, "dave after the revocation", err, r.GetId())
}

// Freshness at consumption (I6): the vendor's bank account changes after
// the ask opened; the approval is not consumed, the ask goes stale saying
// what changed, and a new ask carries the new account. A change in a
// field that does not matter asks nothing.
func TestStaleApprovalThroughTheAPI(t *testing.T) {
	var mu sync.Mutex
	vendor := map[string]any{"bank_account": "DE00 2048", "status": "active", "phone": "+49 1"}
	tools := echoTools()
	tools["erp.get_vendor"] = func(json.RawMessage) (any, error) {
		mu.Lock()
		defer mu.Unlock()
		return maps.Clone(vendor), nil
	}
	set := func(k, v string) { mu.Lock(); vendor[k] = v; mu.Unlock() }
	e := newEnv(t, nil, tools)
	r := e.start("alice", "vendor-payment")
	askID := r.GetId() + "/ask_1"
	first, err := e.approvals("dave").GetAsk(bg, &tollgatev1.GetAskRequest{AskId: askID})
	if err != nil || first.GetAsk().GetResourceVersion() == "" || first.GetAsk().GetMaterialFields()["bank_account"] != `"DE00 2048"` {
		t.Fatalf("the packet carries the facts it was asked on: %v %v", first.GetAsk().GetMaterialFields(), err)
	}
	set("bank_account", "DE00 7731")
	if _, err := e.approvals("dave").Decide(bg, approve(askID)); err != nil {
		t.Fatal(err)
	}
	e.settle()
	stale, err := e.approvals("dave").GetAsk(bg, &tollgatev1.GetAskRequest{AskId: askID + "~1"})
	if err != nil || stale.GetAsk().GetState() != tollgatev1.AskState_ASK_STATE_STALE ||
		!strings.Contains(stale.GetAsk().GetStateReason(), "bank_account ending 2048 → ending 7731") {
		t.Fatalf("the old ask is stale and says what changed: %v %v", stale.GetAsk(), err)
	}
	if n := e.exec.calls(r.GetId() + "/pay"); n != 0 {
		t.Fatalf("pay was called %d times with the old account", n)
	}
	again, err := e.approvals("dave").GetAsk(bg, &tollgatev1.GetAskRequest{AskId: askID})
	if err != nil || again.GetAsk().GetState() != tollgatev1.AskState_ASK_STATE_PENDING || !strings.Contains(again.GetAsk().GetActions()[0].GetArgsJson(), "DE00 7731") {
		t.Fatalf("a new ask with the new account: %v %v", again.GetAsk(), err)
	}
	set("phone", "+49 2") // not a material field
	if _, err := e.approvals("dave").Decide(bg, approve(askID)); err != nil {
		t.Fatal(err)
	}
	e.settle()
	run := e.get("alice", r.GetId())
	if run.GetState() != tollgatev1.RunState_RUN_STATE_COMPLETE || e.exec.calls(r.GetId()+"/pay") != 1 {
		t.Fatalf("unchanged material facts: pay runs once: %v, %d calls", run.GetState(), e.exec.calls(r.GetId()+"/pay"))
	}
	var staleRecs int
	for _, rec := range journal(t, e, r.GetId()) {
		if rec.GetKind() == "ask.stale" {
			staleRecs++
		}
	}
	if staleRecs != 1 {
		t.Fatalf("one ask.stale record, got %d", staleRecs)
	}
}

// A standing approval approves the next matching ask by itself, naming
// itself; it is never wider than its granter's authority; after
// revocation the next ask waits for a person again.
func TestStandingApproval(t *testing.T) {
	e := newEnv(t, nil, echoTools())
	r1 := e.start("alice", "vendor-payment")
	until := timestamppb.New(time.Now().Add(time.Hour))
	grant := func(who, scope string) (*tollgatev1.DecideResponse, error) {
		return e.approvals(who).Decide(bg, &tollgatev1.DecideRequest{AskId: r1.GetId() + "/ask_1", Decision: &tollgatev1.DecideRequest_ApproveException{
			ApproveException: &tollgatev1.ApproveException{Until: until, Scope: scope, Reason: "monthly rent to V-1187"}}})
	}
	if _, err := grant("dave", "payments.pay vendor=V-1187 amount<=2000000"); status.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), "wider than your authority") {
		t.Fatalf("a scope above dave's limit: %v", err)
	}
	if _, err := grant("dave", "payments.pay vendor=V-1187"); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("an amount-bearing scope without a ceiling: %v", err)
	}
	if _, err := grant("dave", "payments.pay vendor=V-9 amount<=500000"); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("a scope that does not cover this ask: %v", err)
	}
	if _, err := grant("dave", "payments.pay vendor=V-1187 amount<=500000"); err != nil {
		t.Fatal(err)
	}
	e.settle()
	if st := e.get("alice", r1.GetId()).GetState(); st != tollgatev1.RunState_RUN_STATE_COMPLETE {
		t.Fatalf("the granting approval approves its own ask: %v", st)
	}
	list, err := e.approvals("bob").ListExceptions(bg, &tollgatev1.ListExceptionsRequest{})
	if err != nil || len(list.GetExceptions()) != 1 {
		t.Fatalf("listed: %v %v", list, err)
	}
	x := list.GetExceptions()[0]

	r2 := e.start("alice", "vendor-payment")
	e.settle()
	r2 = e.get("alice", r2.GetId())
	if r2.GetState() != tollgatev1.RunState_RUN_STATE_COMPLETE {
		t.Fatalf("the next matching ask approves itself: %v", r2.GetState())
	}
	ask, err := e.approvals("dave").GetAsk(bg, &tollgatev1.GetAskRequest{AskId: r2.GetId() + "/ask_1"})
	if err != nil {
		t.Fatal(err)
	}
	d := ask.GetAsk().GetDecisions()[0]
	if d.GetActor() != "dave" || !strings.Contains(d.GetAuthority(), "standing approval "+x.GetId()) {
		t.Fatalf("the automatic approval names the standing approval: %v", d)
	}

	if _, err := e.approvals("bob").RevokeException(bg, &tollgatev1.RevokeExceptionRequest{ExceptionId: x.GetId(), Reason: "r"}); err != nil {
		t.Fatalf("bob holds finance, so he may revoke it: %v", err)
	}
	if _, err := e.approvals("dave").RevokeException(bg, &tollgatev1.RevokeExceptionRequest{ExceptionId: x.GetId(), Reason: "again"}); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("revoking twice: %v", err)
	}
	r3 := e.start("alice", "vendor-payment")
	e.settle()
	if st := e.get("alice", r3.GetId()).GetState(); st != tollgatev1.RunState_RUN_STATE_PARKED {
		t.Fatalf("after revocation a person is asked again: %v", st)
	}
	all, _ := e.approvals("bob").ListExceptions(bg, &tollgatev1.ListExceptionsRequest{IncludeInactive: true})
	if len(all.GetExceptions()) != 1 || !all.GetExceptions()[0].GetRevoked() || all.GetExceptions()[0].GetRevokedBy() != "bob" {
		t.Fatalf("the revoked one stays listed with who revoked it: %v", all)
	}
}

// Request evidence, attach it, decide; delegate to someone eligible only;
// an earlier vote whose authority lapsed does not count toward a quorum.
func TestEvidenceDelegationAndLapsedVotes(t *testing.T) {
	dir := t.TempDir()
	base, err := os.ReadFile("../../examples/policy.csv")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "policy.csv")
	if err := os.WriteFile(path, base, 0o644); err != nil {
		t.Fatal(err)
	}
	az, err := authz.New(authz.Config{PolicyPath: path})
	if err != nil {
		t.Fatal(err)
	}
	e := newEnvWith(t, az, echoTools())
	resp, err := e.runs("alice").StartRun(bg, &tollgatev1.StartRunRequest{Source: &tollgatev1.StartRunRequest_Recipe{Recipe: `a: notes.search {"q": "x"}
ask member:
  store it?
  show: {a}
  approvers: 2 of bob, carol, dave
b: notes.store {"text": "{a}"}
`}})
	if err != nil {
		t.Fatal(err)
	}
	e.settle()
	id := resp.GetRun().GetId()
	askID := id + "/ask_1"
	dec := func(who string, d *tollgatev1.DecideRequest) (*tollgatev1.DecideResponse, error) {
		d.AskId = askID
		return e.approvals(who).Decide(bg, d)
	}
	if _, err := dec("carol", &tollgatev1.DecideRequest{Decision: &tollgatev1.DecideRequest_RequestEvidence{RequestEvidence: &tollgatev1.RequestEvidence{What: "the source"}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.approvals("bob").AttachEvidence(bg, &tollgatev1.AttachEvidenceRequest{AskId: askID, Artifacts: []*tollgatev1.EvidenceUpload{{Name: "s.txt", Content: []byte("s")}}}); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("only the requester attaches: %v", err)
	}
	att, err := e.approvals("alice").AttachEvidence(bg, &tollgatev1.AttachEvidenceRequest{AskId: askID, Artifacts: []*tollgatev1.EvidenceUpload{{Name: "s.txt", Content: []byte("source")}}})
	if err != nil || att.GetAsk().GetState() != tollgatev1.AskState_ASK_STATE_PENDING || len(att.GetAsk().GetEvidence()) != 2 || att.GetAsk().GetEvidenceDigest() == "" {
		t.Fatalf("pending again with the show: ref and the attachment: %v %v", att.GetAsk(), err)
	}
	// erin holds no role: carol cannot hand it to her; dave can take it.
	if _, err := dec("carol", &tollgatev1.DecideRequest{Decision: &tollgatev1.DecideRequest_Delegate{Delegate: &tollgatev1.Delegate{To: "erin", Reason: "away"}}}); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("delegating to someone policy does not allow: %v", err)
	}
	// bob approves; then bob loses the member role; dave's approval must
	// not complete the quorum with bob's lapsed vote.
	if _, err := dec("bob", approve("")); err != nil {
		t.Fatal(err)
	}
	revoked := strings.Replace(string(base), "g, bob,   role:member, acme, _, _\n", "", 1)
	if err := os.WriteFile(path, []byte(revoked), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := az.Reload(); err != nil {
		t.Fatal(err)
	}
	if _, err := dec("dave", approve("")); err != nil {
		t.Fatal(err)
	}
	e.settle()
	if n := e.exec.calls(id + "/b"); n != 0 {
		t.Fatalf("a lapsed vote counted toward the quorum: store ran %d times", n)
	}
	if _, err := dec("carol", approve("")); err != nil {
		t.Fatal(err)
	}
	e.settle()
	if n := e.exec.calls(id + "/b"); n != 1 {
		t.Fatalf("two current approvals: store ran %d times", n)
	}
	var withdrawn bool
	for _, r := range journal(t, e, id) {
		withdrawn = withdrawn || (r.GetKind() == "approval.revoked" && r.GetActor() == "policy" && strings.Contains(r.GetPayloadJson(), `"voter":"bob"`))
	}
	if !withdrawn {
		t.Fatal("the journal records bob's vote withdrawn by policy")
	}
}
