package wire

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	tollgatev1 "github.com/tollgate-dev/tollgate/gen/tollgate/v1"

	"github.com/tollgate-dev/tollgate/internal/store"
	"github.com/tollgate-dev/tollgate/pkg/engine"
	"github.com/tollgate-dev/tollgate/pkg/plan"
)

// CancellationReport says truthfully what did and did not run: every step of the
// plan, whether or not its phase was ever reached. Joins are bookkeeping
// and left out.
func CancellationReport(m *engine.Machine, before, after *engine.Run) *tollgatev1.CancellationReport {
	r := &tollgatev1.CancellationReport{}
	var ids []string
	for _, st := range m.Plan().AllSteps() {
		if st.Kind != plan.KindJoin {
			ids = append(ids, st.ID)
		}
	}
	slices.Sort(ids)
	for _, id := range ids {
		s, old := after.Steps[id], before.Steps[id]
		switch {
		case s == nil:
			r.NotRun = append(r.NotRun, id)
		case s.Status == engine.StatusSucceeded || s.Status == engine.StatusFailed:
			r.Ran = append(r.Ran, id)
		case old != nil && old.Status.InFlight():
			r.Interrupted = append(r.Interrupted, id)
		default:
			r.NotRun = append(r.NotRun, id)
		}
	}
	for _, id := range slices.Sorted(maps.Keys(after.Asks)) {
		if old, ok := before.Asks[id]; ok && old.State == engine.AskPending && after.Asks[id].State != engine.AskPending {
			r.ClosedAsks = append(r.ClosedAsks, store.AskID(after.ID, id))
		}
	}
	list := func(xs []string) string {
		if len(xs) == 0 {
			return "nothing"
		}
		return strings.Join(xs, ", ")
	}
	r.Text = fmt.Sprintf("Ran: %s. Interrupted: %s. Did not run: %s.", list(r.Ran), list(r.Interrupted), list(r.NotRun))
	return r
}
