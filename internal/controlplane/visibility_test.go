package controlplane

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
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
	"github.com/tollgate-dev/tollgate/internal/controlplane/api"
	"github.com/tollgate-dev/tollgate/internal/wire"
	"github.com/tollgate-dev/tollgate/pkg/authz"
)

// visWorld is three runs of alice's under the dev policy, read by people
// who stand in every relation to them (item 7 of issue 13, I9):
//
//   - paid: vendor-payment, approved by dave, who then lost his finance
//     role (a past decider, nothing else);
//   - pending: vendor-payment waiting for finance; frank holds finance-1m
//     (an eligible approver), dave no longer does;
//   - gated: an external run whose gate "claims" bob approved before he
//     stopped being a reviewer, and whose gate "adjudication" waits for a
//     reviewer (frank).
type visWorld struct {
	e                    *env
	paid, pending, gated string
}

func newVisWorld(t *testing.T) *visWorld {
	t.Helper()
	base, err := os.ReadFile("../../examples/policy.csv")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "policy.csv")
	if err := os.WriteFile(path, base, 0o644); err != nil {
		t.Fatal(err)
	}
	az, err := authz.New(authz.Config{PolicyPath: path})
	if err != nil {
		t.Fatal(err)
	}
	_, priv, _ := ed25519.GenerateKey(rand.Reader)
	e := newEnvOn(t, nil, az, echoTools(), func(c *Config) { c.SigningKey, c.KeyID = priv, "grant" })
	w := &visWorld{e: e}

	w.paid = e.start("alice", "vendor-payment").GetId()
	if _, err := e.approvals("dave").Decide(bg, approve(w.paid+"/ask_1")); err != nil {
		t.Fatal(err)
	}
	e.settle()

	gates := func(who string) tollgatev1.GateServiceClient { return tollgatev1.NewGateServiceClient(e.conn(who)) }
	g, err := gates("alice").OpenGate(bg, &tollgatev1.OpenGateRequest{RequestId: "vis-1", RunName: "claims-review", Gate: "claims", Summary: "Are these the claims?"})
	if err != nil {
		t.Fatal(err)
	}
	w.gated = g.GetRunId()
	decideGate := func(who, askID string) {
		t.Helper()
		p, err := e.approvals(who).GetAsk(bg, &tollgatev1.GetAskRequest{AskId: askID})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.approvals(who).Decide(bg, &tollgatev1.DecideRequest{AskId: askID, ExpectedPayloadDigest: p.GetAsk().GetPayloadDigest(),
			ExpectedEvidenceDigest: p.GetAsk().GetEvidenceDigest(), Decision: &tollgatev1.DecideRequest_Approve{Approve: &tollgatev1.Approve{OptionId: "1"}}}); err != nil {
			t.Fatalf("%s approving %s: %v", who, askID, err)
		}
	}
	decideGate("bob", w.gated+"/claims")

	// dave's finance and bob's reviewer rows go to frank.
	text := strings.Replace(string(base), "g, dave,  role:finance-1m,   acme, _, _", "g, frank, role:finance-1m, acme, _, _", 1)
	text = strings.Replace(text, "g, bob,   role:reviewer, acme, _, _", "g, frank, role:reviewer, acme, _, _", 1)
	if strings.Count(text, "frank") != 2 {
		t.Fatal("the dev policy no longer has dave's finance-1m or bob's reviewer row")
	}
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := az.Reload(); err != nil {
		t.Fatal(err)
	}

	w.pending = e.start("alice", "vendor-payment").GetId()
	if _, err := gates("alice").OpenGate(bg, &tollgatev1.OpenGateRequest{RunId: w.gated, Gate: "adjudication", Summary: "Is the adjudication right?"}); err != nil {
		t.Fatal(err)
	}
	return w
}

// wantNotVisible checks that err is what a caller who may not see the
// run gets: NOT_FOUND, as for a run never created (api/readers.go).
func wantNotVisible(t *testing.T, who string, err error, runID string) {
	t.Helper()
	if status.Code(err) != codes.NotFound || status.Convert(err).Message() != api.NotVisible(runID).Error() {
		t.Fatalf("%s: %v, want NOT_FOUND %q", who, err, api.NotVisible(runID))
	}
}

// missingRun is a run id nobody ever created: what a run that is not
// visible must look like.
const missingRun = "r_nosuchrun00"

// readCall is one RPC that reads a run (or an ask of it): it returns the
// error and, when the call lists, whether the run was listed.
type readCall struct {
	name string
	// gateOnly: the call is about an external run's gates.
	gateOnly bool
	// mutates: not called as the requester (who would change the run).
	mutates bool
	// lists: a list call; a run not visible is left out, never refused.
	// inbox: a list of what the caller may decide, which need not hold
	// every run they may see; so is an audit of "every run" by someone
	// who is no auditor (it covers the runs they requested).
	lists, inbox bool
	call         func(w *visWorld, who, run, ask string) (listed bool, err error)
}

func readCalls() []readCall {
	ctx := bg
	wrong := "sha256:0000000000000000000000000000000000000000000000000000000000000000"
	return []readCall{
		{name: "GetRun", call: func(w *visWorld, who, run, _ string) (bool, error) {
			_, err := w.e.runs(who).GetRun(ctx, &tollgatev1.GetRunRequest{RunId: run})
			return false, err
		}},
		{name: "ListRuns", lists: true, call: func(w *visWorld, who, run, _ string) (bool, error) {
			resp, err := w.e.runs(who).ListRuns(ctx, &tollgatev1.ListRunsRequest{PageSize: 500})
			return slices.ContainsFunc(resp.GetRuns(), func(r *tollgatev1.RunSummary) bool { return r.GetId() == run }), err
		}},
		{name: "ListRuns(requester=alice)", lists: true, call: func(w *visWorld, who, run, _ string) (bool, error) {
			resp, err := w.e.runs(who).ListRuns(ctx, &tollgatev1.ListRunsRequest{Requester: "alice", PageSize: 500})
			return slices.ContainsFunc(resp.GetRuns(), func(r *tollgatev1.RunSummary) bool { return r.GetId() == run }), err
		}},
		{name: "WatchRun", call: func(w *visWorld, who, run, _ string) (bool, error) {
			c, cancel := context.WithCancel(ctx)
			defer cancel()
			st, err := w.e.runs(who).WatchRun(c, &tollgatev1.WatchRunRequest{RunId: run})
			if err != nil {
				return false, err
			}
			_, err = st.Recv()
			return false, err
		}},
		{name: "CancelRun", mutates: true, call: func(w *visWorld, who, run, _ string) (bool, error) {
			_, err := w.e.runs(who).CancelRun(ctx, &tollgatev1.CancelRunRequest{RunId: run, Reason: "probe"})
			return false, err
		}},
		{name: "GetAsk", call: func(w *visWorld, who, _, ask string) (bool, error) {
			_, err := w.e.approvals(who).GetAsk(ctx, &tollgatev1.GetAskRequest{AskId: ask})
			return false, err
		}},
		{name: "ListAsks(run, every state)", lists: true, inbox: true, call: func(w *visWorld, who, run, _ string) (bool, error) {
			var states []tollgatev1.AskState
			for _, v := range tollgatev1.AskState_value {
				if _, ok := wire.AskStateFromProto(tollgatev1.AskState(v)); ok {
					states = append(states, tollgatev1.AskState(v))
				}
			}
			resp, err := w.e.approvals(who).ListAsks(ctx, &tollgatev1.ListAsksRequest{RunId: run, States: states})
			return len(resp.GetItems()) > 0, err
		}},
		{name: "Decide(stale digest)", call: func(w *visWorld, who, _, ask string) (bool, error) {
			_, err := w.e.approvals(who).Decide(ctx, &tollgatev1.DecideRequest{AskId: ask, ExpectedPayloadDigest: wrong, ExpectedEvidenceDigest: wrong,
				Decision: &tollgatev1.DecideRequest_Approve{Approve: &tollgatev1.Approve{OptionId: "1"}}})
			return false, err
		}},
		{name: "Answer(stale digest)", call: func(w *visWorld, who, _, ask string) (bool, error) {
			_, err := w.e.approvals(who).Answer(ctx, &tollgatev1.AnswerRequest{AskId: ask, Text: "menu", ExpectedPayloadDigest: wrong})
			return false, err
		}},
		{name: "AttachEvidence", call: func(w *visWorld, who, _, ask string) (bool, error) {
			_, err := w.e.approvals(who).AttachEvidence(ctx, &tollgatev1.AttachEvidenceRequest{AskId: ask,
				Artifacts: []*tollgatev1.EvidenceUpload{{Name: "probe.txt", Content: []byte("x")}}})
			return false, err
		}},
		{name: "ListJournal", call: func(w *visWorld, who, run, _ string) (bool, error) {
			_, err := w.e.audit(who).ListJournal(ctx, &tollgatev1.ListJournalRequest{RunId: run})
			return false, err
		}},
		{name: "VerifyJournal(run)", call: func(w *visWorld, who, run, _ string) (bool, error) {
			_, err := w.e.audit(who).VerifyJournal(ctx, &tollgatev1.VerifyJournalRequest{RunId: run})
			return false, err
		}},
		{name: "VerifyJournal(all)", lists: true, inbox: true, call: func(w *visWorld, who, run, _ string) (bool, error) {
			resp, err := w.e.audit(who).VerifyJournal(ctx, &tollgatev1.VerifyJournalRequest{})
			return slices.ContainsFunc(resp.GetResults(), func(r *tollgatev1.JournalVerification) bool { return r.GetRunId() == run }), err
		}},
		{name: "CheckInvariants(run)", call: func(w *visWorld, who, run, _ string) (bool, error) {
			_, err := w.e.audit(who).CheckInvariants(ctx, &tollgatev1.CheckInvariantsRequest{RunId: run})
			return false, err
		}},
		{name: "GetGate", gateOnly: true, call: func(w *visWorld, who, run, ask string) (bool, error) {
			_, gate, _ := strings.Cut(ask, "/")
			_, err := tollgatev1.NewGateServiceClient(w.e.conn(who)).GetGate(ctx, &tollgatev1.GetGateRequest{RunId: run, Gate: gate})
			return false, err
		}},
		{name: "OpenGate(run)", gateOnly: true, call: func(w *visWorld, who, run, _ string) (bool, error) {
			_, err := tollgatev1.NewGateServiceClient(w.e.conn(who)).OpenGate(ctx, &tollgatev1.OpenGateRequest{RunId: run, Gate: "fix-plan", Summary: "probe"})
			return false, err
		}},
		{name: "RecordStep", gateOnly: true, call: func(w *visWorld, who, run, _ string) (bool, error) {
			_, err := tollgatev1.NewGateServiceClient(w.e.conn(who)).RecordStep(ctx, &tollgatev1.RecordStepRequest{RunId: run, Step: "probe"})
			return false, err
		}},
		{name: "FinishRun", gateOnly: true, call: func(w *visWorld, who, run, _ string) (bool, error) {
			_, err := tollgatev1.NewGateServiceClient(w.e.conn(who)).FinishRun(ctx, &tollgatev1.FinishRunRequest{RunId: run})
			return false, err
		}},
	}
}

// Item 7 (I9): every RPC that reads a run, an ask, a gate or a journal
// shows it to the requester, to whoever may decide or decided one of its
// asks, and to auditors and operators; to anyone else it answers exactly
// as for a run that was never created, and lists leave it out.
func TestItem7_StrangerCannotReadRunsAsksOrJournals(t *testing.T) {
	w := newVisWorld(t)
	type who struct {
		name, user string
		runs       map[string]bool // run → visible
	}
	people := []who{
		{"requester", "alice", map[string]bool{w.paid: true, w.pending: true, w.gated: true}},
		{"eligible approver", "frank", map[string]bool{w.pending: true, w.gated: true}},
		{"past decider (lost the role since)", "dave", map[string]bool{w.paid: true, w.pending: false, w.gated: false}},
		{"past gate decider (lost the role since)", "bob", map[string]bool{w.gated: true}},
		{"auditor", "audrey", map[string]bool{w.paid: true, w.pending: true, w.gated: true}},
		{"operator", "otto", map[string]bool{w.paid: true, w.pending: true, w.gated: true}},
		{"stranger", "mallory", map[string]bool{w.paid: false, w.pending: false, w.gated: false}},
	}
	askOf := map[string]string{w.paid: w.paid + "/ask_1", w.pending: w.pending + "/ask_1", w.gated: w.gated + "/adjudication"}
	secrets := []string{"alice", "485000", "V-1187", "bank", "claims", "adjudication", "finance", "reviewer", "requester"}
	for _, p := range people {
		for run, visible := range p.runs {
			for _, c := range readCalls() {
				if c.gateOnly && run != w.gated {
					continue
				}
				if c.mutates && p.user == "alice" {
					continue
				}
				listed, err := c.call(w, p.user, run, askOf[run])
				switch {
				case c.lists && visible:
					if err != nil || !listed && !c.inbox {
						t.Errorf("%s (%s) %s: listed=%v err=%v; want it listed", p.name, p.user, c.name, listed, err)
					}
				case c.lists:
					if err != nil || listed {
						t.Errorf("%s (%s) %s: listed=%v err=%v; want it left out", p.name, p.user, c.name, listed, err)
					}
				case visible:
					if status.Code(err) == codes.NotFound {
						t.Errorf("%s (%s) %s on a run they may see: %v", p.name, p.user, c.name, err)
					}
				default:
					// NOT_FOUND, word for word what a run never created gets.
					_, missing := c.call(w, p.user, missingRun, strings.Replace(askOf[run], run, missingRun, 1))
					got := strings.ReplaceAll(status.Convert(err).Message(), run, "RUN")
					want := strings.ReplaceAll(status.Convert(missing).Message(), missingRun, "RUN")
					if status.Code(err) != codes.NotFound || got != want {
						t.Errorf("%s (%s) %s: %v; want NOT_FOUND %q, as for a run never created", p.name, p.user, c.name, err, want)
						continue
					}
					for _, s := range secrets {
						if strings.Contains(err.Error(), s) {
							t.Errorf("%s (%s) %s: the refusal echoes %q: %v", p.name, p.user, c.name, s, err)
						}
					}
				}
			}
		}
	}
}

// Item 7: lists page over visible runs only; a stranger's pages are
// empty but the paging ends, and nothing counts what was left out.
func TestItem7_ListsPageOverVisibleRunsOnly(t *testing.T) {
	w := newVisWorld(t)
	page := func(who string) []string {
		t.Helper()
		var ids []string
		tok := ""
		for range 100 {
			resp, err := w.e.runs(who).ListRuns(bg, &tollgatev1.ListRunsRequest{PageSize: 1, PageToken: tok})
			if err != nil {
				t.Fatalf("%s: %v", who, err)
			}
			for _, r := range resp.GetRuns() {
				ids = append(ids, r.GetId())
			}
			if tok = resp.GetNextPageToken(); tok == "" {
				slices.Sort(ids)
				return ids
			}
		}
		t.Fatalf("%s: paging did not end", who)
		return nil
	}
	all := []string{w.paid, w.pending, w.gated}
	slices.Sort(all)
	for who, want := range map[string][]string{"alice": all, "audrey": all, "otto": all, "dave": {w.paid}, "mallory": nil} {
		if got := page(who); !slices.Equal(got, want) {
			t.Errorf("%s pages through %v, want %v", who, got, want)
		}
	}
	inv, err := w.e.audit("mallory").CheckInvariants(bg, &tollgatev1.CheckInvariantsRequest{})
	if err != nil || inv.GetRunsChecked() != 0 || len(inv.GetViolations()) != 0 {
		t.Fatalf("a stranger's audit covers no run and counts none: %v %v", inv, err)
	}
	// Without a run id, anyone but an auditor or operator audits the runs
	// they requested: the store's requester index, not a walk of every
	// run to find the few they may see.
	for who, want := range map[string]uint64{"alice": 3, "dave": 0} {
		inv, err := w.e.audit(who).CheckInvariants(bg, &tollgatev1.CheckInvariantsRequest{})
		if err != nil || inv.GetRunsChecked() != want {
			t.Fatalf("%s's audit of every run checks %d runs (%v), want %d", who, inv.GetRunsChecked(), err, want)
		}
	}
	if inv, err := w.e.audit("dave").CheckInvariants(bg, &tollgatev1.CheckInvariantsRequest{RunId: w.paid}); err != nil || inv.GetRunsChecked() != 1 {
		t.Fatalf("dave audits the run he decided, by its id: %v %v", inv, err)
	}
	inv, err = w.e.audit("audrey").CheckInvariants(bg, &tollgatev1.CheckInvariantsRequest{})
	if err != nil || inv.GetRunsChecked() != 3 {
		t.Fatalf("the auditor's audit covers every run: %v %v", inv, err)
	}
	// The grant of an approved gate is the script's: others who may see
	// the gate do not get it.
	gate := func(who string) *tollgatev1.Gate {
		r, err := tollgatev1.NewGateServiceClient(w.e.conn(who)).GetGate(bg, &tollgatev1.GetGateRequest{RunId: w.gated, Gate: "claims"})
		if err != nil {
			t.Fatalf("%s: %v", who, err)
		}
		return r.GetGate()
	}
	if gate("alice").GetGrant() == nil {
		t.Fatal("the requester gets the approved gate's grant")
	}
	for _, who := range []string{"bob", "audrey", "otto"} {
		if g := gate(who); g.GetGrant() != nil || g.GetOutcome() != tollgatev1.GateOutcome_GATE_OUTCOME_APPROVED {
			t.Errorf("%s sees the gate approved but without its grant: %v", who, g)
		}
	}
}

// Item 7: a standing approval (it names an ask of alice's run and what
// it approves) is listed to its granter, to whoever may revoke it, and to
// auditors and operators; not to a stranger.
func TestItem7_StandingApprovalsAreNotListedToStrangers(t *testing.T) {
	e := newEnv(t, nil, echoTools())
	r := e.start("alice", "vendor-payment")
	until := timestamppb.New(time.Now().Add(time.Hour))
	if _, err := e.approvals("dave").Decide(bg, &tollgatev1.DecideRequest{AskId: r.GetId() + "/ask_1", Decision: &tollgatev1.DecideRequest_ApproveException{
		ApproveException: &tollgatev1.ApproveException{Until: until, Scope: "payments.pay vendor=V-1187 amount<=500000", Reason: "monthly rent"}}}); err != nil {
		t.Fatal(err)
	}
	e.settle()
	for who, n := range map[string]int{"dave": 1, "bob": 1, "audrey": 1, "otto": 1, "mallory": 0} {
		list, err := e.approvals(who).ListExceptions(bg, &tollgatev1.ListExceptionsRequest{IncludeInactive: true})
		if err != nil || len(list.GetExceptions()) != n {
			t.Errorf("%s lists %d standing approvals, want %d: %v", who, len(list.GetExceptions()), n, err)
		}
	}
}

// A principal whose name is the requester placeholder (`me`) or a role's
// name is not the ask's audience: names are compared with people, roles
// are held (the review found a token for "me" reading every `ask me` run).
func TestItem7_NamesThatLookLikeAudiencesSeeNothing(t *testing.T) {
	e := newEnv(t, nil, echoTools())
	for _, skill := range []string{"graph-ask-demo", "vendor-payment"} {
		r := e.start("alice", skill)
		for _, who := range []string{"me", "member", "finance", "finance-100k", "requester"} {
			if _, err := e.runs(who).GetRun(bg, &tollgatev1.GetRunRequest{RunId: r.GetId()}); status.Code(err) != codes.NotFound {
				t.Errorf("%s: a principal named %q reads the run: %v", skill, who, err)
			}
			if _, err := e.approvals(who).GetAsk(bg, &tollgatev1.GetAskRequest{AskId: r.GetId() + "/ask_1"}); status.Code(err) != codes.NotFound {
				t.Errorf("%s: a principal named %q reads ask_1: %v", skill, who, err)
			}
		}
	}
}
