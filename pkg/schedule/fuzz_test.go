package schedule

import (
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

// simCrons are the schedules the loop simulation draws from: dense and
// sparse, with seconds, and in zones with gaps, overlaps and a skipped day.
var simCrons = []struct{ expr, tz string }{
	{"* * * * * *", ""},
	{"*/7 * * * * *", "Europe/Berlin"},
	{"*/5 * * * *", ""},
	{"30 1 * * *", "America/New_York"},
	{"30 2 * * *", "America/New_York"},
	{"0 9 * * MON-FRI", "Europe/Berlin"},
	{"*/30 * * * *", "Australia/Lord_Howe"},
	{"0 12 * * *", "Pacific/Apia"},
	{"0 0 1 * *", "America/Santiago"},
	{"@weekly", "Asia/Kolkata"},
	{"0,1,2 0 * * * *", ""},
	{"0 0 29 2 *", ""},
}

// simulate plays a control-plane loop against Decide: the clock moves on
// by random steps (sometimes not at all, sometimes across an outage of up
// to a year), runs end at random, the schedule is sometimes paused and
// resumed, and after each move the loop applies decisions until Nothing.
// It fails the test if a tick is decided twice, out of order, before it is
// due or at or before Since; if a decision breaks its policy; if a due
// tick is left undecided; or if the loop does not settle.
func simulate(t *testing.T, c *Cron, p Policy, seed uint64, steps int) {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, seed^0x5ced))
	gap := c.MinInterval()
	if p.Grace > 200*gap { // keep dense crons' runs short
		p.Grace = 200 * gap
	}
	grace := p.Grace
	if grace <= 0 {
		grace = DefaultGrace
	}
	now := utc(1995, 1, 1, 0, 0, 0).Add(time.Duration(rng.Int64N(int64(40 * 365 * 24 * time.Hour))))
	now = now.Add(time.Duration(rng.Int64N(int64(time.Second))))
	st := State{Since: now}
	decided := map[time.Time]Action{}
	started := map[time.Time]bool{}
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("%v %+v seed %d at %v, state %+v: "+format, append([]any{c, p, seed, now, st}, args...)...)
	}
	for range steps {
		switch r := rng.IntN(100); {
		case r < 5: // the same instant again
		case r < 30:
			now = now.Add(time.Duration(rng.Int64N(int64(time.Second))))
		case r < 70:
			now = now.Add(time.Duration(rng.Int64N(int64(3*gap) + 1)))
		case r < 85:
			now = now.Add(grace + time.Duration(rng.Int64N(int64(10*grace))))
		case r < 95:
			now = now.Add(time.Duration(rng.Int64N(int64(40 * 24 * time.Hour))))
		default:
			now = now.Add(time.Duration(rng.Int64N(int64(366 * 24 * time.Hour))))
		}
		if st.RunActive && rng.IntN(3) == 0 {
			st.RunActive = false
		}
		if rng.IntN(50) == 0 { // paused, and resumed now
			st.Since, st.Buffered = now, time.Time{}
		}
		// Bound on calls: one per tick within the grace, plus three.
		limit := 3
		for u := c.Next(now.Add(-grace)); !u.IsZero() && !u.After(now) && limit < 10000; u = c.Next(u) {
			limit++
		}
		cutoff := now.Add(-grace)
		calls := 0
		for {
			calls++
			if calls > limit {
				fail("no Nothing after %d calls", limit)
			}
			d := Decide(c, p, st, now)
			base := st.LastTick
			if st.Since.After(base) {
				base = st.Since
			}
			switch d.Action {
			case Nothing:
				if next := c.Next(base); !next.IsZero() && !next.After(now) {
					fail("Nothing while the tick at %v is due", next)
				}
				if want := c.Next(base); !st.Buffered.IsZero() {
					if d.Wake.IsZero() || d.Wake.After(now.Add(time.Second)) || (!want.IsZero() && d.Wake.After(want)) {
						fail("Nothing with a buffered tick waiting wakes at %v", d.Wake)
					}
				} else if !d.Wake.Equal(want) {
					fail("Nothing wakes at %v, want the next tick %v", d.Wake, want)
				}
			case StartBuffered:
				if st.RunActive || !d.Tick.Equal(st.Buffered) {
					fail("StartBuffered %v while the run is active or another is buffered", d.Tick)
				}
				if started[d.Tick] || decided[d.Tick] != Buffer {
					fail("StartBuffered %v, which was %v and started %v", d.Tick, decided[d.Tick], started[d.Tick])
				}
				started[d.Tick] = true
			case Start, Skip, Buffer, Miss:
				tick := d.Tick
				if _, ok := decided[tick]; ok {
					fail("%v decided twice", tick)
				}
				if !tick.After(base) {
					fail("%v %v is not after the base %v (LastTick %v, Since %v)", d.Action, tick, base, st.LastTick, st.Since)
				}
				if tick.After(now) {
					fail("%v %v before it is due", d.Action, tick)
				}
				if !c.Next(tick.Add(-time.Second)).Equal(tick) {
					fail("%v %v is not a tick", d.Action, tick)
				}
				if n := c.count(base, tick, MaxDropped); n != d.Dropped {
					fail("%v %v drops %d ticks, but %d lie between it and %v", d.Action, tick, d.Dropped, n, base)
				}
				next := c.Next(tick)
				onTimeFollows := !next.IsZero() && !next.After(now)
				if (d.Action == Miss) != (!tick.After(cutoff) && (p.CatchUp == CatchUpNone || onTimeFollows)) {
					fail("%v %v breaks catch_up %q (cutoff %v)", d.Action, tick, p.CatchUp, cutoff)
				}
				if !tick.After(cutoff) && !next.IsZero() && !next.After(cutoff) {
					fail("%v %v, a missed tick, but not the latest missed (%v is)", d.Action, tick, next)
				}
				if d.Action == Miss && tick.After(cutoff) {
					fail("Miss of the on-time tick %v", tick)
				}
				if tick.After(cutoff) && d.Dropped != 0 {
					fail("on-time %v %v drops %d", d.Action, tick, d.Dropped)
				}
				if d.Action != Miss {
					want := Start
					if st.RunActive {
						switch {
						case p.Concurrency == ConcurrencyAllow:
						case p.Concurrency != ConcurrencyWait:
							want = Skip
						case st.Buffered.IsZero():
							want = Buffer
						default:
							want = Skip
						}
					}
					if d.Action != want {
						fail("%v %v, want %v under concurrency %q", d.Action, tick, want, p.Concurrency)
					}
				}
				if d.Action != Start && d.Reason == "" {
					fail("%v %v without a reason", d.Action, tick)
				}
				decided[tick] = d.Action
				if d.Action == Start {
					started[tick] = true
				}
			default:
				fail("unknown action %v", d.Action)
			}
			next := st.Apply(d)
			if next.LastTick.Before(st.LastTick) {
				fail("LastTick went back from %v to %v", st.LastTick, next.LastTick)
			}
			st = next
			if d.Action == Nothing {
				break
			}
		}
	}
}

func simPolicy(bits uint8, graceSeconds uint16) Policy {
	p := Policy{
		CatchUp:     []CatchUp{"", CatchUpNone, CatchUpLast, CatchUpLast}[bits&3],
		Concurrency: []Concurrency{"", ConcurrencyAllow, ConcurrencySkip, ConcurrencyWait}[bits>>2&3],
		Grace:       time.Duration(graceSeconds%7200) * time.Second,
	}
	if bits&16 != 0 {
		p.Grace = time.Duration(graceSeconds%5) * time.Second / 2
	}
	return p
}

// TestDecideLoop runs the simulation over every cron in simCrons with
// seeded random policies.
func TestDecideLoop(t *testing.T) {
	steps := 100
	if testing.Short() {
		steps = 20
	}
	for i, sc := range simCrons {
		c := mustParse(t, sc.expr, sc.tz)
		for k := range 12 {
			seed := uint64(i*100 + k)
			rng := rand.New(rand.NewPCG(seed, 7))
			simulate(t, c, simPolicy(uint8(rng.IntN(256)), uint16(rng.IntN(1<<16))), seed, steps)
		}
	}
}

func FuzzDecide(f *testing.F) {
	f.Add(uint8(0), uint8(0), uint16(60), uint64(1))
	f.Add(uint8(1), uint8(0b1110), uint16(0), uint64(2))
	f.Add(uint8(3), uint8(0b1101), uint16(3600), uint64(3))
	f.Add(uint8(7), uint8(0b11100), uint16(3), uint64(4))
	f.Add(uint8(11), uint8(0b0101), uint16(1), uint64(5))
	f.Fuzz(func(t *testing.T, cron, policy uint8, grace uint16, seed uint64) {
		sc := simCrons[int(cron)%len(simCrons)]
		simulate(t, mustParse(t, sc.expr, sc.tz), simPolicy(policy, grace), seed, 40)
	})
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{"* * * * *", "*/5 * * * * *", "0 9 * * MON-FRI", "@daily", "@every 1s", "TZ=", "CRON_TZ=UTC",
		"0 0 30 2 *", "5-3 * * * *", "1,,2 * * * *", "0 0 29 2 *", "0 30 7 * * MON-FRI", "*/0 * * * *", "? ? ? ? ?"} {
		for _, tz := range []string{"", "UTC", "Europe/Berlin", "America/New_York", "Pacific/Apia", "Local", "../x"} {
			f.Add(s, tz, int64(1700000000))
		}
	}
	f.Add("30 1 * * *", "America/New_York", int64(1730591000))
	f.Add("0 12 * * *", "Pacific/Apia", int64(1325000000))
	f.Fuzz(func(t *testing.T, expr, tz string, unix int64) {
		c, err := Parse(expr, tz)
		if err != nil {
			if err.Error() == "" {
				t.Fatalf("Parse(%q, %q): empty error", expr, tz)
			}
			return
		}
		if !strings.HasPrefix(c.String(), strings.TrimSpace(expr)) {
			t.Fatalf("String() = %q for %q", c.String(), expr)
		}
		if c.MinInterval() < time.Second {
			t.Fatalf("%v: MinInterval %v", c, c.MinInterval())
		}
		// Somewhere from 1900 to 2200, not on a whole second.
		const lo, span = -2208988800, 9467280000
		from := time.Unix(lo+(unix%span+span)%span, unix&0xfff)
		ticks := c.Upcoming(from, 20)
		if len(ticks) == 0 {
			t.Fatalf("%v: no tick after %v", c, from)
		}
		prev := from
		for _, u := range ticks {
			if !u.After(prev) || u.Nanosecond() != 0 || u.Location() != time.UTC {
				t.Fatalf("%v: tick %v after %v", c, u, prev)
			}
			if !matchesWall(c, u) {
				t.Fatalf("%v: %v (%v) does not match", c, u, u.In(c.loc))
			}
			prev = u
		}
		for i, u := range ticks {
			if got, ok := c.Latest(from, u); !ok || !got.Equal(u) {
				t.Fatalf("%v: Latest(%v, %v) = %v, %v", c, from, u, got, ok)
			}
			got, ok := c.Latest(from, u.Add(-time.Nanosecond))
			if i == 0 && ok {
				t.Fatalf("%v: Latest(%v, %v) = %v, want none", c, from, u.Add(-time.Nanosecond), got)
			}
			if i > 0 && (!ok || !got.Equal(ticks[i-1])) {
				t.Fatalf("%v: Latest(%v, %v) = %v, %v; want %v", c, from, u.Add(-time.Nanosecond), got, ok, ticks[i-1])
			}
		}
	})
}
