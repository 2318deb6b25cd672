package dispatch

import (
	"maps"
	"slices"

	"github.com/tollgate-dev/tollgate/internal/wire"
)

// Connected lists the executors connected here and what each offers, by
// id (an executor with two streams open is one entry, offering what
// either does): what a blocked run's view names (wire.Views.Connected).
// Draining, it lists none: nothing here takes work; nor does it list a
// session whose executor is leaving.
func (d *Dispatcher) Connected() []wire.Executor {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.draining {
		return nil
	}
	byID := map[string]*wire.Executor{}
	for s := range d.sessions {
		if s.leaving {
			continue
		}
		e := byID[s.executor]
		if e == nil {
			e = &wire.Executor{ID: s.executor}
			byID[s.executor] = e
		}
		e.Prose = e.Prose || s.prose
		for _, l := range s.labels {
			if !slices.Contains(e.Labels, l) {
				e.Labels = append(e.Labels, l)
			}
		}
		for t := range s.tools {
			if !slices.Contains(e.Tools, t) {
				e.Tools = append(e.Tools, t)
			}
		}
	}
	out := make([]wire.Executor, 0, len(byID))
	for _, id := range slices.Sorted(maps.Keys(byID)) {
		e := byID[id]
		slices.Sort(e.Labels)
		slices.Sort(e.Tools)
		out = append(out, *e)
	}
	return out
}
