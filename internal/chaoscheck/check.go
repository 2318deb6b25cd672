package chaoscheck

import (
	"fmt"
	"slices"
	"sort"
	"strings"
)

// Terminal reports whether a run state (the API's, lower case, without
// its prefix) is an outcome: the suite waits for every run to be terminal
// or parked, and settled judges the same way.
func Terminal(state string) bool {
	switch state {
	case "complete", "partial", "failed", "cancelled", "rejected", "expired":
		return true
	}
	return false
}

// openAsk ask states: someone must still decide.
var openAsk = []string{"pending", "evidence_requested", "in_doubt"}

// Check judges h and f and returns every violation found, in a stable
// order (by check, then run).
func Check(h []Op, f Final) []Violation {
	var out []Violation
	out = append(out, settled(f)...)
	out = append(out, acknowledged(h, f)...)
	out = append(out, effects(f)...)
	out = append(out, fenced(f)...)
	out = append(out, honest(h)...)
	out = append(out, SingleUse(h)...)
	if f.Audit != "" {
		out = append(out, Violation{Check: "audit", Detail: f.Audit})
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Check != out[j].Check {
			return out[i].Check < out[j].Check
		}
		return out[i].Run < out[j].Run
	})
	return out
}

// settled: every run is terminal, or parked with every open ask
// answerable.
func settled(f Final) []Violation {
	var out []Violation
	for _, id := range sortedRuns(f) {
		r := f.Runs[id]
		if r.Missing {
			continue // acknowledged reports it when a client was told it exists
		}
		if Terminal(r.State) {
			continue
		}
		if r.State != "parked" {
			out = append(out, Violation{Check: "settled", Run: id, Detail: fmt.Sprintf("still %s after the faults healed", r.State)})
			continue
		}
		open := 0
		for _, a := range r.Asks {
			if !slices.Contains(openAsk, a.State) {
				continue
			}
			open++
			if a.Deciders == 0 {
				out = append(out, Violation{Check: "settled", Run: id, Detail: fmt.Sprintf("ask %s (%s) has nobody who may decide it", a.ID, a.State)})
			}
		}
		if open == 0 {
			out = append(out, Violation{Check: "settled", Run: id, Detail: "parked with no open ask"})
		}
	}
	return out
}

// acknowledged: no write a client was told succeeded is lost.
func acknowledged(h []Op, f Final) []Violation {
	var out []Violation
	for _, o := range h {
		if o.Outcome != OK {
			continue
		}
		switch o.Kind {
		case Start:
			if r, ok := f.Runs[o.Run]; !ok || r.Missing {
				out = append(out, Violation{Check: "acknowledged", Run: o.Run, Detail: "started (" + o.String() + ") but not found"})
			}
		case Decide, Answer:
			run := runOf(o.Ask)
			r, ok := f.Runs[run]
			if !ok || r.Missing {
				out = append(out, Violation{Check: "acknowledged", Run: run, Detail: "decided (" + o.String() + ") on a run not found"})
				continue
			}
			if !decidedIn(r.Journal, askOf(o.Ask), o.Who) {
				out = append(out, Violation{Check: "acknowledged", Run: run, Detail: "told succeeded but not in the journal: " + o.String()})
			}
		case Finish:
			if r, ok := f.Runs[o.Run]; !ok || r.Missing || !hasKind(r.Journal, "run.finish") {
				out = append(out, Violation{Check: "acknowledged", Run: o.Run, Detail: "finish told succeeded, the journal has no run.finish"})
			}
		case Cancel:
			r, ok := f.Runs[o.Run]
			if ok && !r.Missing && !hasKind(r.Journal, "run.cancel") && !Terminal(r.State) {
				out = append(out, Violation{Check: "acknowledged", Run: o.Run, Detail: "cancel told succeeded, the run is " + r.State + " and its journal has no run.cancel"})
			}
		}
	}
	return out
}

// effects: each side effect ran as the journal says.
func effects(f Final) []Violation {
	var out []Violation
	for _, id := range sortedRuns(f) {
		r := f.Runs[id]
		if r.Missing || r.Mark == "" {
			continue
		}
		ran := f.Marks[r.Mark]
		started := map[string]bool{}
		succeeded, retries, consumed := 0, 0, 0
		for _, rec := range r.Journal {
			switch rec.Kind {
			case "step.started":
				if str(rec.Payload["step"]) == r.MarkStep {
					started[str(rec.Payload["attempt"])] = true
				}
			case "step.succeeded":
				if str(rec.Payload["step"]) == r.MarkStep && rec.Payload["by"] == nil {
					succeeded++
				}
			case "ask.decided":
				if rec.Payload["decision"] == "in_doubt" && rec.Payload["option"] == "retry" {
					retries++
				}
			case "approval.consumed":
				if str(rec.Payload["step"]) == r.MarkStep {
					consumed++
				}
			}
		}
		if ran > 0 && consumed == 0 {
			out = append(out, Violation{Check: "effects", Run: id, Detail: fmt.Sprintf("%s ran %d times and no approval was consumed for step %s", r.Mark, ran, r.MarkStep)})
		}
		if ran > len(started) {
			out = append(out, Violation{Check: "effects", Run: id, Detail: fmt.Sprintf("%s ran %d times, its journal records %d durable Starts", r.Mark, ran, len(started))})
		}
		if len(started) > 1+retries {
			out = append(out, Violation{Check: "effects", Run: id, Detail: fmt.Sprintf("step %s started %d attempts with %d in-doubt retries answered", r.MarkStep, len(started), retries)})
		}
		if ran < succeeded {
			out = append(out, Violation{Check: "effects", Run: id, Detail: fmt.Sprintf("executors reported %s succeeded %d times, it ran %d", r.Mark, succeeded, ran)})
		}
	}
	return out
}

// fenced: every lease, start and result the journal records is of the
// step's current attempt (the last one dispatched): an executor holding
// an older attempt's lease is refused, whatever it sends.
func fenced(f Final) []Violation {
	var out []Violation
	for _, id := range sortedRuns(f) {
		current := map[string]string{}
		for _, rec := range f.Runs[id].Journal {
			step, attempt := str(rec.Payload["step"]), str(rec.Payload["attempt"])
			switch rec.Kind {
			case "step.dispatched":
				current[step] = attempt
			case "step.leased", "step.started", "step.succeeded", "step.failed":
				if rec.Kind == "step.succeeded" && rec.Payload["by"] != nil {
					continue // a person's word on an in-doubt step
				}
				if attempt != current[step] {
					out = append(out, Violation{Check: "fenced", Run: id, Detail: fmt.Sprintf("seq %d: %s of %s attempt %s while attempt %s is current", rec.Seq, rec.Kind, step, attempt, current[step])})
				}
			}
		}
	}
	return out
}

// honest: a start is never refused NOT_FOUND. A client that starts with a
// request key, or retries with it, is told the run, or a reason; "not
// found" would name a run it never asked about and read as "nothing was
// started" while the first attempt may still commit.
func honest(h []Op) []Violation {
	var out []Violation
	for _, o := range h {
		if o.Kind == Start && o.Outcome == Refused && strings.HasPrefix(o.Err, "NotFound") {
			out = append(out, Violation{Check: "honest", Run: o.Run, Detail: "a start was refused NOT_FOUND: " + o.String()})
		}
	}
	return out
}

func decidedIn(journal []Record, ask, who string) bool {
	for _, rec := range journal {
		if (rec.Kind == "ask.decided" || rec.Kind == "ask.voted") && rec.Actor == who && str(rec.Payload["ask"]) == ask {
			return true
		}
	}
	return false
}

func hasKind(journal []Record, kind string) bool {
	return slices.ContainsFunc(journal, func(r Record) bool { return r.Kind == kind })
}

// runOf and askOf split an API ask id, RUN/ASK.
func runOf(ask string) string {
	run, _, _ := strings.Cut(ask, "/")
	return run
}

func askOf(ask string) string {
	_, a, _ := strings.Cut(ask, "/")
	return a
}

func str(v any) string {
	switch v := v.(type) {
	case nil:
		return ""
	case string:
		return v
	case float64:
		return fmt.Sprint(int64(v))
	default:
		return fmt.Sprint(v)
	}
}

func sortedRuns(f Final) []string {
	ids := make([]string, 0, len(f.Runs))
	for id := range f.Runs {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}
