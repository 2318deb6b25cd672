package approvectl

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	tollgatev1 "github.com/tollgate-dev/tollgate/gen/tollgate/v1"
)

var t0 = time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)

func at(d time.Duration) *timestamppb.Timestamp { return timestamppb.New(t0.Add(d)) }

// attempt is one try leased and finished on edge-1 (finish 0: running).
func attempt(n int, queued, leased, finished time.Duration) *tollgatev1.Attempt {
	a := &tollgatev1.Attempt{N: int32(n), Executor: "edge-1", QueuedAt: at(queued), LeasedAt: at(leased), StartedAt: at(leased)}
	if finished > 0 {
		a.FinishedAt = at(finished)
	}
	return a
}

const ms1 = time.Millisecond

// fanRun is a run that fanned out three probes, joined them, wrote a
// brief and now waits on a question, with save still to come.
func fanRun() *tollgatev1.Run {
	step := func(id, group string, st tollgatev1.StepStatus, busy time.Duration, atts ...*tollgatev1.Attempt) *tollgatev1.StepState {
		return &tollgatev1.StepState{StepId: id, ParallelGroup: group, State: st, BranchTime: durationpb.New(busy), Attempts: atts}
	}
	ok := tollgatev1.StepStatus_STEP_STATUS_SUCCEEDED
	return &tollgatev1.Run{
		Id: "r1", State: tollgatev1.RunState_RUN_STATE_PARKED, Requester: "alice", CreatedAt: at(0), PlanCard: "plan card\n",
		Steps: []*tollgatev1.StepState{
			step("cpu", "probes", ok, 412*ms1, attempt(1, 1*ms1, 3*ms1, 415*ms1)),
			step("mem", "probes", ok, 270*ms1, attempt(1, 1*ms1, 4*ms1, 274*ms1)),
			step("disk", "probes", ok, 81*ms1, attempt(1, 2*ms1, 5*ms1, 86*ms1)),
			step("join_probes", "", ok, 0),
			step("brief", "", ok, 12*ms1, attempt(1, 416*ms1, 420*ms1, 432*ms1)),
			step("save", "", tollgatev1.StepStatus_STEP_STATUS_WAITING, 0),
		},
		Fans: []*tollgatev1.FanTiming{{Group: "probes", Branches: 3, Steps: []string{"cpu", "mem", "disk"},
			Wall: durationpb.New(414 * ms1), BranchSum: durationpb.New(763 * ms1), BranchMax: durationpb.New(412 * ms1), Start: at(1 * ms1), End: at(415 * ms1)}},
		Asks: []*tollgatev1.AskSummary{
			{Id: "r1/ask_1", Title: "save this reading?", State: tollgatev1.AskState_ASK_STATE_PENDING, CreatedAt: at(433 * ms1),
				ExpiresAt: at(72 * time.Hour), AnswerCommand: "approvectl approve r1/ask_1"},
		},
	}
}

func TestTimelineOfAParkedFanRun(t *testing.T) {
	now := t0.Add(3*time.Hour + 12*time.Minute)
	var b bytes.Buffer
	writeTimeline(&b, fanRun(), nil, now)
	got := b.String()
	want := []string{
		"+1ms    fan probes  3 branches  wall 414ms · sum 763ms · max 412ms",
		"+1ms      cpu        succeeded  on edge-1  1 attempt  412ms  queued 2ms",
		"+1ms      mem        succeeded  on edge-1  1 attempt  270ms  queued 3ms",
		"+2ms      disk       succeeded  on edge-1  1 attempt  81ms  queued 3ms",
		"          join_probes  succeeded",
		"+416ms  brief        succeeded  on edge-1  1 attempt  12ms  queued 4ms",
		`+433ms  ask r1/ask_1 "save this reading?"  pending  waiting 3h12m  (opened 2026-03-01T09:00:00Z, expires 2026-03-04 09:00 (in 2d21h))`,
		"          answer: approvectl approve r1/ask_1",
		"        save         waiting",
	}
	lines := strings.Split(strings.TrimRight(got, "\n"), "\n")
	if len(lines) != len(want) {
		t.Fatalf("got %d lines, want %d:\n%s", len(lines), len(want), got)
	}
	for i, w := range want {
		if strings.TrimSpace(lines[i]) != strings.TrimSpace(w) {
			t.Errorf("line %d:\n got %q\nwant %q", i, strings.TrimSpace(lines[i]), strings.TrimSpace(w))
		}
	}
}

func TestTimelineOfADecidedAsk(t *testing.T) {
	r := fanRun()
	a := r.Asks[0]
	a.State, a.ClosedAt, a.AnswerCommand = tollgatev1.AskState_ASK_STATE_CONSUMED, at(3*time.Minute+5*time.Second+433*ms1), ""
	packets := map[string]*tollgatev1.Ask{a.Id: {Id: a.Id, Decisions: []*tollgatev1.Decision{
		{Kind: tollgatev1.DecisionKind_DECISION_KIND_APPROVE, Actor: "alice", Time: a.ClosedAt, OptionId: "1", Reason: "looks right"}}}}
	var b bytes.Buffer
	writeTimeline(&b, r, packets, t0.Add(48*time.Hour))
	for _, want := range []string{
		`ask r1/ask_1 "save this reading?"  consumed  waited 3m05s  (opened 2026-03-01T09:00:00Z → decided 2026-03-01T09:03:05Z, deadline 2026-03-04T09:00:00Z)`,
		"approve by alice at 2026-03-01T09:03:05Z · option 1 · looks right",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("lacks %q:\n%s", want, b.String())
		}
	}
	if strings.Contains(b.String(), "answer:") {
		t.Errorf("a decided ask has no answer command:\n%s", b.String())
	}
}

func TestTimelineOfAFanUnderWay(t *testing.T) {
	r := fanRun()
	r.Fans = nil
	r.Steps[2].State, r.Steps[2].Attempts[0].FinishedAt, r.Steps[2].BranchTime = tollgatev1.StepStatus_STEP_STATUS_LEASED, nil, durationpb.New(0)
	var b bytes.Buffer
	writeTimeline(&b, r, nil, t0.Add(2*time.Second))
	for _, want := range []string{"fan probes  3 branches  2 done, figures when all are", "disk       leased     on edge-1  1 attempt  running 2.0s  queued 3ms"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("lacks %q:\n%s", want, b.String())
		}
	}
}

func TestRunJSONCarriesTheTimeline(t *testing.T) {
	now := t0.Add(time.Hour)
	out := runJSON(fanRun(), now)
	if len(out.Fans) != 1 || out.Fans[0].WallMS != 414 || out.Fans[0].BranchSumMS != 763 || out.Fans[0].BranchMaxMS != 412 || out.Fans[0].Branches != 3 {
		t.Fatalf("fans: %+v", out.Fans)
	}
	cpu := out.Steps[0]
	if cpu.ParallelGroup != "probes" || cpu.BranchMS != 412 || cpu.QueueWaitMS != 2 || cpu.Executor != "edge-1" || len(cpu.AttemptLog) != 1 ||
		!cpu.AttemptLog[0].LeasedAt.Equal(t0.Add(3*ms1)) {
		t.Fatalf("cpu: %+v", cpu)
	}
	if a := out.Asks[0]; a.WaitMS != ms(now.Sub(t0.Add(433*ms1))) || !a.ClosedAt.IsZero() || a.Command == "" {
		t.Fatalf("an open ask waits until now: %+v", a)
	}
}
