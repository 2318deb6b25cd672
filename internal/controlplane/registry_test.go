package controlplane

import (
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	tollgatev1 "github.com/tollgate-dev/tollgate/gen/tollgate/v1"
)

func (e *env) skills(user string) tollgatev1.SkillServiceClient {
	return tollgatev1.NewSkillServiceClient(e.conn(user))
}

const greetV1 = `---
name: greet
description: note a greeting
---
ask me:
  save it?
save: notes.store {"text": "hello"}
`

// Issue 19, item 1: a skill is published, run by name, published again,
// and each run records the version it ran; the history stays after a
// delete, and a deleted skill runs no version.
func TestSkillRegistryVersionsRunsAndDelete(t *testing.T) {
	e := newEnv(t, nil, echoTools())
	put := func(user, src string) *tollgatev1.PutSkillResponse {
		t.Helper()
		resp, err := e.skills(user).PutSkill(bg, &tollgatev1.PutSkillRequest{Source: src})
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	v1 := put("alice", greetV1)
	if !v1.GetSaved() || v1.GetSkill().GetVersion() != 1 || v1.GetSkill().GetAuthor() != "alice" || v1.GetSkill().GetOrigin() != "api" {
		t.Fatalf("first publication: %+v", v1)
	}
	if again := put("bob", greetV1); !again.GetUnchanged() || again.GetSkill().GetVersion() != 1 || again.GetSkill().GetAuthor() != "alice" {
		t.Fatalf("the same source again stores nothing: %+v", again)
	}
	r1 := e.start("alice", "greet")
	if r1.GetSkill() != "greet" || r1.GetSkillVersion() != 1 || r1.GetPlanDigest() != v1.GetPlanDigest() {
		t.Fatalf("run of v1 records skill %q v%d plan %s; want greet v1 %s", r1.GetSkill(), r1.GetSkillVersion(), r1.GetPlanDigest(), v1.GetPlanDigest())
	}
	v2 := put("bob", strings.Replace(greetV1, `"hello"`, `"good morning"`, 1))
	if v2.GetSkill().GetVersion() != 2 || v2.GetPlanDigest() == v1.GetPlanDigest() {
		t.Fatalf("second version: %+v", v2)
	}
	r2 := e.start("alice", "greet")
	if r2.GetSkillVersion() != 2 || r2.GetPlanDigest() != v2.GetPlanDigest() {
		t.Fatalf("run after v2 ran v%d %s", r2.GetSkillVersion(), r2.GetPlanDigest())
	}
	// A pinned version runs that version.
	pinned, err := e.runs("alice").StartRun(bg, &tollgatev1.StartRunRequest{Source: &tollgatev1.StartRunRequest_Skill{Skill: "greet"}, SkillVersion: 1})
	if err != nil || pinned.GetRun().GetSkillVersion() != 1 || pinned.GetRun().GetPlanDigest() != v1.GetPlanDigest() {
		t.Fatalf("pinned v1: %v %+v", err, pinned.GetRun())
	}
	// A schedule's request ids are its own: a caller cannot take a tick's.
	if _, err := e.runs("alice").StartRun(bg, &tollgatev1.StartRunRequest{RequestId: "schedule:nightly:1:2026-12-07T08:00:00Z", Source: &tollgatev1.StartRunRequest_Skill{Skill: "greet"}}); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("a request id with the schedules' prefix: %v", err)
	}
	// The journal's first record names the skill version.
	if recs := journal(t, e, r2.GetId()); !strings.Contains(recs[0].GetPayloadJson(), `"skill_version":2`) {
		t.Fatalf("run_started does not record the version: %s", recs[0].GetPayloadJson())
	}
	// Listing filters runs by skill and shows the version.
	list, err := e.runs("alice").ListRuns(bg, &tollgatev1.ListRunsRequest{Skill: "greet"})
	if err != nil || len(list.GetRuns()) != 3 {
		t.Fatalf("runs of greet: %v %d", err, len(list.GetRuns()))
	}

	// Delete: gone by name, history kept, and no version runs.
	if _, err := e.skills("carol").DeleteSkill(bg, &tollgatev1.DeleteSkillRequest{Name: "greet"}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.runs("alice").StartRun(bg, &tollgatev1.StartRunRequest{Source: &tollgatev1.StartRunRequest_Skill{Skill: "greet"}}); status.Code(err) != codes.NotFound {
		t.Fatalf("run of a deleted skill: %v", err)
	}
	if _, err := e.runs("alice").StartRun(bg, &tollgatev1.StartRunRequest{Source: &tollgatev1.StartRunRequest_Skill{Skill: "greet"}, SkillVersion: 1}); status.Code(err) != codes.NotFound {
		t.Fatalf("run of a deleted skill's old version: %v", err)
	}
	h, err := e.skills("dave").SkillHistory(bg, &tollgatev1.SkillHistoryRequest{Name: "greet"})
	if err != nil || len(h.GetVersions()) != 3 || !h.GetVersions()[2].GetDeleted() || h.GetVersions()[2].GetAuthor() != "carol" || h.GetVersions()[0].GetSource() != "" {
		t.Fatalf("history after delete: %v %+v", err, h.GetVersions())
	}
	old, err := e.skills("dave").GetSkill(bg, &tollgatev1.GetSkillRequest{Name: "greet", Version: 1})
	if err != nil || old.GetSkill().GetSource() != greetV1 || old.GetPlanCard() == "" || old.GetLatestVersion() != 3 {
		t.Fatalf("v1 after delete is still readable: %v %+v", err, old)
	}
	if _, err := e.skills("dave").GetSkill(bg, &tollgatev1.GetSkillRequest{Name: "greet"}); status.Code(err) != codes.NotFound {
		t.Fatalf("the latest of a deleted skill: %v", err)
	}
	// Published again, it continues the numbering.
	if v4 := put("alice", greetV1); v4.GetSkill().GetVersion() != 4 {
		t.Fatalf("republished as v%d, want 4", v4.GetSkill().GetVersion())
	}
}

// Issue 19, item 1: what may not be published is refused with line:col,
// and who may publish is policy.
func TestSkillPublicationRefusals(t *testing.T) {
	e := newEnv(t, nil, echoTools())
	cases := []struct {
		name, who, src string
		code           codes.Code
		line, col      int32 // where an ERROR diagnostic must be (col 0: any)
	}{
		{name: "does not compile", who: "alice", src: "---\nname: broken\n---\nsave: notes.nope {}\n", line: 4},
		{name: "a gate nobody could decide", who: "alice", src: "---\nname: pay-anyone\n---\nask auditor:\n  save it?\nsave: notes.store {\"text\": \"x\"}\n", line: 4, col: 1},
		{name: "not a member: no skill.* role", who: "mallory", src: greetV1, code: codes.PermissionDenied},
		{name: "a bad name", who: "alice", src: "---\nname: Bad.Name\n---\nask me:\n  ok?\n", code: codes.InvalidArgument},
		{name: "names disagree", who: "alice", src: greetV1, code: codes.InvalidArgument},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req := &tollgatev1.PutSkillRequest{Source: tc.src}
			if tc.name == "names disagree" {
				req.Name = "other"
			}
			resp, err := e.skills(tc.who).PutSkill(bg, req)
			if tc.code != codes.OK {
				if status.Code(err) != tc.code {
					t.Fatalf("got %v, want %v", err, tc.code)
				}
				return
			}
			if err != nil || resp.GetSaved() {
				t.Fatalf("saved=%v err=%v: want refused with diagnostics", resp.GetSaved(), err)
			}
			var found bool
			for _, d := range resp.GetDiagnostics() {
				if d.GetSeverity() == tollgatev1.DiagnosticSeverity_DIAGNOSTIC_SEVERITY_ERROR && d.GetLine() == tc.line && (tc.col == 0 || d.GetColumn() == tc.col) {
					found = true
				}
			}
			if !found {
				t.Fatalf("no error at %d:%d: %+v", tc.line, tc.col, resp.GetDiagnostics())
			}
		})
	}
	// Nothing refused was stored.
	list, err := e.skills("alice").ListSkills(bg, &tollgatev1.ListSkillsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range list.GetSkills() {
		if s.GetName() == "broken" || s.GetName() == "pay-anyone" || s.GetName() == "other" {
			t.Fatalf("a refused skill was stored: %+v", s)
		}
	}
}

// An attacker with publish rights on a skill someone else's schedule
// follows: bob publishes a new latest version of alice's skill with a
// `without asking` side effect. alice's schedule runs as alice, and alice
// may approve that step by starting a run — but she never saw bob's
// version, so the schedule must not approve it in her name.
func TestScheduleFollowingLatestDoesNotApproveAnotherAuthorsUnaskedSteps(t *testing.T) {
	e := newEnv(t, nil, echoTools())
	put := func(user, text string) {
		t.Helper()
		src := "---\nname: jot\n---\nn: notes.store {\"text\": \"" + text + "\"} without asking\n"
		if resp, err := e.skills(user).PutSkill(bg, &tollgatev1.PutSkillRequest{Source: src}); err != nil || !resp.GetSaved() {
			t.Fatalf("%s publishes jot: %v %+v", user, err, resp.GetDiagnostics())
		}
	}
	put("alice", "alice wrote this")
	sched := tollgatev1.NewScheduleServiceClient(e.conn("alice"))
	if _, err := sched.PutSchedule(bg, &tollgatev1.PutScheduleRequest{Spec: &tollgatev1.ScheduleSpec{Name: "jot-often", Skill: "jot", Cron: "* * * * * *", Concurrency: "allow"}}); err != nil {
		t.Fatal(err)
	}
	show := func() *tollgatev1.Schedule {
		t.Helper()
		resp, err := sched.GetSchedule(bg, &tollgatev1.GetScheduleRequest{Name: "jot-often"})
		if err != nil {
			t.Fatal(err)
		}
		return resp.GetSchedule()
	}
	deadline := time.Now().Add(10 * time.Second)
	for show().GetStarted() == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("alice's own version never started: %+v", show())
		}
		<-time.After(50 * time.Millisecond)
	}
	put("bob", "bob wrote this")
	for !strings.Contains(show().GetLastError(), "published by bob") {
		if time.Now().After(deadline.Add(10 * time.Second)) {
			t.Fatalf("a tick of bob's version was not refused: %+v", show())
		}
		<-time.After(50 * time.Millisecond)
	}
	if _, err := sched.PauseSchedule(bg, &tollgatev1.PauseScheduleRequest{Name: "jot-often"}); err != nil {
		t.Fatal(err)
	}
	runs, err := e.runs("alice").ListRuns(bg, &tollgatev1.ListRunsRequest{Schedule: "jot-often", PageSize: 500})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range runs.GetRuns() {
		if r.GetSkillVersion() != 1 {
			t.Fatalf("alice's schedule ran bob's version %d: %+v", r.GetSkillVersion(), r)
		}
	}
}
