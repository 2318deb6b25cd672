// Package humantext writes times, durations and other people's words for
// people to read, the same on every surface (approvectl, the web inbox,
// Slack): one span, one deadline, one escape of text that could redraw a
// screen. Pure: every function takes the clock it needs as an argument.
package humantext

import (
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Span renders a duration compactly, to the precision a person reads at
// that size: 0.4ms, 412ms, 1.2s, 3m05s, 3h12m, 2d4h, 3d. It rounds at the
// unit it shows (59.96s is 1m00s, not 60.0s); from an hour on it is
// Remaining's form.
func Span(d time.Duration) string {
	if d < 0 {
		return "-" + Span(-d)
	}
	if r := d.Round(100 * time.Microsecond); r < 10*time.Millisecond {
		return strconv.FormatFloat(float64(r)/float64(time.Millisecond), 'f', -1, 64) + "ms"
	}
	if r := d.Round(time.Millisecond); r < time.Second {
		return fmt.Sprintf("%dms", r/time.Millisecond)
	}
	if r := d.Round(100 * time.Millisecond); r < time.Minute {
		return strconv.FormatFloat(r.Seconds(), 'f', 1, 64) + "s"
	}
	if r := d.Round(time.Second); r < time.Hour {
		return fmt.Sprintf("%dm%02ds", r/time.Minute, r%time.Minute/time.Second)
	}
	// An hour and more reads as a deadline does (remaining): one way to
	// write 3h05m or 2d4h, whatever the figure is.
	return Remaining(d)
}

// Ago renders a duration in its largest whole unit, rounded down, for
// tables: 45s, 12m, 3h, 2d.
func Ago(d time.Duration) string {
	switch {
	case d < 0:
		return "0s"
	case d < time.Minute:
		return fmt.Sprintf("%ds", d/time.Second)
	case d < time.Hour:
		return fmt.Sprintf("%dm", d/time.Minute)
	case d < 24*time.Hour:
		return fmt.Sprintf("%dh", d/time.Hour)
	}
	return fmt.Sprintf("%dd", d/(24*time.Hour))
}

// Age renders how long ago t was (see Ago); a time in the future (clock
// skew) reads 0s.
func Age(t, now time.Time) string { return Ago(now.Sub(t)) }

// DueIn renders a deadline relative to now: "in 3d", "in 5h30m" while it
// is ahead, "overdue 10m" once it has passed (see Remaining). It is the
// one relative deadline every surface prints (asks, asks show, runs show,
// the timeline, watch, gate), so a deadline reads the same everywhere.
func DueIn(deadline, now time.Time) string {
	if now.Before(deadline) {
		return "in " + Remaining(deadline.Sub(now))
	}
	return "overdue " + Remaining(now.Sub(deadline))
}

// Remaining renders a time to or past a deadline in at most two units,
// rounded to the smaller one, a zero smaller unit left out: 45s, 12m,
// 5h, 5h30m, 5h05m, 3d, 2d22h. A 72h deadline a few seconds on reads 3d, not
// 2d (rounded down) or 3d0h.
func Remaining(d time.Duration) string {
	if d < 0 {
		d = -d
	}
	if r := d.Round(time.Second); r < time.Minute {
		return fmt.Sprintf("%ds", r/time.Second)
	}
	if r := d.Round(time.Minute); r < time.Hour {
		return fmt.Sprintf("%dm", r/time.Minute)
	} else if r < 24*time.Hour {
		if m := r % time.Hour / time.Minute; m != 0 {
			return fmt.Sprintf("%dh%02dm", r/time.Hour, m)
		}
		return fmt.Sprintf("%dh", r/time.Hour)
	}
	r := d.Round(time.Hour)
	if h := r % (24 * time.Hour) / time.Hour; h != 0 {
		return fmt.Sprintf("%dd%dh", r/(24*time.Hour), h)
	}
	return fmt.Sprintf("%dd", r/(24*time.Hour))
}

// Deadline is a deadline for people: absolute in the time's own
// location, then relative, as "2026-03-01 15:04 (in 5h)". Every surface
// that shows a deadline prints it with this.
func Deadline(deadline, now time.Time) string {
	return deadline.Format("2006-01-02 15:04") + " (" + DueIn(deadline, now) + ")"
}

// Escape is s with every control character but newline and tab, every
// bidi override or isolate, and every byte that is not UTF-8 written as
// an escape (\x1b, \u202e), so the text cannot move a terminal's cursor,
// clear what was printed, or reorder itself on any screen to show another
// payload than the one the packet binds.
func Escape(s string) string {
	if !strings.ContainsFunc(s, Unsafe) && utf8.ValidString(s) {
		return s
	}
	var b strings.Builder
	for len(s) > 0 {
		r, n := utf8.DecodeRuneInString(s)
		switch {
		case r == utf8.RuneError && n == 1:
			fmt.Fprintf(&b, `\x%02x`, s[0])
		case Unsafe(r) && r < 0x100:
			fmt.Fprintf(&b, `\x%02x`, r)
		case Unsafe(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteString(s[:n])
		}
		s = s[n:]
	}
	return b.String()
}

func Unsafe(r rune) bool {
	return unicode.IsControl(r) && r != '\n' && r != '\t' ||
		r >= 0x202a && r <= 0x202e || r >= 0x2066 && r <= 0x2069 || r == 0x200e || r == 0x200f || r == 0x061c
}
