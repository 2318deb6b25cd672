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

// Executor is one executor connected to this replica, as its dispatcher
// knows it (dispatch.Dispatcher.Connected): what a blocked run's view
// lists, and what its steps' reasons are worked out from.
type Executor struct {
	ID     string
	Labels []string
	Tools  []string // "server.tool", sorted
	Prose  bool
}

// offers reports whether e offers what t needs, the label aside.
func (e Executor) offers(t engine.Target) bool {
	if t.Kind == plan.KindProse {
		return e.Prose
	}
	return slices.Contains(e.Tools, t.Server+"."+t.Tool)
}

// need is what a step of target t needs, as people read it.
func need(t engine.Target) string {
	if t.Kind == plan.KindProse {
		return "prose steps (a model)"
	}
	return t.Server + "·" + t.Tool // as the plan card writes it
}

// blockedSteps are the run's steps that wait for an executor (queued and
// marked blocked), in order, each with why from what execs offer.
func blockedSteps(run *engine.Run, m *engine.Machine, order []string, execs []Executor) []*tollgatev1.BlockedStep {
	var out []*tollgatev1.BlockedStep
	for _, id := range order {
		s := run.Steps[id]
		if s == nil || s.Status != engine.StatusQueued || !s.Blocked {
			continue
		}
		t, ok := m.TargetOf(id)
		if !ok {
			continue
		}
		b := &tollgatev1.BlockedStep{StepId: id, Label: t.On, Prose: t.Kind == plan.KindProse, Reason: blockedReason(t, execs)}
		if !b.Prose {
			b.Server, b.Tool = t.Server, t.Tool
		}
		if ask, ok := strings.CutPrefix(id, engine.CheckStepID("")); ok {
			b.CheckOfAskId = store.AskID(run.ID, ask)
		}
		out = append(out, b)
	}
	return out
}

// blockedReason says why no executor here takes a step of target t.
func blockedReason(t engine.Target, execs []Executor) string {
	what := need(t)
	if t.On != "" {
		what += " on an executor labelled " + t.On
	}
	if len(execs) == 0 {
		return "waits for an executor that offers " + what + "; none is connected to this replica"
	}
	var offer, fit, ids []string
	for _, e := range execs {
		ids = append(ids, e.ID)
		if e.offers(t) {
			offer = append(offer, e.ID)
			if t.On == "" || slices.Contains(e.Labels, t.On) {
				fit = append(fit, e.ID)
			}
		}
	}
	switch {
	case len(fit) > 0:
		// It connected since the step was refused: the step is offered
		// again when it is next queued or claimed.
		return fmt.Sprintf("%s offers %s now; the step is leased once it is offered again", names(fit), need(t))
	case len(offer) > 0:
		return fmt.Sprintf("no connected executor labelled %s offers %s (%s offers it without the label)", t.On, need(t), names(offer))
	}
	return fmt.Sprintf("no connected executor offers %s (connected to this replica: %s)", what, names(ids))
}

// names lists executor ids, the first few of many with how many more.
func names(ids []string) string {
	const shown = 8
	if len(ids) <= shown {
		return strings.Join(ids, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(ids[:shown], ", "), len(ids)-shown)
}

// blockedSummary is a blocked run's state reason: what its waiting steps
// need, whatever is connected.
func blockedSummary(run *engine.Run, m *engine.Machine) string {
	needs := map[string]bool{}
	for id, s := range run.Steps {
		if s.Status != engine.StatusQueued || !s.Blocked {
			continue
		}
		if t, ok := m.TargetOf(id); ok {
			w := need(t)
			if t.On != "" {
				w += " (label " + t.On + ")"
			}
			needs[w] = true
		}
	}
	if len(needs) == 0 {
		return ""
	}
	return "waiting for an executor that offers " + strings.Join(slices.Sorted(maps.Keys(needs)), ", ")
}

// MaxListedExecutors bounds the executors a blocked run's view lists (and
// names in a reason): the run is sent whole on every watch event.
const MaxListedExecutors = 64

// executorsProto is what execs offer, for a blocked run's view: the first
// MaxListedExecutors of them.
func executorsProto(execs []Executor) []*tollgatev1.ConnectedExecutor {
	execs = execs[:min(len(execs), MaxListedExecutors)]
	out := make([]*tollgatev1.ConnectedExecutor, 0, len(execs))
	for _, e := range execs {
		out = append(out, &tollgatev1.ConnectedExecutor{Id: e.ID, Labels: e.Labels, Tools: e.Tools, Prose: e.Prose})
	}
	return out
}
