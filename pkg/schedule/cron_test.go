package schedule

import (
	"math/rand/v2"
	"strings"
	"testing"
	"time"
	_ "time/tzdata" // the zones below, whatever the host has installed
)

func mustParse(t testing.TB, expr, tz string) *Cron {
	t.Helper()
	c, err := Parse(expr, tz)
	if err != nil {
		t.Fatalf("Parse(%q, %q): %v", expr, tz, err)
	}
	return c
}

func utc(y int, mo time.Month, d, h, mi, s int) time.Time {
	return time.Date(y, mo, d, h, mi, s, 0, time.UTC)
}

func zone(t testing.TB, tz string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(tz)
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

// sameTimes reports whether got and want hold the same instants, and
// says how they differ.
func sameTimes(t *testing.T, what string, got, want []time.Time) {
	t.Helper()
	ok := len(got) == len(want)
	for i := 0; ok && i < len(got); i++ {
		ok = got[i].Equal(want[i]) && got[i].Location() == time.UTC
	}
	if !ok {
		t.Errorf("%s:\n got  %v\n want %v", what, got, want)
	}
}

// matchesWall is the definition of a tick, checked directly: u's
// wall-clock time in the zone matches every field.
func matchesWall(c *Cron, u time.Time) bool {
	if u.Nanosecond() != 0 {
		return false
	}
	l := u.In(c.loc)
	w := &c.wall
	has := func(set uint64, v int) bool { return set&(1<<v) != 0 }
	if !has(w.Second, l.Second()) || !has(w.Minute, l.Minute()) || !has(w.Hour, l.Hour()) || !has(w.Month, int(l.Month())) {
		return false
	}
	dom, dow := has(w.Dom, l.Day()), has(w.Dow, int(l.Weekday()))
	if w.Dom&(1<<63) != 0 || w.Dow&(1<<63) != 0 {
		return dom && dow
	}
	return dom || dow
}

func TestParseAccepts(t *testing.T) {
	tests := []struct {
		expr, tz string
		from     time.Time
		want     []time.Time
	}{
		{"*/15 * * * *", "", utc(2024, 1, 1, 0, 7, 30),
			[]time.Time{utc(2024, 1, 1, 0, 15, 0), utc(2024, 1, 1, 0, 30, 0), utc(2024, 1, 1, 0, 45, 0)}},
		// A tick exactly at from is not after it.
		{"*/15 * * * *", "UTC", utc(2024, 1, 1, 0, 15, 0),
			[]time.Time{utc(2024, 1, 1, 0, 30, 0)}},
		// 2024-01-05 is a Friday.
		{"0 9 * * MON-FRI", "", utc(2024, 1, 5, 10, 0, 0),
			[]time.Time{utc(2024, 1, 8, 9, 0, 0), utc(2024, 1, 9, 9, 0, 0)}},
		{"  0 9 * * mon-fri\t", "", utc(2024, 1, 5, 10, 0, 0),
			[]time.Time{utc(2024, 1, 8, 9, 0, 0)}},
		{"30 */12 1,15 * *", "", utc(2024, 1, 1, 0, 0, 0),
			[]time.Time{utc(2024, 1, 1, 0, 30, 0), utc(2024, 1, 1, 12, 30, 0), utc(2024, 1, 15, 0, 30, 0)}},
		{"5/20 * * * *", "", utc(2024, 1, 1, 0, 0, 0),
			[]time.Time{utc(2024, 1, 1, 0, 5, 0), utc(2024, 1, 1, 0, 25, 0), utc(2024, 1, 1, 0, 45, 0), utc(2024, 1, 1, 1, 5, 0)}},
		{"0 0 29 2 *", "", utc(2024, 3, 1, 0, 0, 0),
			[]time.Time{utc(2028, 2, 29, 0, 0, 0), utc(2032, 2, 29, 0, 0, 0)}},
		// 2100 is not a leap year: eight years between two 29 Februaries.
		{"0 0 29 2 *", "Europe/Berlin", utc(2097, 1, 1, 0, 0, 0),
			[]time.Time{utc(2104, 2, 28, 23, 0, 0)}},
		{"0 12 31 * *", "", utc(2024, 1, 31, 12, 0, 0),
			[]time.Time{utc(2024, 3, 31, 12, 0, 0), utc(2024, 5, 31, 12, 0, 0)}},
		{"59 23 31 dec *", "", utc(2024, 6, 1, 0, 0, 0),
			[]time.Time{utc(2024, 12, 31, 23, 59, 0), utc(2025, 12, 31, 23, 59, 0)}},
		// Both day fields restricted: either matches (1 January 2024 is a
		// Monday; 1 February a Thursday).
		{"0 0 1,15 * 1", "", utc(2023, 12, 31, 0, 0, 0),
			[]time.Time{utc(2024, 1, 1, 0, 0, 0), utc(2024, 1, 8, 0, 0, 0), utc(2024, 1, 15, 0, 0, 0),
				utc(2024, 1, 22, 0, 0, 0), utc(2024, 1, 29, 0, 0, 0), utc(2024, 2, 1, 0, 0, 0)}},
		// Day-of-month * (or ?): both must match, so Mondays only.
		{"0 0 * * 1", "", utc(2024, 1, 2, 0, 0, 0),
			[]time.Time{utc(2024, 1, 8, 0, 0, 0), utc(2024, 1, 15, 0, 0, 0)}},
		{"0 0 12 ? * SUN", "", utc(2024, 1, 1, 0, 0, 0),
			[]time.Time{utc(2024, 1, 7, 12, 0, 0), utc(2024, 1, 14, 12, 0, 0)}},
		{"0 0 * * 0", "", utc(2024, 1, 1, 0, 0, 0), // Sunday is 0
			[]time.Time{utc(2024, 1, 7, 0, 0, 0)}},
		// Six fields: seconds first.
		{"*/10 * * * * *", "", time.Date(2024, 1, 1, 0, 0, 9, 500_000_000, time.UTC),
			[]time.Time{utc(2024, 1, 1, 0, 0, 10), utc(2024, 1, 1, 0, 0, 20), utc(2024, 1, 1, 0, 0, 30)}},
		{"30 0 0 * * *", "", utc(2024, 1, 1, 0, 0, 0),
			[]time.Time{utc(2024, 1, 1, 0, 0, 30), utc(2024, 1, 2, 0, 0, 30)}},
		{"0,1 0 9 * * *", "", utc(2024, 1, 1, 0, 0, 0),
			[]time.Time{utc(2024, 1, 1, 9, 0, 0), utc(2024, 1, 1, 9, 0, 1), utc(2024, 1, 2, 9, 0, 0)}},
		{"@hourly", "", utc(2024, 1, 1, 0, 30, 0),
			[]time.Time{utc(2024, 1, 1, 1, 0, 0)}},
		{"@daily", "", utc(2024, 1, 1, 0, 30, 0),
			[]time.Time{utc(2024, 1, 2, 0, 0, 0)}},
		{"@DAILY", "", utc(2024, 1, 1, 0, 30, 0),
			[]time.Time{utc(2024, 1, 2, 0, 0, 0)}},
		{"@midnight", "", utc(2024, 1, 1, 0, 30, 0),
			[]time.Time{utc(2024, 1, 2, 0, 0, 0)}},
		{"@weekly", "", utc(2024, 1, 1, 0, 0, 0), // Sundays
			[]time.Time{utc(2024, 1, 7, 0, 0, 0), utc(2024, 1, 14, 0, 0, 0)}},
		{"@monthly", "", utc(2024, 1, 1, 0, 0, 0),
			[]time.Time{utc(2024, 2, 1, 0, 0, 0)}},
		{"@yearly", "", utc(2024, 1, 1, 0, 0, 0),
			[]time.Time{utc(2025, 1, 1, 0, 0, 0)}},
		{"@annually", "", utc(2024, 1, 1, 0, 0, 0),
			[]time.Time{utc(2025, 1, 1, 0, 0, 0)}},
		{"@daily", "Asia/Tokyo", utc(2024, 1, 1, 0, 0, 0),
			[]time.Time{utc(2024, 1, 1, 15, 0, 0)}},
		{"0 9 * * *", "Asia/Kolkata", utc(2024, 1, 1, 0, 0, 0), // +05:30
			[]time.Time{utc(2024, 1, 1, 3, 30, 0)}},
	}
	for _, tt := range tests {
		c := mustParse(t, tt.expr, tt.tz)
		sameTimes(t, tt.expr+" in "+tt.tz, c.Upcoming(tt.from, len(tt.want)), tt.want)
	}
}

func TestParseRefuses(t *testing.T) {
	long := strings.Repeat("*", 201)
	tests := []struct {
		expr, tz string
		want     []string // substrings of the message
	}{
		{"", "", []string{"empty", "5 fields", "@daily"}},
		{" \t ", "", []string{"empty"}},
		{long, "", []string{"201 bytes", "at most 200"}},
		{"TZ=Europe/Berlin 0 9 * * *", "", []string{"starts with TZ=", "time-zone field"}},
		{"CRON_TZ=Europe/Berlin 0 9 * * *", "", []string{"starts with CRON_TZ=", "time-zone field"}},
		{"cron_tz=UTC 0 9 * * *", "", []string{"CRON_TZ="}},
		{"TZ=", "", []string{"TZ="}}, // robfig panics on this one
		{"@every 10s", "", []string{"@every is not supported", "time zone", `"*/10 * * * * *"`}},
		{"@every", "", []string{"@every is not supported"}},
		{"@fortnightly", "", []string{`"@fortnightly" is not a known descriptor`, "@daily"}},
		{"@daily 0", "", []string{"not a known descriptor"}},
		{"* * * *", "", []string{"has 4 fields", "want 5", "or 6"}},
		{"* * * * * * *", "", []string{"has 7 fields"}},
		{"60 * * * *", "", []string{`minute field "60"`, "0-59"}},
		{"* 24 * * *", "", []string{`hour field "24"`, "0-23"}},
		{"* * 0 * *", "", []string{`day-of-month field "0"`, "1-31"}},
		{"* * 32 * *", "", []string{`day-of-month field "32"`}},
		{"* * * 13 *", "", []string{`month field "13"`, "1-12"}},
		{"* * * * 7", "", []string{`day-of-week field "7"`, "0-6", "Sunday is 0"}},
		{"60 * * * * *", "", []string{`second field "60"`}},
		{"0 60 * * * *", "", []string{`minute field "60"`}},
		{"5-3 * * * *", "", []string{`minute field "5-3"`, "backwards", "5-59,0-3"}},
		{"* * * * FRI-MON", "", []string{"day-of-week", "backwards"}},
		{"*/0 * * * *", "", []string{"step 0", "at least 1"}},
		{"*/x * * * *", "", []string{`step "x"`}},
		{"*/61 * * * *", "", []string{"step 61", "0-59"}},
		{"1/2/3 * * * *", "", []string{"more than one /"}},
		{"1-2-3 * * * *", "", []string{"more than one -"}},
		{"1,,2 * * * *", "", []string{"empty list item"}},
		{",1 * * * *", "", []string{"empty list item"}},
		{"-1 * * * *", "", []string{"missing end", "negative"}},
		{"+5 * * * *", "", []string{`"+5"`, "not a whole number"}},
		{"x * * * *", "", []string{`minute field "x"`, "not a whole number"}},
		{"? * * * *", "", []string{"only day-of-month and day-of-week"}},
		{"*-5 * * * *", "", []string{"inside a range"}},
		{"* * * foo *", "", []string{`month field "foo"`, "jan-dec"}},
		{"* * * * funday", "", []string{"day-of-week", "sun-sat"}},
		{"* * * * MON-", "", []string{"missing end"}},
		{"0 0 30 2 *", "", []string{"never fires", "30 February"}},
		{"0 0 31 4,6,9,11 *", "", []string{"never fires"}},
		{"0 9 * * *", "Europe/Berln", []string{`unknown time zone "Europe/Berln"`, "IANA"}},
		{"0 9 * * *", "Local", []string{`"Local"`, "name the zone"}},
		{"0 9 * * *", "../../etc/passwd", []string{"unknown time zone"}},
		{"0 9 * * *", " UTC", []string{"unknown time zone"}},
		{"0 9 * * *", strings.Repeat("A", 65), []string{"65 bytes", "at most 64"}},
	}
	for _, tt := range tests {
		c, err := Parse(tt.expr, tt.tz)
		if err == nil {
			t.Errorf("Parse(%q, %q) = %v, want an error", tt.expr, tt.tz, c)
			continue
		}
		for _, w := range tt.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("Parse(%q, %q): error %q does not say %q", tt.expr, tt.tz, err, w)
			}
		}
		if len(tt.expr) <= MaxExprBytes && strings.TrimSpace(tt.expr) != "" && tt.tz == "" &&
			!strings.Contains(err.Error(), `"`+strings.TrimSpace(tt.expr)+`"`) {
			t.Errorf("Parse(%q): error %q does not quote the expression", tt.expr, err)
		}
	}
}

func TestString(t *testing.T) {
	for _, tt := range []struct{ expr, tz, want string }{
		{" 0 9 * * MON-FRI ", "Europe/Berlin", "0 9 * * MON-FRI (Europe/Berlin)"},
		{"@daily", "", "@daily (UTC)"},
		{"*/5 * * * * *", "UTC", "*/5 * * * * * (UTC)"},
	} {
		if got := mustParse(t, tt.expr, tt.tz).String(); got != tt.want {
			t.Errorf("String() = %q, want %q", got, tt.want)
		}
	}
}

func TestTimeZones(t *testing.T) {
	c := mustParse(t, "0 30 7 * * MON-FRI", "Europe/Berlin")
	tests := []struct {
		name string
		from time.Time
		want []time.Time
	}{
		// 2024-01-12 is a Friday: winter, CET (+01:00), weekend skipped.
		{"winter", utc(2024, 1, 12, 0, 0, 0), []time.Time{utc(2024, 1, 12, 6, 30, 0), utc(2024, 1, 15, 6, 30, 0)}},
		// 2024-07-12 is a Friday: summer, CEST (+02:00).
		{"summer", utc(2024, 7, 12, 0, 0, 0), []time.Time{utc(2024, 7, 12, 5, 30, 0), utc(2024, 7, 15, 5, 30, 0)}},
		// Clocks go forward on Sunday 2024-03-31.
		{"into summer", utc(2024, 3, 29, 0, 0, 0), []time.Time{utc(2024, 3, 29, 6, 30, 0), utc(2024, 4, 1, 5, 30, 0)}},
		// And back on Sunday 2024-10-27.
		{"into winter", utc(2024, 10, 25, 0, 0, 0), []time.Time{utc(2024, 10, 25, 5, 30, 0), utc(2024, 10, 28, 6, 30, 0)}},
	}
	for _, tt := range tests {
		sameTimes(t, tt.name, c.Upcoming(tt.from, len(tt.want)), tt.want)
	}
	berlin := zone(t, "Europe/Berlin")
	for _, tick := range c.Upcoming(utc(2024, 1, 1, 0, 0, 0), 300) {
		l := tick.In(berlin)
		if wd := l.Weekday(); wd == time.Saturday || wd == time.Sunday || l.Hour() != 7 || l.Minute() != 30 || l.Second() != 0 {
			t.Fatalf("tick %v is %v %v in Berlin, want a weekday at 07:30:00", tick, wd, l.Format("15:04:05"))
		}
	}
}

// The DST rules: a wall-clock time the gap skips does not fire; one the
// overlap repeats fires twice; a day the zone skips has no ticks.
func TestDaylightSaving(t *testing.T) {
	tests := []struct {
		name, expr, tz string
		from           time.Time
		want           []time.Time
	}{
		// New York jumps from 02:00 EST to 03:00 EDT on 2024-03-10: no
		// 02:30 that day (robfig/cron does the same).
		{"gap skips the tick", "30 2 * * *", "America/New_York", utc(2024, 3, 9, 5, 0, 0),
			[]time.Time{utc(2024, 3, 9, 7, 30, 0), utc(2024, 3, 11, 6, 30, 0)}},
		{"gap: time flows on", "*/30 * * * *", "America/New_York", utc(2024, 3, 10, 6, 0, 0),
			[]time.Time{utc(2024, 3, 10, 6, 30, 0), utc(2024, 3, 10, 7, 0, 0), utc(2024, 3, 10, 7, 30, 0)}},
		// It falls back from 02:00 EDT to 01:00 EST on 2024-11-03: 01:30
		// happens twice, and fires twice.
		{"overlap fires twice", "30 1 * * *", "America/New_York", utc(2024, 11, 2, 12, 0, 0),
			[]time.Time{utc(2024, 11, 3, 5, 30, 0), utc(2024, 11, 3, 6, 30, 0), utc(2024, 11, 4, 6, 30, 0)}},
		{"overlap: hourly stays hourly", "0 * * * *", "America/New_York", utc(2024, 11, 3, 3, 30, 0),
			[]time.Time{utc(2024, 11, 3, 4, 0, 0), utc(2024, 11, 3, 5, 0, 0), utc(2024, 11, 3, 6, 0, 0), utc(2024, 11, 3, 7, 0, 0)}},
		// Lord Howe moves by half an hour: 02:00 -> 02:30 on 2024-10-06.
		{"half-hour gap", "15,45 2 * * *", "Australia/Lord_Howe", utc(2024, 10, 4, 0, 0, 0),
			[]time.Time{utc(2024, 10, 4, 15, 45, 0), utc(2024, 10, 4, 16, 15, 0), utc(2024, 10, 5, 15, 45, 0), utc(2024, 10, 6, 15, 15, 0)}},
		// Santiago skips midnight on 2022-09-11 (00:00 -> 01:00).
		{"missing midnight", "0 0 * * *", "America/Santiago", utc(2022, 9, 9, 12, 0, 0),
			[]time.Time{utc(2022, 9, 10, 4, 0, 0), utc(2022, 9, 12, 3, 0, 0)}},
		// robfig/cron answers 2003-10-12 here, a day the expression does
		// not name (the clocks went forward at midnight).
		{"no wrong day", "0 12 11,26 * *", "America/Santiago", utc(2003, 10, 11, 16, 0, 0),
			[]time.Time{utc(2003, 10, 26, 15, 0, 0)}},
		// Samoa skipped 30 December 2011 (-10:00 -> +14:00); robfig/cron
		// loops forever here.
		{"skipped day", "0 12 * * *", "Pacific/Apia", utc(2011, 12, 28, 0, 0, 0),
			[]time.Time{utc(2011, 12, 28, 22, 0, 0), utc(2011, 12, 29, 22, 0, 0), utc(2011, 12, 30, 22, 0, 0)}},
		{"skipped date", "0 0 30 12 *", "Pacific/Apia", utc(2011, 6, 1, 0, 0, 0),
			[]time.Time{utc(2012, 12, 29, 10, 0, 0)}},
		{"monthly across the skip", "0 0 1 * *", "Pacific/Apia", utc(2011, 12, 1, 10, 0, 0),
			[]time.Time{utc(2011, 12, 31, 10, 0, 0)}},
	}
	for _, tt := range tests {
		c := mustParse(t, tt.expr, tt.tz)
		done := make(chan []time.Time, 1)
		go func() { done <- c.Upcoming(tt.from, len(tt.want)) }()
		select {
		case got := <-done:
			sameTimes(t, tt.name, got, tt.want)
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: Upcoming does not return", tt.name)
		}
	}
}

// Next finds exactly the instants whose wall-clock time matches, checked
// minute by minute over windows around zone transitions in zones with
// gaps and overlaps of all kinds.
func TestNextMatchesWallClock(t *testing.T) {
	zones := []string{"America/New_York", "Europe/Berlin", "America/Santiago", "Australia/Lord_Howe",
		"Asia/Tehran", "America/Sao_Paulo", "America/Havana", "Asia/Beirut", "Africa/Cairo",
		"Antarctica/Troll", "Pacific/Chatham", "Pacific/Apia", "Pacific/Kiritimati", "Europe/Dublin"}
	exprs := []string{"30 2 * * *", "0 0 * * *", "30 1 * * *", "*/30 * * * *", "15 0-3 * * 0",
		"45 23 * * *", "0 1 1 * *", "0 12 11,26 * *", "0 2 * * 6"}
	var crons []*Cron
	for _, tz := range zones {
		for _, e := range exprs {
			crons = append(crons, mustParse(t, e, tz))
		}
	}
	windows := 0
	for i, tz := range zones {
		loc := zone(t, tz)
		var transitions []time.Time
		for at := utc(1995, 1, 1, 0, 0, 0); at.Before(utc(2026, 1, 1, 0, 0, 0)); {
			_, end := at.In(loc).ZoneBounds()
			if end.IsZero() {
				break
			}
			transitions = append(transitions, end)
			at = end
		}
		// A handful spread over the years, both directions.
		var picked []time.Time
		for k := 0; k < len(transitions); k += max(1, len(transitions)/4) {
			picked = append(picked, transitions[k])
			if k+1 < len(transitions) {
				picked = append(picked, transitions[k+1])
			}
		}
		for _, tr := range picked {
			windows++
			from, to := tr.Add(-36*time.Hour), tr.Add(36*time.Hour)
			for _, c := range crons[i*len(exprs) : (i+1)*len(exprs)] {
				var want []time.Time
				for u := from.Truncate(time.Minute).Add(time.Minute); u.Before(to); u = u.Add(time.Minute) {
					if matchesWall(c, u) {
						want = append(want, u)
					}
				}
				var got []time.Time
				for u := c.Next(from); !u.IsZero() && u.Before(to); u = c.Next(u) {
					got = append(got, u)
				}
				sameTimes(t, c.String()+" around "+tr.String(), got, want)
			}
		}
	}
	if windows < 3*len(zones) {
		t.Fatalf("only %d windows around transitions: the zone data is missing", windows)
	}
}

func TestUpcoming(t *testing.T) {
	c := mustParse(t, "* * * * * *", "")
	from := utc(2024, 1, 1, 0, 0, 0)
	if got := c.Upcoming(from, 0); got != nil {
		t.Errorf("Upcoming(0) = %v, want nil", got)
	}
	if got := c.Upcoming(from, -1); got != nil {
		t.Errorf("Upcoming(-1) = %v, want nil", got)
	}
	got := c.Upcoming(from, MaxUpcoming+5)
	if len(got) != MaxUpcoming {
		t.Fatalf("Upcoming(MaxUpcoming+5) has %d ticks, want %d", len(got), MaxUpcoming)
	}
	if !got[0].Equal(from.Add(time.Second)) || !got[MaxUpcoming-1].Equal(from.Add(MaxUpcoming*time.Second)) {
		t.Errorf("Upcoming runs %v .. %v", got[0], got[MaxUpcoming-1])
	}
}

func TestLatest(t *testing.T) {
	var zero time.Time
	tests := []struct {
		name, expr, tz string
		after, at      time.Time
		want           time.Time // zero: none
	}{
		{"just before", "*/15 * * * *", "", zero, utc(2024, 5, 5, 10, 7, 0), utc(2024, 5, 5, 10, 0, 0)},
		{"at t counts", "*/15 * * * *", "", zero, utc(2024, 5, 5, 10, 15, 0), utc(2024, 5, 5, 10, 15, 0)},
		{"after excluded", "*/15 * * * *", "", utc(2024, 5, 5, 10, 0, 0), utc(2024, 5, 5, 10, 14, 59), zero},
		{"after just before", "*/15 * * * *", "", utc(2024, 5, 5, 9, 59, 59), utc(2024, 5, 5, 10, 14, 59), utc(2024, 5, 5, 10, 0, 0)},
		{"after == t", "*/15 * * * *", "", utc(2024, 5, 5, 10, 0, 0), utc(2024, 5, 5, 10, 0, 0), zero},
		{"after > t", "*/15 * * * *", "", utc(2024, 5, 5, 11, 0, 0), utc(2024, 5, 5, 10, 0, 0), zero},
		{"every second, 10 years back", "* * * * * *", "", utc(2014, 5, 5, 0, 0, 0),
			time.Date(2024, 5, 5, 12, 34, 56, 789, time.UTC), utc(2024, 5, 5, 12, 34, 56)},
		{"every second, no lower bound", "* * * * * *", "", zero, utc(2024, 5, 5, 12, 34, 56), utc(2024, 5, 5, 12, 34, 56)},
		{"dense but none lately", "* * 0-22 * * *", "", zero, utc(2024, 5, 5, 23, 59, 59), utc(2024, 5, 5, 22, 59, 59)},
		{"yearly", "0 0 1 1 *", "", zero, utc(2024, 6, 1, 0, 0, 0), utc(2024, 1, 1, 0, 0, 0)},
		{"yearly, after the tick", "0 0 1 1 *", "", utc(2024, 1, 1, 0, 0, 0), utc(2024, 12, 31, 0, 0, 0), zero},
		{"yearly, after before the tick", "0 0 1 1 *", "", utc(2023, 12, 31, 0, 0, 0), utc(2024, 12, 31, 0, 0, 0), utc(2024, 1, 1, 0, 0, 0)},
		{"leap day", "0 0 29 2 *", "", zero, utc(2027, 1, 1, 0, 0, 0), utc(2024, 2, 29, 0, 0, 0)},
		{"weekly", "@weekly", "", zero, utc(2024, 5, 8, 12, 0, 0), utc(2024, 5, 5, 0, 0, 0)},
		{"zone", "0 9 * * *", "Europe/Berlin", zero, utc(2024, 7, 1, 7, 0, 0), utc(2024, 7, 1, 7, 0, 0)},
		{"zone, before today's", "0 9 * * *", "Europe/Berlin", zero, utc(2024, 7, 1, 6, 59, 59), utc(2024, 6, 30, 7, 0, 0)},
		{"second of a repeated time", "30 1 * * *", "America/New_York", zero, utc(2024, 11, 3, 6, 45, 0), utc(2024, 11, 3, 6, 30, 0)},
		{"first of a repeated time", "30 1 * * *", "America/New_York", zero, utc(2024, 11, 3, 6, 29, 59), utc(2024, 11, 3, 5, 30, 0)},
		{"across the skipped day", "0 12 * * *", "Pacific/Apia", zero, utc(2011, 12, 30, 21, 0, 0), utc(2011, 12, 29, 22, 0, 0)},
	}
	for _, tt := range tests {
		c := mustParse(t, tt.expr, tt.tz)
		got, ok := c.Latest(tt.after, tt.at)
		if ok != !tt.want.IsZero() || !got.Equal(tt.want) {
			t.Errorf("%s: Latest(%v, %v) = %v, %v; want %v", tt.name, tt.after, tt.at, got, ok, tt.want)
		}
	}
}

// Latest agrees with walking Next from after, for random bounds.
func TestLatestMatchesWalk(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, tt := range []struct {
		expr, tz string
		span     time.Duration // of the random window
	}{
		{"*/7 * * * * *", "", time.Hour},
		{"0 */5 * * * *", "Europe/Berlin", 3 * 24 * time.Hour},
		{"30 1 * * *", "America/New_York", 400 * 24 * time.Hour},
		{"0 9 * * MON-FRI", "Asia/Kolkata", 100 * 24 * time.Hour},
		{"0 0 29 2 *", "", 20 * 366 * 24 * time.Hour},
		{"*/20 * * * *", "Pacific/Apia", 10 * 24 * time.Hour},
	} {
		c := mustParse(t, tt.expr, tt.tz)
		for range 100 {
			after := utc(2010, 1, 1, 0, 0, 0).Add(time.Duration(rng.Int64N(int64(15 * 365 * 24 * time.Hour))))
			after = after.Add(time.Duration(rng.IntN(3)) * time.Duration(rng.Int64N(int64(time.Second))))
			at := after.Add(time.Duration(rng.Int64N(int64(tt.span))))
			var want time.Time
			for u := c.Next(after); !u.IsZero() && !u.After(at); u = c.Next(u) {
				want = u
			}
			got, ok := c.Latest(after, at)
			if ok != !want.IsZero() || !got.Equal(want) {
				t.Fatalf("%v: Latest(%v, %v) = %v, %v; walking Next gives %v", c, after, at, got, ok, want)
			}
		}
	}
}

// Latest over ten years of a cron firing every second must not walk the
// ticks (3e8 of them): a thousand calls take well under a second, even
// under the race detector.
func TestLatestIsBounded(t *testing.T) {
	for _, tt := range []struct{ expr, tz string }{
		{"* * * * * *", ""}, {"* * 0-22 * * *", "Europe/Berlin"}, {"0 0 29 2 *", "America/New_York"}, {"@yearly", ""},
	} {
		c := mustParse(t, tt.expr, tt.tz)
		at := utc(2024, 5, 5, 23, 59, 59)
		start := time.Now()
		for i := range 1000 {
			if _, ok := c.Latest(time.Time{}.Add(time.Duration(i)), at.Add(time.Duration(i)*time.Second)); !ok {
				t.Fatalf("%v: no latest tick", c)
			}
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("%v: 1000 calls of Latest took %v", c, d)
		}
	}
}

func TestMinInterval(t *testing.T) {
	day := 24 * time.Hour
	tests := []struct {
		expr string
		want time.Duration
	}{
		{"* * * * * *", time.Second},
		{"*/10 * * * * *", 10 * time.Second},
		{"0,1 * * * * *", time.Second},
		{"0,59 * * * * *", time.Second},   // :59 to the next minute's :00
		{"0 0,59 * * * *", time.Minute},   // 59 to the next hour's 00
		{"0,59 0,1 * * * *", time.Second}, // 00:59 to 01:00
		{"0 0,59 0,1 * * *", time.Minute}, // 00:59 to 01:00
		{"* * * * *", time.Minute},
		{"0 30 23,0 * * *", time.Hour}, // 23:30 to 00:30 the next day
		{"0 0 * * *", day},
		{"0 0 * * 1-5", day},
		{"0 0 * * 1,5", 3 * day},  // Friday to Monday
		{"0 0 1,31 * *", day},     // 31st to the 1st
		{"0 0 0 1 * *", 28 * day}, // February
		{"@weekly", 7 * day},      // Sundays
		{"0 0 1 1 *", 365 * day},
		{"0 0 29 2 *", (3*365 + 366) * day},
	}
	for _, tt := range tests {
		if got := mustParse(t, tt.expr, "Europe/Berlin").MinInterval(); got != tt.want {
			t.Errorf("MinInterval(%q) = %v, want %v", tt.expr, got, tt.want)
		}
	}
}

func TestCheckInterval(t *testing.T) {
	every := mustParse(t, "* * * * * *", "")
	if err := every.CheckInterval(0); err != nil {
		t.Errorf("CheckInterval(0) on every second: %v (the default allows 1s)", err)
	}
	err := every.CheckInterval(time.Minute)
	if err == nil || !strings.Contains(err.Error(), "1s apart") || !strings.Contains(err.Error(), "1m0s") {
		t.Errorf("CheckInterval(1m) on every second = %v, want an error naming 1s and 1m0s", err)
	}
	if err := mustParse(t, "* * * * *", "").CheckInterval(time.Minute); err != nil {
		t.Errorf("CheckInterval(1m) on every minute: %v", err)
	}
	if err := mustParse(t, "0,30 0 * * * *", "").CheckInterval(time.Minute); err == nil {
		t.Errorf("CheckInterval(1m) on two ticks 30s apart: no error")
	}
}

func BenchmarkNext(b *testing.B) {
	c := mustParse(b, "*/5 * * * *", "Europe/Berlin")
	t := utc(2024, 3, 1, 0, 0, 0)
	for b.Loop() {
		t = c.Next(t)
	}
}

func BenchmarkLatestEverySecondTenYears(b *testing.B) {
	c := mustParse(b, "* * * * * *", "")
	after, at := utc(2014, 5, 5, 0, 0, 0), utc(2024, 5, 5, 12, 34, 56)
	for b.Loop() {
		c.Latest(after, at)
	}
}

func BenchmarkLatestDenseButNotLately(b *testing.B) {
	c := mustParse(b, "* * 0-22 * * *", "Europe/Berlin")
	at := utc(2024, 5, 5, 21, 59, 59) // 23:59:59 CEST
	for b.Loop() {
		c.Latest(time.Time{}, at)
	}
}

func BenchmarkLatestYearly(b *testing.B) {
	c := mustParse(b, "0 0 1 1 *", "America/New_York")
	at := utc(2024, 12, 31, 0, 0, 0)
	for b.Loop() {
		c.Latest(time.Time{}, at)
	}
}
