package approvectl

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/pkg/schedule"
)

// The example schedule (examples/schedules) reads as `schedules add -f`
// reads it, names an example skill, and fires on weekdays at 07:30 in
// Berlin, winter and summer.
func TestExampleScheduleIsAWeekdayMorning(t *testing.T) {
	spec, err := readScheduleFile("../../examples/schedules/morning-briefing.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join("../../examples/skills", spec.Skill, "SKILL.md")); err != nil {
		t.Fatalf("the example schedule runs %q, which is no example skill: %v", spec.Skill, err)
	}
	c, err := schedule.Parse(spec.Cron, spec.TimeZone)
	if err != nil {
		t.Fatal(err)
	}
	berlin, _ := time.LoadLocation("Europe/Berlin")
	for _, from := range []time.Time{time.Date(2027, 1, 8, 12, 0, 0, 0, berlin), time.Date(2027, 7, 9, 12, 0, 0, 0, berlin)} {
		ticks := c.Upcoming(from, 10)
		if len(ticks) != 10 {
			t.Fatalf("%d ticks", len(ticks))
		}
		for _, tk := range ticks {
			local := tk.In(berlin)
			if wd := local.Weekday(); wd == time.Saturday || wd == time.Sunday || local.Hour() != 7 || local.Minute() != 30 {
				t.Fatalf("a tick at %s (%s): want weekdays at 07:30 in Berlin", local, wd)
			}
		}
	}
	if _, err := schedule.ParseCatchUp(spec.CatchUp); err != nil {
		t.Fatal(err)
	}
	if _, err := schedule.ParseConcurrency(spec.Concurrency); err != nil {
		t.Fatal(err)
	}
	if _, err := time.ParseDuration(spec.Grace); err != nil {
		t.Fatal(err)
	}
}
