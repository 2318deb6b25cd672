package engine

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/pkg/compiler"
	"github.com/tollgate-dev/tollgate/pkg/plan"
)

var t0 = time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)

func catalog(t testing.TB) *compiler.Catalog {
	t.Helper()
	b, err := os.ReadFile("../../examples/catalog.yaml")
	if err != nil {
		t.Fatal(err)
	}
	c, err := compiler.ParseCatalog(b)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func compile(t testing.TB, src string) *plan.Plan {
	t.Helper()
	r := compiler.Compile(src, compiler.Options{Catalog: catalog(t), Name: "t"})
	if r.Plan == nil {
		t.Fatalf("does not compile: %v", r.Diagnostics)
	}
	return r.Plan
}

func skill(t testing.TB, name string) *plan.Plan {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("../../examples/skills", name, "SKILL.md"))
	if err != nil {
		t.Fatal(err)
	}
	return compile(t, string(b))
}

// sim drives one run through the machine like a store and dispatcher
// would: it applies events, keeps the latest run and collects effects.
type sim struct {
	t        testing.TB
	m        *Machine
	run      *Run
	now      time.Time
	queued   map[string]Dispatch // step → latest dispatch not yet finished
	all      []Effect
	records  []Record
	consumed map[string]bool // asks seen consumed before a governed dispatch
}

func newSim(t testing.TB, p *plan.Plan) *sim {
	t.Helper()
	m, err := New(p, Config{})
	if err != nil {
		t.Fatal(err)
	}
	s := &sim{t: t, m: m, now: t0, queued: map[string]Dispatch{}}
	s.take(m.Start("r1", "alice", t0))
	return s
}

func (s *sim) take(tr Transition) {
	s.t.Helper()
	s.run = tr.Run
	s.records = append(s.records, tr.Records...)
	for _, e := range tr.Effects {
		s.all = append(s.all, e)
		if d, ok := e.(Dispatch); ok {
			s.queued[d.Step] = d
		}
	}
}

// apply applies an event that must be accepted.
func (s *sim) apply(ev Event) Transition {
	s.t.Helper()
	tr, err := s.m.Apply(s.run, ev)
	if err != nil {
		s.t.Fatalf("%T refused: %v", ev, err)
	}
	s.take(tr)
	return tr
}

func (s *sim) tick(d time.Duration) time.Time {
	s.now = s.now.Add(d)
	return s.now
}

// run finishes a dispatched step: leased, started, then succeeded with out.
func (s *sim) succeed(step string, out any) {
	s.t.Helper()
	d, ok := s.queued[step]
	if !ok {
		s.t.Fatalf("%s was not dispatched; state %s", step, s.run.State)
	}
	s.apply(StepLeased{Step: step, Attempt: d.Attempt, Executor: "x1", LeaseID: "l-" + step, At: s.tick(time.Millisecond)})
	s.apply(StepStarted{Step: step, Attempt: d.Attempt, At: s.tick(time.Millisecond)})
	b, _ := json.Marshal(out)
	delete(s.queued, step) // the result may queue the step again (a probe)
	s.apply(StepSucceeded{Step: step, Attempt: d.Attempt, Output: b, At: s.tick(time.Millisecond)})
}

func (s *sim) fail(step, msg string) {
	s.t.Helper()
	d := s.queued[step]
	s.apply(StepLeased{Step: step, Attempt: d.Attempt, Executor: "x1", At: s.tick(time.Millisecond)})
	s.apply(StepFailed{Step: step, Attempt: d.Attempt, Error: msg, At: s.tick(time.Millisecond)})
	if s.run.Steps[step].Status != StatusQueued {
		delete(s.queued, step)
	}
}

func (s *sim) approve(ask, actor string) {
	s.t.Helper()
	s.apply(Decide{Ask: ask, Actor: actor, Option: "1", At: s.tick(time.Second)})
}

func (s *sim) dispatched() map[string]int {
	out := map[string]int{}
	for _, e := range s.all {
		if d, ok := e.(Dispatch); ok {
			out[d.Step]++
		}
	}
	return out
}

func (s *sim) want(state State) {
	s.t.Helper()
	if s.run.State != state {
		s.t.Fatalf("run is %s, want %s (reason %q)", s.run.State, state, s.run.Reason)
	}
}
