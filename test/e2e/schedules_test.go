package e2e

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	tollgatev1 "github.com/tollgate-dev/tollgate/gen/tollgate/v1"
)

// writeSkill writes a SKILL.md in a folder of its own and returns its path.
func writeSkill(t *testing.T, dir, name, body string) string {
	t.Helper()
	path := filepath.Join(dir, name, "SKILL.md")
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("---\nname: "+name+"\ndescription: an e2e skill\n---\n"+body), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// runsOf lists every run a schedule started, through the API, paging.
func runsOf(t *testing.T, p *plane, user, schedule string) []*tollgatev1.RunSummary {
	t.Helper()
	cl := tollgatev1.NewRunServiceClient(p.conn(t, user))
	var out []*tollgatev1.RunSummary
	tok := ""
	for {
		resp, err := cl.ListRuns(context.Background(), &tollgatev1.ListRunsRequest{Schedule: schedule, PageSize: 500, PageToken: tok})
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, resp.GetRuns()...)
		if tok = resp.GetNextPageToken(); tok == "" {
			return out
		}
	}
}

// ticksOf maps each schedule tick to the runs started for it.
func ticksOf(t *testing.T, p *plane, user, schedule string) map[time.Time][]string {
	t.Helper()
	out := map[time.Time][]string{}
	cl := tollgatev1.NewRunServiceClient(p.conn(t, user))
	for _, r := range runsOf(t, p, user, schedule) {
		run, err := cl.GetRun(context.Background(), &tollgatev1.GetRunRequest{RunId: r.GetId()})
		if err != nil {
			t.Fatal(err)
		}
		if run.GetRun().GetSchedule() != schedule || run.GetRun().GetScheduleTick() == nil {
			t.Fatalf("run %s of schedule %s records schedule %q tick %v", r.GetId(), schedule, run.GetRun().GetSchedule(), run.GetRun().GetScheduleTick())
		}
		tick := run.GetRun().GetScheduleTick().AsTime()
		out[tick] = append(out[tick], r.GetId())
	}
	return out
}

func mustCtl(t *testing.T, p *plane, args ...string) result {
	t.Helper()
	res := p.ctl(t, "", args...)
	if res.code != 0 {
		t.Fatalf("approvectl %s: exit %d\n%s%s", strings.Join(args, " "), res.code, res.stdout, res.stderr)
	}
	return res
}

// Issue 19: push a skill, run it by name from approvectl and through the
// API, push a second version, each run records the version it ran, and
// `skills diff` shows the change; a skill that does not compile, or has a
// gate nobody could decide, is refused with line:col and not stored.
func TestSkillsPushRunAndDiff(t *testing.T) {
	t.Parallel()
	c := newClusterSpec(t, clusterSpec{})
	p := c.plane
	dir := t.TempDir()
	body := "ask me:\n  mark it?\nm: test.mark {\"name\": \"first\"}\n"
	path := writeSkill(t, dir, "tidy", body)
	if res := mustCtl(t, p, "--as", "alice", "skills", "push", path); !strings.Contains(res.stdout, "tidy v1") {
		t.Fatalf("push v1 printed:\n%s", res.stdout)
	}
	var byCtl runOut
	mustCtl(t, p, "--as", "alice", "run", "tidy", "-o", "json").json(t, &byCtl)
	runs := tollgatev1.NewRunServiceClient(p.conn(t, "alice"))
	byAPI, err := runs.StartRun(context.Background(), &tollgatev1.StartRunRequest{RequestId: "e2e-tidy-1", Source: &tollgatev1.StartRunRequest_Skill{Skill: "tidy"}})
	if err != nil {
		t.Fatal(err)
	}
	writeSkill(t, dir, "tidy", strings.Replace(body, "first", "second", 1))
	if res := mustCtl(t, p, "--as", "bob", "skills", "push", path); !strings.Contains(res.stdout, "tidy v2") {
		t.Fatalf("push v2 printed:\n%s", res.stdout)
	}
	var after runOut
	mustCtl(t, p, "--as", "alice", "run", "tidy", "-o", "json").json(t, &after)
	for id, want := range map[string]int64{byCtl.RunID: 1, byAPI.GetRun().GetId(): 1, after.RunID: 2} {
		r, err := runs.GetRun(context.Background(), &tollgatev1.GetRunRequest{RunId: id})
		if err != nil {
			t.Fatal(err)
		}
		if r.GetRun().GetSkill() != "tidy" || r.GetRun().GetSkillVersion() != want {
			t.Fatalf("run %s records %s v%d, want tidy v%d", id, r.GetRun().GetSkill(), r.GetRun().GetSkillVersion(), want)
		}
	}
	if res := mustCtl(t, p, "--as", "alice", "runs", "show", after.RunID); !strings.Contains(res.stdout, "v2") {
		t.Fatalf("runs show does not say the version:\n%s", res.stdout)
	}
	diff := mustCtl(t, p, "--as", "carol", "skills", "diff", "tidy", "1", "2")
	var changed bool
	for _, line := range strings.Split(diff.stdout, "\n") {
		if strings.Contains(line, "first") && strings.Contains(line, "second") && strings.Contains(line, "|") {
			changed = true
		}
	}
	if !changed {
		t.Fatalf("skills diff does not show first | second side by side:\n%s", diff.stdout)
	}
	if res := mustCtl(t, p, "--as", "carol", "skills", "list"); !strings.Contains(res.stdout, "tidy") {
		t.Fatalf("skills list:\n%s", res.stdout)
	}

	// Refusals: with the file's line:col, and nothing stored.
	broken := writeSkill(t, dir, "broken", "ask me:\n  ok?\nm: test.nope {}\n")
	res := p.ctl(t, "", "--as", "alice", "skills", "push", broken)
	if res.code == 0 || !strings.Contains(res.stdout+res.stderr, "SKILL.md:7:") {
		t.Fatalf("a skill that does not compile: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	nobody := writeSkill(t, dir, "nobody", "ask auditor:\n  mark it?\nm: test.mark {\"name\": \"x\"}\n")
	res = p.ctl(t, "", "--as", "alice", "skills", "push", nobody)
	if res.code == 0 || !strings.Contains(res.stdout+res.stderr, "SKILL.md:5:1") || !strings.Contains(res.stdout+res.stderr, "decide") {
		t.Fatalf("a skill with a gate nobody could decide: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	skills := tollgatev1.NewSkillServiceClient(p.conn(t, "alice"))
	for _, name := range []string{"broken", "nobody"} {
		if _, err := skills.GetSkill(context.Background(), &tollgatev1.GetSkillRequest{Name: name}); status.Code(err) != codes.NotFound {
			t.Fatalf("refused skill %s was stored: %v", name, err)
		}
	}
	// Who may publish is policy: mallory holds no skill.* role.
	if res := p.ctl(t, "", "--as", "mallory", "skills", "push", path); res.code == 0 {
		t.Fatalf("mallory published a skill:\n%s", res.stdout)
	}
}

// Issue 19: a schedule firing every second for 10 s across three replicas
// starts exactly one run per tick, and none while paused.
func TestScheduleOnThreeReplicasStartsOneRunPerTick(t *testing.T) {
	t.Parallel()
	c := newClusterSpec(t, clusterSpec{})
	a := c.plane
	b, cc := c.startReplica(), c.startReplica()
	// The run parks on its question at once: no executor is needed, and
	// every run stays live (concurrency allow starts one per tick anyway).
	mustCtl(t, a, "--as", "alice", "skills", "push", writeSkill(t, t.TempDir(), "tick", "ask me:\n  mark it?\nm: test.mark {\"name\": \"tick\"}\n"))
	mustCtl(t, b, "--as", "alice", "schedules", "add", "every-second", "--skill", "tick", "--cron", "* * * * * *", "--concurrency", "allow")
	<-time.After(10500 * time.Millisecond)
	mustCtl(t, cc, "--as", "alice", "schedules", "pause", "every-second")
	ticks := ticksOf(t, a, "alice", "every-second")
	var sorted []time.Time
	for tick, ids := range ticks {
		if len(ids) != 1 {
			t.Fatalf("tick %s started %d runs: %v", tick, len(ids), ids)
		}
		sorted = append(sorted, tick)
	}
	slices.SortFunc(sorted, func(x, y time.Time) int { return x.Compare(y) })
	if len(sorted) < 9 {
		t.Fatalf("%d ticks in 10 s started runs, want at least 9: %v", len(sorted), sorted)
	}
	for i := 1; i < len(sorted); i++ {
		if d := sorted[i].Sub(sorted[i-1]); d != time.Second {
			t.Fatalf("ticks %s and %s are %s apart: a tick started no run", sorted[i-1], sorted[i], d)
		}
	}
	var show struct {
		Started int64 `json:"started"`
		Paused  bool  `json:"paused"`
	}
	mustCtl(t, a, "--as", "alice", "schedules", "show", "every-second", "-o", "json").json(t, &show)
	if show.Started != int64(len(sorted)) || !show.Paused {
		t.Fatalf("schedules show: started %d paused %v; runs %d", show.Started, show.Paused, len(sorted))
	}
	// Paused: nothing more starts.
	<-time.After(2500 * time.Millisecond)
	if n := len(runsOf(t, b, "alice", "every-second")); n != len(sorted) {
		t.Fatalf("%d runs started while paused", n-len(sorted))
	}
	t.Logf("%d ticks, one run each, across 3 replicas", len(sorted))
}

// Issue 19: every replica stopped across two ticks; when one comes back,
// catch_up none starts nothing for them and catch_up last one run, for the
// latest.
func TestScheduleCatchUpAfterEveryReplicaStopped(t *testing.T) {
	t.Parallel()
	c := newClusterSpec(t, clusterSpec{})
	a := c.plane
	b := c.startReplica()
	mustCtl(t, a, "--as", "alice", "skills", "push", writeSkill(t, t.TempDir(), "tick", "ask me:\n  mark it?\nm: test.mark {\"name\": \"tick\"}\n"))
	for _, mode := range []string{"none", "last"} {
		mustCtl(t, a, "--as", "alice", "schedules", "add", "catch-"+mode, "--skill", "tick", "--cron", "*/4 * * * * *",
			"--concurrency", "allow", "--catch-up", mode, "--grace", "1s")
	}
	// Stop both right after a tick both schedules started.
	deadline := time.Now().Add(15 * time.Second)
	for len(runsOf(t, a, "alice", "catch-none")) == 0 || len(runsOf(t, a, "alice", "catch-last")) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no tick started a run")
		}
		<-time.After(100 * time.Millisecond)
	}
	a.stop(t)
	b.stop(t)
	stopped := time.Now()
	// Two ticks pass; start again 1.5 s after the second (grace 1 s:
	// both missed), well before the third.
	t1 := stopped.Truncate(4 * time.Second).Add(4 * time.Second)
	t2 := t1.Add(4 * time.Second)
	<-time.After(time.Until(t2.Add(1500 * time.Millisecond)))
	a2 := c.startReplica()
	<-time.After(time.Until(t2.Add(3500 * time.Millisecond))) // before t3
	none, last := ticksOf(t, a2, "alice", "catch-none"), ticksOf(t, a2, "alice", "catch-last")
	for _, tk := range []time.Time{t1, t2} {
		if len(none[tk.UTC()]) != 0 {
			t.Fatalf("catch_up none started a run for the missed tick %s", tk)
		}
	}
	if len(last[t1.UTC()]) != 0 || len(last[t2.UTC()]) != 1 {
		t.Fatalf("catch_up last: runs for %s: %v, for %s: %v; want none and one", t1, last[t1.UTC()], t2, last[t2.UTC()])
	}
	// The next tick is on time for both.
	t3 := t2.Add(4 * time.Second)
	<-time.After(time.Until(t3.Add(2 * time.Second)))
	if len(ticksOf(t, a2, "alice", "catch-none")[t3.UTC()]) != 1 || len(ticksOf(t, a2, "alice", "catch-last")[t3.UTC()]) != 1 {
		t.Fatalf("the first tick after the restart did not start one run each")
	}
	var show struct {
		Missed   int64  `json:"missed"`
		LastSkip string `json:"last_skip"`
	}
	mustCtl(t, a2, "--as", "alice", "schedules", "show", "catch-none", "-o", "json").json(t, &show)
	if show.Missed < 2 {
		t.Fatalf("catch-none counts %d missed ticks, want at least 2 (%q)", show.Missed, show.LastSkip)
	}
}

// Issue 19: a scheduled run is an ordinary run. Its gate parks and routes
// by policy; the identity it runs as may not approve it (separation from
// the requester), someone policy allows does; and a `without asking` side
// effect the identity may not approve by starting is never run by a
// schedule.
func TestScheduledRunParksAndIsApprovedBySomeoneElse(t *testing.T) {
	t.Parallel()
	c := newClusterSpec(t, clusterSpec{start: []string{"edge-1"}, markFloor: "p2, acme, test.mark, 1, requester, -\n"})
	p := c.plane
	dir := t.TempDir()
	mustCtl(t, p, "--as", "alice", "skills", "push", writeSkill(t, dir, "gated", "ask member:\n  mark it?\nm: test.mark {\"name\": \"scheduled\"}\n"))
	mustCtl(t, p, "--as", "alice", "skills", "push", writeSkill(t, dir, "unasked", "m: test.mark {\"name\": \"unasked\"} without asking\n"))
	mustCtl(t, p, "--as", "alice", "schedules", "add", "gated-daily", "--skill", "gated", "--cron", "*/2 * * * * *")
	mustCtl(t, p, "--as", "alice", "schedules", "add", "unasked-daily", "--skill", "unasked", "--cron", "*/2 * * * * *")
	var id string
	deadline := time.Now().Add(15 * time.Second)
	for id == "" {
		if rs := runsOf(t, p, "alice", "gated-daily"); len(rs) > 0 {
			id = rs[0].GetId()
		} else if time.Now().After(deadline) {
			t.Fatal("the schedule started no run")
		}
		<-time.After(100 * time.Millisecond)
	}
	mustCtl(t, p, "--as", "alice", "schedules", "pause", "gated-daily")
	r := c.until(id, "parked", func(r runOut) bool { return r.State == "parked" })
	if c.mark("scheduled") != 0 {
		t.Fatal("the gated side effect ran before anyone approved it")
	}
	if res := p.ctl(t, "", "--as", "alice", "approve", r.Asks[0].AskID); res.code == 0 {
		t.Fatalf("alice, whom the schedule runs as, approved her own scheduled run's gate:\n%s", res.stdout)
	}
	mustCtl(t, p, "--as", "bob", "approve", r.Asks[0].AskID)
	c.until(id, "complete", func(r runOut) bool { return r.State == "complete" })
	if n := c.mark("scheduled"); n != 1 {
		t.Fatalf("the approved side effect ran %d times", n)
	}
	show := mustCtl(t, p, "--as", "alice", "asks", "show", r.Asks[0].AskID)
	if !strings.Contains(show.stdout, "bob") {
		t.Fatalf("the decision does not name bob:\n%s", show.stdout)
	}
	// The unasked schedule: alice may not approve test.mark by starting a
	// run (separation from the requester), so no tick runs it.
	var sh struct {
		LastError string `json:"last_error"`
		Started   int64  `json:"started"`
	}
	deadline = time.Now().Add(15 * time.Second)
	for sh.LastError == "" {
		if time.Now().After(deadline) {
			t.Fatalf("the unasked schedule never recorded why its tick did not start: %+v", sh)
		}
		<-time.After(200 * time.Millisecond)
		mustCtl(t, p, "--as", "alice", "schedules", "show", "unasked-daily", "-o", "json").json(t, &sh)
	}
	mustCtl(t, p, "--as", "alice", "schedules", "rm", "unasked-daily")
	if sh.Started != 0 || c.mark("unasked") != 0 || !strings.Contains(sh.LastError, "approves nothing") {
		t.Fatalf("a schedule ran a side effect its identity may not approve: started %d, marks %d, error %q", sh.Started, c.mark("unasked"), sh.LastError)
	}
	auditClean(t, p, "audrey", id)
}
