package chaoscheck

import (
	"strings"
	"testing"
	"time"
)

func ms(n int) time.Duration { return time.Duration(n) * time.Millisecond }

func rec(kind, actor string, kv ...any) Record {
	p := map[string]any{}
	for i := 0; i+1 < len(kv); i += 2 {
		p[kv[i].(string)] = kv[i+1]
	}
	return Record{Kind: kind, Actor: actor, Payload: p}
}

// goodRun is a gated side effect that ran once: approved by bob, started,
// succeeded.
func goodRun(id string) RunFinal {
	return RunFinal{ID: id, State: "complete", Mark: "m-" + id, MarkStep: "m",
		Asks: []AskFinal{{ID: id + "/ask_1", State: "consumed"}},
		Journal: []Record{
			rec("ask.decided", "bob", "ask", "ask_1", "decision", "approve"),
			rec("approval.consumed", "system", "ask", "ask_1", "step", "m"),
			rec("step.dispatched", "system", "step", "m", "attempt", 1.0),
			rec("step.leased", "edge-1", "step", "m", "attempt", 1.0),
			rec("step.started", "edge-1", "step", "m", "attempt", 1.0),
			rec("step.succeeded", "edge-1", "step", "m", "attempt", 1.0),
		}}
}

func goodHistory(id string) []Op {
	return []Op{
		{Client: 0, Kind: Start, Call: ms(0), Return: ms(5), Key: "k1", Run: id, Outcome: OK},
		{Client: 1, Kind: Read, Call: ms(6), Return: ms(7), Run: id, Outcome: OK, Asks: map[string]string{id + "/ask_1": "pending"}},
		{Client: 1, Kind: Decide, Call: ms(8), Return: ms(9), Ask: id + "/ask_1", Who: "bob", Verdict: "approve", Outcome: OK},
		{Client: 2, Kind: Decide, Call: ms(8), Return: ms(10), Ask: id + "/ask_1", Who: "carol", Verdict: "approve", Outcome: Refused},
		{Client: 0, Kind: Read, Call: ms(11), Return: ms(12), Run: id, Outcome: OK, Asks: map[string]string{id + "/ask_1": "consumed"}},
	}
}

func TestCheck(t *testing.T) {
	const id = "r1"
	cases := []struct {
		name  string
		edit  func(h []Op, f *Final) []Op
		check string // "" for clean; else the check that must fire
		want  string // a phrase of its detail
	}{
		{"clean", func(h []Op, f *Final) []Op { return h }, "", ""},
		{"a run still running", func(h []Op, f *Final) []Op {
			r := f.Runs[id]
			r.State = "running"
			f.Runs[id] = r
			return h
		}, "settled", "still running"},
		{"parked on an ask nobody may decide", func(h []Op, f *Final) []Op {
			r := f.Runs[id]
			r.State, r.Asks = "parked", []AskFinal{{ID: id + "/doubt_m_1", State: "in_doubt"}}
			f.Runs[id] = r
			return h
		}, "settled", "nobody who may decide"},
		{"parked with an answerable ask", func(h []Op, f *Final) []Op {
			r := f.Runs[id]
			r.State, r.Asks = "parked", []AskFinal{{ID: id + "/doubt_m_1", State: "in_doubt", Deciders: 2}}
			f.Runs[id] = r
			return h
		}, "", ""},
		{"an acknowledged start lost", func(h []Op, f *Final) []Op {
			f.Runs[id] = RunFinal{ID: id, Missing: true}
			return h[:1]
		}, "acknowledged", "not found"},
		{"a start with no answer may be lost", func(h []Op, f *Final) []Op {
			f.Runs[id] = RunFinal{ID: id, Missing: true}
			h[0].Outcome = Unknown
			return h[:1]
		}, "", ""},
		{"an acknowledged decision not journaled", func(h []Op, f *Final) []Op {
			r := f.Runs[id]
			r.Journal = r.Journal[1:]
			f.Runs[id] = r
			return h
		}, "acknowledged", "not in the journal"},
		{"an effect with no durable start", func(h []Op, f *Final) []Op {
			f.Marks["m-"+id] = 2
			return h
		}, "effects", "1 durable Starts"},
		{"an effect with no approval", func(h []Op, f *Final) []Op {
			r := f.Runs[id]
			r.Journal = append(r.Journal[:1:1], r.Journal[2:]...)
			f.Runs[id] = r
			return h
		}, "effects", "no approval was consumed"},
		{"a second attempt started without a retry", func(h []Op, f *Final) []Op {
			r := f.Runs[id]
			r.Journal = append(r.Journal, rec("step.started", "edge-2", "step", "m", "attempt", 2.0))
			f.Runs[id] = r
			return h
		}, "effects", "started 2 attempts with 0 in-doubt retries"},
		{"a second attempt after a retry", func(h []Op, f *Final) []Op {
			r := f.Runs[id]
			r.Journal = append(r.Journal, rec("ask.decided", "carol", "ask", "doubt_m_1", "decision", "in_doubt", "option", "retry"),
				rec("step.dispatched", "system", "step", "m", "attempt", 2.0), rec("step.leased", "edge-2", "step", "m", "attempt", 2.0),
				rec("step.started", "edge-2", "step", "m", "attempt", 2.0))
			f.Runs[id] = r
			return h
		}, "", ""},
		{"a success reported that never ran", func(h []Op, f *Final) []Op {
			f.Marks["m-"+id] = 0
			return h
		}, "effects", "reported"},
		{"two decisions both told OK", func(h []Op, f *Final) []Op {
			h[3].Outcome = OK
			r := f.Runs[id]
			r.Journal = append(r.Journal, rec("ask.decided", "carol", "ask", "ask_1", "decision", "approve"))
			f.Runs[id] = r
			return h
		}, "single-use", "not linearizable"},
		{"two decisions, one with no answer", func(h []Op, f *Final) []Op {
			h[3].Outcome = Unknown
			return h
		}, "", ""},
		{"seen decided before anyone decided", func(h []Op, f *Final) []Op {
			h[1].Asks[id+"/ask_1"] = "approved"
			return h
		}, "single-use", "not linearizable"},
		{"decided after it was seen closed", func(h []Op, f *Final) []Op {
			h[1].Asks[id+"/ask_1"] = "cancelled"
			return h
		}, "single-use", "not linearizable"},
		{"an acknowledged finish not journaled", func(h []Op, f *Final) []Op {
			return append(h, Op{Client: 3, Kind: Finish, Run: id, Call: ms(20), Return: ms(21), Outcome: OK})
		}, "acknowledged", "no run.finish"},
		{"a stale attempt's result applied", func(h []Op, f *Final) []Op {
			r := f.Runs[id]
			r.Journal = append(r.Journal[:len(r.Journal)-2:len(r.Journal)-2], rec("step.lease_lost", "system", "step", "m", "attempt", 1.0),
				rec("step.dispatched", "system", "step", "m", "attempt", 2.0), rec("step.leased", "edge-2", "step", "m", "attempt", 2.0),
				rec("step.started", "edge-2", "step", "m", "attempt", 1.0), rec("step.succeeded", "edge-2", "step", "m", "attempt", 1.0))
			f.Runs[id] = r
			return h
		}, "fenced", "attempt 1 while attempt 2 is current"},
		{"a retried start refused not found", func(h []Op, f *Final) []Op {
			return append(h, Op{Client: 2, Kind: Start, Key: "k1", Call: ms(20), Return: ms(21), Outcome: Refused, Err: "NotFound: run r_x: not found"})
		}, "honest", "NOT_FOUND"},
		{"the audit is not clean", func(h []Op, f *Final) []Op {
			f.Audit = "hash chain broken at seq 4"
			return h
		}, "audit", "hash chain"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := Final{Runs: map[string]RunFinal{id: goodRun(id)}, Marks: map[string]int{"m-" + id: 1}}
			h := tc.edit(goodHistory(id), &f)
			got := Check(h, f)
			if tc.check == "" {
				if len(got) != 0 {
					t.Fatalf("want clean, got %v", got)
				}
				return
			}
			for _, v := range got {
				if v.Check == tc.check && strings.Contains(v.Detail, tc.want) {
					return
				}
			}
			t.Fatalf("want a %s violation saying %q, got %v", tc.check, tc.want, got)
		})
	}
}
