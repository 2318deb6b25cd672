package wire

import (
	"testing"
	"time"

	tollgatev1 "github.com/tollgate-dev/tollgate/gen/tollgate/v1"
	"github.com/tollgate-dev/tollgate/pkg/engine"
)

// An ask's summary says when it closed and, while it is pending, how to
// answer it; system decisions have kinds of their own.
func TestAskSummaryClosedAndCommand(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	run := &engine.Run{ID: "r1", Requester: "alice"}
	a := &engine.AskRun{ID: "ask_1", Type: "menu", Title: "ok?", State: engine.AskPending, OpenedAt: t0, ExpiresAt: t0.Add(time.Hour)}
	s := AskSummary(run, a)
	if s.GetClosedAt() != nil || s.GetAnswerCommand() != "approvectl approve r1/ask_1   or   approvectl reject r1/ask_1 --reason TEXT" {
		t.Fatalf("pending: %v", s)
	}
	a.State, a.Closed = engine.AskExpired, t0.Add(time.Hour)
	a.Decisions = []engine.Decision{{Kind: "expire", Actor: "system", At: a.Closed}}
	s = AskSummary(run, a)
	if !s.GetClosedAt().AsTime().Equal(t0.Add(time.Hour)) || s.GetAnswerCommand() != "" {
		t.Fatalf("expired: %v", s)
	}
	if k := Ask(run, nil, a, false).GetDecisions()[0].GetKind(); k != tollgatev1.DecisionKind_DECISION_KIND_EXPIRE {
		t.Fatalf("an expiry is recorded as EXPIRE, got %v", k)
	}
}
