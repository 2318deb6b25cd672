package controlplane

import (
	"fmt"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	tollgatev1 "github.com/tollgate-dev/tollgate/gen/tollgate/v1"
	"github.com/tollgate-dev/tollgate/internal/controlplane/api/runsvc"
)

func recipeReq(rid, recipe string, inputs map[string]string) *tollgatev1.StartRunRequest {
	return &tollgatev1.StartRunRequest{RequestId: rid, Source: &tollgatev1.StartRunRequest_Recipe{Recipe: recipe}, Inputs: inputs}
}

// Item 15 (issue 13): a request_id reused for a different request is
// ALREADY_EXISTS naming the first run, as the proto says; only the very
// same request returns the first run with created = false.
func TestItem15_RequestIDReusedForADifferentRequestIsAlreadyExists(t *testing.T) {
	e := newEnv(t, nil, echoTools())
	alice := e.runs("alice")
	const a = "cpu: mcp-monitor.get_cpu_info {}\n"
	const b = "mem: mcp-monitor.get_memory_info {}\n"
	first, err := alice.StartRun(bg, recipeReq("rid-1", a, map[string]string{"who": "bob"}))
	if err != nil || !first.GetCreated() {
		t.Fatalf("first start: %v %v", first, err)
	}
	id := first.GetRun().GetId()
	again, err := alice.StartRun(bg, recipeReq("rid-1", a, map[string]string{"who": "bob"}))
	if err != nil || again.GetCreated() || again.GetRun().GetId() != id {
		t.Fatalf("the same request again must return the first run, created=false: %v %v", again, err)
	}
	for name, req := range map[string]*tollgatev1.StartRunRequest{
		"another recipe":   recipeReq("rid-1", b, map[string]string{"who": "bob"}),
		"other inputs":     recipeReq("rid-1", a, map[string]string{"who": "carol"}),
		"no inputs":        recipeReq("rid-1", a, nil),
		"a skill":          {RequestId: "rid-1", Source: &tollgatev1.StartRunRequest_Skill{Skill: "graph-ask-demo"}},
		"another run name": {RequestId: "rid-1", Name: "renamed", Source: &tollgatev1.StartRunRequest_Recipe{Recipe: a}, Inputs: map[string]string{"who": "bob"}},
	} {
		resp, err := alice.StartRun(bg, req)
		if status.Code(err) != codes.AlreadyExists || !strings.Contains(err.Error(), id) {
			t.Errorf("%s under a used request_id: want ALREADY_EXISTS naming %s, got %v (run %s)", name, id, err, resp.GetRun().GetId())
		}
	}

	// The same rule for the external runs of GateService.
	gs := tollgatev1.NewGateServiceClient(e.conn("alice"))
	cr, err := gs.CreateRun(bg, &tollgatev1.CreateRunRequest{RequestId: "k1", Name: "claims-review"})
	if err != nil || !cr.GetCreated() {
		t.Fatalf("create run: %v %v", cr, err)
	}
	if again, err := gs.CreateRun(bg, &tollgatev1.CreateRunRequest{RequestId: "k1", Name: "claims-review"}); err != nil || again.GetCreated() || again.GetRun().GetId() != cr.GetRun().GetId() {
		t.Fatalf("the same CreateRun again: %v %v", again, err)
	}
	if _, err := gs.CreateRun(bg, &tollgatev1.CreateRunRequest{RequestId: "k1", Name: "payroll"}); status.Code(err) != codes.AlreadyExists || !strings.Contains(err.Error(), cr.GetRun().GetId()) {
		t.Errorf("CreateRun with a used request_id and another name: want ALREADY_EXISTS naming %s, got %v", cr.GetRun().GetId(), err)
	}
	if _, err := gs.OpenGate(bg, &tollgatev1.OpenGateRequest{RequestId: "rid-1", Gate: "claims", Summary: "s"}); status.Code(err) != codes.AlreadyExists || !strings.Contains(err.Error(), id) {
		t.Errorf("OpenGate creating a run under the request_id of a recipe run: want ALREADY_EXISTS naming %s, got %v", id, err)
	}
	e.settle()
}

// Item 15 (issue 13): inputs are recorded in the run and readable by the
// plan's references as {NAME}, whole or spliced into text.
func TestItem15_StartRunInputsAreReadableByReferences(t *testing.T) {
	e := newEnv(t, nil, echoTools())
	const recipe = "look: notes.search {\"query\": \"notes by {who}\", \"who\": \"{who}\"}\n"
	resp, err := e.runs("alice").StartRun(bg, recipeReq("in-1", recipe, map[string]string{"who": "bob", "unused": "x"}))
	if err != nil {
		t.Fatalf("a recipe reading an input: %v", err)
	}
	e.settle()
	run := e.get("alice", resp.GetRun().GetId())
	if run.GetState() != tollgatev1.RunState_RUN_STATE_COMPLETE {
		t.Fatalf("run: %v %s", run.GetState(), run.GetStateReason())
	}
	if got := run.GetInputs(); got["who"] != "bob" || got["unused"] != "x" || len(got) != 2 {
		t.Errorf("the run records its inputs: %v", got)
	}
	out := run.GetSteps()[0].GetAttempts()[0].GetOutputJson()
	if !strings.Contains(out, `"query":"notes by bob"`) || !strings.Contains(out, `"who":"bob"`) {
		t.Errorf("the step read its inputs: %s", out)
	}
	// A reference to a name that is neither a step, an ask nor an input
	// still fails to compile.
	if _, err := e.runs("alice").StartRun(bg, recipeReq("in-2", recipe, map[string]string{"whom": "bob"})); status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "{who}") {
		t.Errorf("an unknown reference: %v", err)
	}
}

// Item 15 (issue 13): an input named like a step or an ask is refused
// naming both, and so are more inputs than the bound and names no
// reference could read; nothing is started.
func TestItem15_StartRunInputsCollidingOrTooManyAreRefused(t *testing.T) {
	e := newEnv(t, nil, echoTools())
	const recipe = "look: notes.search {\"query\": \"{who}\"}\nask me as kind:\n  which?\n  options: a | b\n"
	for name, tc := range map[string]struct {
		inputs map[string]string
		want   []string
	}{
		"input named like a step": {map[string]string{"who": "bob", "look": "x"}, []string{`input "look"`, "step"}},
		"input named like an ask": {map[string]string{"who": "bob", "kind": "x"}, []string{`input "kind"`, "ask"}},
		"ten thousand inputs, one colliding": {func() map[string]string {
			m := map[string]string{"who": "bob", "look": "x"}
			for i := range 10_000 {
				m[fmt.Sprintf("in%d", i)] = "v"
			}
			return m
		}(), []string{"10002 inputs", fmt.Sprint(runsvc.MaxInputs)}},
		"a name no reference can read": {map[string]string{"who": "bob", "two words": "x"}, []string{`input "two words"`}},
		"an empty name":                {map[string]string{"who": "bob", "": "x"}, []string{`input ""`}},
	} {
		_, err := e.runs("alice").StartRun(bg, recipeReq("c-"+name, recipe, tc.inputs))
		if status.Code(err) != codes.InvalidArgument {
			t.Errorf("%s: want INVALID_ARGUMENT, got %v", name, err)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: the error should say %q: %v", name, w, err)
			}
		}
	}
	resp, err := e.runs("alice").ListRuns(bg, &tollgatev1.ListRunsRequest{})
	if err != nil || len(resp.GetRuns()) != 0 {
		t.Fatalf("nothing started: %d runs, %v", len(resp.GetRuns()), err)
	}
}
