package approvectl

import (
	"bytes"
	"os"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	tollgatev1 "github.com/tollgate-dev/tollgate/gen/tollgate/v1"
)

// progressRuns is a run as a follower sees it commit by commit: its
// probes queued, running, done, then parked on a question.
func progressRuns() []*tollgatev1.Run {
	st := func(id string, s tollgatev1.StepStatus) *tollgatev1.StepState {
		return &tollgatev1.StepState{StepId: id, State: s}
	}
	q, l, ok, w := tollgatev1.StepStatus_STEP_STATUS_RUNNABLE, tollgatev1.StepStatus_STEP_STATUS_LEASED, tollgatev1.StepStatus_STEP_STATUS_SUCCEEDED, tollgatev1.StepStatus_STEP_STATUS_WAITING
	running, parked := tollgatev1.RunState_RUN_STATE_RUNNING, tollgatev1.RunState_RUN_STATE_PARKED
	ask := &tollgatev1.AskSummary{Id: "r1/ask_1", Title: "save this reading?", State: tollgatev1.AskState_ASK_STATE_PENDING, CreatedAt: at(time.Second),
		AnswerCommand: "approvectl approve r1/ask_1   or   approvectl reject r1/ask_1 --reason TEXT"}
	return []*tollgatev1.Run{
		{State: running, Steps: []*tollgatev1.StepState{st("cpu", q), st("mem", q), st("brief", w)}},
		{State: running, Steps: []*tollgatev1.StepState{st("cpu", l), st("mem", q), st("brief", w)}},
		{State: running, Steps: []*tollgatev1.StepState{st("cpu", l), st("mem", l), st("brief", w)}},
		{State: running, Steps: []*tollgatev1.StepState{st("cpu", l), st("mem", l), st("brief", w)}}, // a heartbeat: nothing to show
		{State: running, Steps: []*tollgatev1.StepState{st("cpu", ok), st("mem", ok), st("brief", ok)}},
		{State: parked, Steps: []*tollgatev1.StepState{st("cpu", ok), st("mem", ok), st("brief", ok), st("save", w)}, Asks: []*tollgatev1.AskSummary{ask}},
	}
}

func TestLineProgressPrintsOnlyChanges(t *testing.T) {
	var b bytes.Buffer
	p := newLineProgress(&b, time.UTC)
	for i, r := range progressRuns() {
		p.show(r, t0.Add(time.Duration(i)*time.Second))
	}
	p.show(progressRuns()[5], t0.Add(time.Minute)) // parked again: the question is not repeated
	p.end()
	want := "09:00:00  running  steps 0/3  queued cpu, mem\n" +
		"09:00:01  running  steps 0/3  now cpu  queued mem\n" +
		"09:00:02  running  steps 0/3  now cpu, mem\n" +
		"09:00:04  running  steps 3/3\n" +
		"09:00:05  parked  steps 3/4  waiting on r1/ask_1\n" +
		"09:00:05  ask r1/ask_1 \"save this reading?\"\n" +
		"09:00:05    answer: approvectl approve r1/ask_1   or   approvectl reject r1/ask_1 --reason TEXT\n"
	if b.String() != want {
		t.Fatalf("got:\n%s\nwant:\n%s", b.String(), want)
	}
}

// writes records each Write: what a terminal receives, call by call.
type writes struct{ calls []string }

func (w *writes) Write(p []byte) (int, error) {
	w.calls = append(w.calls, string(p))
	return len(p), nil
}

func TestTermProgressRedrawsOneLine(t *testing.T) {
	w := &writes{}
	p := newTermProgress(w, time.UTC, 40)
	runs := progressRuns()
	for i, r := range runs {
		p.show(r, t0.Add(time.Duration(i)*time.Second))
	}
	p.end()
	if len(w.calls) != len(runs)+1 {
		t.Fatalf("want one write per update and a newline at the end, got %q", w.calls)
	}
	for i, c := range w.calls[:len(runs)] {
		if !strings.HasPrefix(c, "\r\x1b[2K") {
			t.Errorf("update %d does not return and clear the line: %q", i, c)
		}
		status := c[strings.LastIndex(c, "\n")+1:]
		if n := len([]rune(strings.TrimPrefix(status, "\r\x1b[2K"))); n > 39 {
			t.Errorf("update %d is %d runes wide on a 40-column terminal: %q", i, n, status)
		}
		if i < len(runs)-1 && strings.Contains(c, "\n") {
			t.Errorf("update %d moved to a new line: %q", i, c)
		}
	}
	if got := w.calls[1]; got != "\r\x1b[2K09:00:01  running  steps 0/3  now cpu …" {
		t.Errorf("a long status is cut to the width: %q", got)
	}
	// The question is printed above the status line, where it stays.
	last := w.calls[len(runs)-1]
	want := "\r\x1b[2Kask r1/ask_1 \"save this reading?\"\n  answer: approvectl approve r1/ask_1   or   approvectl reject r1/ask_1 --reason TEXT\n09:00:05  parked  steps 3/4  waiting o…"
	if last != want {
		t.Errorf("parked:\n got %q\nwant %q", last, want)
	}
	if w.calls[len(runs)] != "\n" {
		t.Errorf("the last line is ended before the summary: %q", w.calls[len(runs)])
	}
}

func TestIsTerminal(t *testing.T) {
	if isTerminal(&bytes.Buffer{}) {
		t.Fatal("a buffer is not a terminal")
	}
	f, err := os.CreateTemp(t.TempDir(), "out")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if isTerminal(f) {
		t.Fatal("a regular file is not a terminal")
	}
}

// graphAskDemo is graph-ask-demo's plan as a run carries it: two probes
// joined, a brief, and save behind "save this reading?", which checks a
// fact before it is used (so the run holds its freshness probe).
func graphAskDemo() *tollgatev1.Plan {
	tool, join := tollgatev1.StepKind_STEP_KIND_TOOL, tollgatev1.StepKind_STEP_KIND_JOIN
	return &tollgatev1.Plan{
		InitialSteps: []*tollgatev1.Step{{Id: "cpu", Kind: tool}, {Id: "mem", Kind: tool}, {Id: "join_probes", Kind: join},
			{Id: "brief", Kind: tollgatev1.StepKind_STEP_KIND_PROSE}},
		StoppingPoints: []*tollgatev1.StoppingPoint{{Id: "ask_1", Type: tollgatev1.StoppingPointType_STOPPING_POINT_TYPE_MENU,
			Check:   &tollgatev1.Check{Id: "host"},
			Options: []*tollgatev1.Option{{Id: "1", Label: "Yes", Steps: []*tollgatev1.Step{{Id: "save", Kind: tool}}}, {Id: "2", Label: "No"}}}},
	}
}

// Issue 16: progress counts what will run (not joins, not a gate's
// freshness probe), says what waits behind a gate, keeps its total while
// the run waits and is approved, and never shows an internal id.
func TestProgressCountsWhatWillRun(t *testing.T) {
	st := func(id string, s tollgatev1.StepStatus) *tollgatev1.StepState {
		return &tollgatev1.StepState{StepId: id, State: s}
	}
	ok, l, q := tollgatev1.StepStatus_STEP_STATUS_SUCCEEDED, tollgatev1.StepStatus_STEP_STATUS_LEASED, tollgatev1.StepStatus_STEP_STATUS_RUNNABLE
	ask := &tollgatev1.AskSummary{Id: "r1/ask_1", StoppingPointId: "ask_1", Title: "save this reading?", State: tollgatev1.AskState_ASK_STATE_PENDING, CreatedAt: at(time.Second)}
	approved := &tollgatev1.AskSummary{Id: "r1/ask_1", StoppingPointId: "ask_1", State: tollgatev1.AskState_ASK_STATE_CONSUMED, CreatedAt: at(time.Second)}
	done := []*tollgatev1.StepState{st("cpu", ok), st("mem", ok), st("join_probes", ok), st("brief", ok)}
	for _, tc := range []struct {
		name string
		run  *tollgatev1.Run
		want string
	}{
		{"running", &tollgatev1.Run{State: tollgatev1.RunState_RUN_STATE_RUNNING,
			Steps: []*tollgatev1.StepState{st("cpu", ok), st("mem", l), st("join_probes", tollgatev1.StepStatus_STEP_STATUS_WAITING), st("brief", tollgatev1.StepStatus_STEP_STATUS_WAITING)}},
			"running  steps 1/3  now mem"},
		{"parked, probing", &tollgatev1.Run{State: tollgatev1.RunState_RUN_STATE_PARKED,
			Steps: append(append([]*tollgatev1.StepState{}, done...), st("check~ask_1", l)), Asks: []*tollgatev1.AskSummary{ask}},
			"parked  steps 3/3, 1 behind a gate  now checking facts for ask_1  waiting on r1/ask_1"},
		{"parked, probe queued again", &tollgatev1.Run{State: tollgatev1.RunState_RUN_STATE_PARKED,
			Steps: append(append([]*tollgatev1.StepState{}, done...), st("check~ask_1", q)), Asks: []*tollgatev1.AskSummary{ask}},
			"parked  steps 3/3, 1 behind a gate  queued checking facts for ask_1  waiting on r1/ask_1"},
		{"approved, facts being checked", &tollgatev1.Run{State: tollgatev1.RunState_RUN_STATE_RUNNING,
			Steps: append(append([]*tollgatev1.StepState{}, done...), st("check~ask_1", l)), Asks: []*tollgatev1.AskSummary{withState(ask, tollgatev1.AskState_ASK_STATE_APPROVED)}},
			"running  steps 3/3, 1 behind a gate  now checking facts for ask_1"},
		// A fact changed: the ask went stale and what it read runs again;
		// the total stays, and save is still behind the gate.
		{"re-preparing", &tollgatev1.Run{State: tollgatev1.RunState_RUN_STATE_RUNNING,
			Steps: []*tollgatev1.StepState{st("cpu", q), st("mem", ok), st("join_probes", tollgatev1.StepStatus_STEP_STATUS_WAITING),
				st("brief", tollgatev1.StepStatus_STEP_STATUS_WAITING), st("check~ask_1", ok)}, Asks: []*tollgatev1.AskSummary{withState(ask, tollgatev1.AskState_ASK_STATE_STALE)}},
			"running  steps 1/3, 1 behind a gate  queued cpu"},
		{"rejected", &tollgatev1.Run{State: tollgatev1.RunState_RUN_STATE_REJECTED,
			Steps: append(append([]*tollgatev1.StepState{}, done...), st("check~ask_1", ok)), Asks: []*tollgatev1.AskSummary{withState(ask, tollgatev1.AskState_ASK_STATE_REJECTED)}},
			"rejected  steps 3/3"},
		{"approved", &tollgatev1.Run{State: tollgatev1.RunState_RUN_STATE_RUNNING,
			Steps: append(append([]*tollgatev1.StepState{}, done...), st("check~ask_1", ok), st("save", q)), Asks: []*tollgatev1.AskSummary{approved}},
			"running  steps 3/4  queued save"},
		{"complete", &tollgatev1.Run{State: tollgatev1.RunState_RUN_STATE_COMPLETE,
			Steps: append(append([]*tollgatev1.StepState{}, done...), st("check~ask_1", ok), st("save", ok)), Asks: []*tollgatev1.AskSummary{approved}},
			"complete  steps 4/4"},
	} {
		if got := progressOf(tc.run, graphAskDemo()).line(); got != tc.want {
			t.Errorf("%s:\n got %q\nwant %q", tc.name, got, tc.want)
		}
	}
}

func withState(a *tollgatev1.AskSummary, st tollgatev1.AskState) *tollgatev1.AskSummary {
	c := proto.Clone(a).(*tollgatev1.AskSummary)
	c.State = st
	return c
}

// What waits on a question (it runs whatever the answer) is said to be
// behind a question, not a gate.
func TestProgressBehindAQuestion(t *testing.T) {
	r := &tollgatev1.Run{State: tollgatev1.RunState_RUN_STATE_PARKED,
		Plan: &tollgatev1.Plan{StoppingPoints: []*tollgatev1.StoppingPoint{{Id: "kind", Type: tollgatev1.StoppingPointType_STOPPING_POINT_TYPE_CHOICE,
			Options: []*tollgatev1.Option{{Id: "1", Label: "sequence"}, {Id: "2", Label: "class"}},
			Then:    &tollgatev1.Phase{Steps: []*tollgatev1.Step{{Id: "source", Kind: tollgatev1.StepKind_STEP_KIND_TOOL}, {Id: "drawing", Kind: tollgatev1.StepKind_STEP_KIND_PROSE}}}}}},
		Asks: []*tollgatev1.AskSummary{{Id: "r1/kind", StoppingPointId: "kind", State: tollgatev1.AskState_ASK_STATE_PENDING}}}
	if got, want := progressOf(r, r.GetPlan()).line(), "parked  steps 0/0, 2 behind a question  waiting on r1/kind"; got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
}

// A watch sends the plan with its first event only: the display keeps it,
// so later events are counted against it too.
func TestProgressKeepsThePlanOfTheFirstEvent(t *testing.T) {
	st := func(id string, s tollgatev1.StepStatus) *tollgatev1.StepState {
		return &tollgatev1.StepState{StepId: id, State: s}
	}
	ok, w := tollgatev1.StepStatus_STEP_STATUS_SUCCEEDED, tollgatev1.StepStatus_STEP_STATUS_WAITING
	first := &tollgatev1.Run{State: tollgatev1.RunState_RUN_STATE_RUNNING, Plan: graphAskDemo(),
		Steps: []*tollgatev1.StepState{st("cpu", ok), st("mem", ok), st("join_probes", w), st("brief", w)}}
	parked := &tollgatev1.Run{State: tollgatev1.RunState_RUN_STATE_PARKED,
		Steps: []*tollgatev1.StepState{st("cpu", ok), st("mem", ok), st("join_probes", ok), st("brief", ok)},
		Asks:  []*tollgatev1.AskSummary{{Id: "r1/ask_1", StoppingPointId: "ask_1", Title: "save this reading?", State: tollgatev1.AskState_ASK_STATE_PENDING, CreatedAt: at(time.Second)}}}
	var b bytes.Buffer
	p := newLineProgress(&b, time.UTC)
	p.show(first, t0)
	p.show(parked, t0.Add(time.Second))
	want := "09:00:00  running  steps 2/3\n" +
		"09:00:01  parked  steps 3/3, 1 behind a gate  waiting on r1/ask_1\n" +
		"09:00:01  ask r1/ask_1 \"save this reading?\"\n"
	if b.String() != want {
		t.Fatalf("got:\n%s\nwant:\n%s", b.String(), want)
	}
}
