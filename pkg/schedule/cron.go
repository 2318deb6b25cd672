package schedule

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
)

const (
	// MaxExprBytes is the longest cron expression Parse accepts.
	MaxExprBytes = 200
	// MaxZoneBytes is the longest time-zone name Parse accepts.
	MaxZoneBytes = 64
	// MaxUpcoming is the most ticks Upcoming returns.
	MaxUpcoming = 1000
	// DefaultMinInterval is the shortest gap between ticks a server allows
	// unless configured otherwise (see Cron.CheckInterval).
	DefaultMinInterval = time.Second
)

// Cron is a parsed cron expression in a time zone. Its ticks are exactly
// the whole-second instants whose wall-clock time in the zone matches the
// expression, so:
//
//   - a wall-clock time that a daylight-saving gap skips does not fire that
//     day ("30 2 * * *" in America/New_York has no tick on the day the
//     clocks jump from 02:00 to 03:00; the next is 02:30 the day after);
//   - a wall-clock time that a fall-back overlap repeats fires at both
//     instants ("30 1 * * *" in America/New_York fires at 05:30Z and
//     06:30Z on the day the clocks go back from 02:00 to 01:00);
//   - a day a zone skips altogether (Pacific/Apia's 30 December 2011) has
//     no ticks.
//
// This is robfig/cron's behaviour in gaps and overlaps; Cron parses with
// robfig/cron but does its own zone arithmetic, because robfig's
// Schedule.Next loops forever near a skipped day (Pacific/Apia, December
// 2011) and its handling of a missing midnight can skip a day.
//
// When both day-of-month and day-of-week are restricted (neither is * or
// ?), a day matches when either matches, as in Vixie cron; "*/2" counts as
// restricted there, "*" and "*/1" do not.
//
// A Cron is immutable and safe for concurrent use.
type Cron struct {
	expr string
	tz   string
	loc  *time.Location
	// wall is the parsed expression searched on the zone's wall clock,
	// represented as UTC (which has no transitions, so robfig's search is
	// exact there).
	wall cron.SpecSchedule
}

var parser = cron.NewParser(cron.Second | cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// descriptors are the @-forms Parse accepts (all but @every).
var descriptors = map[string]bool{
	"@yearly": true, "@annually": true, "@monthly": true, "@weekly": true,
	"@daily": true, "@midnight": true, "@hourly": true,
}

// wallRef is where Parse looks for a first tick: a fixed wall-clock instant,
// so that Parse does not depend on the clock.
var wallRef = time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC)

// Parse parses expr in the IANA time zone tz ("" means UTC). It is
// deterministic: it does not read the clock.
//
// expr is 5 fields (minute hour day-of-month month day-of-week), 6 fields
// (second first), or one of the descriptors @yearly, @annually, @monthly,
// @weekly, @daily, @midnight, @hourly; surrounding white space is ignored.
// Fields take *, numbers, ranges (1-5), lists (1,3,5) and steps (*/15,
// 10-50/10, 5/20 meaning 5-59/20); month and day-of-week also take names
// (jan-dec, sun-sat, any case); day-of-month and day-of-week take ? as *.
// Day-of-week runs 0 (Sunday) to 6.
//
// Parse refuses, with an error that names the problem and the field:
// an empty expression or one longer than MaxExprBytes; a CRON_TZ= or TZ=
// prefix (the zone is the tz argument); @every (it counts from when a
// process started rather than from the clock, and ignores the zone: write
// "*/10 * * * * *" instead); other unknown descriptors; the wrong number of
// fields; anything a field does not accept (out of range, backwards range,
// zero or over-long step, empty list item); a tz that is not a known IANA
// zone, is "Local", or is longer than MaxZoneBytes; and an expression that
// never fires (a day-of-month no month it names has, such as 30 February).
func Parse(expr, tz string) (*Cron, error) {
	if len(expr) > MaxExprBytes {
		return nil, fmt.Errorf("cron expression is %d bytes long; at most %d are allowed", len(expr), MaxExprBytes)
	}
	e := strings.TrimSpace(expr)
	if e == "" {
		return nil, errors.New("cron expression is empty: give 5 fields (minute hour day-of-month month day-of-week), 6 with a second field first, or a descriptor such as @daily")
	}
	upper := strings.ToUpper(e)
	for _, prefix := range []string{"CRON_TZ=", "TZ="} {
		if strings.HasPrefix(upper, prefix) {
			return nil, fmt.Errorf("cron expression %q starts with %s: give the time zone in the schedule's time-zone field instead, not in the expression", e, prefix)
		}
	}
	loc, err := loadZone(tz)
	if err != nil {
		return nil, err
	}

	var spec string
	if strings.HasPrefix(e, "@") {
		lower := strings.ToLower(e)
		switch {
		case strings.HasPrefix(lower, "@every"):
			return nil, fmt.Errorf("cron expression %q: @every is not supported: it counts from when a process started, not from the clock, and ignores the time zone; write a cron expression instead, such as \"*/10 * * * * *\" for every 10 seconds", e)
		case !descriptors[lower]:
			return nil, fmt.Errorf("cron expression %q is not a known descriptor: use one of @yearly, @annually, @monthly, @weekly, @daily, @midnight, @hourly, or 5 or 6 fields", e)
		}
		spec = lower
	} else {
		fields := strings.Fields(e)
		var layout []field
		switch len(fields) {
		case 5:
			layout = fiveFields
		case 6:
			layout = sixFields
		default:
			return nil, fmt.Errorf("cron expression %q has %d fields; want 5 (minute hour day-of-month month day-of-week) or 6 (second minute hour day-of-month month day-of-week)", e, len(fields))
		}
		for i, f := range layout {
			if err := f.check(fields[i]); err != nil {
				return nil, fmt.Errorf("cron expression %q: %w", e, err)
			}
		}
		if len(fields) == 5 {
			fields = append([]string{"0"}, fields...)
		}
		spec = strings.Join(fields, " ")
	}

	s, err := parser.Parse(spec)
	if err != nil {
		return nil, fmt.Errorf("cron expression %q: %v", e, err)
	}
	ss, ok := s.(*cron.SpecSchedule)
	if !ok {
		return nil, fmt.Errorf("cron expression %q: unsupported schedule kind %T", e, s)
	}
	c := &Cron{expr: e, tz: tz, loc: loc, wall: *ss}
	c.wall.Location = time.UTC
	if _, ok := c.wallNext(wallRef); !ok {
		return nil, fmt.Errorf("cron expression %q never fires: no month it allows has a day-of-month it allows (such as 30 February)", e)
	}
	return c, nil
}

func loadZone(tz string) (*time.Location, error) {
	switch {
	case tz == "":
		return time.UTC, nil
	case len(tz) > MaxZoneBytes:
		return nil, fmt.Errorf("time zone is %d bytes long; at most %d are allowed", len(tz), MaxZoneBytes)
	case strings.EqualFold(tz, "Local"):
		return nil, fmt.Errorf("time zone %q means whatever zone the server runs in; name the zone, such as \"Europe/Berlin\" or \"UTC\"", tz)
	}
	loc, err := time.LoadLocation(tz)
	if err != nil {
		return nil, fmt.Errorf("unknown time zone %q: give an IANA zone name, such as \"Europe/Berlin\" or \"UTC\"", tz)
	}
	return loc, nil
}

// String returns the expression (without surrounding white space) and the
// zone, e.g. "0 9 * * MON-FRI (Europe/Berlin)"; the zone is UTC when it
// was given as "".
func (c *Cron) String() string {
	tz := c.tz
	if tz == "" {
		tz = "UTC"
	}
	return c.expr + " (" + tz + ")"
}

// Location returns the schedule's time zone.
func (c *Cron) Location() *time.Location { return c.loc }

// maxSegments bounds how many spans of constant UTC offset Next walks
// through; real zones change offset at most a few times a year and Next
// looks at most about 15 years ahead.
const maxSegments = 200

// Next returns the first tick strictly after t, in UTC, or the zero time if
// there is none in the next 15 years or so (a Cron that Parse accepted
// fires at least once every 8 years, the longest gap between two 29
// Februaries). Ticks are whole seconds.
func (c *Cron) Next(t time.Time) time.Time {
	a := t.Truncate(time.Second).Add(time.Second)
	// Within one span of constant offset the wall clock is the instant
	// plus the offset: search the wall clock there, and if the first match
	// falls after the span, go on from the next span.
	for range maxSegments {
		local := a.In(c.loc)
		_, off := local.Zone()
		_, end := local.ZoneBounds()
		shift := time.Duration(off) * time.Second
		w, ok := c.wallNext(a.Add(shift).UTC())
		if !ok {
			return time.Time{}
		}
		r := w.Add(-shift)
		if end.IsZero() || r.Before(end) {
			return r
		}
		a = end
	}
	return time.Time{}
}

// wallNext returns the first wall-clock time at or after w (a whole second,
// in UTC) that matches, looking at least 15 years ahead.
func (c *Cron) wallNext(w time.Time) (time.Time, bool) {
	from := w.Add(-time.Second)
	for range 3 {
		if r := c.wall.Next(from); !r.IsZero() {
			return r, true
		}
		// robfig gives up once it reaches the year after from.Year()+5,
		// having found nothing before it: go on from there.
		from = time.Date(from.Year()+5, 12, 31, 0, 0, 0, 0, time.UTC)
	}
	return time.Time{}, false
}

// Upcoming returns the next n ticks after t (at most MaxUpcoming), fewer if
// Next runs out.
func (c *Cron) Upcoming(t time.Time, n int) []time.Time {
	n = min(n, MaxUpcoming)
	if n <= 0 {
		return nil
	}
	out := make([]time.Time, 0, n)
	for len(out) < n {
		t = c.Next(t)
		if t.IsZero() {
			break
		}
		out = append(out, t)
	}
	return out
}

// windows are how far back Latest looks, in turn, before doubling years.
var windows = []time.Duration{time.Minute, time.Hour, 24 * time.Hour, 32 * 24 * time.Hour, 366 * 24 * time.Hour}

// Latest returns the latest tick in (after, t]: after < tick <= t. ok is
// false if there is none (or after is not before t).
//
// The work is bounded whatever the cron and however far back after is: it
// looks back in growing windows (1 minute, 1 hour, 1 day, 32 days, 366
// days, then 5, 10, 20, ... years, never past after) until one holds a
// tick, then bisects that window down to one second, calling Next about
// twice per halving: some 60 calls for a tick a year back, and about a
// dozen for a cron firing every second.
func (c *Cron) Latest(after, t time.Time) (time.Time, bool) {
	if !after.Before(t) {
		return time.Time{}, false
	}
	// Invariant once found: a tick lies in (lo, hi], none in (hi, t], and
	// x = Next(lo).
	hi := t
	var lo, x time.Time
	for i := 0; ; i++ {
		start := after
		if i < len(windows) {
			start = t.Add(-windows[i])
		} else if k := i - len(windows); k < 25 {
			if years := 5 << k; years < t.Year()-after.Year()+1 {
				start = t.AddDate(-years, 0, 0)
			}
		}
		if !start.After(after) {
			start = after
		}
		if n := c.Next(start); !n.IsZero() && !n.After(t) {
			lo, x = start, n
			break
		}
		if start.Equal(after) {
			return time.Time{}, false
		}
		hi = start
	}
	for {
		if y := c.Next(x); y.IsZero() || y.After(hi) || hi.Sub(lo) <= time.Second {
			// x is the only tick in (lo, hi]. The check guards what
			// Decide relies on, should Next ever disagree with itself.
			if x.IsZero() || x.After(t) || !x.After(after) {
				return time.Time{}, false
			}
			return x, true
		}
		mid := lo.Add(hi.Sub(lo) / 2)
		if m := c.Next(mid); !m.IsZero() && !m.After(hi) {
			lo, x = mid, m
		} else {
			hi = mid // x <= mid: a tick lies in (lo, hi] and none after mid
		}
	}
}

// count returns how many ticks lie in (after, before), counting at most
// limit of them.
func (c *Cron) count(after, before time.Time, limit int) int {
	n := 0
	for t := c.Next(after); n < limit && !t.IsZero() && t.Before(before); t = c.Next(t) {
		n++
	}
	return n
}

// MinInterval returns the shortest gap between two consecutive ticks on the
// zone's wall clock, computed from the fields (days over a 28-year cycle of
// weekdays and leap years). A daylight-saving change can bring two real
// ticks closer than that by the size of the change (a tick in a repeated
// hour fires twice, an hour apart), or push them further apart.
func (c *Cron) MinInterval() time.Duration {
	s := bits(c.wall.Second, 0, 59)
	m := bits(c.wall.Minute, 0, 59)
	h := bits(c.wall.Hour, 0, 23)
	best := int64(math.MaxInt64)
	consider := func(list []int, unit, span int64) {
		if d := minDiff(list); d > 0 {
			best = min(best, d*unit-span)
		}
	}
	// Consecutive ticks are in the same minute, in consecutive matching
	// minutes of an hour, in consecutive matching hours of a day, or on
	// consecutive matching days.
	consider(s, 1, 0)
	spanS := int64(s[len(s)-1] - s[0])
	consider(m, 60, spanS)
	spanMS := int64(m[len(m)-1]*60+s[len(s)-1]) - int64(m[0]*60+s[0])
	consider(h, 3600, spanMS)
	spanHMS := int64(h[len(h)-1]*3600+m[len(m)-1]*60+s[len(s)-1]) - int64(h[0]*3600+m[0]*60+s[0])
	if d := c.minDayGap(); d > 0 {
		best = min(best, d*86400-spanHMS)
	}
	return time.Duration(best) * time.Second
}

// CheckInterval returns an error if ticks can come closer together than
// minGap on the wall clock (see MinInterval); minGap <= 0 means
// DefaultMinInterval.
func (c *Cron) CheckInterval(minGap time.Duration) error {
	if minGap <= 0 {
		minGap = DefaultMinInterval
	}
	if got := c.MinInterval(); got < minGap {
		return fmt.Errorf("cron expression %q can fire %v apart; this server allows at most one tick every %v", c.expr, got, minGap)
	}
	return nil
}

// minDayGap returns the fewest days between two consecutive matching days,
// over 2001-2028 (every weekday and leap-year alignment), or 0 if fewer
// than two days match there.
func (c *Cron) minDayGap() int64 {
	const starBit = 1 << 63
	and := c.wall.Dom&starBit != 0 || c.wall.Dow&starBit != 0
	best, last := int64(0), int64(-1)
	day, weekday := int64(0), 1 // 2001-01-01 was a Monday
	for y := 2001; y <= 2028; y++ {
		for mo := 1; mo <= 12; mo++ {
			n := time.Date(y, time.Month(mo)+1, 0, 0, 0, 0, 0, time.UTC).Day()
			monthOK := c.wall.Month&(1<<mo) != 0
			for d := 1; d <= n; d++ {
				if monthOK {
					domOK := c.wall.Dom&(1<<d) != 0
					dowOK := c.wall.Dow&(1<<weekday) != 0
					if (and && domOK && dowOK) || (!and && (domOK || dowOK)) {
						if last >= 0 && (best == 0 || day-last < best) {
							best = day - last
						}
						last = day
					}
				}
				day++
				weekday = (weekday + 1) % 7
			}
		}
	}
	return best
}

// bits lists the values set in a robfig field bit set.
func bits(set uint64, lo, hi int) []int {
	var out []int
	for i := lo; i <= hi; i++ {
		if set&(1<<i) != 0 {
			out = append(out, i)
		}
	}
	return out
}

// minDiff returns the smallest difference between neighbours of a sorted
// list, or 0 if it has fewer than two values.
func minDiff(list []int) int64 {
	best := int64(0)
	for i := 1; i < len(list); i++ {
		if d := int64(list[i] - list[i-1]); best == 0 || d < best {
			best = d
		}
	}
	return best
}
