package answer

import (
	"math"
	"strings"
	"testing"
)

// FuzzMatch: for any reply, stored miss count and ask shape, Match never
// panics, is deterministic, returns one of the five kinds with a non-empty
// message and a non-negative miss count that follows the counting rules, and
// a selection on a menu is one of its options.
func FuzzMatch(f *testing.F) {
	for _, s := range []string{
		"", " ", "/", "//", "1", "2", "02", "0", "-1", "99999999999999999999",
		"yes", "YES", "/yes", "stop", "/STOP", "menu", "/menu", "options",
		"cancel", "/cancel", "exit", "quit", "nevermind", "help",
		"2 no add it to #alpha-testing", "pick the right one", "\x00", "\xff",
		"ſtop", "\u00a0menu\u00a0",
	} {
		f.Add(s, 0, "Yes", "Stop", false)
		f.Add(s, 2, "Menu", "2", true)
	}
	f.Add("x", math.MaxInt, "", "", false)
	f.Add("x", -1, "a", "A", true)

	f.Fuzz(func(t *testing.T, text string, misses int, l1, l2 string, free bool) {
		a := Ask{Title: "q?", Options: []Option{{ID: "a", Label: l1}, {ID: "b", Label: l2}}, FreeText: free}
		for _, ask := range []Ask{a, {Title: "q?", FreeText: free}} {
			r := Match(ask, text, misses)
			if r2 := Match(ask, text, misses); r2 != r {
				t.Fatalf("not deterministic: %+v vs %+v", r, r2)
			}
			if !allKinds[r.Kind] {
				t.Fatalf("kind %q", r.Kind)
			}
			if r.Message == "" {
				t.Fatalf("empty message for %q (%s)", text, r.Kind)
			}
			if r.Misses < 0 {
				t.Fatalf("misses %d", r.Misses)
			}
			in := max(misses, 0)
			next := in
			if in < math.MaxInt {
				next++
			}
			switch r.Kind {
			case Selected:
				if r.Misses != 0 {
					t.Fatalf("selected with misses %d", r.Misses)
				}
				if r.Option != (Option{}) {
					found := false
					for _, o := range ask.Options {
						found = found || o == r.Option
					}
					if !found || r.Text != "" {
						t.Fatalf("selected %+v, not an option of %+v", r, ask.Options)
					}
				} else if !ask.FreeText {
					t.Fatalf("menu selection without an option: %+v", r)
				} else if r.Text == "" || r.Text != strings.TrimSpace(text) {
					t.Fatalf("free-text answer %q for %q", r.Text, text)
				}
			case Dropped:
				if r.Misses != 0 || r.Option != (Option{}) || r.Text != "" {
					t.Fatalf("dropped: %+v", r)
				}
			case Reshown:
				if r.Misses != in || r.Message != Menu(ask) {
					t.Fatalf("reshown: %+v (in %d)", r, in)
				}
			case NoMatch:
				if r.Misses != next || next >= MissesBeforeEscapeHint {
					t.Fatalf("no match: %+v (in %d)", r, in)
				}
			case EscapeHint:
				if r.Misses != next || next < MissesBeforeEscapeHint {
					t.Fatalf("escape hint: %+v (in %d)", r, in)
				}
			}
			if Menu(ask) == "" {
				t.Fatal("empty menu")
			}
		}
	})
}
