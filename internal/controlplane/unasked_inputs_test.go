package controlplane

import (
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	tollgatev1 "github.com/tollgate-dev/tollgate/gen/tollgate/v1"
)

// A `without asking` step may read the run's inputs: they are known at
// the start. An input's value is data, whatever it holds: braces in it
// are not a reference to an earlier step, neither when the start judges
// the step (it was refused as "depends on earlier steps") nor when it
// runs (the value goes in as written).
func TestUnaskedStepTakesAnInputWithBraces(t *testing.T) {
	tools := echoTools()
	var mu sync.Mutex
	var got []string
	tools["notes.store"] = func(args json.RawMessage) (any, error) {
		var a struct{ Text string }
		_ = json.Unmarshal(args, &a)
		mu.Lock()
		got = append(got, a.Text)
		mu.Unlock()
		return map[string]any{"ok": true}, nil
	}
	e := newEnvOn(t, nil, devPolicy(t), tools, withoutInputSchemas)
	recipe := "w: notes.store {\"text\": \"note: {note}\"} without asking\n"
	resp, err := e.runs("alice").StartRun(bg, &tollgatev1.StartRunRequest{Source: &tollgatev1.StartRunRequest_Recipe{Recipe: recipe},
		Inputs: map[string]string{"note": "see {config} and {w.ok}"}})
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	e.settle()
	if r := e.get("alice", resp.GetRun().GetId()); r.GetState() != tollgatev1.RunState_RUN_STATE_COMPLETE {
		t.Fatalf("run %v: %s", r.GetState(), r.GetStateReason())
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 1 || got[0] != "note: see {config} and {w.ok}" {
		t.Fatalf("stored %q", got)
	}
}

// An input whose value holds braces is still checked against the tool's
// input schema at the start: it is the value the call will run with.
func TestInputWithBracesIsCheckedAtStart(t *testing.T) {
	e := newEnv(t, nil, echoTools())
	recipe := "ask finance:\n  pay V-1?\np: payments.pay {\"vendor\": \"V-1\", \"invoice\": \"I-1\", \"amount\": 10, \"currency\": \"{cur}\", \"bank_account\": \"X\"}\n"
	_, err := e.runs("alice").StartRun(bg, &tollgatev1.StartRunRequest{Source: &tollgatev1.StartRunRequest_Recipe{Recipe: recipe}, Inputs: map[string]string{"cur": "{p}"}})
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "currency") || !strings.Contains(err.Error(), "pattern") {
		t.Fatalf("want the start refused for currency %q: %v", "{p}", err)
	}
}
