package e2e

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	tollgatev1 "github.com/tollgate-dev/tollgate/gen/tollgate/v1"
	"github.com/tollgate-dev/tollgate/internal/executor"
	"github.com/tollgate-dev/tollgate/internal/store/memstore"
	"github.com/tollgate-dev/tollgate/pkg/engine"
	"github.com/tollgate-dev/tollgate/pkg/grant"
)

// approvedSideEffect starts a run whose side effect w is approved by
// alice, and returns its id.
func approvedSideEffect(t *testing.T, w *world, ctx context.Context) (tollgatev1.RunServiceClient, string) {
	t.Helper()
	runs := tollgatev1.NewRunServiceClient(w.conn(t, "alice"))
	resp, err := runs.StartRun(ctx, &tollgatev1.StartRunRequest{Source: &tollgatev1.StartRunRequest_Recipe{Recipe: "ask me:\n  go?\nw: notes.store {\"text\": \"once\"}\nr: summarise {w}\n"}})
	if err != nil {
		t.Fatal(err)
	}
	id := resp.GetRun().GetId()
	waitRun(t, runs, id, state(tollgatev1.RunState_RUN_STATE_PARKED))
	approvals := tollgatev1.NewApprovalServiceClient(w.conn(t, "alice"))
	if err := approveAsShown(t, ctx, approvals, id+"/ask_1"); err != nil {
		t.Fatal(err)
	}
	return runs, id
}

// auditRun fails the test unless run id's invariants hold and its journal
// verifies.
func auditRun(t *testing.T, w *world, ctx context.Context, id string) {
	t.Helper()
	audit := tollgatev1.NewAuditServiceClient(w.conn(t, "alice"))
	inv, err := audit.CheckInvariants(ctx, &tollgatev1.CheckInvariantsRequest{RunId: id})
	if err != nil || len(inv.GetViolations()) != 0 {
		t.Fatalf("audit: %v %v", inv.GetViolations(), err)
	}
	if v, err := audit.VerifyJournal(ctx, &tollgatev1.VerifyJournalRequest{RunId: id}); err != nil || !v.GetOk() {
		t.Fatalf("verify journal: %v %v", v, err)
	}
}

// Review finding 3a: an executor refuses an approved side-effecting lease
// before acknowledging it (here it trusts another grant key, as a
// misconfigured executor does). Nothing ran, so this is no lost lease: the
// refusal is recorded, the step fails with the executor's reason and the
// run ends failed, instead of staying running with a handler waiting for
// an ack that never comes. No goroutine is left behind.
func TestExecutorRefusalBeforeAckFailsTheStep(t *testing.T) {
	// Not in parallel: goleak sees every goroutine of the process,
	// other tests\' too.
	before := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, before) }) // runs after the world's cleanups
	w := newWorld(t, "")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	otherPub, _, _ := ed25519.GenerateKey(rand.Reader)
	client := tollgatev1.NewExecutorServiceClient(w.execConn(t, "edge-x"))
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		_ = executor.Run(ctx, executor.Config{ID: "edge-x", Capacity: 16, Host: w.tools, Prose: executor.Template{},
			Grants: grant.NewVerifier(map[string]ed25519.PublicKey{"cp": otherPub}),
			Connect: func(ctx context.Context) (tollgatev1.ExecutorService_ConnectClient, error) {
				return client.Connect(ctx)
			}})
	}()
	runs, id := approvedSideEffect(t, w, ctx)
	r := waitRun(t, runs, id, func(r *tollgatev1.Run) bool { return terminal(r.GetState()) })
	if r.GetState() != tollgatev1.RunState_RUN_STATE_FAILED {
		t.Fatalf("run %v (%s), want failed", r.GetState(), r.GetStateReason())
	}
	why := stepMessages(r, "w")
	if !strings.Contains(why, "executor edge-x refused") || !strings.Contains(why, grant.ErrBadSignature.Error()) {
		t.Fatalf("step w fails with %q, want the executor's refusal (%q)", why, grant.ErrBadSignature)
	}
	if n := w.tools.Count("notes.store"); n != 0 {
		t.Fatalf("the refused effect ran %d times", n)
	}
	auditRun(t, w, ctx, id)
}

// Review finding 3b: the commit of an approved side effect's lease ack
// meets a store that is unavailable once. The lease is not offered again
// at the same fence (its grant is used: the executor would refuse it as
// reused, and the run would hang); the ack is recorded again while the
// executor holds the lease, and the effect runs exactly once.
func TestLeaseAckStoreBlipRunsSideEffectOnce(t *testing.T) {
	// Not in parallel: goleak sees every goroutine of the process,
	// other tests\' too.
	before := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, before) })
	for _, written := range []bool{false, true} {
		t.Run(map[bool]string{false: "lost", true: "written"}[written], func(t *testing.T) {
			st := &lossyStore{Store: memstore.New(memstore.Config{}), kind: string(engine.JournalStepLeased), written: written}
			w := newWorldOn(t, "", st)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			w.executor(t, ctx, "edge-1")
			runs, id := approvedSideEffect(t, w, ctx)
			r := waitRun(t, runs, id, func(r *tollgatev1.Run) bool { return terminal(r.GetState()) })
			if !st.fired.Load() {
				t.Fatal("the store never failed the lease's commit: the test tested nothing")
			}
			if r.GetState() != tollgatev1.RunState_RUN_STATE_COMPLETE {
				t.Fatalf("run %v (%s), want complete", r.GetState(), r.GetStateReason())
			}
			if n := w.tools.Count("notes.store"); n != 1 {
				t.Fatalf("the effect ran %d times, want 1", n)
			}
			auditRun(t, w, ctx, id)
		})
	}
}

// Review finding 3a with real processes: an executor binary configured
// with a grant key that is not the control plane's (the operator copied
// the wrong grant.pub) is leased an approved side effect. It refuses it
// before acking; the control plane records the refusal, the step fails
// with the executor's reason, the run ends failed, the mark never runs,
// and the audit is clean.
func TestExecutorWrongGrantKeyProcessFailsTheStep(t *testing.T) {
	t.Parallel()
	c := newClusterSpec(t, clusterSpec{later: []string{"edge-bad"}})
	other, _, _ := ed25519.GenerateKey(rand.Reader)
	der, err := x509.MarshalPKIXPublicKey(other)
	if err != nil {
		t.Fatal(err)
	}
	// startExecutor configures the executor with the key in grant.pub,
	// read once when it starts; the control plane signs with grant.key,
	// loaded already.
	if err := os.WriteFile(filepath.Join(c.home, "grant.pub"), pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), 0o644); err != nil {
		t.Fatal(err)
	}
	c.startExecutor("edge-bad", os.Stderr)
	id := c.start("m: test.mark {\"name\": \"refused\"} without asking\n")
	c.until(id, "failed", func(r runOut) bool { return r.State == "failed" })
	if why := c.stepErrors(id)["m"]; !strings.Contains(why, "executor edge-bad refused") || !strings.Contains(why, grant.ErrBadSignature.Error()) {
		t.Fatalf("step m fails with %q, want the executor's refusal (%q)", why, grant.ErrBadSignature)
	}
	if n := c.mark("refused"); n != 0 {
		t.Fatalf("the refused effect ran %d times", n)
	}
	c.audit()
}

// Review finding 3a, as a hostile (or broken) executor plays it over its
// own stream: it is leased an approved side effect, sends a Start with no
// Ack before it, then a refusal, then an Ack. The Start is answered not
// durable (nothing may run) instead of waiting for an ack that never came;
// the refusal is recorded (the step fails with it, the run ends) and
// answered with ResultAck; the late Ack records nothing.
func TestExecutorStartWithoutAckIsNotDurableAndRefusalEndsTheRun(t *testing.T) {
	// Not in parallel: goleak sees every goroutine of the process,
	// other tests\' too.
	before := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, before) })
	w := newWorld(t, "")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stream, err := tollgatev1.NewExecutorServiceClient(w.execConn(t, "edge-h")).Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	down := make(chan *tollgatev1.ControlMessage, 64)
	go func() {
		defer close(down)
		for {
			m, err := stream.Recv()
			if err != nil {
				return
			}
			down <- m
		}
	}()
	next := func(what string, pick func(*tollgatev1.ControlMessage) bool) *tollgatev1.ControlMessage {
		t.Helper()
		timeout := time.After(10 * time.Second)
		for {
			select {
			case m, ok := <-down:
				if !ok {
					t.Fatalf("the stream ended before %s", what)
				}
				if pick(m) {
					return m
				}
			case <-timeout:
				t.Fatalf("no %s within 10s", what)
			}
		}
	}
	send := func(m *tollgatev1.ExecutorMessage) {
		t.Helper()
		if err := stream.Send(m); err != nil {
			t.Fatal(err)
		}
	}
	send(&tollgatev1.ExecutorMessage{Message: &tollgatev1.ExecutorMessage_Hello{Hello: &tollgatev1.Hello{ExecutorId: "edge-h", CapacityCredits: 4,
		Tools: []*tollgatev1.Tool{{Server: "notes", Tool: "store", Annotations: &tollgatev1.ToolAnnotations{}}}}}})
	next("welcome", func(m *tollgatev1.ControlMessage) bool { return m.GetWelcome() != nil })

	runs := tollgatev1.NewRunServiceClient(w.conn(t, "alice"))
	resp, err := runs.StartRun(ctx, &tollgatev1.StartRunRequest{Source: &tollgatev1.StartRunRequest_Recipe{Recipe: "ask me:\n  go?\nw: notes.store {\"text\": \"once\"}\n"}})
	if err != nil {
		t.Fatal(err)
	}
	id := resp.GetRun().GetId()
	waitRun(t, runs, id, state(tollgatev1.RunState_RUN_STATE_PARKED))
	if err := approveAsShown(t, ctx, tollgatev1.NewApprovalServiceClient(w.conn(t, "alice")), id+"/ask_1"); err != nil {
		t.Fatal(err)
	}
	l := next("lease", func(m *tollgatev1.ControlMessage) bool { return m.GetLease() != nil }).GetLease()
	ref := func(lid string, fence uint64) bool { return lid == l.GetLeaseId() && fence == l.GetFence() }

	send(&tollgatev1.ExecutorMessage{Message: &tollgatev1.ExecutorMessage_Start{Start: &tollgatev1.Start{LeaseId: l.GetLeaseId(), Fence: l.GetFence()}}})
	sa := next("answer to a Start sent without an Ack", func(m *tollgatev1.ControlMessage) bool {
		return m.GetStartAck() != nil && ref(m.GetStartAck().GetLeaseId(), m.GetStartAck().GetFence())
	}).GetStartAck()
	if sa.GetDurable() {
		t.Fatal("a Start with no Ack before it was answered durable: the side effect may run")
	}

	send(&tollgatev1.ExecutorMessage{Message: &tollgatev1.ExecutorMessage_Result{Result: &tollgatev1.Result{LeaseId: l.GetLeaseId(), Fence: l.GetFence(),
		Outcome: &tollgatev1.Result_Refusal{Refusal: &tollgatev1.Refusal{Reason: tollgatev1.RefusalReason_REFUSAL_REASON_GRANT_BAD_SIGNATURE, Message: "no thanks"}}}}})
	next("ResultAck of the refusal", func(m *tollgatev1.ControlMessage) bool {
		return m.GetResultAck() != nil && ref(m.GetResultAck().GetLeaseId(), m.GetResultAck().GetFence())
	})
	send(&tollgatev1.ExecutorMessage{Message: &tollgatev1.ExecutorMessage_Ack{Ack: &tollgatev1.Ack{LeaseId: l.GetLeaseId(), Fence: l.GetFence()}}})

	r := waitRun(t, runs, id, func(r *tollgatev1.Run) bool { return terminal(r.GetState()) })
	if r.GetState() != tollgatev1.RunState_RUN_STATE_FAILED || !strings.Contains(r.GetStateReason()+stepMessages(r, "w"), "executor edge-h refused the lease before starting it: no thanks") {
		t.Fatalf("run %v (%s; w: %s), want failed with the refusal", r.GetState(), r.GetStateReason(), stepMessages(r, "w"))
	}
	if n := w.tools.Count("notes.store"); n != 0 {
		t.Fatalf("the effect ran %d times", n)
	}
	auditRun(t, w, ctx, id)
	_ = stream.CloseSend()
	cancel()
	for range down {
	}
}

// stepMessages joins the errors of step's attempts.
func stepMessages(r *tollgatev1.Run, step string) string {
	var why string
	for _, s := range r.GetSteps() {
		if s.GetStepId() == step {
			for _, a := range s.GetAttempts() {
				why += a.GetError().GetMessage()
			}
		}
	}
	return why
}
