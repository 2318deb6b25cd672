package controlplane

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tollgate-dev/tollgate/client/gates"
	tollgatev1 "github.com/tollgate-dev/tollgate/gen/tollgate/v1"
	"github.com/tollgate-dev/tollgate/pkg/authz"
	"github.com/tollgate-dev/tollgate/pkg/engine"
)

const devPolicyFile = "/home/dev/.tollgate/dev/policy.csv"

func withPolicyFile(c *Config) { c.PolicyFile = devPolicyFile }

// payRecipe asks finance to pay with args (a JSON object, after an
// invoice lookup the args may refer to).
func payRecipe(args string) string {
	return "invoice: erp.get_invoice {\"id\":\"I-1\"}\nask finance:\n  pay the vendor?\npay: payments.pay " + args + "\n"
}

func startRecipe(e *env, user, key, src string) (*tollgatev1.Run, error) {
	resp, err := e.runs(user).StartRun(bg, &tollgatev1.StartRunRequest{RequestId: key, Source: &tollgatev1.StartRunRequest_Recipe{Recipe: src}})
	if err != nil {
		return nil, err
	}
	e.settle()
	return e.get(user, resp.GetRun().GetId()), nil
}

// Issue 16: a gate the policy in force leaves undecidable is refused
// when the run starts — with the reason and the fix or the rows to add,
// naming the policy file — and no run is made, so no ask parks.
func TestIssue16_UndecidableGateRefusedAtStart(t *testing.T) {
	e := newEnvOn(t, nil, devPolicy(t), echoTools(), withPolicyFile, withoutInputSchemas)
	for _, c := range []struct {
		what, args string
		want       []string
	}{
		{"args without a currency", `{"vendor":"V-1","invoice":"I-1","amount":90000,"bank_account":"X"}`,
			[]string{`"pay the vendor?" (ask_1) cannot be decided by anyone`, "missing currency for amount 90000", `add "currency": "INR" to its args`}},
		{"an amount over every limit", `{"vendor":"V-1","invoice":"I-1","amount":5000000,"currency":"INR","bank_account":"X"}`,
			[]string{"no role's limit reaches 5000000", devPolicyFile, "p, role:finance-1m, acme, payments.pay, 5000000", "alice is the requester"}},
	} {
		_, err := startRecipe(e, "alice", c.what, payRecipe(c.args))
		if status.Code(err) != codes.FailedPrecondition {
			t.Fatalf("%s: %v, want FAILED_PRECONDITION", c.what, err)
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: the refusal lacks %q:\n%v", c.what, w, err)
			}
		}
		if n := strings.Count(err.Error(), "cannot be decided by anyone"); n != 1 {
			t.Errorf("%s: said %d times: %v", c.what, n, err)
		}
	}
	runs, err := e.runs("alice").ListRuns(bg, &tollgatev1.ListRunsRequest{})
	if err != nil || len(runs.GetRuns()) != 0 {
		t.Fatalf("runs after refused starts: %v %v", runs.GetRuns(), err)
	}
	asks, err := e.approvals("bob").ListAsks(bg, &tollgatev1.ListAsksRequest{})
	if err != nil || len(asks.GetItems()) != 0 {
		t.Fatalf("asks after refused starts: %v %v", asks.GetItems(), err)
	}
	// The same payment with its currency starts and asks finance.
	run, err := startRecipe(e, "alice", "ok", payRecipe(`{"vendor":"V-1","invoice":"I-1","amount":90000,"currency":"INR","bank_account":"X"}`))
	if err != nil || run.GetState() != tollgatev1.RunState_RUN_STATE_PARKED {
		t.Fatalf("a payment finance may decide: %v %v", run.GetState(), err)
	}
}

// invoiceTools answer the invoice lookup with an amount, so a payment's
// amount is known only after the lookup ran.
func invoiceTools() map[string]func(json.RawMessage) (any, error) {
	tools := echoTools()
	tools["erp.get_invoice"] = func(json.RawMessage) (any, error) { return map[string]any{"amount": 90000}, nil }
	return tools
}

// deferredPay pays the invoice's amount, without a currency: nothing is
// wrong at the start (the amount is not known), and everything when the
// ask would open.
var deferredPay = payRecipe(`{"vendor":"V-1","invoice":"I-1","amount":"{invoice.amount}","bank_account":"X"}`)

// Issue 16: where the args are known only after earlier steps ran, the
// check runs again as the ask would open: nobody could decide it, so the
// run fails with the reason, and no ask is left for an approver to find.
func TestIssue16_UndecidableAskFailsTheRunAsItOpens(t *testing.T) {
	e := newEnvOn(t, nil, devPolicy(t), invoiceTools(), withPolicyFile, withoutInputSchemas)
	run, err := startRecipe(e, "alice", "k", deferredPay)
	if err != nil {
		t.Fatalf("a payment whose amount is not known yet starts: %v", err)
	}
	run = e.get("alice", run.GetId())
	if run.GetState() != tollgatev1.RunState_RUN_STATE_FAILED || !strings.Contains(run.GetStateReason(), "cannot be decided by anyone") ||
		!strings.Contains(run.GetStateReason(), "missing currency for amount 90000") {
		t.Fatalf("run: %v %q, want failed saying nobody could decide it and why", run.GetState(), run.GetStateReason())
	}
	asks, err := e.approvals("bob").ListAsks(bg, &tollgatev1.ListAsksRequest{})
	if err != nil || len(asks.GetItems()) != 0 {
		t.Fatalf("asks: %v %v, want none parked", asks.GetItems(), err)
	}
	if e.exec.calls(run.GetId()+"/pay") != 0 {
		t.Fatal("the payment ran")
	}
}

// Issue 16: an ask that could not be judged (here one opened without the
// check, as one opened before it existed) refuses its approver saying
// why once, not three times in one message.
func TestIssue16_UnjudgeableAskSaysWhyOnce(t *testing.T) {
	e := newEnvOn(t, nil, devPolicy(t), invoiceTools(), withoutInputSchemas, func(c *Config) {
		c.Engine.Undecidable = func(*engine.Run, *engine.AskRun) string { return "" }
	})
	run, err := startRecipe(e, "alice", "k", deferredPay)
	if err != nil || e.get("alice", run.GetId()).GetState() != tollgatev1.RunState_RUN_STATE_PARKED {
		t.Fatalf("start: %v", err)
	}
	_, err = e.approvals("bob").Decide(bg, approve(run.GetId()+"/ask_1"))
	wantDenied(t, "bob", err, "payments.pay cannot be judged: missing currency for amount 90000")
	if n := strings.Count(err.Error(), "missing currency"); n != 1 {
		t.Fatalf("said %d times: %v", n, err)
	}
}

// Issue 16: under the dev policy a gate from code with no row of its own
// (approvectl gate my-own-gate) falls under gate.* and goes to a
// reviewer, bob; its requester cannot decide it, nor route it to herself
// by naming an action she could decide (--action notes.store), nor name
// an action no policy floor governs.
func TestIssue16_GatesFromCodeUnderTheDevPolicy(t *testing.T) {
	e, _ := gateEnv(t)
	alice := gates.New(e.conn("alice"))
	d, err := alice.Gate(bg, "", "my-own-gate", gates.Options{Summary: "ship it?", RunName: "script", NoWait: true})
	if err != nil || d.Outcome != gates.Pending {
		t.Fatalf("my-own-gate: %+v %v", d, err)
	}
	ask := d.RunID + "/my-own-gate"
	wantDenied(t, "alice on her own gate", func() error { _, err := e.approvals("alice").Decide(bg, approve(ask)); return err }(), "separation of duties")
	if _, err := e.approvals("bob").Decide(bg, approve(ask)); err != nil {
		t.Fatalf("bob, a reviewer: %v", err)
	}

	g, err := alice.Gate(bg, d.RunID, "notes-gate", gates.Options{Summary: "store?", Action: "notes.store", NoWait: true})
	if err != nil || g.Outcome != gates.Pending {
		t.Fatalf("a gate --action notes.store: %+v %v", g, err)
	}
	wantDenied(t, "alice on her notes.store gate", func() error {
		_, err := e.approvals("alice").Decide(bg, approve(d.RunID+"/notes-gate"))
		return err
	}(), "separation of duties")
	inbox, err := e.approvals("alice").ListAsks(bg, &tollgatev1.ListAsksRequest{})
	if err != nil || len(inbox.GetItems()) != 0 {
		t.Fatalf("alice's inbox: %v %v, want empty", inbox.GetItems(), err)
	}
	inbox, err = e.approvals("bob").ListAsks(bg, &tollgatev1.ListAsksRequest{})
	if err != nil || len(inbox.GetItems()) != 1 || inbox.GetItems()[0].GetAsk().GetId() != d.RunID+"/notes-gate" {
		t.Fatalf("bob's inbox: %v %v, want the notes.store gate", inbox.GetItems(), err)
	}
	if _, err := e.runs("alice").CancelRun(bg, &tollgatev1.CancelRunRequest{RunId: d.RunID, Reason: "done"}); err != nil {
		t.Fatal(err)
	}

	ctx := bg
	for _, c := range []struct {
		what string
		opts gates.Options
		want string
	}{
		{"routed to herself", gates.Options{Summary: "s", Action: "notes.store", Approvers: []string{"alice"}, NoWait: true}, "of them 0 may decide"},
		{"an action no floor governs", gates.Options{Summary: "s", Action: "bank.wire", NoWait: true}, "no policy row covers bank.wire in acme"},
	} {
		_, err := alice.Gate(ctx, "", "self", c.opts)
		if status.Code(errors.Unwrap(err)) != codes.FailedPrecondition || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want FAILED_PRECONDITION saying %q", c.what, err, c.want)
		}
	}
}

// A start retried with its request_id after policy changed returns the run
// it started: the run was judged when it started; a retry is not a new
// start and is not refused by today's policy. A new request_id is judged
// by today's policy.
func TestRetriedStartIsNotJudgedAgain(t *testing.T) {
	src, err := os.ReadFile("../../examples/policy.csv")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "policy.csv")
	if err := os.WriteFile(path, src, 0o600); err != nil {
		t.Fatal(err)
	}
	az, err := authz.New(authz.Config{PolicyPath: path})
	if err != nil {
		t.Fatal(err)
	}
	e := newEnvOn(t, nil, az, echoTools(), withoutInputSchemas)
	recipe := payRecipe(`{"vendor":"V-1","invoice":"I-1","amount":90000,"currency":"INR","bank_account":"X"}`)
	first, err := startRecipe(e, "alice", "pay-1", recipe)
	if err != nil {
		t.Fatalf("first start: %v", err)
	}
	// Nobody may decide payments any more.
	var kept []string
	for _, line := range strings.Split(string(src), "\n") {
		if !strings.Contains(line, "payments.pay") {
			kept = append(kept, line)
		}
	}
	if err := os.WriteFile(path, []byte(strings.Join(kept, "\n")), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := az.Reload(); err != nil {
		t.Fatal(err)
	}
	again, err := startRecipe(e, "alice", "pay-1", recipe)
	if err != nil || again.GetId() != first.GetId() {
		t.Fatalf("retry after the policy changed: %v %v, want run %s", again.GetId(), err, first.GetId())
	}
	if _, err := startRecipe(e, "alice", "pay-2", recipe); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("a new start under the new policy: %v, want FAILED_PRECONDITION", err)
	}
}
