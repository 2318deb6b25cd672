package controlplane

import (
	"math/rand/v2"
	"sync"
	"testing"

	tollgatev1 "github.com/tollgate-dev/tollgate/gen/tollgate/v1"
)

// workload drives many runs of every example skill through random
// decisions — approvals, rejections, answers, cancellations, some from the
// wrong person, many at once — and then audits: no ask may be pending on a
// finished run, no side effect may have started before its approval was
// consumed, and every journal chain must verify.
func workload(t *testing.T, e *env, runs int) {
	t.Helper()
	skills := []string{"graph-ask-demo", "morning-briefing", "pr-review", "vendor-payment", "uml-diagram"}
	var wg sync.WaitGroup
	errs := make(chan error, runs)
	for i := range runs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(i), 99))
			resp, err := e.runs("alice").StartRun(bg, &tollgatev1.StartRunRequest{Source: &tollgatev1.StartRunRequest_Skill{Skill: skills[i%len(skills)]}})
			if err != nil {
				errs <- err
				return
			}
			id := resp.GetRun().GetId()
			for range 12 {
				e.settle()
				g, err := e.runs("alice").GetRun(bg, &tollgatev1.GetRunRequest{RunId: id})
				if err != nil {
					errs <- err
					return
				}
				r := g.GetRun()
				if terminal(r.GetState()) {
					return
				}
				var pending []*tollgatev1.AskSummary
				for _, a := range r.GetAsks() {
					if a.GetState() == tollgatev1.AskState_ASK_STATE_PENDING {
						pending = append(pending, a)
					}
				}
				if len(pending) == 0 {
					continue
				}
				a := pending[rng.IntN(len(pending))]
				who := "alice"
				if a.GetTitle() != "" && rng.IntN(8) == 0 {
					who = "bob" // refused: not the requester
				}
				if len(r.GetAsks()) > 0 && a.GetKind() == tollgatev1.AskKind_ASK_KIND_APPROVAL && rng.IntN(4) == 0 {
					who = "carol"
				}
				switch n := rng.IntN(20); {
				case n == 0:
					_, _ = e.runs("alice").CancelRun(bg, &tollgatev1.CancelRunRequest{RunId: id, Reason: "workload"})
				case n < 3:
					_, _ = e.approvals(who).Decide(bg, &tollgatev1.DecideRequest{AskId: a.GetId(), Decision: &tollgatev1.DecideRequest_Reject{Reject: &tollgatev1.Reject{Reason: "no"}}})
				case n < 6:
					_, _ = e.approvals(who).Answer(bg, &tollgatev1.AnswerRequest{AskId: a.GetId(), Text: []string{"1", "huh", "menu", "2", "docs/a.md"}[rng.IntN(5)]})
				default:
					// Several at once, as people double-click.
					var inner sync.WaitGroup
					for range 3 {
						inner.Add(1)
						go func() {
							defer inner.Done()
							req := &tollgatev1.DecideRequest{AskId: a.GetId(), Decision: &tollgatev1.DecideRequest_Approve{Approve: &tollgatev1.Approve{}}}
							if a.GetKind() == tollgatev1.AskKind_ASK_KIND_TEXT {
								req.Decision = &tollgatev1.DecideRequest_TextAnswer{TextAnswer: &tollgatev1.TextAnswer{Text: "docs/x.md"}}
							}
							_, _ = e.approvals(who).Decide(bg, req)
						}()
					}
					inner.Wait()
				}
			}
		}()
	}
	wg.Wait()
	e.settle()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	inv, err := e.audit("alice").CheckInvariants(bg, &tollgatev1.CheckInvariantsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(inv.GetViolations()) != 0 || int(inv.GetRunsChecked()) != runs {
		t.Fatalf("audit: %d runs checked, violations %v", inv.GetRunsChecked(), inv.GetViolations())
	}
	v, err := e.audit("alice").VerifyJournal(bg, &tollgatev1.VerifyJournalRequest{})
	if err != nil || !v.GetOk() || len(v.GetResults()) != runs {
		t.Fatalf("journal: %v %v", v, err)
	}
	states := map[string]int{}
	for _, res := range v.GetResults() {
		g, _ := e.runs("alice").GetRun(bg, &tollgatev1.GetRunRequest{RunId: res.GetRunId()})
		states[g.GetRun().GetState().String()]++
	}
	t.Logf("outcomes: %v", states)
	if len(states) < 3 {
		t.Fatalf("the workload should reach varied outcomes: %v", states)
	}
}

func terminal(s tollgatev1.RunState) bool {
	switch s {
	case tollgatev1.RunState_RUN_STATE_COMPLETE, tollgatev1.RunState_RUN_STATE_PARTIAL, tollgatev1.RunState_RUN_STATE_FAILED,
		tollgatev1.RunState_RUN_STATE_CANCELLED, tollgatev1.RunState_RUN_STATE_REJECTED, tollgatev1.RunState_RUN_STATE_EXPIRED:
		return true
	}
	return false
}

func TestRandomWorkloadAuditsClean(t *testing.T) {
	e := newEnv(t, nil, echoTools())
	workload(t, e, 40)
}
