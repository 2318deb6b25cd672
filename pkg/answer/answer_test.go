package answer

import (
	"math"
	"strings"
	"testing"
)

func opts(labels ...string) []Option {
	out := make([]Option, len(labels))
	for i, l := range labels {
		out[i] = Option{ID: "o" + string(rune('1'+i)), Label: l}
	}
	return out
}

var (
	yesNo    = Ask{Title: "save this reading?", Options: opts("Yes", "No")}
	three    = Ask{Title: "which diagram?", Options: opts("Sequence", "Class", "Component")}
	withStop = Ask{Title: "did it happen?", Options: opts("Retry", "It ran", "Stop")}
	freeText = Ask{Title: "why reject?", FreeText: true}
)

var allKinds = map[Kind]bool{Selected: true, Reshown: true, NoMatch: true, EscapeHint: true, Dropped: true}

// check asserts the invariants every reply keeps.
func check(t *testing.T, a Ask, text string, r Reply) {
	t.Helper()
	if !allKinds[r.Kind] {
		t.Fatalf("%q: unknown kind %q", text, r.Kind)
	}
	if r.Message == "" {
		t.Fatalf("%q: empty message (kind %s)", text, r.Kind)
	}
	if r.Misses < 0 {
		t.Fatalf("%q: negative misses %d", text, r.Misses)
	}
}

func TestMatchMenu(t *testing.T) {
	tests := []struct {
		name   string
		ask    Ask
		text   string
		kind   Kind
		option string // label of the selected option
	}{
		{"number", yesNo, "2", Selected, "No"},
		{"number first", yesNo, "1", Selected, "Yes"},
		{"number with spaces", yesNo, "  2\t\n", Selected, "No"},
		{"number with slash", yesNo, "/2", Selected, "No"},
		{"label", yesNo, "Yes", Selected, "Yes"},
		{"label folded", yesNo, "yes", Selected, "Yes"},
		{"label upper", yesNo, "NO", Selected, "No"},
		{"label mixed with spaces", yesNo, "  yEs  ", Selected, "Yes"},
		{"label with slash", yesNo, "/yes", Selected, "Yes"},
		{"label with slash and space", yesNo, "/ yes", Selected, "Yes"},
		{"label multiword", withStop, "it ran", Selected, "It ran"},
		{"label inner spaces collapse", withStop, "It   ran", Selected, "It ran"},
		{"label unicode fold", Ask{Options: opts("Über", "Straße")}, "über", Selected, "Über"},
		{"zero", yesNo, "0", NoMatch, ""},
		{"out of range", yesNo, "3", NoMatch, ""},
		{"way out of range", yesNo, "99999999999999999999", NoMatch, ""},
		{"negative", yesNo, "-1", NoMatch, ""},
		{"leading zero", yesNo, "02", NoMatch, ""},
		{"plus sign", yesNo, "+2", NoMatch, ""},
		{"trailing dot", yesNo, "2.", NoMatch, ""},
		{"paren", yesNo, "2)", NoMatch, ""},
		{"B16 partial", yesNo, "2 no add it to #alpha-testing", NoMatch, ""},
		{"number then label", yesNo, "2 no", NoMatch, ""},
		{"label prefix", yesNo, "ye", NoMatch, ""},
		{"label plus words", yesNo, "yes please", NoMatch, ""},
		{"empty", yesNo, "", NoMatch, ""},
		{"blank", yesNo, "   \t ", NoMatch, ""},
		{"lone slash", yesNo, "/", NoMatch, ""},
		{"double slash", yesNo, "//menu", NoMatch, ""},
		{"help is not a control word", yesNo, "help", NoMatch, ""},
		{"option id is not a label", yesNo, "o1", NoMatch, ""},
		{"sentence", three, "pick the right diagram", NoMatch, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := Match(tt.ask, tt.text, 0)
			check(t, tt.ask, tt.text, r)
			if r.Kind != tt.kind {
				t.Fatalf("Match(%q) kind = %s, want %s (message %q)", tt.text, r.Kind, tt.kind, r.Message)
			}
			if r.Option.Label != tt.option {
				t.Fatalf("Match(%q) option = %+v, want label %q", tt.text, r.Option, tt.option)
			}
			if tt.kind == Selected && r.Text != "" {
				t.Fatalf("Match(%q) text = %q on an option selection", tt.text, r.Text)
			}
		})
	}
}

func TestSelectedReturnsTheOption(t *testing.T) {
	r := Match(three, "3", 2)
	if r.Kind != Selected || r.Option != three.Options[2] {
		t.Fatalf("got %+v, want option %+v", r, three.Options[2])
	}
	if r.Misses != 0 {
		t.Fatalf("a match must reset misses, got %d", r.Misses)
	}
	if !strings.Contains(r.Message, "Component") {
		t.Fatalf("selected message %q does not name the option", r.Message)
	}
}

func TestControlWords(t *testing.T) {
	for _, w := range []string{"menu", "options"} {
		for _, text := range []string{w, "/" + w, strings.ToUpper(w), " /" + strings.ToUpper(w) + " ", "/ " + w} {
			r := Match(three, text, 2)
			check(t, three, text, r)
			if r.Kind != Reshown {
				t.Fatalf("%q: kind %s, want RESHOWN", text, r.Kind)
			}
			if r.Message != Menu(three) {
				t.Fatalf("%q: message %q, want the menu", text, r.Message)
			}
			if r.Misses != 2 {
				t.Fatalf("%q: reshow must neither count nor reset: misses %d, want 2", text, r.Misses)
			}
		}
	}
	for _, w := range []string{"cancel", "exit", "quit", "stop", "nevermind"} {
		for _, text := range []string{w, "/" + w, strings.ToUpper(w), "  /" + w + "\n"} {
			r := Match(three, text, 5)
			check(t, three, text, r)
			if r.Kind != Dropped {
				t.Fatalf("%q: kind %s, want DROPPED", text, r.Kind)
			}
			if r.Misses != 0 {
				t.Fatalf("%q: misses %d after a drop, want 0", text, r.Misses)
			}
			if r.Option != (Option{}) || r.Text != "" {
				t.Fatalf("%q: a drop selected something: %+v", text, r)
			}
		}
	}
	for _, text := range []string{"never mind", "cancel it", "stop now", "menus", "option", "/help"} {
		if r := Match(three, text, 0); r.Kind != NoMatch {
			t.Fatalf("%q: kind %s, want NO_MATCH", text, r.Kind)
		}
	}
}

func TestSlashMenuSameAsMenu(t *testing.T) {
	for _, a := range []Ask{yesNo, three, withStop} {
		for misses := 0; misses < 5; misses++ {
			if x, y := Match(a, "/menu", misses), Match(a, "menu", misses); x != y {
				t.Fatalf("/menu %+v != menu %+v", x, y)
			}
		}
	}
}

func TestOptionBeatsControlWord(t *testing.T) {
	for _, text := range []string{"stop", "STOP", "Stop", "/stop", " /STOP "} {
		r := Match(withStop, text, 1)
		if r.Kind != Selected || r.Option.Label != "Stop" {
			t.Fatalf("%q on a menu with Stop: got %+v, want option Stop", text, r)
		}
		if r := Match(three, text, 1); r.Kind != Dropped {
			t.Fatalf("%q on a menu without Stop: got %s, want DROPPED", text, r.Kind)
		}
	}
	menuAsk := Ask{Title: "where to?", Options: opts("Menu", "Home")}
	if r := Match(menuAsk, "menu", 0); r.Kind != Selected || r.Option.Label != "Menu" {
		t.Fatalf("menu on a menu with option Menu: %+v", r)
	}
	if r := Match(menuAsk, "options", 0); r.Kind != Reshown {
		t.Fatalf("options on a menu with option Menu: %s, want RESHOWN", r.Kind)
	}
}

func TestNumberBeatsNumericLabel(t *testing.T) {
	a := Ask{Title: "replicas?", Options: opts("3", "1", "5")}
	if r := Match(a, "1", 0); r.Kind != Selected || r.Option != a.Options[0] {
		t.Fatalf("1: got %+v, want option 1 (label 3)", r)
	}
	// Out of range as a number, but an exact label.
	if r := Match(a, "5", 0); r.Kind != Selected || r.Option != a.Options[2] {
		t.Fatalf("5: got %+v, want option 3 (label 5)", r)
	}
}

func TestAmbiguousLabelIsAMiss(t *testing.T) {
	a := Ask{Title: "which?", Options: opts("Yes", "YES", "Stop", "stop")}
	for _, text := range []string{"yes", "stop", "/stop"} {
		r := Match(a, text, 0)
		if r.Kind != NoMatch || r.Misses != 1 {
			t.Fatalf("%q: got %+v, want NO_MATCH", text, r)
		}
		if r.Message != msgAmbiguous {
			t.Fatalf("%q: message %q", text, r.Message)
		}
	}
	if r := Match(a, "2", 0); r.Kind != Selected || r.Option != a.Options[1] {
		t.Fatalf("number on an ambiguous label: %+v", r)
	}
}

// The reply script of the seed (003): the response changes by the third miss,
// never goes empty, and the escape word leaves the ask.
func TestSeedReplyScript(t *testing.T) {
	script := []string{"pick the right one", "did it run?", "help", "what now", "cancel"}
	want := []Kind{NoMatch, NoMatch, EscapeHint, EscapeHint, Dropped}
	wantMisses := []int{1, 2, 3, 4, 0}
	misses := 0
	var msgs []string
	for i, text := range script {
		r := Match(three, text, misses)
		check(t, three, text, r)
		if r.Kind != want[i] || r.Misses != wantMisses[i] {
			t.Fatalf("step %d %q: kind %s misses %d, want %s %d", i, text, r.Kind, r.Misses, want[i], wantMisses[i])
		}
		if r.Kind.StaysParked() != (i < 4) {
			t.Fatalf("step %d %q: StaysParked = %v", i, text, r.Kind.StaysParked())
		}
		misses = r.Misses
		msgs = append(msgs, r.Message)
	}
	if msgs[0] == msgs[2] {
		t.Fatalf("the third miss did not change the response: %q", msgs[2])
	}
	if !strings.Contains(msgs[2], "(3 tries)") || !strings.Contains(msgs[3], "(4 tries)") {
		t.Fatalf("hints do not count tries: %q / %q", msgs[2], msgs[3])
	}
}

func TestEscapeHintNamesTheExits(t *testing.T) {
	r := Match(three, "what now", MissesBeforeEscapeHint-1)
	if r.Kind != EscapeHint {
		t.Fatalf("kind %s, want ESCAPE_HINT", r.Kind)
	}
	for _, want := range []string{
		"a number or a label",
		`"menu" to see the options again`,
		`"cancel" to drop the run`,
		Menu(three),
	} {
		if !strings.Contains(strings.ToLower(r.Message), strings.ToLower(want)) {
			t.Fatalf("hint %q lacks %q", r.Message, want)
		}
	}
	// Every exit the hint names works on the same ask.
	if k := Match(three, "menu", r.Misses).Kind; k != Reshown {
		t.Fatalf("named menu word gives %s", k)
	}
	if k := Match(three, "cancel", r.Misses).Kind; k != Dropped {
		t.Fatalf("named cancel word gives %s", k)
	}
}

// A hint never names an exit that an option label would capture.
func TestEscapeHintSkipsShadowedWords(t *testing.T) {
	a := Ask{Title: "what now?", Options: opts("Menu", "Cancel", "Exit")}
	r := Match(a, "huh", 7)
	if r.Kind != EscapeHint {
		t.Fatalf("kind %s", r.Kind)
	}
	if strings.Contains(r.Message, `"menu"`) || strings.Contains(r.Message, `"cancel"`) || strings.Contains(r.Message, `"exit"`) {
		t.Fatalf("hint names a shadowed word: %q", r.Message)
	}
	if !strings.Contains(r.Message, `"options" to see the options again`) || !strings.Contains(r.Message, `"quit" to drop the run`) {
		t.Fatalf("hint lacks the free words: %q", r.Message)
	}
	if Match(a, "options", 0).Kind != Reshown || Match(a, "quit", 0).Kind != Dropped {
		t.Fatal("the named words do not work")
	}
}

func TestFreeText(t *testing.T) {
	tests := []struct {
		text string
		kind Kind
		ans  string
	}{
		{"cancel", Selected, "cancel"},
		{"stop", Selected, "stop"},
		{"menu", Selected, "menu"},
		{"Nevermind", Selected, "Nevermind"},
		{"  the numbers   look off \n", Selected, "the numbers   look off"},
		{"2", Selected, "2"},
		{"/usr/local is full", Selected, "/usr/local is full"},
		{"/help", Selected, "/help"},
		{"/cancel", Dropped, ""},
		{"/CANCEL", Dropped, ""},
		{" /quit ", Dropped, ""},
		{"/stop", Dropped, ""},
		{"/menu", Reshown, ""},
		{"/options", Reshown, ""},
		{"", NoMatch, ""},
		{"  ", NoMatch, ""},
		{"/", NoMatch, ""},
	}
	for _, tt := range tests {
		r := Match(freeText, tt.text, 1)
		check(t, freeText, tt.text, r)
		if r.Kind != tt.kind || r.Text != tt.ans {
			t.Fatalf("free text %q: got %s %q, want %s %q", tt.text, r.Kind, r.Text, tt.kind, tt.ans)
		}
		if r.Option != (Option{}) {
			t.Fatalf("free text %q selected an option: %+v", tt.text, r.Option)
		}
		switch r.Kind {
		case Selected, Dropped:
			if r.Misses != 0 {
				t.Fatalf("%q: misses %d, want 0", tt.text, r.Misses)
			}
		case Reshown:
			if r.Misses != 1 || r.Message != Menu(freeText) {
				t.Fatalf("%q: %+v", tt.text, r)
			}
		case NoMatch:
			if r.Misses != 2 {
				t.Fatalf("%q: misses %d, want 2", tt.text, r.Misses)
			}
		}
	}
}

func TestFreeTextEscapeHint(t *testing.T) {
	misses := 0
	var r Reply
	for range MissesBeforeEscapeHint {
		r = Match(freeText, " ", misses)
		misses = r.Misses
	}
	if r.Kind != EscapeHint || r.Misses != 3 {
		t.Fatalf("third empty reply: %+v", r)
	}
	// In a free-text ask the bare words are answers, so the hint names the slash forms.
	for _, want := range []string{`"/menu" to see the question again`, `"/cancel" to drop the run`, "type your answer"} {
		if !strings.Contains(strings.ToLower(r.Message), strings.ToLower(want)) {
			t.Fatalf("hint %q lacks %q", r.Message, want)
		}
	}
	if strings.Contains(r.Message, `"cancel"`) {
		t.Fatalf("hint names a bare word that would be taken as the answer: %q", r.Message)
	}
}

func TestFreeTextWithOptions(t *testing.T) {
	a := Ask{Title: "which channel?", Options: opts("#general", "Stop"), FreeText: true}
	cases := []struct {
		text   string
		kind   Kind
		option string
		ans    string
	}{
		{"1", Selected, "#general", ""},
		{"#GENERAL", Selected, "#general", ""},
		{"stop", Selected, "Stop", ""},
		{"/stop", Selected, "Stop", ""},
		{"#alpha-testing", Selected, "", "#alpha-testing"},
		{"3", Selected, "", "3"},
		{"cancel", Selected, "", "cancel"},
		{"/cancel", Dropped, "", ""},
		{"/menu", Reshown, "", ""},
	}
	for _, c := range cases {
		r := Match(a, c.text, 0)
		check(t, a, c.text, r)
		if r.Kind != c.kind || r.Option.Label != c.option || r.Text != c.ans {
			t.Fatalf("%q: got %+v, want %s option %q text %q", c.text, r, c.kind, c.option, c.ans)
		}
	}
	h := Match(a, "", 2)
	if h.Kind != EscapeHint || !strings.Contains(h.Message, `"/menu" to see the options again`) || !strings.Contains(h.Message, `"/cancel" to drop the run`) {
		t.Fatalf("hint: %+v", h)
	}
}

func TestMissCounter(t *testing.T) {
	cases := []struct {
		name   string
		text   string
		in     int
		kind   Kind
		misses int
	}{
		{"first miss", "nope", 0, NoMatch, 1},
		{"second miss", "nope", 1, NoMatch, 2},
		{"third miss hints", "nope", 2, EscapeHint, 3},
		{"later miss hints", "nope", 10, EscapeHint, 11},
		{"negative stored count is 0", "nope", -5, NoMatch, 1},
		{"saturates", "nope", math.MaxInt, EscapeHint, math.MaxInt},
		{"match resets", "1", 9, Selected, 0},
		{"reshow keeps", "menu", 9, Reshown, 9},
		{"reshow keeps zero", "options", 0, Reshown, 0},
		{"reshow clamps negative", "menu", -1, Reshown, 0},
		{"drop resets", "quit", 9, Dropped, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := Match(three, c.text, c.in)
			if r.Kind != c.kind || r.Misses != c.misses {
				t.Fatalf("Match(%q, %d) = %s %d, want %s %d", c.text, c.in, r.Kind, r.Misses, c.kind, c.misses)
			}
		})
	}
	// A reshow between misses does not break the run of misses.
	m := Match(three, "a", 0).Misses
	m = Match(three, "b", m).Misses
	m = Match(three, "/menu", m).Misses
	if r := Match(three, "c", m); r.Kind != EscapeHint {
		t.Fatalf("miss, miss, menu, miss: %s, want ESCAPE_HINT", r.Kind)
	}
	// After a match the count starts over.
	m = Match(three, "2", m).Misses
	if r := Match(three, "d", m); r.Kind != NoMatch || r.Misses != 1 {
		t.Fatalf("miss after a match: %+v", r)
	}
}

func TestNoMatchMessages(t *testing.T) {
	if got := Match(three, "x", 0).Message; !strings.Contains(got, "1 to 3") {
		t.Fatalf("menu no-match %q does not give the range", got)
	}
	one := Ask{Title: "ok?", Options: opts("OK")}
	if got := Match(one, "x", 0).Message; !strings.Contains(got, "Reply with 1") {
		t.Fatalf("single-option no-match %q", got)
	}
	none := Ask{Title: "nothing to pick"}
	r := Match(none, "x", 0)
	if r.Kind != NoMatch || r.Message != msgNoOptions {
		t.Fatalf("no-option ask: %+v", r)
	}
	h := Match(none, "x", 2)
	if h.Kind != EscapeHint || strings.Contains(h.Message, "number") || !strings.Contains(h.Message, `"cancel" to drop the run`) {
		t.Fatalf("no-option hint must not offer numbers: %q", h.Message)
	}
	if Match(none, "cancel", 2).Kind != Dropped {
		t.Fatal("no-option ask cannot be dropped")
	}
}

func TestDroppedMessage(t *testing.T) {
	for _, a := range []Ask{three, freeText} {
		r := Match(a, "/nevermind", 0)
		if r.Kind != Dropped || !strings.HasPrefix(r.Message, "Dropped the run.") {
			t.Fatalf("%+v", r)
		}
	}
}

func TestMenu(t *testing.T) {
	cases := []struct {
		ask  Ask
		want string
	}{
		{yesNo, "save this reading?\n  1) Yes\n  2) No"},
		{Ask{Options: opts("A")}, "  1) A"},
		{freeText, "why reject?\n  (type your answer)"},
		{Ask{Title: "channel?", Options: opts("#a"), FreeText: true}, "channel?\n  1) #a\n  or type your own answer"},
		{Ask{Title: "empty"}, "empty\n  (no options)"},
		{Ask{Title: "  "}, "  (no options)"},
		{Ask{}, "  (no options)"},
	}
	for _, c := range cases {
		if got := Menu(c.ask); got != c.want {
			t.Errorf("Menu(%+v) = %q, want %q", c.ask, got, c.want)
		}
	}
}

func TestStaysParked(t *testing.T) {
	want := map[Kind]bool{Selected: false, Reshown: true, NoMatch: true, EscapeHint: true, Dropped: false}
	for k, p := range want {
		if k.StaysParked() != p {
			t.Errorf("%s.StaysParked() = %v, want %v", k, !p, p)
		}
	}
	if Kind("BOGUS").StaysParked() {
		t.Error("an unknown kind must not claim the ask stays parked")
	}
}
