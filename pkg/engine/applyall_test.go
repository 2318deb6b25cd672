package engine

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/pkg/plan"
)

// ApplyAll is Apply in sequence: for random windows of random events
// (valid, stale, refused) it gives the same run, the same per-event
// records, effects and errors, and leaves its input alone.
func TestApplyAllIsApplyInSequence(t *testing.T) {
	plans := map[string]*plan.Plan{}
	for _, name := range []string{"graph-ask-demo", "morning-briefing", "pr-review", "vendor-payment", "uml-diagram"} {
		plans[name] = skill(t, name)
	}
	plans["chain"] = compile(t, "a: notes.store {\"t\":\"1\"}\nb: notes.store {\"t\":\"{a}\"}\n")
	windows, refused := 0, 0
	for name, p := range plans {
		m, err := New(p, Config{DefaultExpiry: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		for seed := range 40 {
			rng := rand.New(rand.NewPCG(uint64(seed), 11))
			now := t0
			run := m.Start("r", "alice", now).Run
			for range 12 {
				start := run
				var evs []Event
				var want []Transition
				var wantErr []error
				for range 1 + rng.IntN(6) {
					now = now.Add(time.Duration(rng.IntN(20)) * time.Minute)
					ev := randomEvent(rng, run, now)
					tr, err := m.Apply(run, ev)
					evs, want, wantErr = append(evs, ev), append(want, tr), append(wantErr, err)
					if err == nil {
						run = tr.Run
					} else {
						refused++
					}
				}
				before := cloneForCompare(start)
				got, gotErr := m.ApplyAll(start, evs)
				if !reflect.DeepEqual(before, cloneForCompare(start)) {
					t.Fatalf("%s seed %d: ApplyAll changed its input", name, seed)
				}
				for i := range evs {
					if fmt.Sprint(gotErr[i]) != fmt.Sprint(wantErr[i]) {
						t.Fatalf("%s seed %d event %d (%T): error %v, Apply says %v", name, seed, i, evs[i], gotErr[i], wantErr[i])
					}
					if wantErr[i] != nil {
						continue
					}
					if !reflect.DeepEqual(got[i].Records, want[i].Records) || !reflect.DeepEqual(got[i].Effects, want[i].Effects) ||
						fmt.Sprint(got[i].Refusal) != fmt.Sprint(want[i].Refusal) || !reflect.DeepEqual(got[i].Reply, want[i].Reply) {
						t.Fatalf("%s seed %d event %d (%T): transition differs from Apply's", name, seed, i, evs[i])
					}
					if want := m.countAll(got[i].Run); *got[i].Run.tally != want {
						t.Fatalf("%s seed %d: tally %+v, steps count %+v", name, seed, *got[i].Run.tally, want)
					}
					if g, w := cloneForCompare(got[i].Run), cloneForCompare(run); string(g) != string(w) {
						t.Fatalf("%s seed %d: final run differs from Apply's:\n got %s\nwant %s", name, seed, g, w)
					}
				}
				windows++
			}
		}
	}
	if refused == 0 {
		t.Fatal("no refused event: the rollback was never tried")
	}
	t.Logf("%d windows, %d refused events", windows, refused)
}
