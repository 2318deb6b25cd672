package engine

import (
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/pkg/plan"
)

// TestInvariantsUnderRandomEvents drives every example plan (and a few
// hand-written ones) with random event sequences — valid, stale and
// hostile — and checks after every transition:
//
//	I1: a side-effecting step is dispatched only under a consumed approval of
//	    the gate that governs it (or the start, for `without asking`);
//	I3: a terminal run holds no pending ask;
//	I7: a step that succeeded is never dispatched again, unless it is a
//	    read-only step re-prepared after its ask went stale, or a
//	    freshness probe; a side-effecting step is never re-prepared;
//	I6: a side effect governed by a gate with a check: is dispatched only
//	    after the probe found the facts unchanged since the ask opened;
//
// and that Apply never changes its input and always advances the version.
func TestInvariantsUnderRandomEvents(t *testing.T) {
	plans := map[string]*plan.Plan{}
	for _, name := range []string{"graph-ask-demo", "morning-briefing", "pr-review", "vendor-payment", "uml-diagram"} {
		plans[name] = skill(t, name)
	}
	plans["no-branch"] = compile(t, "a: notes.search {}\nask me:\n  go?\n  if no:\n    undo: notes.store {\"why\":\"no\"}\nw: notes.store {\"t\":\"{a}\"}; retry: 2\n")
	plans["without-asking"] = compile(t, "w: notes.store {} without asking\nr: notes.search {}; retry: 1\n")
	plans["chain"] = compile(t, "a: notes.store {\"t\":\"1\"}\nb: notes.store {\"t\":\"{a}\"}\n")
	seqs := 120
	if testing.Short() {
		seqs = 30
	}
	var cov coverage
	for name, p := range plans {
		m, err := New(p, Config{DefaultExpiry: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		for seed := range seqs {
			rng := rand.New(rand.NewPCG(uint64(seed), 7))
			fuzzRun(t, name, m, rng, &cov)
		}
	}
	// The generator must reach the states the invariants are about, or the
	// test proves nothing.
	if cov.effects == 0 || cov.terminal == 0 || cov.expired == 0 || cov.refused == 0 || cov.complete == 0 || cov.stale == 0 || cov.fresh == 0 {
		t.Fatalf("random runs did not cover enough: %+v", cov)
	}
	t.Logf("coverage: %+v", cov)
}

type coverage struct{ effects, terminal, complete, expired, refused, doubts, stale, fresh int }

func fuzzRun(t *testing.T, name string, m *Machine, rng *rand.Rand, cov *coverage) {
	now := t0
	tr := m.Start("r", "alice", now)
	run := tr.Run
	succeeded := map[string]bool{}
	fresh := map[string]bool{}
	check := func(tr Transition, ev Event) {
		t.Helper()
		for _, rec := range tr.Records {
			step, _ := rec.Payload["step"].(string)
			ask, _ := rec.Payload["ask"].(string)
			switch rec.Kind {
			case JournalStepReprepare:
				if m.steps[step].step.SideEffect {
					t.Fatalf("%s: I7: side-effecting %s re-prepared", name, step)
				}
				delete(succeeded, step)
			case JournalApprovalFresh:
				fresh[ask] = true
				cov.fresh++
			case JournalAskStale:
				fresh[ask] = false
				cov.stale++
			case JournalAskOpened:
				fresh[ask] = false
			}
		}
		for _, e := range tr.Effects {
			d, ok := e.(Dispatch)
			if !ok {
				continue
			}
			if succeeded[d.Step] && !strings.HasPrefix(d.Step, "check~") {
				t.Fatalf("%s: I7: %s dispatched again after it succeeded (event %T %+v)", name, d.Step, ev, ev)
			}
			if !d.SideEffect {
				continue
			}
			if a := tr.Run.Asks[d.Grant]; a != nil && a.HasCheck && !fresh[d.Grant] {
				t.Fatalf("%s: I6: %s dispatched under %s before its facts were verified", name, d.Step, d.Grant)
			}
			cov.effects++
			info := m.steps[d.Step]
			if a := tr.Run.Asks[d.Grant]; a != nil && a.Type == InDoubt {
				if a.Step != d.Step || a.State != AskAnswered || a.Option != DoubtRetry || a.Decisions[len(a.Decisions)-1].Actor == "system" {
					t.Fatalf("%s: I1: %s retried under in-doubt ask %+v", name, d.Step, a)
				}
				cov.doubts++
				continue
			}
			if info.step.WithoutAsking {
				if d.Grant != GrantStart {
					t.Fatalf("%s: without asking step %s dispatched with grant %q", name, d.Step, d.Grant)
				}
				continue
			}
			a := tr.Run.Asks[d.Grant]
			if a == nil || info.gate == nil || a.ID != info.gate.sp.ID {
				t.Fatalf("%s: I1: %s dispatched under %q, governed by %v", name, d.Step, d.Grant, info.gate)
			}
			okState := a.State == AskConsumed || (a.State == AskRejected && a.Option != "")
			if !okState || m.phases[phaseKey(a.ID, a.Option)] != info.phase && !within(info.phase, m.phases[phaseKey(a.ID, a.Option)]) {
				t.Fatalf("%s: I1: %s dispatched under ask %s in state %s option %q", name, d.Step, a.ID, a.State, a.Option)
			}
		}
		if tr.Run.State.Terminal() {
			cov.terminal++
			switch tr.Run.State {
			case Complete, Partial:
				cov.complete++
			case Expired:
				cov.expired++
			}
			for _, a := range tr.Run.Asks {
				if a.State.Open() {
					t.Fatalf("%s: I3: run %s with open ask %s (%s)", name, tr.Run.State, a.ID, a.State)
				}
			}
		}
		for id, s := range tr.Run.Steps {
			if s.Status == StatusSucceeded && m.steps[id].step.Kind != plan.KindJoin {
				succeeded[id] = true
			}
		}
	}
	check(tr, nil)
	for i := 0; i < 60; i++ {
		now = now.Add(time.Duration(rng.IntN(20)) * time.Minute)
		ev := randomEvent(rng, run, now)
		before := cloneForCompare(run)
		next, err := m.Apply(run, ev)
		if !reflect.DeepEqual(before, cloneForCompare(run)) {
			t.Fatalf("%s: Apply(%T) changed its input", name, ev)
		}
		if err != nil {
			cov.refused++
			continue
		}
		if want := m.countAll(next.Run); next.Run.tally == nil || *next.Run.tally != want {
			t.Fatalf("%s: after %T the run's tally is %+v, its steps count %+v", name, ev, next.Run.tally, want)
		}
		if next.Run.Version != run.Version+1 {
			t.Fatalf("%s: version %d → %d", name, run.Version, next.Run.Version)
		}
		check(next, ev)
		run = next.Run
	}
}

func within(ph, anc *phaseInfo) bool {
	for p := ph; p != nil; p = p.parent {
		if p == anc {
			return true
		}
	}
	return false
}

func cloneForCompare(r *Run) []byte {
	b, _ := json.Marshal(r)
	return b
}

var texts = []string{"1", "2", "3", "yes", "No", "menu", "/menu", "cancel", "/cancel", "stop", "pick one", "", "class", "docs/x.md"}

func randomEvent(rng *rand.Rand, run *Run, now time.Time) Event {
	steps := slices.Sorted(func(yield func(string) bool) {
		for k := range run.Steps {
			if !yield(k) {
				return
			}
		}
	})
	asks := sortedAskIDs(run)
	pick := func(list []string) string {
		if len(list) == 0 {
			return "none"
		}
		return list[rng.IntN(len(list))]
	}
	step := pick(steps)
	attempt := 1
	if s, ok := run.Steps[step]; ok {
		attempt = s.Attempt
		if rng.IntN(8) == 0 {
			attempt = rng.IntN(3) // stale or bogus
		}
	}
	actor := []string{"alice", "alice", "bob"}[rng.IntN(3)]
	if rng.IntN(10) < 7 {
		// Mostly events that fit: they drive runs deep.
		for _, id := range steps {
			s := run.Steps[id]
			if rng.IntN(3) != 0 {
				continue
			}
			switch s.Status {
			case StatusQueued:
				return StepLeased{Step: id, Attempt: s.Attempt, Executor: "x", At: now}
			case StatusLeased:
				if rng.IntN(2) == 0 {
					return StepStarted{Step: id, Attempt: s.Attempt, At: now}
				}
				return StepSucceeded{Step: id, Attempt: s.Attempt, Output: json.RawMessage(`{"bank_account":"` + []string{"1", "1", "1", "2"}[rng.IntN(4)] + `"}`), At: now}
			case StatusStarted:
				if rng.IntN(5) == 0 {
					return StepFailed{Step: id, Attempt: s.Attempt, Error: "boom", At: now}
				}
				return StepSucceeded{Step: id, Attempt: s.Attempt, Output: json.RawMessage(`"ok"`), At: now}
			}
		}
		for _, id := range asks {
			if run.Asks[id].State == AskPending && rng.IntN(2) == 0 {
				if rng.IntN(4) == 0 {
					return Answer{Ask: id, Actor: "alice", Text: texts[rng.IntN(len(texts))], At: now}
				}
				return Decide{Ask: id, Actor: "alice", Option: "1", At: now}
			}
		}
	}
	switch rng.IntN(12) {
	case 0, 1:
		return StepLeased{Step: step, Attempt: attempt, Executor: "x", At: now}
	case 2:
		return StepStarted{Step: step, Attempt: attempt, At: now}
	case 3, 4:
		return StepSucceeded{Step: step, Attempt: attempt, Output: json.RawMessage(`{"bank_account":"1","v":1}`), At: now}
	case 5:
		return StepFailed{Step: step, Attempt: attempt, Error: "boom", At: now}
	case 6:
		return LeaseLost{Step: step, Attempt: attempt, At: now}
	case 7:
		return StepBlocked{Step: step, Attempt: attempt, At: now}
	case 8:
		return Decide{Ask: pick(asks), Actor: actor, Option: []string{"1", "2", "3"}[rng.IntN(3)], At: now}
	case 9:
		return Decide{Ask: pick(asks), Actor: actor, Reject: true, Reason: []string{"", "no"}[rng.IntN(2)], At: now}
	case 10:
		switch rng.IntN(4) {
		case 0:
			return RequestEvidence{Ask: pick(asks), Actor: actor, What: "the signed invoice", At: now}
		case 1:
			return AttachEvidence{Ask: pick(asks), Actor: actor, Artifacts: []Evidence{{Name: "invoice.pdf", Content: []byte("pdf")}}, At: now}
		}
		return Answer{Ask: pick(asks), Actor: actor, Text: texts[rng.IntN(len(texts))], At: now}
	default:
		if rng.IntN(6) == 0 {
			return Cancel{Actor: actor, At: now}
		}
		return Tick{At: now.Add(time.Duration(rng.IntN(3)) * time.Hour)}
	}
}
