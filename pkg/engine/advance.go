package engine

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/tollgate-dev/tollgate/pkg/freshness"
	"github.com/tollgate-dev/tollgate/pkg/plan"
)

// activate makes a phase's steps part of the run.
func (t *tx) activate(ph *phaseInfo) {
	if ph == nil || slices.Contains(t.run.Phases, ph.key) {
		return
	}
	t.run.Phases = append(t.run.Phases, ph.key)
	for _, s := range ph.steps {
		if _, ok := t.run.Steps[s.ID]; !ok {
			t.newStep(s.ID, &StepRun{Status: StatusWaiting})
		}
	}
}

// queue dispatches the next attempt of a step.
func (t *tx) queue(id string, s *StepRun, why string) {
	info := t.m.steps[id]
	st := info.step
	if t.run.Failing != "" || t.run.State.Terminal() {
		// The run is stopping: nothing new goes out (I1, I2).
		s.Status = StatusCancelled
		t.record(JournalStepCancelled, "system", map[string]any{"step": id, "why": "the run is stopping"})
		return
	}
	if s.Attempt > 0 && st.SideEffect && s.Grant != "" && s.Grant != GrantStart {
		t.record(JournalApprovalReused, "system", map[string]any{"ask": s.Grant, "step": id, "attempt": s.Attempt + 1, "why": why})
	}
	s.Attempt++
	s.Status = StatusQueued
	s.Blocked = false
	s.Attempts = append(s.Attempts, Attempt{N: s.Attempt, QueuedAt: t.at})
	d := t.dispatchFor(id, s)
	if err := dispatchTooLarge(d); err != nil {
		// No lease could carry it, and a retry resolves the same values.
		_ = t.refused(StepRefused{Step: id, Attempt: s.Attempt, Reason: err.Error()})
		return
	}
	t.effects = append(t.effects, d)
	t.record(JournalStepDispatched, "system", map[string]any{"step": id, "attempt": s.Attempt, "why": why, "grant": s.Grant})
}

// dispatchFor builds the dispatch of a step's current attempt.
func (t *tx) dispatchFor(id string, s *StepRun) Dispatch {
	st := t.m.steps[id].step
	d := Dispatch{Step: id, Attempt: s.Attempt, Kind: st.Kind, Server: st.Server, Tool: st.Tool,
		SideEffect: st.SideEffect, Idempotent: st.Idempotent, On: st.On, Timeout: st.Timeout, Grant: s.Grant}
	if st.Kind == plan.KindProse {
		d.Prompt = t.interpolate(st.Prompt)
	} else {
		d.Args = t.resolveArgs(st.Args)
	}
	if st.SideEffect && s.Grant != GrantStart {
		// I6: a governed step runs with exactly the args its approver saw.
		if a := t.run.Asks[s.Grant]; a != nil {
			for _, p := range a.Payload {
				if p.Step == id {
					d.Args = p.Args
				}
			}
		}
	}
	return d
}

// Queued returns the dispatches of a run's queued steps, for a control
// plane that must offer them again (after a restart: what waited in one
// process's memory is gone, what is in the store is not).
func (m *Machine) Queued(run *Run) []Dispatch {
	t := &tx{m: m, run: run}
	var out []Dispatch
	for _, id := range sortedStepIDs(run) {
		if s := run.Steps[id]; s.Status == StatusQueued {
			out = append(out, t.dispatchFor(id, s))
		}
	}
	return out
}

// DispatchOf returns the dispatch of a run's step if it is queued at
// attempt: what a replica that claimed the step's work offers.
func (m *Machine) DispatchOf(run *Run, step string, attempt int) (Dispatch, bool) {
	s := run.Steps[step]
	if s == nil || s.Status != StatusQueued || s.Attempt != attempt || m.steps[step] == nil || run.State.Terminal() {
		return Dispatch{}, false
	}
	t := &tx{m: m, run: run}
	return t.dispatchFor(step, s), true
}

// Target is where a step runs: what an executor must offer to take it.
type Target struct {
	Kind         plan.Kind
	Server, Tool string
	On           string
}

// TargetOf returns where a step of the plan runs.
func (m *Machine) TargetOf(step string) (Target, bool) {
	st, ok := m.steps[step]
	if !ok {
		return Target{}, false
	}
	return Target{Kind: st.step.Kind, Server: st.step.Server, Tool: st.step.Tool, On: st.step.On}, true
}

// Target is where d runs.
func (d Dispatch) Target() Target {
	return Target{Kind: d.Kind, Server: d.Server, Tool: d.Tool, On: d.On}
}

// advance moves the run as far as it can go without another event:
// joins resolve, runnable steps dispatch, asks whose inputs are ready
// open, and the run's state is derived.
func (t *tx) advance() {
	for changed := true; changed && !t.run.State.Terminal(); {
		changed = false
		if t.run.Failing != "" {
			break
		}
		// Only a waiting step can move: a run with none (a fan in flight)
		// costs no scan of its steps.
		scan := t.counts().waiting > 0
		for _, key := range t.run.Phases {
			ph := t.m.phases[key]
			for _, st := range ph.steps {
				if !scan {
					break
				}
				if t.run.Failing != "" {
					break
				}
				if t.step(st) {
					changed = true
				}
			}
			for _, sp := range ph.stops {
				if t.open(sp) {
					changed = true
				}
			}
		}
	}
	t.derive()
}

// ready reports whether every id has finished in a way its readers accept:
// succeeded, or failed with on_fail: skip (they see no output).
func (t *tx) ready(ids []string) bool {
	for _, id := range ids {
		s, ok := t.run.Steps[id]
		if !ok {
			return false
		}
		switch s.Status {
		case StatusSucceeded:
		case StatusFailed:
			if t.m.steps[id].step.OnFail != plan.OnFailSkip {
				return false
			}
		default:
			return false
		}
	}
	return true
}

// step moves one waiting step if it can. It reports whether it did.
func (t *tx) step(st *plan.Step) bool {
	s := t.run.Steps[st.ID]
	if s == nil || s.Status != StatusWaiting {
		return false
	}
	if st.Kind == plan.KindJoin {
		ok, failed, done := 0, 0, 0
		for _, m := range st.In {
			switch t.run.Steps[m].Status {
			case StatusSucceeded:
				ok++
				done++
			case StatusFailed, StatusCancelled:
				failed++
				done++
			}
		}
		switch {
		case ok >= st.MinSuccess && done == len(st.In) && t.ready(st.DependsOn):
			s = t.stepW(st.ID)
			s.Status = StatusSucceeded
			s.Output = json.RawMessage(fmt.Sprintf(`{"succeeded":%d,"of":%d}`, ok, len(st.In)))
			t.record(JournalJoinHeld, "system", map[string]any{"join": st.ID, "succeeded": ok, "of": len(st.In), "need": st.MinSuccess})
			return true
		case failed > len(st.In)-st.MinSuccess:
			s = t.stepW(st.ID)
			s.Status = StatusFailed
			s.Error = fmt.Sprintf("needs %d of %d, and %d failed", st.MinSuccess, len(st.In), failed)
			t.record(JournalJoinFailed, "system", map[string]any{"join": st.ID, "succeeded": ok, "failed": failed, "need": st.MinSuccess})
			t.run.Failing = st.ID
			return true
		}
		return false
	}
	if !t.ready(st.DependsOn) {
		return false
	}
	s = t.stepW(st.ID)
	if st.SideEffect {
		grant, ok := t.grant(st)
		if !ok {
			return false // by construction unreachable: the phase is active only after its gate's answer
		}
		s.Grant = grant
	}
	t.queue(st.ID, s, "runnable")
	return true
}

// grant finds the approval that lets a side-effecting step dispatch and
// consumes it (I1). A `without asking` step is approved by the start.
func (t *tx) grant(st *plan.Step) (string, bool) {
	if st.WithoutAsking {
		return GrantStart, true
	}
	g := t.m.steps[st.ID].gate
	if g == nil {
		return "", false
	}
	a, ok := t.run.Asks[g.sp.ID]
	if !ok || (a.State != AskApproved && a.State != AskConsumed && a.State != AskRejected) {
		return "", false
	}
	switch a.State {
	case AskApproved:
		a.State = AskConsumed
		t.record(JournalApprovalConsumed, "system", map[string]any{"ask": a.ID, "step": st.ID, "option": a.Option})
	case AskRejected:
		// The No option's own steps: choosing No approved exactly them.
		t.record(JournalApprovalConsumed, "system", map[string]any{"ask": a.ID, "step": st.ID, "option": a.Option})
	}
	return a.ID, true
}

// open opens a stopping point whose inputs have finished.
func (t *tx) open(sp *stopInfo) bool {
	if t.run.State.Terminal() {
		return false // an ask found too large ended the run (below)
	}
	prev, ok := t.run.Asks[sp.sp.ID]
	if ok && prev.State != AskStale {
		return false
	}
	if !t.ready(sp.sp.After) {
		return false
	}
	round := 0
	if prev != nil {
		// Asked again after going stale: the stale ask keeps its record
		// under a round-numbered id; the ask id itself is the live one.
		old := *prev
		old.ID = fmt.Sprintf("%s~%d", prev.ID, prev.Round+1)
		t.run.Asks[old.ID] = &old
		round = prev.Round + 1
	}
	exp := t.m.cfg.DefaultExpiry
	if d, err := parseDur(sp.sp.Expires); err == nil && d > 0 {
		exp = d
	}
	a := &AskRun{ID: sp.sp.ID, Type: sp.sp.Type, Title: sp.sp.Title, Summary: sp.sp.Summary, Audience: sp.sp.Audience, Added: sp.sp.Added,
		State: AskPending, OpenedAt: t.at, ExpiresAt: t.at.Add(exp), OnExpiry: sp.sp.OnExpiry,
		Quorum: sp.sp.Quorum, Approvers: slices.Clone(sp.sp.Approvers), Amend: slices.Clone(sp.sp.Amend), EscalateTo: sp.sp.EscalateTo}
	if d, err := parseDur(sp.sp.RemindAfter); err == nil && d > 0 {
		a.RemindAt = t.at.Add(d)
	}
	if d, err := parseDur(sp.sp.EscalateAfter); err == nil && d > 0 && a.EscalateTo != "" {
		a.EscalateAt = t.at.Add(d)
	}
	if a.Audience == "" {
		a.Audience = plan.AudienceRequester
	}
	for _, o := range sp.sp.Options {
		a.Options = append(a.Options, plan.Option{ID: o.ID, Label: o.Label})
	}
	for _, g := range sp.governed {
		args := t.resolveArgs(g.step.Args)
		if err := t.checkArgs(g.step, args); err != nil {
			t.end(Failed, fmt.Sprintf("%q is not asked: %v", a.Title, err))
			return true
		}
		p, err := newPayload(g.step.ID, g.step.Server, g.step.Tool, args)
		if err != nil {
			t.end(Failed, fmt.Sprintf("%q cannot be asked: %v", a.Title, err))
			return true
		}
		a.Payload = append(a.Payload, p)
	}
	if err := payloadTooLarge(a.Payload); err != nil {
		// An approver could not be shown it, nor a lease carry it.
		t.end(Failed, fmt.Sprintf("%q cannot be asked: %v", a.Title, err))
		return true
	}
	t.floorQuorum(a)
	if t.m.cfg.Undecidable != nil && a.countsQuorum() {
		if why := t.m.cfg.Undecidable(t.run, a); why != "" {
			t.end(Failed, fmt.Sprintf("%q cannot be decided by anyone, so it was not asked: %s", a.Title, why))
			return true
		}
	}
	a.Round = round
	for _, ref := range sp.sp.Show {
		// What the approver reads, bound by digest: the referenced output
		// as it is now. The content is read from the run when shown
		// (Machine.Shown), not copied into the ask.
		a.Evidence = append(a.Evidence, Evidence{Ref: ref, MediaType: ShownMediaType, Digest: freshness.ContentDigest(t.shown(ref))})
	}
	t.run.Asks[a.ID] = a
	t.effects = append(t.effects, AskOpened{Ask: a.ID})
	t.record(JournalAskOpened, "system", map[string]any{"ask": a.ID, "title": a.Title, "expires_at": a.ExpiresAt, "round": round, "digest": a.PayloadDigest()})
	if sp.check != nil {
		// The facts the approver decides on: read now, compared again
		// before the approval is consumed.
		a.HasCheck = true
		t.probe(a, "the ask opened")
	}
	return true
}

// checkArgs is Config.CheckArgs on a governed step's resolved args, as an
// error naming the step.
func (t *tx) checkArgs(st *plan.Step, args plan.Object) error {
	if err := t.toolRefuses(st.Server, st.Tool, args); err != nil {
		return fmt.Errorf("`%s` (%s·%s) cannot run with the args it would be approved with (%v), so nobody is asked to approve it", st.ID, st.Server, st.Tool, err)
	}
	return nil
}

// toolRefuses is Config.CheckArgs, or nil when none is set.
func (t *tx) toolRefuses(server, tool string, args plan.Object) error {
	if t.m.cfg.CheckArgs == nil {
		return nil
	}
	return t.m.cfg.CheckArgs(server, tool, args)
}

// ShownMediaType is the media type of what a `show:` reference shows: the
// referenced value's canonical JSON.
const ShownMediaType = "application/json"

// shown is what a `show:` reference ("id" or "id.field") shows: the
// canonical JSON of the value it reads now (freshness.ValueDigest's bytes).
func (t *tx) shown(ref string) []byte {
	id, field, _ := strings.Cut(ref, ".")
	return plan.AppendCanonical(nil, t.value(plan.Ref{ID: id, Field: field}))
}

// Shown is the content of e, an artifact of an ask of run: an attached
// artifact's bytes, or for a `show:` reference the referenced value's
// canonical JSON read from the run now. ok is false when that is no
// longer what the ask bound (its digest differs: the step ran again after
// the ask went stale); the content is then not the one shown and is not
// returned.
func (m *Machine) Shown(run *Run, e Evidence) (content []byte, ok bool) {
	if e.Ref == "" {
		return e.Content, true
	}
	b := (&tx{m: m, run: run}).shown(e.Ref)
	if freshness.ContentDigest(b) != e.Digest {
		return nil, false
	}
	return b, true
}

// probe queues the next attempt of an ask's freshness probe.
func (t *tx) probe(a *AskRun, why string) {
	id := CheckStepID(a.ID)
	s := t.stepW(id)
	if s == nil {
		s = t.newStep(id, &StepRun{Status: StatusWaiting})
	}
	t.queue(id, s, why)
}

// probing reports whether an ask's probe is queued or running.
func (t *tx) probing(a *AskRun) bool {
	s := t.run.Steps[CheckStepID(a.ID)]
	return s != nil && (s.Status == StatusQueued || s.Status.InFlight())
}

// checked handles a finished attempt of an ask's freshness probe: the
// facts of an opening ask, or the verdict on an approval waiting to be
// consumed.
func (t *tx) checked(askID string, attempt int) {
	a := t.run.Asks[askID]
	s := t.run.Steps[CheckStepID(askID)]
	if a == nil || s == nil || t.run.State.Terminal() {
		return
	}
	facts, err := t.material(a, s)
	if a.Material == nil && a.FactsError == "" {
		if err != nil {
			a.FactsError = err.Error()
			t.record(JournalAskFacts, "system", map[string]any{"ask": a.ID, "error": err.Error()})
		} else {
			a.Material, a.ResourceVersion = facts, freshness.FactsDigest(facts)
			t.record(JournalAskFacts, "system", map[string]any{"ask": a.ID, "resource_version": a.ResourceVersion})
		}
	}
	if !a.Verifying {
		return
	}
	if a.VerifyAttempt != attempt {
		// This result was read before the approval: read again.
		if !t.probing(a) {
			t.probe(a, "verify the approval")
			a.VerifyAttempt = s.Attempt
		}
		return
	}
	var changed []string
	switch {
	case err != nil:
		changed = append(changed, "the facts could not be read again: "+err.Error())
	case a.Material == nil:
		changed = append(changed, "the facts could not be read when you were asked: "+a.FactsError)
	default:
		changed = freshness.Changes(a.Material, facts)
	}
	a.Verifying = false
	if len(changed) == 0 {
		t.record(JournalApprovalFresh, "system", map[string]any{"ask": a.ID, "resource_version": a.ResourceVersion, "digest": a.PayloadDigest()})
		t.activate(t.m.stops[a.ID].options[a.Option])
		return
	}
	t.stale(a, strings.Join(changed, "; "))
}

// stale retires an approval whose facts changed before it was consumed,
// and re-prepares: the read-only steps the governed steps and the ask's
// inputs depend on run again, and the ask opens anew when they are done.
func (t *tx) stale(a *AskRun, what string) {
	a.Stale = what
	t.closeAsk(a, AskStale, Decision{Kind: DecisionStale, Actor: "system", At: t.at, Reason: what})
	t.record(JournalAskStale, "system", map[string]any{"ask": a.ID, "changed": what, "round": a.Round})
	for _, id := range t.m.stops[a.ID].prepare {
		s := t.run.Steps[id]
		if s == nil || !s.Status.Done() {
			continue
		}
		s = t.stepW(id)
		s.Status, s.Output, s.Error = StatusWaiting, nil, ""
		t.record(JournalStepReprepare, "system", map[string]any{"step": id, "because": a.ID})
	}
}

// material reads the check's material fields from the probe's output.
func (t *tx) material(a *AskRun, s *StepRun) (map[string]string, error) {
	if s.Status != StatusSucceeded {
		return nil, fmt.Errorf("%s", s.Error)
	}
	out, err := decodeValue(s.Output)
	if err != nil {
		return nil, fmt.Errorf("the check's output is not JSON: %w", err)
	}
	return freshness.ReadFacts(out, t.m.stops[a.ID].sp.Check.Fields), nil
}

// derive sets the run's state from its steps and asks, and journals a
// change.
func (t *tx) derive() {
	before := t.run.State
	t.deriveState()
	switch after := t.run.State; {
	case after == Parked && before != Parked:
		t.run.Parks++
		t.run.ParkedAt = t.at
	case before == Parked && after != Parked:
		t.run.ResumedAt = t.at
	}
	if after := t.run.State; after != before && !after.Terminal() {
		t.record(JournalRunState, "system", map[string]any{"from": string(before), "to": string(after)})
	}
}

func (t *tx) deriveState() {
	r := t.run
	if r.State.Terminal() {
		return
	}
	if r.External {
		t.deriveExternal()
		return
	}
	c := t.counts() // the steps, counted by what changed (tally.go)
	inflight, queued, blocked, pending, failedSkip := c.inflight, c.queued, c.blocked, 0, c.failedSkip
	waiting, doubt, probes, probesBlocked := c.waiting, c.doubt, c.probes, c.probesBlocked
	for _, a := range r.Asks {
		if a.State.Open() {
			pending++
		}
	}
	if r.Failing != "" {
		if inflight+queued == 0 {
			s := r.Steps[r.Failing]
			t.end(Failed, fmt.Sprintf("%s failed: %s", r.Failing, s.Error))
			return
		}
		// Stop dispatching; let what is in flight settle.
		for _, id := range sortedStepIDs(r) {
			if s := r.Steps[id]; s.Status == StatusQueued {
				s = t.stepW(id)
				s.Status = StatusCancelled
				queued--
				t.effects = append(t.effects, CancelStep{Step: id, Attempt: s.Attempt})
				t.record(JournalStepCancelled, "system", map[string]any{"step": id, "attempt": s.Attempt, "why": "the run is failing"})
			}
		}
		r.State = Running
		if inflight == 0 {
			t.end(Failed, fmt.Sprintf("%s failed: %s", r.Failing, r.Steps[r.Failing].Error))
		}
		return
	}
	unopened := 0
	for _, key := range r.Phases {
		for _, sp := range t.m.phases[key].stops {
			if _, ok := r.Asks[sp.sp.ID]; !ok {
				unopened++
			}
		}
	}
	switch {
	case inflight > 0 || queued > blocked:
		r.State = Running
	case blocked > 0:
		r.State = Blocked
	case pending > 0:
		r.State = Parked
	case probes > 0:
		r.State = Running
	case probesBlocked > 0:
		r.State = Blocked
	case waiting == 0 && unopened == 0 && doubt == 0:
		if failedSkip > 0 {
			t.end(Partial, "finished; some branches failed but every join held")
		} else {
			t.end(Complete, "finished")
		}
	default:
		r.State = Running
	}
}

// resolveArgs replaces references in the string values of args. A string
// that is exactly one reference takes the referenced JSON value; otherwise
// references are spliced in as text.
func (t *tx) resolveArgs(raw plan.Object) plan.Object { return resolveArgs(raw, t.value) }

// interpolate splices references into text.
func (t *tx) interpolate(s string) string { return interpolate(s, t.value) }

// resolveArgs is tx.resolveArgs with value reading each reference.
func resolveArgs(raw plan.Object, value func(plan.Ref) any) plan.Object {
	m, err := plan.DecodeObject(raw)
	if err != nil {
		return raw
	}
	var walk func(v any) any
	walk = func(v any) any {
		switch x := v.(type) {
		case string:
			spans := plan.ScanRefs(x)
			if len(spans) == 1 && len(spans[0].Refs) == 1 && spans[0].Start == 0 && spans[0].End == len(x) {
				return value(spans[0].Refs[0])
			}
			return interpolate(x, value)
		case map[string]any:
			for k, e := range x {
				x[k] = walk(e)
			}
			return x
		case []any:
			for i, e := range x {
				x[i] = walk(e)
			}
			return x
		}
		return v
	}
	return plan.AppendCanonical(nil, walk(m))
}

// interpolate is tx.interpolate with value reading each reference.
func interpolate(s string, value func(plan.Ref) any) string {
	spans := plan.ScanRefs(s)
	if len(spans) == 0 {
		return s
	}
	var b strings.Builder
	last := 0
	for _, sp := range spans {
		b.WriteString(s[last:sp.Start])
		for i, r := range sp.Refs {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(text(value(r)))
		}
		last = sp.End
	}
	b.WriteString(s[last:])
	return b.String()
}

// value is what a reference reads: a step's output (or a field of it), an
// ask's answer, or a run input. A step that failed and was skipped reads
// as null.
func (t *tx) value(r plan.Ref) any {
	if t.m.inputs[r.ID] {
		if v, ok := t.run.Inputs[r.ID]; ok {
			return v
		}
		return nil
	}
	if a, ok := t.run.Asks[r.ID]; ok && t.m.steps[r.ID] == nil {
		if a.Type == plan.StopText {
			return a.Text
		}
		return a.Label
	}
	s, ok := t.run.Steps[r.ID]
	if !ok || s.Status != StatusSucceeded || len(s.Output) == 0 {
		return nil
	}
	v, err := decodeValue(s.Output)
	if err != nil {
		return string(s.Output)
	}
	if r.Field == "" {
		return v
	}
	for _, f := range strings.Split(r.Field, ".") {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[f]
	}
	return v
}

func decodeValue(raw json.RawMessage) (any, error) {
	var v any
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.UseNumber()
	err := dec.Decode(&v)
	return v, err
}

// text renders a value for splicing into text: strings as they are,
// nothing as empty, anything else as compact JSON.
func text(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return x
	}
	return string(plan.AppendCanonical(nil, v))
}

func sortedAskIDs(r *Run) []string  { return slices.Sorted(maps.Keys(r.Asks)) }
func sortedStepIDs(r *Run) []string { return slices.Sorted(maps.Keys(r.Steps)) }
