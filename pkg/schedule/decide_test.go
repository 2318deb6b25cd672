package schedule

import (
	"strings"
	"testing"
	"time"
)

func TestParseCatchUp(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want CatchUp
		err  bool
	}{
		{"", CatchUpLast, false},
		{"last", CatchUpLast, false},
		{"none", CatchUpNone, false},
		{"all", "", true},
		{"Last", "", true},
	} {
		got, err := ParseCatchUp(tt.in)
		if got != tt.want || (err != nil) != tt.err {
			t.Errorf("ParseCatchUp(%q) = %q, %v", tt.in, got, err)
		}
		if err != nil && !strings.Contains(err.Error(), "none, last") {
			t.Errorf("ParseCatchUp(%q): error %q does not list the choices", tt.in, err)
		}
	}
}

func TestParseConcurrency(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want Concurrency
		err  bool
	}{
		{"", ConcurrencySkip, false},
		{"allow", ConcurrencyAllow, false},
		{"skip", ConcurrencySkip, false},
		{"wait", ConcurrencyWait, false},
		{"queue", "", true},
		{" skip", "", true},
	} {
		got, err := ParseConcurrency(tt.in)
		if got != tt.want || (err != nil) != tt.err {
			t.Errorf("ParseConcurrency(%q) = %q, %v", tt.in, got, err)
		}
		if err != nil && !strings.Contains(err.Error(), "allow, skip, wait") {
			t.Errorf("ParseConcurrency(%q): error %q does not list the choices", tt.in, err)
		}
	}
}

func TestApply(t *testing.T) {
	since, last, buf, tick := utc(2024, 1, 1, 0, 0, 0), utc(2024, 1, 1, 9, 0, 0), utc(2024, 1, 1, 8, 55, 0), utc(2024, 1, 1, 9, 5, 0)
	st := State{Since: since, LastTick: last}
	tests := []struct {
		st   State
		d    Decision
		want State
	}{
		{st, Decision{Action: Nothing, Wake: tick}, st},
		{st, Decision{Action: Start, Tick: tick}, State{Since: since, LastTick: tick, RunActive: true}},
		{st, Decision{Action: Skip, Tick: tick}, State{Since: since, LastTick: tick}},
		{st, Decision{Action: Miss, Tick: tick}, State{Since: since, LastTick: tick}},
		{State{Since: since, LastTick: last, RunActive: true}, Decision{Action: Buffer, Tick: tick},
			State{Since: since, LastTick: tick, Buffered: tick, RunActive: true}},
		{State{Since: since, LastTick: last, Buffered: buf}, Decision{Action: StartBuffered, Tick: buf},
			State{Since: since, LastTick: last, RunActive: true}},
	}
	for _, tt := range tests {
		if got := tt.st.Apply(tt.d); got != tt.want {
			t.Errorf("%+v.Apply(%v) = %+v, want %+v", tt.st, tt.d.Action, got, tt.want)
		}
	}
}

func TestActionString(t *testing.T) {
	for a, want := range map[Action]string{Nothing: "nothing", Start: "start", StartBuffered: "start-buffered",
		Skip: "skip", Buffer: "buffer", Miss: "miss", Action(42): "Action(42)", Action(-1): "Action(-1)"} {
		if got := a.String(); got != want {
			t.Errorf("Action(%d).String() = %q, want %q", int(a), got, want)
		}
	}
}

// Every branch of Decide, on a cron firing every five minutes (UTC) with a
// grace of one minute unless a row says otherwise.
func TestDecide(t *testing.T) {
	c := mustParse(t, "*/5 * * * *", "")
	at := func(h, m, s int) time.Time { return utc(2024, 1, 15, h, m, s) }
	pol := func(cu CatchUp, cc Concurrency) Policy {
		return Policy{CatchUp: cu, Concurrency: cc, Grace: time.Minute}
	}
	skip, allow, wait := pol(CatchUpLast, ConcurrencySkip), pol(CatchUpLast, ConcurrencyAllow), pol(CatchUpLast, ConcurrencyWait)
	tests := []struct {
		name    string
		p       Policy
		st      State
		now     time.Time
		want    Decision
		reasons []string // substrings of want's reason; "" for an empty one
	}{
		// On time, and nothing due.
		{"on time", skip, State{Since: at(8, 0, 0), LastTick: at(8, 55, 0)}, at(9, 0, 10),
			Decision{Action: Start, Tick: at(9, 0, 0)}, []string{""}},
		{"due at now exactly", skip, State{Since: at(8, 0, 0), LastTick: at(9, 0, 0)}, at(9, 5, 0),
			Decision{Action: Start, Tick: at(9, 5, 0)}, nil},
		{"nothing due", skip, State{Since: at(8, 0, 0), LastTick: at(9, 0, 0)}, at(9, 3, 0),
			Decision{Action: Nothing, Wake: at(9, 5, 0)}, []string{""}},
		{"nothing due just before a tick", skip, State{Since: at(8, 0, 0), LastTick: at(9, 0, 0)}, time.Date(2024, 1, 15, 9, 4, 59, 999_999_999, time.UTC),
			Decision{Action: Nothing, Wake: at(9, 5, 0)}, nil},
		{"last tick ahead of the clock", skip, State{Since: at(8, 0, 0), LastTick: at(9, 10, 0)}, at(9, 3, 0),
			Decision{Action: Nothing, Wake: at(9, 15, 0)}, nil},

		// Since: created or resumed.
		{"created at a tick", skip, State{Since: at(9, 0, 0)}, at(9, 0, 10),
			Decision{Action: Nothing, Wake: at(9, 5, 0)}, nil},
		{"created just before a tick", skip, State{Since: at(8, 59, 59)}, at(9, 0, 10),
			Decision{Action: Start, Tick: at(9, 0, 0)}, nil},
		{"resumed after a pause", skip, State{Since: at(9, 0, 5), LastTick: at(7, 0, 0)}, at(9, 0, 10),
			Decision{Action: Nothing, Wake: at(9, 5, 0)}, nil},
		{"resumed, ticks since are due", pol(CatchUpNone, ConcurrencySkip), State{Since: at(8, 31, 0), LastTick: at(7, 0, 0)}, at(9, 3, 0),
			Decision{Action: Miss, Tick: at(9, 0, 0), Dropped: 5}, []string{"5 ticks"}},
		{"created in the future", skip, State{Since: at(9, 10, 0)}, at(9, 3, 0),
			Decision{Action: Nothing, Wake: at(9, 15, 0)}, nil},

		// Grace.
		{"within the grace", skip, State{Since: at(8, 0, 0), LastTick: at(8, 55, 0)}, time.Date(2024, 1, 15, 9, 0, 59, 999_999_999, time.UTC),
			Decision{Action: Start, Tick: at(9, 0, 0)}, []string{""}},
		{"grace ends at now-grace", pol(CatchUpNone, ConcurrencySkip), State{Since: at(8, 0, 0), LastTick: at(8, 55, 0)}, at(9, 1, 0),
			Decision{Action: Miss, Tick: at(9, 0, 0)}, []string{"missed", "2024-01-15 09:00:00 UTC", "grace of 1m0s", "catch_up none"}},
		{"zero grace means the default", Policy{CatchUp: CatchUpNone}, State{Since: at(8, 0, 0), LastTick: at(8, 55, 0)}, at(9, 0, 59),
			Decision{Action: Start, Tick: at(9, 0, 0)}, nil},
		{"negative grace means the default", Policy{CatchUp: CatchUpNone, Grace: -time.Hour}, State{Since: at(8, 0, 0), LastTick: at(8, 55, 0)}, at(9, 0, 59),
			Decision{Action: Start, Tick: at(9, 0, 0)}, nil},
		{"long grace", Policy{CatchUp: CatchUpNone, Grace: time.Hour}, State{Since: at(7, 0, 0), LastTick: at(8, 0, 0)}, at(8, 59, 0),
			Decision{Action: Start, Tick: at(8, 5, 0)}, nil},

		// Missed.
		{"missed, catch_up none", pol(CatchUpNone, ConcurrencySkip), State{Since: at(7, 0, 0), LastTick: at(8, 0, 0)}, at(9, 3, 0),
			Decision{Action: Miss, Tick: at(9, 0, 0), Dropped: 11},
			[]string{"missed: no control plane decided the tick at 2024-01-15 09:00:00 UTC within its grace of 1m0s", "nor 11 ticks before it", "(catch_up none)"}},
		{"missed, catch_up last", skip, State{Since: at(7, 0, 0), LastTick: at(8, 0, 0)}, at(9, 3, 0),
			Decision{Action: Start, Tick: at(9, 0, 0), Dropped: 11}, []string{"late:", "09:00:00 UTC", "nor 11 ticks", "catch_up last"}},
		{"missed, catch_up default", Policy{Grace: time.Minute}, State{Since: at(7, 0, 0), LastTick: at(8, 0, 0)}, at(9, 3, 0),
			Decision{Action: Start, Tick: at(9, 0, 0), Dropped: 11}, []string{"catch_up last"}},
		{"one missed, catch_up last", skip, State{Since: at(7, 0, 0), LastTick: at(8, 55, 0)}, at(9, 3, 0),
			Decision{Action: Start, Tick: at(9, 0, 0)}, []string{"late:", "09:00:00 UTC"}},
		{"missed, catch_up last, run active, skip", skip, State{Since: at(7, 0, 0), LastTick: at(8, 0, 0), RunActive: true}, at(9, 3, 0),
			Decision{Action: Skip, Tick: at(9, 0, 0), Dropped: 11}, []string{"late:", "still running (concurrency skip)"}},
		{"missed, catch_up last, run active, wait", wait, State{Since: at(7, 0, 0), LastTick: at(8, 0, 0), RunActive: true}, at(9, 3, 0),
			Decision{Action: Buffer, Tick: at(9, 0, 0), Dropped: 11}, []string{"late:", "waits for it to end (concurrency wait)"}},
		{"missed, catch_up last, run active, allow", allow, State{Since: at(7, 0, 0), LastTick: at(8, 0, 0), RunActive: true}, at(9, 3, 0),
			Decision{Action: Start, Tick: at(9, 0, 0), Dropped: 11}, []string{"late:"}},
		{"missed then on time", skip, State{Since: at(7, 0, 0), LastTick: at(8, 0, 0)}, at(9, 0, 10),
			Decision{Action: Miss, Tick: at(8, 55, 0), Dropped: 10},
			[]string{"missed:", "08:55:00 UTC", "nor 10 ticks", "the tick at 2024-01-15 09:00:00 UTC is on time"}},
		{"missed then on time at now exactly", skip, State{Since: at(7, 0, 0), LastTick: at(8, 0, 0)}, at(9, 0, 0),
			Decision{Action: Miss, Tick: at(8, 55, 0), Dropped: 10}, []string{"09:00:00 UTC is on time"}},
		{"missed then on time, catch_up none", pol(CatchUpNone, ConcurrencySkip), State{Since: at(7, 0, 0), LastTick: at(8, 0, 0)}, at(9, 0, 10),
			Decision{Action: Miss, Tick: at(8, 55, 0), Dropped: 10}, []string{"is on time"}},
		{"one missed then on time", skip, State{Since: at(7, 0, 0), LastTick: at(8, 50, 0)}, at(9, 0, 10),
			Decision{Action: Miss, Tick: at(8, 55, 0)}, []string{"missed:", "is on time"}},

		// Concurrency, on time.
		{"allow, run active", allow, State{Since: at(7, 0, 0), LastTick: at(8, 55, 0), RunActive: true}, at(9, 0, 10),
			Decision{Action: Start, Tick: at(9, 0, 0)}, []string{""}},
		{"skip, run active", skip, State{Since: at(7, 0, 0), LastTick: at(8, 55, 0), RunActive: true}, at(9, 0, 10),
			Decision{Action: Skip, Tick: at(9, 0, 0)}, []string{"a run this schedule started is still running (concurrency skip)"}},
		{"skip, no run", skip, State{Since: at(7, 0, 0), LastTick: at(8, 55, 0)}, at(9, 0, 10),
			Decision{Action: Start, Tick: at(9, 0, 0)}, nil},
		{"unknown concurrency counts as skip", pol(CatchUpLast, "bogus"), State{Since: at(7, 0, 0), LastTick: at(8, 55, 0), RunActive: true}, at(9, 0, 10),
			Decision{Action: Skip, Tick: at(9, 0, 0)}, nil},
		{"default concurrency is skip", Policy{}, State{Since: at(7, 0, 0), LastTick: at(8, 55, 0), RunActive: true}, at(9, 0, 10),
			Decision{Action: Skip, Tick: at(9, 0, 0)}, nil},
		{"wait, run active", wait, State{Since: at(7, 0, 0), LastTick: at(8, 55, 0), RunActive: true}, at(9, 0, 10),
			Decision{Action: Buffer, Tick: at(9, 0, 0)}, []string{"still running; this tick waits for it to end (concurrency wait)"}},
		{"wait, run active, one waits", wait, State{Since: at(7, 0, 0), LastTick: at(8, 55, 0), Buffered: at(8, 55, 0), RunActive: true}, at(9, 0, 10),
			Decision{Action: Skip, Tick: at(9, 0, 0)}, []string{"still running and the tick at 2024-01-15 08:55:00 UTC already waits for it (concurrency wait)"}},
		{"wait, no run", wait, State{Since: at(7, 0, 0), LastTick: at(8, 55, 0)}, at(9, 0, 10),
			Decision{Action: Start, Tick: at(9, 0, 0)}, nil},

		// Buffered.
		{"buffered starts when the run ends", wait, State{Since: at(7, 0, 0), LastTick: at(8, 55, 0), Buffered: at(8, 55, 0)}, at(8, 57, 0),
			Decision{Action: StartBuffered, Tick: at(8, 55, 0)}, []string{"the run that the tick at 2024-01-15 08:55:00 UTC waited for has ended"}},
		{"buffered starts before due ticks", wait, State{Since: at(7, 0, 0), LastTick: at(8, 55, 0), Buffered: at(8, 55, 0)}, at(9, 0, 10),
			Decision{Action: StartBuffered, Tick: at(8, 55, 0)}, nil},
		{"buffered starts late", wait, State{Since: at(7, 0, 0), LastTick: at(8, 55, 0), Buffered: at(8, 55, 0)}, at(12, 0, 0),
			Decision{Action: StartBuffered, Tick: at(8, 55, 0)}, nil},
		{"buffered waits: poll", wait, State{Since: at(7, 0, 0), LastTick: at(8, 55, 0), Buffered: at(8, 55, 0), RunActive: true}, at(8, 57, 0),
			Decision{Action: Nothing, Wake: at(8, 57, 1)}, nil},
		{"buffered waits: the tick is sooner", wait, State{Since: at(7, 0, 0), LastTick: at(8, 55, 0), Buffered: at(8, 55, 0), RunActive: true}, time.Date(2024, 1, 15, 8, 59, 59, 500_000_000, time.UTC),
			Decision{Action: Nothing, Wake: at(9, 0, 0)}, nil},
		{"buffered waits, missed ticks", pol(CatchUpLast, ConcurrencyWait), State{Since: at(7, 0, 0), LastTick: at(8, 0, 0), Buffered: at(8, 0, 0), RunActive: true}, at(9, 3, 0),
			Decision{Action: Skip, Tick: at(9, 0, 0), Dropped: 11}, []string{"late:", "already waits"}},
	}
	for _, tt := range tests {
		got := Decide(c, tt.p, tt.st, tt.now)
		reason := got.Reason
		got.Reason = ""
		if got != tt.want {
			t.Errorf("%s:\n got  %+v\n want %+v", tt.name, got, tt.want)
		}
		for _, w := range tt.reasons {
			if (w == "" && reason != "") || !strings.Contains(reason, w) {
				t.Errorf("%s: reason %q does not say %q", tt.name, reason, w)
			}
		}
		if tt.want.Action != Nothing && tt.want.Action != Start && reason == "" {
			t.Errorf("%s: %v with no reason", tt.name, got.Action)
		}
	}
}

// With neither Since nor LastTick, every tick since the year 1 counts as
// missed: they are folded into one Miss (counted up to MaxDropped) at once.
func TestDecideFromTheBeginningOfTime(t *testing.T) {
	c := mustParse(t, "*/5 * * * *", "")
	now := utc(2024, 1, 15, 9, 0, 10)
	st := State{}
	d := Decide(c, Policy{}, st, now)
	if d.Action != Miss || !d.Tick.Equal(utc(2024, 1, 15, 8, 55, 0)) || d.Dropped != MaxDropped {
		t.Fatalf("Decide from zero state = %+v, want Miss 08:55 with Dropped %d", d, MaxDropped)
	}
	if !strings.Contains(d.Reason, "at least 1000 ticks") {
		t.Errorf("reason %q does not say at least 1000 ticks", d.Reason)
	}
	st = st.Apply(d)
	if d := Decide(c, Policy{}, st, now); d.Action != Start || !d.Tick.Equal(utc(2024, 1, 15, 9, 0, 0)) || d.Dropped != 0 {
		t.Errorf("second Decide = %+v, want Start 09:00", d)
	}
}

// Reasons speak the schedule's wall clock.
func TestDecideReasonInZone(t *testing.T) {
	c := mustParse(t, "0 9 * * *", "Europe/Berlin")
	d := Decide(c, Policy{CatchUp: CatchUpNone}, State{Since: utc(2024, 1, 1, 0, 0, 0)}, utc(2024, 1, 2, 12, 0, 0))
	if d.Action != Miss || !strings.Contains(d.Reason, "2024-01-02 09:00:00 CET") || !strings.Contains(d.Reason, "nor 1 tick before it") {
		t.Errorf("Decide = %+v; want a Miss whose reason names 2024-01-02 09:00:00 CET and 1 tick", d)
	}
}

// A story: a five-minute schedule, skip, catch_up last. Every control plane
// is down from 08:58 until 09:20:30, while the 08:55 run goes on; it ends
// at 09:27. Then they are all down again from 09:31 to 10:02.
func TestDecideStory(t *testing.T) {
	c := mustParse(t, "*/5 * * * *", "")
	p := Policy{Grace: time.Minute}
	st := State{Since: utc(2024, 1, 15, 8, 50, 0), LastTick: utc(2024, 1, 15, 8, 55, 0), RunActive: true}
	type step struct {
		now      time.Time
		runEnded bool
		want     []string // actions, with the tick's clock time
	}
	steps := []step{
		{utc(2024, 1, 15, 9, 20, 30), false, []string{"miss 09:15 (dropped 3)", "skip 09:20", "nothing"}},
		{utc(2024, 1, 15, 9, 25, 0), false, []string{"skip 09:25", "nothing"}},
		{utc(2024, 1, 15, 9, 27, 0), true, []string{"nothing"}},
		{utc(2024, 1, 15, 9, 30, 0), false, []string{"start 09:30", "nothing"}},
		{utc(2024, 1, 15, 10, 2, 0), true, []string{"start 10:00 (dropped 5)", "nothing"}},
		{utc(2024, 1, 15, 10, 5, 30), false, []string{"skip 10:05", "nothing"}},
	}
	for _, s := range steps {
		if s.runEnded {
			st.RunActive = false
		}
		var got []string
		for range 10 {
			d := Decide(c, p, st, s.now)
			line := d.Action.String()
			if d.Action != Nothing {
				line += " " + d.Tick.Format("15:04")
			}
			if d.Dropped > 0 {
				line += " (dropped " + itoa(d.Dropped) + ")"
			}
			got = append(got, line)
			st = st.Apply(d)
			if d.Action == Nothing {
				break
			}
		}
		if strings.Join(got, ", ") != strings.Join(s.want, ", ") {
			t.Errorf("at %s: %v, want %v", s.now.Format("15:04:05"), got, s.want)
		}
	}
}

func itoa(n int) string {
	if n < 10 {
		return string(rune('0' + n))
	}
	return itoa(n/10) + itoa(n%10)
}

func BenchmarkDecideOnTime(b *testing.B) {
	c := mustParse(b, "*/5 * * * *", "Europe/Berlin")
	st := State{Since: utc(2024, 1, 1, 0, 0, 0), LastTick: utc(2024, 1, 15, 8, 55, 0)}
	now := utc(2024, 1, 15, 9, 0, 10)
	for b.Loop() {
		Decide(c, Policy{}, st, now)
	}
}

// The worst case: a cron firing every second, undecided for ten years.
func BenchmarkDecideAfterTenYearOutage(b *testing.B) {
	c := mustParse(b, "* * * * * *", "")
	st := State{Since: utc(2014, 1, 1, 0, 0, 0)}
	now := utc(2024, 1, 15, 9, 0, 10)
	for b.Loop() {
		Decide(c, Policy{CatchUp: CatchUpNone}, st, now)
	}
}
