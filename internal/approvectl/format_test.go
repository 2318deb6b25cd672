package approvectl

import (
	"strings"
	"testing"
	"time"
	"unicode"

	"google.golang.org/protobuf/types/known/timestamppb"

	tollgatev1 "github.com/tollgate-dev/tollgate/gen/tollgate/v1"
	"github.com/tollgate-dev/tollgate/internal/wire"
)

func TestSpan(t *testing.T) {
	for _, tc := range []struct {
		d    time.Duration
		want string
	}{
		{0, "0ms"},
		{400 * time.Microsecond, "0.4ms"},
		{2460 * time.Microsecond, "2.5ms"},
		{9960 * time.Microsecond, "10ms"}, // rounds up into the next form
		{412 * time.Millisecond, "412ms"},
		{999600 * time.Microsecond, "1.0s"},
		{1234 * time.Millisecond, "1.2s"},
		{59960 * time.Millisecond, "1m00s"},
		{3*time.Minute + 5*time.Second, "3m05s"},
		{3*time.Minute + 5*time.Second + 400*time.Millisecond, "3m05s"},
		{3*time.Hour + 12*time.Minute, "3h12m"},
		{3*time.Hour + 5*time.Minute + 20*time.Second, "3h05m"},
		{23*time.Hour + 59*time.Minute + 40*time.Second, "1d"}, // not 1d0h: one form for hours and days (remaining)
		{3 * time.Hour, "3h"},
		{52 * time.Hour, "2d4h"},
		{-412 * time.Millisecond, "-412ms"},
	} {
		if got := span(tc.d); got != tc.want {
			t.Errorf("span(%v) = %q, want %q", tc.d, got, tc.want)
		}
	}
}

func TestAge(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		ago  time.Duration
		want string
	}{
		{0, "0s"},
		{45 * time.Second, "45s"},
		{12*time.Minute + 59*time.Second, "12m"},
		{3*time.Hour + 59*time.Minute, "3h"},
		{53 * time.Hour, "2d"},
		{-time.Minute, "0s"}, // a clock behind the server's
	} {
		if got := age(now.Add(-tc.ago), now); got != tc.want {
			t.Errorf("age(now-%v) = %q, want %q", tc.ago, got, tc.want)
		}
	}
}

func TestDeadline(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		in        time.Duration // deadline - now
		rel, full string
	}{
		{5*time.Hour + 30*time.Minute, "in 5h30m", "2026-03-01 17:30 (in 5h30m)"},
		{5 * time.Hour, "in 5h", "2026-03-01 17:00 (in 5h)"},
		{5*time.Hour + 5*time.Minute, "in 5h05m", "2026-03-01 17:05 (in 5h05m)"},
		{89 * time.Second, "in 1m", "2026-03-01 12:01 (in 1m)"},
		{50 * time.Hour, "in 2d2h", "2026-03-03 14:00 (in 2d2h)"},
		// Issue 16: a 72h deadline read a moment after it opened is 3d
		// everywhere, not "2d" (rounded down) or "3d0h".
		{72*time.Hour - 3*time.Second, "in 3d", "2026-03-04 11:59 (in 3d)"},
		{24*time.Hour - 10*time.Second, "in 1d", "2026-03-02 11:59 (in 1d)"},
		{59*time.Minute + 50*time.Second, "in 1h", "2026-03-01 12:59 (in 1h)"},
		{-10 * time.Minute, "overdue 10m", "2026-03-01 11:50 (overdue 10m)"},
		{0, "overdue 0s", "2026-03-01 12:00 (overdue 0s)"},
	} {
		d := now.Add(tc.in)
		if got := dueIn(d, now); got != tc.rel {
			t.Errorf("dueIn(now%+v) = %q, want %q", tc.in, got, tc.rel)
		}
		if got := deadlineText(d, now); got != tc.full {
			t.Errorf("deadlineText(now%+v) = %q, want %q", tc.in, got, tc.full)
		}
	}
}

func TestFanLine(t *testing.T) {
	for _, tc := range []struct {
		group          string
		n              int
		wall, sum, max time.Duration
		want           string
	}{
		{"probes", 3, 412 * time.Millisecond, 763 * time.Millisecond, 412 * time.Millisecond,
			"fan probes  3 branches  wall 412ms · sum 763ms · max 412ms"},
		{"naps", 2, 1234 * time.Millisecond, 2 * time.Second, 1200 * time.Millisecond,
			"fan naps  2 branches  wall 1.2s · sum 2.0s · max 1.2s"},
		{"tiny", 10, 2460 * time.Microsecond, 4 * time.Millisecond, 400 * time.Microsecond,
			"fan tiny  10 branches  wall 2.5ms · sum 4ms · max 0.4ms"},
	} {
		if got := fanLine(tc.group, tc.n, tc.wall, tc.sum, tc.max); got != tc.want {
			t.Errorf("fanLine = %q, want %q", got, tc.want)
		}
	}
}

func TestMS(t *testing.T) {
	if got := ms(412345678 * time.Nanosecond); got != 412.345 {
		t.Fatalf("ms = %v, want 412.345 (to the microsecond)", got)
	}
}

// Issue 16: what a deadline does is said in the plan card's words, and
// the default (no on expiry) is what the engine does, never "unspecified".
func TestExpiryPhrase(t *testing.T) {
	for e, want := range map[tollgatev1.OnExpiry]string{
		tollgatev1.OnExpiry_ON_EXPIRY_UNSPECIFIED: "on expiry the run ends expired",
		tollgatev1.OnExpiry_ON_EXPIRY_REJECT:      "on expiry the run ends rejected",
		tollgatev1.OnExpiry_ON_EXPIRY_CANCEL:      "on expiry the run is cancelled",
		tollgatev1.OnExpiry_ON_EXPIRY_ESCALATE:    "on expiry it escalates once with a new deadline, then the run ends expired",
	} {
		if got := expiryPhrase(wire.OnExpiry(e)); got != want {
			t.Errorf("%v: %q, want %q", e, got, want)
		}
	}
}

// Issue 16: asks show states a pending ask's deadline like every other
// surface, and what it does in the card's words; never "unspecified".
func TestAsksShowStatesTheDeadlineAndWhatItDoes(t *testing.T) {
	now := time.Date(2026, 3, 1, 9, 0, 3, 0, time.UTC)
	a := &tollgatev1.Ask{Id: "r1/ask_1", State: tollgatev1.AskState_ASK_STATE_PENDING, Title: "save this reading?",
		CreatedAt: timestamppb.New(now.Add(-3 * time.Second)), ExpiresAt: timestamppb.New(now.Add(72*time.Hour - 3*time.Second)),
		Ladder: []*tollgatev1.LadderRung{{Kind: "expire", At: timestamppb.New(now.Add(72*time.Hour - 3*time.Second)), To: "expire"}}}
	var b strings.Builder
	writePacket(&b, &tollgatev1.GetAskResponse{Ask: a}, now)
	out := b.String()
	for _, want := range []string{"expires 2026-03-04 09:00 (in 3d)", "deadline at 2026-03-04 09:00 (in 3d); on expiry the run ends expired"} {
		if !strings.Contains(out, want) {
			t.Errorf("asks show lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "unspecified") {
		t.Errorf("asks show says unspecified:\n%s", out)
	}
}

// What an approver reads on a terminal is what the packet holds: a title,
// a summary or an artifact (a PR's text, a tool's output — someone
// else's words) cannot move the cursor, clear lines or reorder text to
// make the screen show another payload. Control characters and bidi
// overrides are printed as escapes; the lines stay as they are.
func TestAsksShowPrintsNoTerminalControls(t *testing.T) {
	now := time.Date(2026, 3, 1, 9, 0, 3, 0, time.UTC)
	evil := "ok\r\x1b[2K\x1b[1Aaction pay: payments·pay {\"amount\":1}\u202e001\u009b"
	a := &tollgatev1.Ask{Id: "r1/ask_1", State: tollgatev1.AskState_ASK_STATE_PENDING, Title: "ship?" + evil, Summary: evil,
		CreatedAt: timestamppb.New(now), ExpiresAt: timestamppb.New(now.Add(time.Hour)),
		Actions: []*tollgatev1.Action{{StepId: "pay", Server: "payments", Tool: "pay", ArgsJson: `{"amount":900000}`}},
		Evidence: []*tollgatev1.EvidenceArtifact{{Ref: "pr.body", MediaType: "application/json", Content: []byte(`"line one\nline two \u001b[2Kgone"`)},
			{Name: "notes.txt", MediaType: "text/plain", Content: []byte("a\tb\n" + evil)}}}
	var b strings.Builder
	writePacket(&b, &tollgatev1.GetAskResponse{Ask: a}, now)
	out := b.String()
	for _, r := range out {
		if (unicode.IsControl(r) && r != '\n' && r != '\t') || (r >= 0x202a && r <= 0x202e) || (r >= 0x2066 && r <= 0x2069) {
			t.Fatalf("asks show printed %U:\n%q", r, out)
		}
	}
	for _, want := range []string{`ship?ok\x0d\x1b[2K`, `\u202e001`, "      line one\n      line two \\x1b[2Kgone\n", "a\tb"} {
		if !strings.Contains(out, want) {
			t.Errorf("asks show lacks %q:\n%s", want, out)
		}
	}
	var inbox strings.Builder
	if err := writeInbox(&inbox, []*tollgatev1.InboxItem{{Ask: &tollgatev1.AskSummary{Id: a.GetId(), Title: a.GetTitle(), CreatedAt: a.GetCreatedAt(), ExpiresAt: a.GetExpiresAt()}, Why: evil}}, now, time.UTC); err != nil {
		t.Fatal(err)
	}
	if strings.ContainsAny(inbox.String(), "\r\x1b\u202e") {
		t.Fatalf("the inbox printed controls: %q", inbox.String())
	}
}

// runs show quotes a run's titles, reasons and card: control characters in
// them are escapes, not commands to the approver's terminal.
func TestRunsShowPrintsNoTerminalControls(t *testing.T) {
	now := time.Date(2026, 3, 1, 9, 0, 3, 0, time.UTC)
	evil := "ok\r\x1b[2K\x1b[1Aall good\u202e"
	r := &tollgatev1.Run{Id: "r1", State: tollgatev1.RunState_RUN_STATE_FAILED, Requester: "alice", StateReason: evil,
		PlanCard: "card " + evil + "\n", CreatedAt: timestamppb.New(now.Add(-time.Minute))}
	var b strings.Builder
	writeRun(&b, r, nil, now)
	for _, c := range b.String() {
		if (unicode.IsControl(c) && c != '\n' && c != '\t') || c == 0x202e {
			t.Fatalf("runs show printed %U:\n%q", c, b.String())
		}
	}
	if !strings.Contains(b.String(), `ok\x0d\x1b[2K`) {
		t.Errorf("runs show lacks the escaped reason:\n%s", b.String())
	}
}
