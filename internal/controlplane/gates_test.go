package controlplane

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tollgate-dev/tollgate/client/gates"
	tollgatev1 "github.com/tollgate-dev/tollgate/gen/tollgate/v1"
	"github.com/tollgate-dev/tollgate/pkg/freshness"
	"github.com/tollgate-dev/tollgate/pkg/grant"
)

func gateEnv(t *testing.T) (*env, ed25519.PublicKey) {
	t.Helper()
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	e := newEnvOn(t, nil, devPolicy(t), nil, func(c *Config) { c.SigningKey, c.KeyID = priv, "grant" })
	return e, pub
}

// A gate from code through the Go client: it blocks until a person with
// authority decides; the script's identity cannot approve its own gate
// (separation of duties under the dev policy); the approval yields a grant
// that verifies for the gate's exact payload, once.
func TestGateBlocksUntilDecided(t *testing.T) {
	e, pub := gateEnv(t)
	alice := gates.New(e.conn("alice"))
	alice.Retry = 10 * time.Millisecond
	artifact := []byte("claim 1: the report says X\n")
	type got struct {
		d   gates.Decision
		err error
	}
	done := make(chan got, 1)
	waiting := make(chan gates.Decision, 8)
	go func() {
		d, err := alice.Gate(bg, "", "claims", gates.Options{Summary: "Are these the claims?", RunName: "claims-review",
			Artifacts: []gates.Artifact{{Name: "claims.txt", Content: artifact}},
			Progress: func(d gates.Decision) {
				// Never block the client: it reports every change of the run.
				select {
				case waiting <- d:
				default:
				}
			}})
		done <- got{d, err}
	}()
	w := <-waiting
	if w.Outcome != gates.Pending || w.RunID == "" {
		t.Fatalf("waiting: %+v", w)
	}
	run := e.get("bob", w.RunID)
	if run.GetState() != tollgatev1.RunState_RUN_STATE_PARKED || !run.GetExternal() {
		t.Fatalf("run while the gate waits: %v external=%v", run.GetState(), run.GetExternal())
	}
	askID := w.RunID + "/claims"
	packet, err := e.approvals("bob").GetAsk(bg, &tollgatev1.GetAskRequest{AskId: askID})
	if err != nil {
		t.Fatal(err)
	}
	if k := packet.GetAsk().GetKind(); k != tollgatev1.AskKind_ASK_KIND_GATE || len(packet.GetAsk().GetEvidence()) != 1 ||
		packet.GetAsk().GetEvidence()[0].GetDigest() != freshness.ContentDigest(artifact) {
		t.Fatalf("packet: kind %v evidence %v", k, packet.GetAsk().GetEvidence())
	}
	decide := func(who string) error {
		_, err := e.approvals(who).Decide(bg, &tollgatev1.DecideRequest{AskId: askID, ExpectedPayloadDigest: packet.GetAsk().GetPayloadDigest(),
			ExpectedEvidenceDigest: packet.GetAsk().GetEvidenceDigest(),
			Decision:               &tollgatev1.DecideRequest_Approve{Approve: &tollgatev1.Approve{OptionId: "1"}}})
		return err
	}
	wantDenied(t, "alice approving her own gate", decide("alice"), "separation of duties")
	wantNotVisible(t, "carol, no reviewer", decide("carol"), w.RunID)
	select {
	case g := <-done:
		t.Fatalf("the gate returned before anyone with authority decided: %+v %v", g.d, g.err)
	default:
	}
	if err := decide("bob"); err != nil {
		t.Fatal(err)
	}
	g := <-done
	if g.err != nil || g.d.Outcome != gates.Approved || g.d.Actor != "bob" || g.d.Option != "1" || g.d.Grant == nil {
		t.Fatalf("decision: %+v %v", g.d, g.err)
	}
	if s := e.get("alice", w.RunID).GetState(); s != tollgatev1.RunState_RUN_STATE_RUNNING {
		t.Fatalf("run after approval: %v", s)
	}

	v := grant.NewVerifier(map[string]ed25519.PublicKey{"grant": pub})
	now := time.Now()
	payload := grant.ArtifactsPayload(map[string]string{"claims.txt": freshness.ContentDigest(artifact)})
	other := grant.ArtifactsPayload(map[string]string{"claims.txt": freshness.ContentDigest([]byte("something else"))})
	if err := v.VerifyPayload(g.d.Grant, "notes.store", payload, now); !errors.Is(err, grant.ErrAction) {
		t.Fatalf("a gate's grant for another action: %v", err)
	}
	if err := v.VerifyPayload(g.d.Grant, "gate.claims", other, now); !errors.Is(err, grant.ErrPayload) {
		t.Fatalf("grant for another payload: %v", err)
	}
	if err := v.VerifyPayload(g.d.Grant, "gate.claims", payload, g.d.Grant.ExpiresAt); !errors.Is(err, grant.ErrExpired) {
		t.Fatalf("expired grant: %v", err)
	}
	if err := v.VerifyPayload(g.d.Grant, "gate.claims", payload, now); err != nil {
		t.Fatalf("the approved payload: %v", err)
	}
	if err := v.VerifyPayload(g.d.Grant, "gate.claims", payload, now); !errors.Is(err, grant.ErrReused) {
		t.Fatalf("replay: %v", err)
	}

	// Asked again, the decided gate returns at once and asks nobody.
	again, err := alice.Gate(bg, w.RunID, "claims", gates.Options{Summary: "again"})
	if err != nil || again.Created || again.Outcome != gates.Approved || again.Actor != "bob" {
		t.Fatalf("the gate again: %+v %v", again, err)
	}
}

func TestGateServiceRefusals(t *testing.T) {
	e, _ := gateEnv(t)
	alice := gates.New(e.conn("alice"))
	ctx, cancel := context.WithTimeout(bg, 10*time.Second)
	defer cancel()
	run, created, err := alice.CreateRun(ctx, "k1", "claims-review")
	if err != nil || !created {
		t.Fatalf("create: %v %v", created, err)
	}
	if again, created, err := alice.CreateRun(ctx, "k1", "claims-review"); err != nil || created || again != run {
		t.Fatalf("create again: %s %v %v, want %s", again, created, err, run)
	}
	code := func(err error) codes.Code { return status.Code(errors.Unwrap(err)) }
	// gate.* covers gates one level down; below it no row does.
	_, err = alice.Gate(ctx, run, "undeclared.below", gates.Options{Summary: "no policy covers gate.undeclared.below", NoWait: true})
	if code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "no policy row covers gate.undeclared.below") {
		t.Fatalf("gate without a policy rule: %v", err)
	}
	_, err = gates.New(e.conn("bob")).Gate(ctx, run, "claims", gates.Options{Summary: "bob's", NoWait: true})
	if code(err) != codes.NotFound { // nothing on alice's run is bob's to see
		t.Fatalf("a gate on someone else's run: %v", err)
	}
	rr, err := e.runs("alice").StartRun(ctx, &tollgatev1.StartRunRequest{RequestId: "r1",
		Source: &tollgatev1.StartRunRequest_Recipe{Recipe: "ask me as kind:\n  which diagram?\n  options: sequence | class\ndrawing: draw a {kind} diagram\n"}})
	if err != nil || rr.GetRun().GetState() != tollgatev1.RunState_RUN_STATE_PARKED {
		t.Fatalf("recipe run: %v %v", rr.GetRun().GetState(), err)
	}
	if _, err := alice.Gate(ctx, rr.GetRun().GetId(), "kind", gates.Options{Summary: "not mine to open", Action: "gate.claims", NoWait: true}); code(err) != codes.FailedPrecondition {
		t.Fatalf("a gate on a recipe's run: %v", err)
	}
	if err := alice.RecordStep(ctx, run, "extract", 0, freshness.ContentDigest([]byte("out")), time.Now().Add(-time.Second), time.Now()); err != nil {
		t.Fatal(err)
	}
	if err := alice.RecordStep(ctx, run, "extract", 0, "", time.Now(), time.Now()); !errors.Is(err, gates.ErrStepDone) {
		t.Fatalf("a completed step again: %v", err)
	}
	if done, _, err := alice.StepDone(ctx, run, "extract"); err != nil || !done {
		t.Fatalf("step done: %v %v", done, err)
	}
	// A gate names nobody to escalate to: on expiry escalate is refused,
	// not taken for the default (issue 16).
	if _, err := tollgatev1.NewGateServiceClient(e.conn("alice")).OpenGate(ctx, &tollgatev1.OpenGateRequest{RunId: run, Gate: "claims", Summary: "check",
		OnExpiry: tollgatev1.OnExpiry_ON_EXPIRY_ESCALATE}); status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "nobody to escalate to") {
		t.Fatalf("a gate that escalates on expiry: %v", err)
	}
	d, err := alice.Gate(ctx, run, "claims", gates.Options{Summary: "check", NoWait: true})
	if err != nil || d.Outcome != gates.Pending || !d.Created {
		t.Fatalf("no-wait gate: %+v %v", d, err)
	}
	if err := alice.RecordStep(ctx, run, "adjudicate", 0, "", time.Now(), time.Now()); code(err) != codes.FailedPrecondition {
		t.Fatalf("a step while a gate waits: %v", err)
	}
	if _, err := alice.Finish(ctx, run, false, ""); code(err) != codes.FailedPrecondition {
		t.Fatalf("finish while a gate waits: %v", err)
	}
	if _, err := e.runs("alice").CancelRun(ctx, &tollgatev1.CancelRunRequest{RunId: run, Reason: "abandoned"}); err != nil {
		t.Fatal(err)
	}
	d, err = alice.Get(ctx, run, "claims")
	if err != nil || d.Outcome != gates.Cancelled || !strings.Contains(d.Reason, "abandoned") {
		t.Fatalf("after cancel: %+v %v", d, err)
	}
}
