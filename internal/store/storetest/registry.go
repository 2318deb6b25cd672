package storetest

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/internal/store"
)

// regAt is a time with nanoseconds, to catch a store that keeps less.
var regAt = time.Date(2026, 3, 4, 5, 6, 7, 123_456_789, time.UTC)

// skillV is version n of a skill as published: its source and digest say
// which n it was, so a read shows which version it got.
func skillV(name string, n int) store.SkillVersion {
	return store.SkillVersion{Name: name, Version: 99, Description: fmt.Sprintf("%s v%d", name, n),
		Source: fmt.Sprintf("---\nname: %s\n---\nstep %d", name, n), PlanDigest: fmt.Sprintf("sha256:%s-%d", name, n),
		Author: "alice", At: regAt.Add(time.Duration(n) * time.Minute), Origin: "api"}
}

func tombstone(name string, n int) store.SkillVersion {
	return store.SkillVersion{Name: name, Author: "bob", At: regAt.Add(time.Duration(n) * time.Minute), Deleted: true, Origin: "api"}
}

// sameSkill compares every field but Version (checked apart); Source
// only when withSource.
func sameSkill(t *testing.T, got, want store.SkillVersion, version int64, withSource bool) {
	t.Helper()
	src := want.Source
	if !withSource {
		src = ""
	}
	if got.Name != want.Name || got.Version != version || got.Description != want.Description || got.Source != src ||
		got.PlanDigest != want.PlanDigest || got.Author != want.Author || !got.At.Equal(want.At) ||
		got.Deleted != want.Deleted || got.Origin != want.Origin {
		t.Fatalf("skill differs:\n got %+v\nwant %+v (version %d, source %v)", got, want, version, withSource)
	}
}

// addSkill appends version expect+1 and checks what the store says it
// stored.
func addSkill(t *testing.T, s store.Store, v store.SkillVersion, expect int64) {
	t.Helper()
	got, err := s.AddSkillVersion(ctx, v, expect)
	must(t, err)
	sameSkill(t, got, v, expect+1, true)
}

// testSkillVersions: versions count 1, 2, 3 whatever Version says; a
// stale or future expect writes nothing; reads by number and latest.
func testSkillVersions(t *testing.T, s store.Store) {
	for n := range 3 {
		addSkill(t, s, skillV("alpha", n+1), int64(n))
	}
	for _, expect := range []int64{0, 1, 2, 4} {
		if _, err := s.AddSkillVersion(ctx, skillV("alpha", 9), expect); !errors.Is(err, store.ErrConflict) {
			t.Fatalf("AddSkillVersion expecting %d when the latest is 3: %v", expect, err)
		}
	}
	if _, err := s.AddSkillVersion(ctx, skillV("beta", 1), 1); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("AddSkillVersion expecting 1 of a name never used: %v", err)
	}
	latest, err := s.SkillVersion(ctx, "alpha", 0)
	must(t, err)
	sameSkill(t, latest, skillV("alpha", 3), 3, true)
	for n := int64(1); n <= 3; n++ {
		v, err := s.SkillVersion(ctx, "alpha", n)
		must(t, err)
		sameSkill(t, v, skillV("alpha", int(n)), n, true)
	}
	for _, q := range []struct {
		name    string
		version int64
	}{{"alpha", 4}, {"alpha", -1}, {"beta", 0}, {"beta", 1}} {
		if _, err := s.SkillVersion(ctx, q.name, q.version); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("SkillVersion(%s, %d): %v, want ErrNotFound", q.name, q.version, err)
		}
	}
	hist, err := s.SkillHistory(ctx, "alpha", 0, 0)
	must(t, err)
	if len(hist) != 3 {
		t.Fatalf("history of 3 versions after refused writes: %+v", hist)
	}
	if _, err := s.AddSkillVersion(ctx, store.SkillVersion{Author: "alice"}, 0); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("a skill without a name: %v", err)
	}
}

// testSkillsRace: of concurrent writers that read the same version,
// exactly one appends.
func testSkillsRace(t *testing.T, s store.Store) {
	addSkill(t, s, skillV("alpha", 1), 0)
	const n = 16
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = s.AddSkillVersion(ctx, skillV("alpha", 100+i), 1)
		}()
	}
	wg.Wait()
	won := -1
	for i, err := range errs {
		switch {
		case err == nil && won >= 0:
			t.Fatalf("writers %d and %d both appended version 2", won, i)
		case err == nil:
			won = i
		case !errors.Is(err, store.ErrConflict):
			t.Fatalf("writer %d: %v", i, err)
		}
	}
	if won < 0 {
		t.Fatal("no writer appended version 2")
	}
	hist, err := s.SkillHistory(ctx, "alpha", 0, 0)
	must(t, err)
	if len(hist) != 2 || hist[1].Description != skillV("alpha", 100+won).Description {
		t.Fatalf("history after the race (writer %d won): %+v", won, hist)
	}
}

// testSkillTombstone: a delete is a version; it hides the skill from the
// listing, not from its history, and the numbering goes on after it.
func testSkillTombstone(t *testing.T, s store.Store) {
	addSkill(t, s, skillV("alpha", 1), 0)
	addSkill(t, s, skillV("alpha", 2), 1)
	addSkill(t, s, skillV("beta", 1), 0)
	addSkill(t, s, tombstone("alpha", 3), 2)
	latest, err := s.SkillVersion(ctx, "alpha", 0)
	must(t, err)
	sameSkill(t, latest, tombstone("alpha", 3), 3, true)
	listed, next, err := s.ListSkills(ctx, "", 0)
	must(t, err)
	if len(listed) != 1 || listed[0].Name != "beta" || next != "" {
		t.Fatalf("the listing after alpha's delete: %+v %q", listed, next)
	}
	hist, err := s.SkillHistory(ctx, "alpha", 0, 0)
	must(t, err)
	want := []store.SkillVersion{skillV("alpha", 1), skillV("alpha", 2), tombstone("alpha", 3)}
	if len(hist) != len(want) {
		t.Fatalf("alpha's history: %+v", hist)
	}
	for i := range want {
		sameSkill(t, hist[i], want[i], int64(i+1), false)
	}
	old, err := s.SkillVersion(ctx, "alpha", 2)
	must(t, err)
	sameSkill(t, old, skillV("alpha", 2), 2, true)

	// Published again: version 4, listed again.
	addSkill(t, s, skillV("alpha", 4), 3)
	listed, _, err = s.ListSkills(ctx, "", 0)
	must(t, err)
	if len(listed) != 2 {
		t.Fatalf("the listing after alpha came back: %+v", listed)
	}
	sameSkill(t, listed[0], skillV("alpha", 4), 4, false)
	sameSkill(t, listed[1], skillV("beta", 1), 1, false)
}

// testListSkills: by name, latest versions without source, in pages that
// neither repeat nor skip.
func testListSkills(t *testing.T, s store.Store) {
	if got, next, err := s.ListSkills(ctx, "", 3); err != nil || len(got) != 0 || next != "" {
		t.Fatalf("listing an empty store: %+v %q %v", got, next, err)
	}
	names := []string{"golf", "alpha", "echo", "hotel", "charlie", "bravo", "foxtrot", "delta"}
	latest := map[string]int{}
	for i, name := range names {
		addSkill(t, s, skillV(name, 1), 0)
		latest[name] = 1
		if i%2 == 0 { // some have a second version
			addSkill(t, s, skillV(name, 2), 1)
			latest[name] = 2
		}
	}
	addSkill(t, s, tombstone("echo", latest["echo"]+1), int64(latest["echo"]))
	want := []string{"alpha", "bravo", "charlie", "delta", "foxtrot", "golf", "hotel"}

	var got []string
	tok := ""
	for pages := 0; ; pages++ {
		if pages == 3 {
			t.Fatalf("more than 3 pages of 3 for 7 skills (so far %v)", got)
		}
		page, next, err := s.ListSkills(ctx, tok, 3)
		must(t, err)
		if len(page) > 3 || (next != "" && len(page) != 3) {
			t.Fatalf("page %d: %d rows, next %q", pages, len(page), next)
		}
		for _, v := range page {
			sameSkill(t, v, skillV(v.Name, latest[v.Name]), int64(latest[v.Name]), false)
			got = append(got, v.Name)
		}
		if next == "" {
			break
		}
		tok = next
	}
	if !slices.Equal(got, want) {
		t.Fatalf("paged listing %v, want %v", got, want)
	}
	all, next, err := s.ListSkills(ctx, "", 0)
	must(t, err)
	if len(all) != len(want) || next != "" {
		t.Fatalf("listing with the default limit: %d rows, next %q", len(all), next)
	}
	if _, _, err := s.ListSkills(ctx, "not a token!", 3); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("a bad page token: %v", err)
	}
}

// testSkillHistoryPages: after and limit page the history, oldest first.
func testSkillHistoryPages(t *testing.T, s store.Store) {
	for n := range 5 {
		addSkill(t, s, skillV("alpha", n+1), int64(n))
	}
	for _, q := range []struct {
		after int64
		limit int
		want  []int64
	}{{0, 2, []int64{1, 2}}, {2, 2, []int64{3, 4}}, {4, 2, []int64{5}}, {5, 2, nil}, {1, 0, []int64{2, 3, 4, 5}}, {-3, 1, []int64{1}}} {
		hist, err := s.SkillHistory(ctx, "alpha", q.after, q.limit)
		must(t, err)
		var got []int64
		for _, v := range hist {
			sameSkill(t, v, skillV("alpha", int(v.Version)), v.Version, false)
			got = append(got, v.Version)
		}
		if !slices.Equal(got, q.want) || hist == nil {
			t.Fatalf("SkillHistory after %d, limit %d: %v (nil %v), want %v", q.after, q.limit, got, hist == nil, q.want)
		}
	}
	if hist, err := s.SkillHistory(ctx, "nosuch", 0, 10); err != nil || hist == nil || len(hist) != 0 {
		t.Fatalf("the history of a name never used: %v (nil %v) %v, want an empty slice", hist, hist == nil, err)
	}
}

// schedule is a schedule with every field set, times with nanoseconds.
func schedule(name string) store.Schedule {
	return store.Schedule{Name: name, Skill: "payroll", SkillVersion: 3, Cron: "0 9 * * 1-5", TimeZone: "Europe/Paris",
		Inputs: map[string]string{"region": "eu", "dry_run": "false"}, RunAs: "svc:payroll", CatchUp: "last", Concurrency: "wait",
		Grace: 90 * time.Second, Paused: true, PausedBy: "carol", PausedAt: regAt.Add(time.Hour),
		CreatedBy: "alice", CreatedAt: regAt, UpdatedBy: "bob", UpdatedAt: regAt.Add(time.Minute),
		Version: 42, LastTick: regAt.Add(2 * time.Hour),
		Pending:  &store.TickClaim{Tick: regAt.Add(3 * time.Hour), RequestID: "sched:" + name + ":1", By: "cp-a", At: regAt.Add(3*time.Hour + time.Second)},
		Buffered: regAt.Add(4 * time.Hour), LastRun: "run-7", LastRunTick: regAt.Add(90 * time.Minute),
		Started: 7, Skipped: 2, Missed: 1, LastSkip: "the previous run was still going", LastError: "policy refused a gate"}
}

// sameSchedule compares every field but Version (checked apart); times
// with Equal, as a store may keep no monotonic reading or location.
func sameSchedule(t *testing.T, got, want store.Schedule, version int64) {
	t.Helper()
	tw := func(a, b time.Time) bool { return a.Equal(b) }
	pend := (got.Pending == nil) == (want.Pending == nil)
	if pend && got.Pending != nil {
		g, w := *got.Pending, *want.Pending
		pend = g.Tick.Equal(w.Tick) && g.RequestID == w.RequestID && g.By == w.By && g.At.Equal(w.At)
	}
	if !pend || got.Name != want.Name || got.Skill != want.Skill || got.SkillVersion != want.SkillVersion || got.Cron != want.Cron ||
		got.TimeZone != want.TimeZone || !maps.Equal(got.Inputs, want.Inputs) || got.RunAs != want.RunAs ||
		got.CatchUp != want.CatchUp || got.Concurrency != want.Concurrency || got.Grace != want.Grace ||
		got.Paused != want.Paused || got.PausedBy != want.PausedBy || !tw(got.PausedAt, want.PausedAt) ||
		got.CreatedBy != want.CreatedBy || !tw(got.CreatedAt, want.CreatedAt) || got.UpdatedBy != want.UpdatedBy ||
		!tw(got.UpdatedAt, want.UpdatedAt) || got.Version != version || !tw(got.LastTick, want.LastTick) ||
		!tw(got.Buffered, want.Buffered) || got.LastRun != want.LastRun || !tw(got.LastRunTick, want.LastRunTick) ||
		got.Started != want.Started || got.Skipped != want.Skipped || got.Missed != want.Missed ||
		got.LastSkip != want.LastSkip || got.LastError != want.LastError {
		t.Fatalf("schedule differs:\n got %+v (pending %+v)\nwant %+v (pending %+v), version %d", got, got.Pending, want, want.Pending, version)
	}
}

// putSchedule writes sc at version expect+1 and checks what the store
// says it stored, and what it reads back.
func putSchedule(t *testing.T, s store.Store, sc store.Schedule, expect int64) {
	t.Helper()
	got, err := s.PutSchedule(ctx, sc, expect)
	must(t, err)
	sameSchedule(t, got, sc, expect+1)
	got, err = s.GetSchedule(ctx, sc.Name)
	must(t, err)
	sameSchedule(t, got, sc, expect+1)
}

// testSchedules: create, compare-and-set updates, listing, delete.
func testSchedules(t *testing.T, s store.Store) {
	if got, err := s.ListSchedules(ctx); err != nil || len(got) != 0 {
		t.Fatalf("a new store has no schedules: %+v %v", got, err)
	}
	if _, err := s.GetSchedule(ctx, "nightly"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("GetSchedule of none: %v", err)
	}
	v1 := schedule("nightly")
	putSchedule(t, s, v1, 0)
	if _, err := s.PutSchedule(ctx, schedule("nightly"), 0); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("creating it again: %v", err)
	}
	// A scheduler's tick: the claim done, no pending, no inputs.
	v2 := v1
	v2.Pending, v2.Inputs, v2.Paused, v2.PausedBy, v2.PausedAt = nil, nil, false, "", time.Time{}
	v2.Started, v2.LastError, v2.LastTick = 8, "", regAt.Add(5*time.Hour+time.Nanosecond)
	putSchedule(t, s, v2, 1)
	for _, expect := range []int64{1, 3} {
		stale := v1
		stale.Cron = "* * * * *"
		if _, err := s.PutSchedule(ctx, stale, expect); !errors.Is(err, store.ErrConflict) {
			t.Fatalf("a write expecting %d when the version is 2: %v", expect, err)
		}
	}
	if _, err := s.PutSchedule(ctx, schedule("weekly"), 1); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("an update of a schedule that does not exist: %v", err)
	}
	got, err := s.GetSchedule(ctx, "nightly")
	must(t, err)
	sameSchedule(t, got, v2, 2)

	putSchedule(t, s, schedule("b-weekly"), 0)
	putSchedule(t, s, schedule("a-hourly"), 0)
	list, err := s.ListSchedules(ctx)
	must(t, err)
	var names []string
	for _, sc := range list {
		names = append(names, sc.Name)
	}
	if !slices.Equal(names, []string{"a-hourly", "b-weekly", "nightly"}) {
		t.Fatalf("ListSchedules by name: %v", names)
	}
	sameSchedule(t, list[2], v2, 2)
	sameSchedule(t, list[0], schedule("a-hourly"), 1)

	if err := s.DeleteSchedule(ctx, "nightly", 1); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("a delete at a stale version: %v", err)
	}
	if _, err := s.GetSchedule(ctx, "nightly"); err != nil {
		t.Fatalf("the refused delete removed it: %v", err)
	}
	must(t, s.DeleteSchedule(ctx, "nightly", 2))
	if _, err := s.GetSchedule(ctx, "nightly"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("GetSchedule after its delete: %v", err)
	}
	if err := s.DeleteSchedule(ctx, "nightly", 2); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("deleting it again: %v", err)
	}
	if list, _ := s.ListSchedules(ctx); len(list) != 2 {
		t.Fatalf("ListSchedules after a delete: %+v", list)
	}
	putSchedule(t, s, schedule("nightly"), 0) // a new life starts at 1
	// A writer holding the old life at the version the new one reached
	// must not overwrite it: the new life has another CreatedAt.
	old := schedule("nightly")
	old.CreatedAt = regAt.Add(-time.Hour)
	if _, err := s.PutSchedule(ctx, old, 1); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("a write of a deleted life over the new one at its version: %v", err)
	}
	if got, _ := s.GetSchedule(ctx, "nightly"); !got.CreatedAt.Equal(regAt) || got.Version != 1 {
		t.Fatalf("the new life was overwritten: %+v", got)
	}
	if _, err := s.PutSchedule(ctx, store.Schedule{Cron: "* * * * *"}, 0); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("a schedule without a name: %v", err)
	}
}

// testSchedulesRace: of concurrent writers that read the same version,
// exactly one writes.
func testSchedulesRace(t *testing.T, s store.Store) {
	putSchedule(t, s, schedule("nightly"), 0)
	const n = 16
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sc := schedule("nightly")
			sc.LastRun = fmt.Sprintf("run-%d", i)
			_, errs[i] = s.PutSchedule(ctx, sc, 1)
		}()
	}
	wg.Wait()
	won := -1
	for i, err := range errs {
		switch {
		case err == nil && won >= 0:
			t.Fatalf("writers %d and %d both wrote version 2", won, i)
		case err == nil:
			won = i
		case !errors.Is(err, store.ErrConflict):
			t.Fatalf("writer %d: %v", i, err)
		}
	}
	if won < 0 {
		t.Fatal("no writer wrote version 2")
	}
	got, err := s.GetSchedule(ctx, "nightly")
	must(t, err)
	if got.Version != 2 || got.LastRun != fmt.Sprintf("run-%d", won) {
		t.Fatalf("after the race (writer %d won): version %d, last run %s", won, got.Version, got.LastRun)
	}
}

// testSchedulesDoNotAlias: the maps and claims a caller passes or gets
// are its own; changing them changes nothing stored.
func testSchedulesDoNotAlias(t *testing.T, s store.Store) {
	sc := schedule("nightly")
	put, err := s.PutSchedule(ctx, sc, 0)
	must(t, err)
	sc.Inputs["region"], sc.Pending.By = "us", "cp-x"
	put.Inputs["region"], put.Pending.RequestID = "ap", "other"
	got, err := s.GetSchedule(ctx, "nightly")
	must(t, err)
	sameSchedule(t, got, schedule("nightly"), 1)
	got.Inputs["extra"], got.Pending.Tick = "1", time.Time{}
	list, err := s.ListSchedules(ctx)
	must(t, err)
	list[0].Inputs["region"] = "sa"
	got, err = s.GetSchedule(ctx, "nightly")
	must(t, err)
	sameSchedule(t, got, schedule("nightly"), 1)
}
