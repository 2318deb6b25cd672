package faults

import (
	"maps"
	"regexp"
	"strings"
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		spec string
		want map[Point]Arm
	}{
		{"", map[Point]Arm{}},
		{"  ", map[Point]Arm{}},
		{"runner.after-commit=kill", map[Point]Arm{AfterCommit: {Action: Kill, Hit: 1}}},
		{"runner.after-commit=kill@1", map[Point]Arm{AfterCommit: {Action: Kill, Hit: 1}}},
		{"dispatch.after-lease-sent=fail@3", map[Point]Arm{AfterLeaseSent: {Action: Fail, Hit: 3}}},
		{"executor.after-tool-call=pause:1.5s", map[Point]Arm{AfterToolCall: {Action: Pause, Pause: 1500 * time.Millisecond, Hit: 1}}},
		{"executor.after-tool-call=pause:1m@12", map[Point]Arm{AfterToolCall: {Action: Pause, Pause: time.Minute, Hit: 12}}},
		{" runner.in-group-commit=fail , grant.after-signed=kill@2 ,notify.after-webhook-sent=pause:10ms", map[Point]Arm{
			InGroupCommit:    {Action: Fail, Hit: 1},
			AfterGrantSigned: {Action: Kill, Hit: 2},
			AfterWebhookSent: {Action: Pause, Pause: 10 * time.Millisecond, Hit: 1},
		}},
		{"executor.after-start-durable=kill,dispatch.after-result-received=fail", map[Point]Arm{
			AfterStartDurable:   {Action: Kill, Hit: 1},
			AfterResultReceived: {Action: Fail, Hit: 1},
		}},
	} {
		got, err := Parse(tc.spec)
		if err != nil {
			t.Errorf("Parse(%q): %v", tc.spec, err)
			continue
		}
		if !maps.Equal(got, tc.want) {
			t.Errorf("Parse(%q) = %v, want %v", tc.spec, got, tc.want)
		}
	}
}

func TestParseRefuses(t *testing.T) {
	for _, tc := range []struct {
		spec string
		want string // in the error
	}{
		{"runner.after-comit=kill", `entry 1 "runner.after-comit=kill": unknown point "runner.after-comit"`},
		{"Runner.After-Commit=kill", "unknown point"},
		{"runner.after-commit", `entry 1 "runner.after-commit": want point=action`},
		{"runner.after-commit=", `unknown action ""`},
		{"runner.after-commit=crash", `unknown action "crash"`},
		{"runner.after-commit=KILL", `unknown action "KILL"`},
		{"runner.after-commit=kill:1s", "takes no argument"},
		{"runner.after-commit=fail:x", "takes no argument"},
		{"runner.after-commit=pause", "pause needs a duration"},
		{"runner.after-commit=pause:", `bad pause ""`},
		{"runner.after-commit=pause:soon", `bad pause "soon"`},
		{"runner.after-commit=pause:0s", `bad pause "0s"`},
		{"runner.after-commit=pause:-1s", `bad pause "-1s"`},
		{"runner.after-commit=pause:61s", `bad pause "61s"`},
		{"runner.after-commit=kill@0", `bad hit "0"`},
		{"runner.after-commit=kill@-2", `bad hit "-2"`},
		{"runner.after-commit=kill@", `bad hit ""`},
		{"runner.after-commit=kill@two", `bad hit "two"`},
		{"runner.after-commit=kill@1@2", `bad hit "1@2"`},
		{"runner.after-commit=kill@99999999999999999999999", "bad hit"},
		{"runner.after-commit=kill,runner.after-commit=fail@2", `entry 2 "runner.after-commit=fail@2": point runner.after-commit is armed twice`},
		{"runner.after-commit=kill,", `entry 2 "": empty entry`},
		{",runner.after-commit=kill", `entry 1 "": empty entry`},
		{"runner.after-commit=kill,,grant.after-signed=fail", `entry 2 "": empty entry`},
		{"runner.after-commit=kill, ,grant.after-signed=fail", `entry 2 "": empty entry`},
		{"grant.after-signed=fail,nope=kill", `entry 2 "nope=kill": unknown point "nope"`},
	} {
		got, err := Parse(tc.spec)
		if err == nil {
			t.Errorf("Parse(%q) = %v, want an error", tc.spec, got)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), EnvVar+" entry ") {
			t.Errorf("Parse(%q): %v, want an error naming the entry, with %q", tc.spec, err, tc.want)
		}
	}
}

func TestFormat(t *testing.T) {
	armed := map[Point]Arm{
		AfterToolCall:  {Action: Pause, Pause: 1500 * time.Millisecond, Hit: 1},
		AfterCommit:    {Action: Kill, Hit: 3},
		AfterLeaseSent: {Action: Fail, Hit: 1},
	}
	const want = "dispatch.after-lease-sent=fail,executor.after-tool-call=pause:1.5s,runner.after-commit=kill@3"
	if got := Format(armed); got != want {
		t.Fatalf("Format = %q, want %q", got, want)
	}
	back, err := Parse(want)
	if err != nil || !maps.Equal(back, armed) {
		t.Fatalf("Parse(Format) = %v, %v; want %v", back, err, armed)
	}
}

// TestAll checks the points are distinct, every one listed, and named
// area.what (lower case, dashes).
func TestAll(t *testing.T) {
	name := regexp.MustCompile(`^[a-z]+\.[a-z]+(-[a-z]+)*$`)
	seen := map[Point]bool{}
	for _, p := range All() {
		if seen[p] {
			t.Errorf("point %s listed twice", p)
		}
		seen[p] = true
		if !name.MatchString(string(p)) {
			t.Errorf("point %q is not named area.what", p)
		}
		if got, err := Parse(string(p) + "=fail"); err != nil || got[p] != (Arm{Action: Fail, Hit: 1}) {
			t.Errorf("Parse(%s=fail) = %v, %v", p, got, err)
		}
	}
	if len(seen) != 9 {
		t.Errorf("All() lists %d points, want 9", len(seen))
	}
}

// FuzzParse: Parse never panics; what it accepts arms only known points
// with valid arms, and reads back the same from its Format.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"", "runner.after-commit=kill", "executor.after-tool-call=pause:1.5s@3,grant.after-signed=fail",
		"runner.after-commit=kill,,", "x=y@z", "notify.after-webhook-sent=pause:1m0s@+7", "runner.in-group-commit=fail@0"} {
		f.Add(s)
	}
	known := map[Point]bool{}
	for _, p := range All() {
		known[p] = true
	}
	f.Fuzz(func(t *testing.T, spec string) {
		armed, err := Parse(spec)
		if err != nil {
			if armed != nil {
				t.Fatalf("Parse(%q) returned %v with its error", spec, armed)
			}
			return
		}
		for p, a := range armed {
			if !known[p] || a.Hit < 1 {
				t.Fatalf("Parse(%q) armed %q with %+v", spec, p, a)
			}
			switch a.Action {
			case Kill, Fail:
				if a.Pause != 0 {
					t.Fatalf("Parse(%q): %s with a pause", spec, a.Action)
				}
			case Pause:
				if a.Pause <= 0 || a.Pause > MaxPause {
					t.Fatalf("Parse(%q): pause %s", spec, a.Pause)
				}
			default:
				t.Fatalf("Parse(%q): action %q", spec, a.Action)
			}
		}
		canon := Format(armed)
		back, err := Parse(canon)
		if err != nil || !maps.Equal(back, armed) {
			t.Fatalf("Parse(%q) = %v; its Format %q reads back as %v, %v", spec, armed, canon, back, err)
		}
	})
}
