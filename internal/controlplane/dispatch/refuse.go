package dispatch

import (
	"context"
	"time"

	"github.com/tollgate-dev/tollgate/pkg/engine"
)

// refuseStep fails a queued step the dispatcher will not hand out (its
// lease would not fit a message, leaseFits; or no approval governs it,
// refuseUngoverned), on a record worker: d.mu may be held. Its attempt
// never ran.
func (d *Dispatcher) refuseStep(o offer, why string) {
	d.handle(func() {
		_, err := o.rec.Event(context.Background(), o.runID, func(now time.Time) engine.Event {
			return engine.StepRefused{Step: o.d.Step, Attempt: o.d.Attempt, Reason: why, At: now}
		})
		if err != nil && !engineRefusal(err) {
			// Still queued in the store: offered again at the next start-up.
			d.cfg.Log.Warn("the refusal of a step was not recorded", "run", o.runID, "step", o.d.Step, "error", err)
		}
	})
}
