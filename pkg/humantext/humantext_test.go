package humantext

import (
	"testing"
	"time"
)

// Others' words cannot redraw a screen or reorder themselves: control
// characters, bidi overrides and isolates, and invalid UTF-8 come out as
// escapes; newlines, tabs and ordinary text are kept.
func TestEscape(t *testing.T) {
	for in, want := range map[string]string{
		"pay 485000 INR":      "pay 485000 INR",
		"a\nb\tc":             "a\nb\tc",
		"\x1b[2Jcleared":      `\x1b[2Jcleared`,
		"amount \u202e0005 ":  `amount \u202e0005 `,
		"\u2066isolate\u2069": `\u2066isolate\u2069`,
		"bad \xff byte":       `bad \xff byte`,
		"naïve café ✓":        "naïve café ✓",
	} {
		if got := Escape(in); got != want {
			t.Errorf("Escape(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestDeadline(t *testing.T) {
	now := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	for d, want := range map[time.Duration]string{
		5*time.Hour + 30*time.Minute: "2026-03-01 15:30 (in 5h30m)",
		72*time.Hour + 3*time.Second: "2026-03-04 10:00 (in 3d)",
		-10 * time.Minute:            "2026-03-01 09:50 (overdue 10m)",
	} {
		if got := Deadline(now.Add(d), now); got != want {
			t.Errorf("Deadline(+%v) = %q, want %q", d, got, want)
		}
	}
}
