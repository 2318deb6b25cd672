package e2e

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	tollgatev1 "github.com/tollgate-dev/tollgate/gen/tollgate/v1"
	"github.com/tollgate-dev/tollgate/internal/approvectl"
	"github.com/tollgate-dev/tollgate/internal/identity"
)

// ctlIn runs approvectl in this process against the world's control plane,
// as user, with cfg's clock and terminal (zero: the real ones).
func (w *world) ctlIn(t *testing.T, cfg approvectl.Config, user string, args ...string) result {
	t.Helper()
	tok, err := identity.Mint(w.priv, "k", "i", "a", user, time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var out, errb bytes.Buffer
	cfg.Stdout, cfg.Stderr, cfg.Getenv = &out, &errb, func(string) string { return "" }
	err = approvectl.Run(ctx, append([]string{"--server", w.addr, "--token", tok}, args...), cfg)
	return result{out.String(), errb.String(), approvectl.ExitCode(err)}
}

// The JSON of `runs show` this test reads.
type shownRun struct {
	RunID string `json:"run_id"`
	State string `json:"state"`
	Steps []struct {
		ID            string  `json:"id"`
		Executor      string  `json:"executor"`
		ParallelGroup string  `json:"parallel_group"`
		BranchMS      float64 `json:"branch_ms"`
		AttemptLog    []struct {
			QueuedAt   time.Time `json:"queued_at"`
			LeasedAt   time.Time `json:"leased_at"`
			FinishedAt time.Time `json:"finished_at"`
		} `json:"attempt_log"`
	} `json:"steps"`
	Fans []struct {
		Group       string   `json:"group"`
		Branches    int      `json:"branches"`
		Steps       []string `json:"steps"`
		WallMS      float64  `json:"wall_ms"`
		BranchSumMS float64  `json:"branch_sum_ms"`
		BranchMaxMS float64  `json:"branch_max_ms"`
	} `json:"fans"`
	Asks []struct {
		AskID     string    `json:"ask_id"`
		OpenedAt  time.Time `json:"opened_at"`
		ClosedAt  time.Time `json:"closed_at"`
		WaitMS    float64   `json:"wait_ms"`
		Decisions []struct {
			Kind  string `json:"kind"`
			Actor string `json:"actor"`
		} `json:"decisions"`
	} `json:"asks"`
}

const napsRecipe = `together naps:
  a: test.sleep {"ms": 300}
  b: test.sleep {"ms": 200}
  c: test.sleep {"ms": 100}
then:
  brief: one line about {a, b, c}
ask me:
  keep it?
keep: notes.store {"text": "{brief}"}
`

// spanRe reads back what approvectl prints for a duration.
var spanRe = regexp.MustCompile(`^(?:(\d+)d(\d+)h|(\d+)h(\d+)m|(\d+)m(\d+)s|([\d.]+)s|([\d.]+)ms)$`)

// parseSpan reads a printed duration and how far the printing may have
// rounded it.
func parseSpan(t *testing.T, s string) (d, tol time.Duration) {
	t.Helper()
	m := spanRe.FindStringSubmatch(s)
	if m == nil {
		t.Fatalf("not a duration: %q", s)
	}
	n := func(i int) float64 { v, _ := strconv.ParseFloat(m[i], 64); return v }
	switch {
	case m[1] != "":
		return time.Duration(n(1)*24+n(2)) * time.Hour, time.Hour / 2
	case m[3] != "":
		return time.Duration(n(3))*time.Hour + time.Duration(n(4))*time.Minute, time.Minute / 2
	case m[5] != "":
		return time.Duration(n(5))*time.Minute + time.Duration(n(6))*time.Second, time.Second / 2
	case m[7] != "":
		return time.Duration(n(7) * float64(time.Second)), 50 * time.Millisecond
	}
	if strings.Contains(m[8], ".") {
		return time.Duration(n(8) * float64(time.Millisecond)), 50 * time.Microsecond
	}
	return time.Duration(n(8) * float64(time.Millisecond)), 500 * time.Microsecond
}

func msOf(v float64) time.Duration { return time.Duration(v * float64(time.Millisecond)) }

// The operator's view against a real control plane and executor: run
// --wait shows progress as plain lines off a terminal and names the
// question with its command; runs show prints the fan's wall / sum / max
// as the run's attempts make them, each step's executor, and the ask's
// wait and decision; -o json carries the same figures.
func TestOperatorViewOfAFanRun(t *testing.T) {
	// Not in parallel: it measures how long a fan takes, which other
	// tests sharing the two cores would stretch.
	w := newWorld(t, "  test:\n    - {name: sleep, annotations: {readOnlyHint: true}}\n")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w.executor(t, ctx, "edge-1")
	runs := tollgatev1.NewRunServiceClient(w.conn(t, "alice"))
	// Once a run has completed, the executor is connected: the run below
	// is not blocked (run --wait stops at blocked).
	warm, err := runs.StartRun(ctx, &tollgatev1.StartRunRequest{Source: &tollgatev1.StartRunRequest_Recipe{Recipe: "nap: test.sleep {\"ms\": 1}\n"}})
	if err != nil {
		t.Fatal(err)
	}
	waitRun(t, runs, warm.GetRun().GetId(), state(tollgatev1.RunState_RUN_STATE_COMPLETE))

	wait := w.ctlIn(t, approvectl.Config{}, "alice", "run", writeRecipe(t, napsRecipe), "--wait")
	if wait.code != approvectl.ExitParked { // it parks at its ask (issue 16: not 0)
		t.Fatalf("run --wait: exit %d\n%s%s", wait.code, wait.stdout, wait.stderr)
	}
	if strings.Contains(wait.stdout, "\r") || strings.Contains(wait.stdout, "\x1b[") {
		t.Fatalf("off a terminal, progress is plain lines:\n%q", wait.stdout)
	}
	id := regexp.MustCompile(`run (\S+): parked`).FindStringSubmatch(wait.stdout)
	if id == nil {
		t.Fatalf("run --wait ends parked:\n%s", wait.stdout)
	}
	runID := id[1]
	ask := runID + "/ask_1"
	lines := strings.Split(strings.TrimRight(wait.stdout, "\n"), "\n")
	var status []string
	for i, l := range lines {
		if i > 0 && l == lines[i-1] {
			t.Errorf("a line is printed only when something changed; twice: %q", l)
		}
		if strings.Contains(l, " steps ") {
			status = append(status, l)
		}
	}
	if len(status) == 0 || !regexp.MustCompile(`^\d\d:\d\d:\d\d  parked  steps 4/4, 1 behind a gate  waiting on `+regexp.QuoteMeta(ask)+`$`).MatchString(status[len(status)-1]) {
		t.Errorf("the last status is the parked run with its steps done of total:\n%s", wait.stdout)
	}
	for _, want := range []string{fmt.Sprintf("  ask %s \"keep it?\"\n", ask), "    answer: approvectl approve " + ask} {
		if strings.Count(wait.stdout, want) != 1 {
			t.Errorf("the parked question is shown once, with its command (%q):\n%s", want, wait.stdout)
		}
	}

	// The inbox, at a clock two hours on: open for 2h, due in 2d22h (72h less 2h).
	later := time.Now().Add(2*time.Hour + time.Minute)
	inbox := w.ctlIn(t, approvectl.Config{Now: func() time.Time { return later }}, "alice", "asks")
	if !regexp.MustCompile(regexp.QuoteMeta(ask) + `\s+keep it\?\s+2h\s+\d{4}-\d\d-\d\d \d\d:\d\d \(in 2d2[12]h\)`).MatchString(inbox.stdout) {
		t.Errorf("the inbox shows how long the ask is open and its deadline:\n%s%s", inbox.stdout, inbox.stderr)
	}
	list := w.ctlIn(t, approvectl.Config{Now: func() time.Time { return later }}, "alice", "runs")
	if !regexp.MustCompile(regexp.QuoteMeta(runID) + `\s+parked\s+2h\s`).MatchString(list.stdout) {
		t.Errorf("runs shows each run's state and age:\n%s%s", list.stdout, list.stderr)
	}

	if r := w.ctlIn(t, approvectl.Config{}, "alice", "approve", ask, "--reason", "fine"); r.code != 0 {
		t.Fatalf("approve: %d %s", r.code, r.stderr)
	}
	waitRun(t, runs, runID, state(tollgatev1.RunState_RUN_STATE_COMPLETE))

	show := w.ctlIn(t, approvectl.Config{}, "alice", "runs", "show", runID)
	if show.code != 0 {
		t.Fatalf("runs show: %d %s", show.code, show.stderr)
	}
	var js shownRun
	w.ctlIn(t, approvectl.Config{}, "alice", "runs", "show", runID, "-o", "json").json(t, &js)
	t.Logf("runs show:\n%s", show.stdout)

	// The fan line, read back.
	m := regexp.MustCompile(`fan naps  (\d+) branches  wall (\S+) · sum (\S+) · max (\S+)\n`).FindStringSubmatch(show.stdout)
	if m == nil {
		t.Fatalf("no fan line:\n%s", show.stdout)
	}
	if m[1] != "3" {
		t.Errorf("3 branches, printed %s", m[1])
	}
	wall, wallTol := parseSpan(t, m[2])
	sum, sumTol := parseSpan(t, m[3])
	mx, maxTol := parseSpan(t, m[4])
	if wall > sum || mx > wall {
		t.Errorf("a fan that ran at once: max %v ≤ wall %v ≤ sum %v", mx, wall, sum)
	}

	// The JSON carries the same figures, and they are what the recorded
	// attempts make: wall from the first branch queued to the last
	// finished, branch times each lease to its finish.
	if len(js.Fans) != 1 || js.Fans[0].Group != "naps" || js.Fans[0].Branches != 3 || strings.Join(js.Fans[0].Steps, ",") != "a,b,c" {
		t.Fatalf("fans in JSON: %+v", js.Fans)
	}
	f := js.Fans[0]
	for _, c := range []struct {
		what      string
		printed   time.Duration
		tol       time.Duration
		jsonValue float64
	}{{"wall", wall, wallTol, f.WallMS}, {"sum", sum, sumTol, f.BranchSumMS}, {"max", mx, maxTol, f.BranchMaxMS}} {
		if d := c.printed - msOf(c.jsonValue); d > c.tol || d < -c.tol {
			t.Errorf("%s: printed %v, JSON %vms", c.what, c.printed, c.jsonValue)
		}
	}
	var first, last time.Time
	var bsum, bmax time.Duration
	executors := map[string]string{}
	for _, s := range js.Steps {
		executors[s.ID] = s.Executor
		if s.ParallelGroup != "naps" {
			continue
		}
		var bt time.Duration
		for _, a := range s.AttemptLog {
			if first.IsZero() || a.QueuedAt.Before(first) {
				first = a.QueuedAt
			}
			if a.FinishedAt.After(last) {
				last = a.FinishedAt
			}
			bt += a.FinishedAt.Sub(a.LeasedAt)
		}
		if d := bt - msOf(s.BranchMS); d > time.Microsecond || d < -time.Microsecond {
			t.Errorf("%s: branch_ms %v, its attempts %v", s.ID, s.BranchMS, bt)
		}
		bsum += bt
		bmax = max(bmax, bt)
	}
	for _, c := range []struct {
		what string
		rec  time.Duration
		got  float64
	}{{"wall", last.Sub(first), f.WallMS}, {"sum", bsum, f.BranchSumMS}, {"max", bmax, f.BranchMaxMS}} {
		if d := c.rec - msOf(c.got); d > time.Microsecond || d < -time.Microsecond {
			t.Errorf("%s: the attempts make %v, the fan says %vms", c.what, c.rec, c.got)
		}
	}

	var order []string
	for _, s := range js.Steps {
		order = append(order, s.ID)
	}
	if strings.Join(order, ",") != "a,b,c,join_naps,brief,keep" {
		t.Errorf("steps come in plan order: %v", order)
	}

	// The slowest branch is the one that slept longest (its time runs
	// from the lease's ack to the result, so it can read a little under
	// the 300ms slept).
	branch := map[string]float64{}
	for _, s := range js.Steps {
		branch[s.ID] = s.BranchMS
	}
	if !(branch["a"] > branch["b"] && branch["b"] > branch["c"]) || f.BranchMaxMS != branch["a"] {
		t.Errorf("branch times %v, max %vms: a slept 300ms, b 200ms, c 100ms", branch, f.BranchMaxMS)
	}

	// Each step names its executor, in the text and in the JSON.
	for _, step := range []string{"a", "b", "c", "brief", "keep"} {
		if executors[step] != "edge-1" {
			t.Errorf("%s ran on %q in the JSON, want edge-1", step, executors[step])
		}
		if !regexp.MustCompile(`(?m)^\s+(\+\S+\s+)?\s*` + step + `\s+succeeded\s+on edge-1  1 attempt  \S+  queued \S+`).MatchString(show.stdout) {
			t.Errorf("step %s: no line with its executor, attempts, time and queue wait:\n%s", step, show.stdout)
		}
	}

	// The ask: its wait and its decision.
	if !regexp.MustCompile(regexp.QuoteMeta(`ask `+ask+` "keep it?"  consumed  waited `)+`\S+  \(opened \S+ → decided \S+, deadline \S+\)`).MatchString(show.stdout) ||
		!strings.Contains(show.stdout, "approve by alice at ") {
		t.Errorf("the ask's wait and decision:\n%s", show.stdout)
	}
	if len(js.Asks) != 1 || js.Asks[0].ClosedAt.IsZero() || js.Asks[0].WaitMS <= 0 ||
		msOf(js.Asks[0].WaitMS)-js.Asks[0].ClosedAt.Sub(js.Asks[0].OpenedAt) > time.Microsecond ||
		len(js.Asks[0].Decisions) != 1 || js.Asks[0].Decisions[0].Actor != "alice" || js.Asks[0].Decisions[0].Kind != "approve" {
		t.Errorf("the ask in JSON: %+v", js.Asks)
	}
}

// On a terminal, run --wait redraws one line in place.
func TestRunWaitOnATerminal(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "")
	cfg := approvectl.Config{Terminal: func(io.Writer) bool { return true }}
	r := w.ctlIn(t, cfg, "alice", "run", writeRecipe(t, askFirst), "--wait")
	if r.code != approvectl.ExitParked {
		t.Fatalf("run --wait: %d %s", r.code, r.stderr)
	}
	if !strings.HasPrefix(r.stdout, "\r\x1b[2K") || !regexp.MustCompile(`\n\d\d:\d\d:\d\d  parked  steps 0/0, 1 behind a question  waiting on \S+\n`).MatchString(r.stdout) {
		t.Fatalf("a terminal gets the status redrawn in place, then a newline:\n%q", r.stdout)
	}
	if !strings.Contains(r.stdout, `ask `) || !strings.Contains(r.stdout, `"which diagram should I draw?"`) {
		t.Fatalf("the question is printed above the status:\n%q", r.stdout)
	}
}
