package approvals

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/internal/store/memstore"
	"github.com/tollgate-dev/tollgate/pkg/engine"
	"github.com/tollgate-dev/tollgate/pkg/plan"
)

// recorded is a runner.Recorder that keeps the events it is handed.
type recorded struct{ events []engine.Event }

func (r *recorded) Release(context.Context, string, engine.Dispatch) {}

func (r *recorded) Get(context.Context, string) (*engine.Run, *engine.Machine, error) {
	return nil, nil, nil
}

func (r *recorded) Event(ctx context.Context, runID string, build func(time.Time) engine.Event) (engine.Transition, error) {
	return r.Events(ctx, runID, build)
}

func (r *recorded) Events(_ context.Context, _ string, builds ...func(time.Time) engine.Event) (engine.Transition, error) {
	for _, b := range builds {
		r.events = append(r.events, b(time.Now()))
	}
	return engine.Transition{}, nil
}

func (r *recorded) StoreTime() time.Time { return time.Now() }

// I5, I9: alice asks herself to pay (`ask me`); separation of duties
// leaves nobody, so when the ask opens the desk escalates it to the
// configured role — routing comes with the policy, not from a type
// assertion that could miss it — and approves nothing.
func TestOpenedEscalatesAnAskNobodyMayDecide(t *testing.T) {
	d := New(Config{Policy: devPolicy(t), Domain: "acme", EscalateTo: "finance", Store: memstore.New(memstore.Config{})})
	args := plan.Object(`{"vendor":"V-1","invoice":"I-1","amount":5000,"currency":"INR","bank_account":"X"}`)
	run := &engine.Run{ID: "r", Requester: "alice", Asks: map[string]*engine.AskRun{"ask_1": {ID: "ask_1", Type: plan.StopMenu, Audience: plan.AudienceRequester,
		State: engine.AskPending, Payload: []engine.Payload{{Step: "b", Server: "payments", Tool: "pay", Args: args}}}}}
	rec := &recorded{}
	d.Opened(context.Background(), rec, run, "ask_1")
	if len(rec.events) != 1 {
		t.Fatalf("events %v, want one escalation", rec.events)
	}
	esc, ok := rec.events[0].(engine.Escalate)
	if !ok || esc.To != "finance" || !strings.Contains(esc.Reason, "nobody eligible") {
		t.Fatalf("want an escalation to finance saying nobody is eligible, got %#v", rec.events[0])
	}
	// Shown as routed: the requester is kept out.
	if req := d.Requirement(context.Background(), run, run.Asks["ask_1"]); len(req.Excluded) == 0 || req.Excluded[0] != "alice" {
		t.Fatalf("requirement %+v: alice is excluded", req)
	}
}
