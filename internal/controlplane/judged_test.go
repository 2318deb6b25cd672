package controlplane

import (
	"context"
	"strings"
	"sync"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	tollgatev1 "github.com/tollgate-dev/tollgate/gen/tollgate/v1"
	"github.com/tollgate-dev/tollgate/internal/controlplane/approvals"
	"github.com/tollgate-dev/tollgate/pkg/authz"
)

// betweenCheckAndCommit is policy that, once armed, runs a function the
// first time it is asked about an actor: that is after the control plane
// read the ask it judges and before it commits the decision — exactly
// where a concurrent decision lands when it is unlucky.
type betweenCheckAndCommit struct {
	approvals.Policy
	mu    sync.Mutex
	actor string
	then  func()
}

func (b *betweenCheckAndCommit) arm(actor string, then func()) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.actor, b.then = actor, then
}

func (b *betweenCheckAndCommit) Authorize(ctx context.Context, req authz.Request) (authz.Decision, error) {
	b.mu.Lock()
	var then func()
	if req.Actor == b.actor && b.then != nil {
		then, b.then = b.then, nil
	}
	b.mu.Unlock()
	if then != nil {
		then()
	}
	return b.Policy.Authorize(ctx, req)
}

// I6, I9: bob (limit 100000) approves the vendor payment as amended to
// 90000, and dave amends it back to 485000 after bob's authority and
// digest were checked but before bob's approval committed. The approval
// must be refused — it was judged on an ask that no longer is — and pay
// must not run with 485000 under bob's name.
func TestDecisionIsJudgedOnTheStateItCommits(t *testing.T) {
	pol := &betweenCheckAndCommit{Policy: devPolicy(t)}
	e := newEnvWith(t, pol, echoTools())
	r := e.start("alice", "vendor-payment")
	askID := r.GetId() + "/ask_1"
	amend := func(v string) error {
		_, err := e.approvals("dave").Decide(bg, &tollgatev1.DecideRequest{AskId: askID,
			Decision: &tollgatev1.DecideRequest_Amend{Amend: &tollgatev1.Amend{Field: "amount", NewValueJson: v, Reason: "x"}}})
		return err
	}
	if err := amend("90000"); err != nil {
		t.Fatal(err)
	}
	shown, err := e.approvals("bob").GetAsk(bg, &tollgatev1.GetAskRequest{AskId: askID})
	if err != nil {
		t.Fatal(err)
	}
	d90 := shown.GetAsk().GetPayloadDigest()
	var amendErr error
	pol.arm("bob", func() { amendErr = amend("485000") })
	_, err = e.approvals("bob").Decide(bg, &tollgatev1.DecideRequest{AskId: askID, ExpectedPayloadDigest: d90,
		ExpectedEvidenceDigest: shown.GetAsk().GetEvidenceDigest(), Decision: &tollgatev1.DecideRequest_Approve{Approve: &tollgatev1.Approve{}}})
	if amendErr != nil {
		t.Fatalf("dave's amendment in between: %v", amendErr)
	}
	e.settle()
	now, gerr := e.approvals("dave").GetAsk(bg, &tollgatev1.GetAskRequest{AskId: askID})
	if gerr != nil {
		t.Fatal(gerr)
	}
	for _, s := range e.get("alice", r.GetId()).GetSteps() {
		if s.GetStepId() == "pay" && len(s.GetAttempts()) > 0 {
			t.Fatalf("bob reviewed %s at 90000; pay ran with %s (approve returned %v)", d90, s.GetAttempts()[0].GetOutputJson(), err)
		}
	}
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), now.GetAsk().GetPayloadDigest()) {
		t.Fatalf("bob's approval judged at 90000 and committed after the amendment to 485000: %v; want FAILED_PRECONDITION naming %s", err, now.GetAsk().GetPayloadDigest())
	}
	if now.GetAsk().GetState() != tollgatev1.AskState_ASK_STATE_PENDING {
		t.Fatalf("ask is %v after the refused approval, want pending", now.GetAsk().GetState())
	}
	// Read again, bob is refused by policy at 485000; with the digest he
	// is now shown, the refusal is his authority's, not the digest's.
	_, err = e.approvals("bob").Decide(bg, &tollgatev1.DecideRequest{AskId: askID, ExpectedPayloadDigest: now.GetAsk().GetPayloadDigest(),
		Decision: &tollgatev1.DecideRequest_Approve{Approve: &tollgatev1.Approve{}}})
	if status.Code(err) != codes.PermissionDenied {
		t.Fatalf("bob approving 485000: %v, want PERMISSION_DENIED", err)
	}
}

// I6: the proto says the payload digest must match; an approval that
// quotes none would approve whatever the ask binds when it commits.
func TestApproveWithoutPayloadDigestIsRefused(t *testing.T) {
	e := newEnv(t, nil, echoTools())
	r := e.start("alice", "vendor-payment")
	askID := r.GetId() + "/ask_1"
	shown, err := e.approvals("dave").GetAsk(bg, &tollgatev1.GetAskRequest{AskId: askID})
	if err != nil {
		t.Fatal(err)
	}
	dave := e.rawApprovals("dave")
	ev := shown.GetAsk().GetEvidenceDigest()
	for name, call := range map[string]func() error{
		"approve": func() error {
			_, err := dave.Decide(bg, &tollgatev1.DecideRequest{AskId: askID, ExpectedEvidenceDigest: ev,
				Decision: &tollgatev1.DecideRequest_Approve{Approve: &tollgatev1.Approve{}}})
			return err
		},
		"answer 1": func() error {
			_, err := dave.Answer(bg, &tollgatev1.AnswerRequest{AskId: askID, Text: "1", ExpectedEvidenceDigest: ev})
			return err
		},
	} {
		err := call()
		if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "send the payload digest you were shown") {
			t.Errorf("%s with no payload digest: %v, want FAILED_PRECONDITION asking for the digest", name, err)
		}
	}
	for _, s := range e.get("alice", r.GetId()).GetSteps() {
		if s.GetStepId() == "pay" && len(s.GetAttempts()) > 0 {
			t.Fatalf("pay ran on an approval that quoted no payload digest")
		}
	}
	// A rejection lets nothing run: it needs no digest.
	if _, err := dave.Decide(bg, &tollgatev1.DecideRequest{AskId: askID,
		Decision: &tollgatev1.DecideRequest_Reject{Reject: &tollgatev1.Reject{Reason: "no"}}}); err != nil {
		t.Fatalf("reject without digests: %v", err)
	}
}
