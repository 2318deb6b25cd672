package approvectl

import (
	"fmt"
	"io"
	"time"

	"github.com/tollgate-dev/tollgate/pkg/humantext"
	"github.com/tollgate-dev/tollgate/pkg/plan"
)

// Formatting for people. Every function here takes the clock it needs as
// an argument: none reads time.Now, so each is tested with a fixed one.

// The formatters are pkg/humantext's, the same on every surface.
func span(d time.Duration) string                 { return humantext.Span(d) }
func ago(d time.Duration) string                  { return humantext.Ago(d) }
func age(t, now time.Time) string                 { return humantext.Age(t, now) }
func dueIn(deadline, now time.Time) string        { return humantext.DueIn(deadline, now) }
func remaining(d time.Duration) string            { return humantext.Remaining(d) }
func deadlineText(deadline, now time.Time) string { return humantext.Deadline(deadline, now) }
func escapeControls(s string) string              { return humantext.Escape(s) }

// expiryPhrase is what an ask's deadline does, in the words the plan card
// uses (plan.ExpiryOutcome): "on expiry the run ends expired". onExpiry
// is the plan's name of it: "" for the default, "reject", "cancel",
// "escalate" (wire.OnExpiry reads an ask's enum so).
func expiryPhrase(onExpiry string) string { return "on expiry " + plan.ExpiryOutcome(onExpiry) }

// fanLine is a fan's figures on one line: the wall / sum / max the
// control plane computed, the same its trace span carries.
func fanLine(group string, branches int, wall, sum, maxBranch time.Duration) string {
	return fmt.Sprintf("fan %s  %d branches  wall %s · sum %s · max %s", group, branches, span(wall), span(sum), span(maxBranch))
}

// ms is a duration in milliseconds, to the microsecond, for JSON.
func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// escaped is a writer for text a person reads on a terminal that holds
// others' words (titles, summaries, artifacts, reasons): every control
// character but newline and tab, every bidi override or isolate, and
// every byte that is not UTF-8 is written as an escape (\x1b, \u202e),
// so the text cannot move the cursor, clear what was printed or reorder
// itself to show another payload than the one the packet binds.
type escaped struct{ w io.Writer }

func (e escaped) Write(p []byte) (int, error) {
	if _, err := io.WriteString(e.w, escapeControls(string(p))); err != nil {
		return 0, err
	}
	return len(p), nil
}
