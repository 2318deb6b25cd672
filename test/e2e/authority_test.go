package e2e

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	tollgatev1 "github.com/tollgate-dev/tollgate/gen/tollgate/v1"
	"github.com/tollgate-dev/tollgate/internal/identity"
)

// conn is user's gRPC connection to a plane started with --dev (its dev
// token), for what approvectl will not send.
func (p *plane) conn(t *testing.T, user string) *grpc.ClientConn {
	t.Helper()
	tok, err := os.ReadFile(filepath.Join(p.home, "dev", "tokens", user+".jwt"))
	if err != nil {
		t.Fatal(err)
	}
	c, err := grpc.NewClient(p.addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithPerRPCCredentials(identity.PerRPCCredentials{Token: strings.TrimSpace(string(tok)), Insecure: true}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// auditClean runs `approvectl audit` and fails the test on any finding:
// every e2e test that performs side effects ends with it.
func auditClean(t *testing.T, p *plane, as string, runs ...string) {
	t.Helper()
	args := []string{"--as", as, "audit"}
	if len(runs) == 1 {
		args = append(args, "--run", runs[0])
	}
	if res := p.ctl(t, "", args...); res.code != 0 {
		t.Fatalf("audit is not clean: %d\n%s%s", res.code, res.stdout, res.stderr)
	}
}

// openGate opens gate name as user without waiting and returns its run.
func openGate(t *testing.T, p *plane, user, name string, args ...string) (string, result) {
	t.Helper()
	res := p.ctl(t, "", append([]string{"--as", user, "gate", name, "--summary", "review " + name, "--no-wait", "-o", "json"}, args...)...)
	var g struct {
		RunID string `json:"run_id"`
	}
	_ = json.Unmarshal([]byte(res.stdout), &g)
	return g.RunID, res
}

// Item 1: a script cannot pick its own gate's policy. The dev policy says
// gate.claims is decided by a reviewer, never the requester; naming a
// laxer action (notes.store, which members approve for themselves) only
// adds a bar, a gate no policy names is refused at open whatever action
// it names, and the grant binds gate.claims so a verifier expecting
// another action refuses it.
func TestItem1_ScriptCannotChooseGatePolicy(t *testing.T) {
	t.Parallel()
	p := startPlane(t, t.TempDir(), "--dev", "--listen", "127.0.0.1:0", "--executor-listen", "127.0.0.1:0")
	work := t.TempDir()
	art := filepath.Join(work, "claims.txt")
	if err := os.WriteFile(art, []byte("claim 1\nclaim 2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	run, res := openGate(t, p, "alice", "claims", "--artifact", art, "--action", "notes.store")
	if res.code != 8 || run == "" {
		t.Fatalf("alice opens claims naming notes.store: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	if res := p.ctl(t, "", "--as", "alice", "approve", run+"/claims"); res.code != 1 || !strings.Contains(res.stderr, "permission denied") {
		t.Fatalf("alice approved her own reviewers' gate by naming notes.store: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	// gate.* covers every gate one level down (issue 16); below it, no
	// row does, and the refusal names the dev policy file to edit.
	if _, res := openGate(t, p, "alice", "anything.below", "--artifact", art, "--action", "notes.store"); res.code != 1 || !strings.Contains(res.stderr, "gate.anything.below") ||
		!strings.Contains(res.stderr, filepath.Join(p.home, "dev", "policy.csv")) || strings.Contains(res.stderr, "rpc error") {
		t.Fatalf("a gate no policy names opened under notes.store: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	// Issue 16: a gate from code with no row of its own goes to a
	// reviewer under gate.*, bob; alice cannot decide it.
	own, res := openGate(t, p, "alice", "my-own-gate", "--artifact", art, "--action", "notes.store")
	if res.code != 8 || own == "" {
		t.Fatalf("approvectl gate my-own-gate under the dev policy: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	if res := p.ctl(t, "", "--as", "alice", "approve", own+"/my-own-gate"); res.code != 1 || !strings.Contains(res.stderr, "separation of duties") {
		t.Fatalf("alice approved her own my-own-gate: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	if res := p.ctl(t, "", "--as", "bob", "approve", own+"/my-own-gate"); res.code != 0 {
		t.Fatalf("bob, a reviewer, approves my-own-gate: %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	if res := p.ctl(t, "", "--as", "bob", "approve", run+"/claims"); res.code != 0 {
		t.Fatalf("bob, a reviewer, approves: %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	grantFile := filepath.Join(work, "grant.json")
	if res := p.ctl(t, "", "--as", "alice", "gate", "claims", "--run", run, "--summary", "again", "--grant-out", grantFile); res.code != 0 {
		t.Fatalf("the decided gate's grant: %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	verify := func(extra ...string) result {
		return p.ctl(t, "", append([]string{"grant", "verify", "--grant", grantFile, "--key", filepath.Join(p.home, "dev", "grant.pub"),
			"--artifact", art, "--ledger", filepath.Join(work, "ledger.json")}, extra...)...)
	}
	if res := verify("--action", "notes.store"); res.code != 1 || !strings.Contains(res.stderr, "gate.claims") {
		t.Fatalf("a gate.claims grant accepted for notes.store: %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	// The verifier names what it will do: the grant's own word is not
	// taken for it (a grant for any gate would then pass).
	if res := verify(); res.code != 2 || !strings.Contains(res.stderr, "--action is required") {
		t.Fatalf("grant verify without --action: %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	if res := verify("--action", "gate.claims"); res.code != 0 {
		t.Fatalf("the grant for the gate it names: %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	auditClean(t, p, "bob", run)
}

// Item 5: an approval binds the evidence it was shown. Bob approves a
// gate with an artifact while sending an all-zero evidence digest: it is
// refused, saying what the ask binds now; approvectl sends the digest it
// read, so its approval stands.
func TestItem5_EvidenceDigestIsChecked(t *testing.T) {
	t.Parallel()
	p := startPlane(t, t.TempDir(), "--dev", "--listen", "127.0.0.1:0", "--executor-listen", "127.0.0.1:0")
	art := filepath.Join(t.TempDir(), "claims.txt")
	if err := os.WriteFile(art, []byte("claim 1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	run, res := openGate(t, p, "alice", "claims", "--artifact", art)
	if res.code != 8 {
		t.Fatalf("open: %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	approvals := tollgatev1.NewApprovalServiceClient(p.conn(t, "bob"))
	ask, err := approvals.GetAsk(ctx, &tollgatev1.GetAskRequest{AskId: run + "/claims"})
	if err != nil {
		t.Fatal(err)
	}
	real := ask.GetAsk().GetEvidenceDigest()
	zero := "sha256:" + strings.Repeat("0", 64)
	pd := ask.GetAsk().GetPayloadDigest() // the payload as shown: this is a test of the evidence
	for _, req := range []*tollgatev1.DecideRequest{
		{AskId: run + "/claims", ExpectedPayloadDigest: pd, ExpectedEvidenceDigest: zero, Decision: &tollgatev1.DecideRequest_Approve{Approve: &tollgatev1.Approve{}}},
		{AskId: run + "/claims", ExpectedPayloadDigest: pd, Decision: &tollgatev1.DecideRequest_Approve{Approve: &tollgatev1.Approve{}}},
	} {
		_, err = approvals.Decide(ctx, req)
		if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), real) {
			t.Fatalf("approve with evidence digest %q: %v, want FAILED_PRECONDITION naming %s", req.GetExpectedEvidenceDigest(), err, real)
		}
	}
	if _, err := approvals.Answer(ctx, &tollgatev1.AnswerRequest{AskId: run + "/claims", Text: "approve", ExpectedPayloadDigest: pd, ExpectedEvidenceDigest: zero}); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("an answer that approves with a wrong evidence digest: %v", err)
	}
	var g struct {
		Outcome string `json:"outcome"`
	}
	p.ctl(t, "", "--as", "alice", "gate", "claims", "--run", run, "--summary", "again", "--no-wait", "-o", "json").json(t, &g)
	if g.Outcome != "pending" {
		t.Fatalf("the gate is %s after refused approvals", g.Outcome)
	}
	if res := p.ctl(t, "", "--as", "bob", "approve", run+"/claims", "--evidence", zero); res.code != 1 || !strings.Contains(res.stderr, "does not match the ask's") {
		t.Fatalf("approvectl approve --evidence ZERO: %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	if res := p.ctl(t, "", "--as", "bob", "approve", run+"/claims"); res.code != 0 {
		t.Fatalf("approvectl binds the evidence it read: %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	auditClean(t, p, "bob", run)
}

// Item 2: an in-doubt "retry" performs the side effect again, so it needs
// the authority approving it did. With test.mark separated from its
// requester, alice's approval of her own mark is refused and bob
// approves; the executor is killed mid-call; alice may not answer retry
// (she could not approve it), bob may, and the audit agrees the second
// attempt was authorized (item 6).
func TestItem2_InDoubtRetryNeedsApproversAuthority(t *testing.T) {
	t.Parallel()
	c := newClusterSpec(t, clusterSpec{markFloor: "p2, acme, test.mark, 1, requester, -\n", start: []string{"edge-1", "edge-2"}})
	id := c.start("ask member:\n  mark it?\nm: test.mark {\"name\": \"effect\", \"hold_ms\": 20000}\n")
	c.until(id, "parked", func(r runOut) bool { return r.State == "parked" })
	if res := c.plane.ctl(t, "", "--as", "alice", "approve", id+"/ask_1"); res.code != 1 || !strings.Contains(res.stderr, "permission denied") {
		t.Fatalf("alice approved her own mark: %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	if res := c.plane.ctl(t, "", "--as", "bob", "approve", id+"/ask_1"); res.code != 0 {
		t.Fatalf("bob approves: %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	r := c.until(id, "started", func(r runOut) bool { st, _, _ := stepOf(r, "m"); return st == "started" })
	c.waitMark("effect", 1)
	_, killed, _ := stepOf(r, "m")
	syscall.Kill(-c.execs[killed].Process.Pid, syscall.SIGKILL)
	c.until(id, "parked in doubt", func(r runOut) bool { st, _, _ := stepOf(r, "m"); return r.State == "parked" && st == "in_doubt" })
	doubt := id + "/doubt_m_1"
	if res := c.plane.ctl(t, "", "--as", "alice", "answer", doubt, "retry"); res.code != 1 || !strings.Contains(res.stderr, "permission denied") {
		t.Fatalf("alice retried the effect policy keeps her from approving: %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	if n := c.mark("effect"); n != 1 {
		t.Fatalf("the refused retry ran the effect: marker %d", n)
	}
	// Whoever could authorize the retry finds the ask in their inbox.
	if res := c.plane.ctl(t, "", "--as", "bob", "asks"); !strings.Contains(res.stdout, doubt) {
		t.Fatalf("bob's inbox lacks %s:\n%s%s", doubt, res.stdout, res.stderr)
	}
	if res := c.plane.ctl(t, "", "--as", "bob", "answer", doubt, "retry"); res.code != 0 {
		t.Fatalf("bob retries: %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	c.until(id, "started again", func(r runOut) bool { st, _, attempts := stepOf(r, "m"); return st == "started" && attempts == 2 })
	c.waitMark("effect", 2)
	if res := c.plane.ctl(t, "", "--as", "alice", "runs", "cancel", id); res.code != 0 {
		t.Fatalf("%s %s", res.stdout, res.stderr)
	}
	c.until(id, "cancelled", func(r runOut) bool { return r.State == "cancelled" })
	auditClean(t, c.plane, "alice", id)
}

// Item 2: "it ran" (and "stop") says what happened, performs nothing, and
// the requester may answer it even where policy keeps them from
// approving the effect.
func TestItem2_RequesterMaySayItRan(t *testing.T) {
	t.Parallel()
	c := newClusterSpec(t, clusterSpec{markFloor: "p2, acme, test.mark, 1, requester, -\n", start: []string{"edge-1", "edge-2"}})
	id := c.start("ask member:\n  mark it?\nm: test.mark {\"name\": \"effect\", \"hold_ms\": 20000}\n")
	c.until(id, "parked", func(r runOut) bool { return r.State == "parked" })
	if res := c.plane.ctl(t, "", "--as", "bob", "approve", id+"/ask_1"); res.code != 0 {
		t.Fatalf("bob approves: %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	r := c.until(id, "started", func(r runOut) bool { st, _, _ := stepOf(r, "m"); return st == "started" })
	c.waitMark("effect", 1)
	_, killed, _ := stepOf(r, "m")
	syscall.Kill(-c.execs[killed].Process.Pid, syscall.SIGKILL)
	c.until(id, "parked in doubt", func(r runOut) bool { st, _, _ := stepOf(r, "m"); return r.State == "parked" && st == "in_doubt" })
	if res := c.plane.ctl(t, "", "--as", "alice", "answer", id+"/doubt_m_1", "it ran"); res.code != 0 {
		t.Fatalf("the requester says it ran: %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	c.until(id, "complete", func(r runOut) bool { return r.State == "complete" })
	if n := c.mark("effect"); n != 1 {
		t.Fatalf("marker %d, want 1", n)
	}
	auditClean(t, c.plane, "alice", id)
}
