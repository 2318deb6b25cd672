package engine

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/tollgate-dev/tollgate/pkg/freshness"
	"github.com/tollgate-dev/tollgate/pkg/plan"
)

// Config holds the engine's settings.
type Config struct {
	// DefaultExpiry is an ask's deadline when the recipe sets none.
	DefaultExpiry time.Duration
	// QuorumFloor, when set, is the quorum policy sets for an ask over
	// actions ("server.tool"): how many distinct people must approve. An
	// approval ask's quorum is fixed when it opens at the larger of this
	// and what the recipe or the gate request asked (I9: policy wins; a
	// decision may raise it further, Decide.Quorum). It must do no I/O:
	// it is called while events are applied. nil: no floor.
	QuorumFloor func(actions []string) int
	// CheckArgs, when set, says why a tool could not run with args (the
	// governed step's, resolved as the ask would show them), or nil: the
	// tool's input schema as the control plane knows it. A call it refuses
	// is never asked: the run fails naming the step, the field and the
	// reason, so nobody approves a call that cannot run. It must do no
	// I/O: it is called while events are applied. nil: no check.
	CheckArgs func(server, tool string, args plan.Object) error
	// Undecidable, when set, says why nobody could decide an approval
	// ask as it opens (its payload resolved, its quorum floored), or ""
	// when someone could. An ask nobody can answer is never parked: the
	// run fails with the reason instead. Like QuorumFloor it must do no
	// I/O and must not change run or ask. nil: every ask parks.
	Undecidable func(run *Run, a *AskRun) string
}

// DefaultAskExpiry is used when Config.DefaultExpiry is zero.
const DefaultAskExpiry = 72 * time.Hour

// Machine runs one plan. It is immutable after New and safe to share.
type Machine struct {
	plan   *plan.Plan
	digest string
	cfg    Config
	steps  map[string]*stepInfo
	stops  map[string]*stopInfo
	phases map[string]*phaseInfo
	top    *phaseInfo
	inputs map[string]bool // the run inputs the plan reads
}

type phaseInfo struct {
	key    string // "" for the top; "ASK/OPTION" for a menu option; "ASK/then"
	steps  []*plan.Step
	stops  []*stopInfo
	owner  *stopInfo // nil at the top
	parent *phaseInfo
}

type stepInfo struct {
	step  *plan.Step
	phase *phaseInfo
	gate  *stopInfo // innermost enclosing approval gate (menu)
	refs  []plan.Ref
}

type stopInfo struct {
	sp       *plan.StoppingPoint
	phase    *phaseInfo
	options  map[string]*phaseInfo // menu: option id → continuation
	then     *phaseInfo            // questions
	governed []*stepInfo           // side-effecting steps this gate governs
	// check is the gate's freshness probe as a step of its own (id
	// CheckStepID(ask)); prepare lists the read-only steps the governed
	// steps and the ask's inputs depend on, re-run when the ask goes
	// stale.
	check   *stepInfo
	prepare []string
}

// CheckStepID is the id of an ask's freshness probe among a run's steps.
// "~" cannot occur in a recipe's ids, so it never collides.
func CheckStepID(ask string) string { return "check~" + ask }

func phaseKey(ask, option string) string { return ask + "/" + option }

// New checks p with plan.Verify — whoever produced it — and indexes it.
func New(p *plan.Plan, cfg Config) (*Machine, error) {
	if err := plan.Verify(p); err != nil {
		return nil, fmt.Errorf("engine refuses the plan: %w", err)
	}
	digest, err := freshness.PlanDigest(p)
	if err != nil {
		return nil, err
	}
	if cfg.DefaultExpiry <= 0 {
		cfg.DefaultExpiry = DefaultAskExpiry
	}
	m := &Machine{plan: p, digest: digest, cfg: cfg, steps: map[string]*stepInfo{}, stops: map[string]*stopInfo{}, phases: map[string]*phaseInfo{}}
	m.top = m.index("", p.InitialSteps, p.StoppingPoints, nil, nil)
	m.inputs = make(map[string]bool, len(p.Inputs))
	for _, n := range p.Inputs {
		m.inputs[n] = true
	}
	for _, st := range m.stops {
		if c := st.sp.Check; c != nil {
			probe := &plan.Step{ID: CheckStepID(st.sp.ID), Kind: plan.KindTool, Server: c.Server, Tool: c.Tool, Args: c.Args,
				Idempotent: true, OnFail: plan.OnFailSkip}
			st.check = &stepInfo{step: probe, phase: st.phase}
			st.check.refs, _ = plan.ObjectRefs(c.Args)
			m.steps[probe.ID] = st.check
		}
		st.prepare = m.prepareSet(st)
	}
	return m, nil
}

// prepareSet is every read-only step an ask's governed steps and inputs
// depend on, directly or through others: what re-preparing re-runs.
// Side-effecting steps are never in it (I7).
func (m *Machine) prepareSet(st *stopInfo) []string {
	seen := map[string]bool{}
	var walk func(id string)
	walk = func(id string) {
		si, ok := m.steps[id]
		if !ok || seen[id] {
			return
		}
		seen[id] = true
		for _, d := range si.step.DependsOn {
			walk(d)
		}
		for _, d := range si.step.In {
			walk(d)
		}
		for _, r := range si.refs {
			walk(r.ID)
		}
	}
	for _, id := range st.sp.After {
		walk(id)
	}
	for _, ref := range st.sp.Show {
		id, _, _ := strings.Cut(ref, ".")
		walk(id)
	}
	for _, g := range st.governed {
		for _, d := range g.step.DependsOn {
			walk(d)
		}
		for _, r := range g.refs {
			walk(r.ID)
		}
	}
	var out []string
	for id := range seen {
		if !m.steps[id].step.SideEffect {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out
}

func (m *Machine) index(key string, steps []plan.Step, stops []plan.StoppingPoint, owner *stopInfo, parent *phaseInfo) *phaseInfo {
	ph := &phaseInfo{key: key, owner: owner, parent: parent}
	m.phases[key] = ph
	var gate *stopInfo
	for p := ph; p != nil; p = p.parent {
		if p.owner != nil && p.owner.sp.Type == plan.StopMenu {
			gate = p.owner
			break
		}
	}
	for i := range steps {
		s := &steps[i]
		ph.steps = append(ph.steps, s)
		si := &stepInfo{step: s, phase: ph}
		if s.Kind == plan.KindTool {
			si.refs, _ = plan.ObjectRefs(s.Args) // Verify already parsed them
		} else if s.Kind == plan.KindProse {
			si.refs = plan.Refs(s.Prompt)
		}
		if s.SideEffect && !s.WithoutAsking {
			si.gate = gate
			gate.governed = append(gate.governed, si) // Verify guarantees a gate
		}
		m.steps[s.ID] = si
	}
	for i := range stops {
		sp := &stops[i]
		st := &stopInfo{sp: sp, phase: ph, options: map[string]*phaseInfo{}}
		m.stops[sp.ID] = st
		ph.stops = append(ph.stops, st)
		if sp.Type == plan.StopMenu {
			for _, o := range sp.Options {
				st.options[o.ID] = m.index(phaseKey(sp.ID, o.ID), o.Steps, o.StoppingPoints, st, ph)
			}
		} else if sp.Then != nil {
			st.then = m.index(phaseKey(sp.ID, "then"), sp.Then.Steps, sp.Then.StoppingPoints, st, ph)
		}
	}
	return ph
}

// Plan returns the plan the machine runs.
func (m *Machine) Plan() *plan.Plan { return m.plan }

// Digest returns the plan's digest.
func (m *Machine) Digest() string { return m.digest }

// Start creates a run: the top phase is active, and whatever is runnable is
// dispatched. The requester's start is the recorded approval of any
// `without asking` step (the caller must have checked policy first).
func (m *Machine) Start(id, requester string, at time.Time) Transition {
	return m.StartWith(id, requester, nil, at)
}

// StartWith is Start with the run's inputs, which the plan's references
// read as {NAME}. The caller checked them (names, count, sizes); the map
// is copied.
func (m *Machine) StartWith(id, requester string, inputs map[string]string, at time.Time) Transition {
	return m.StartFrom(id, requester, inputs, Origin{}, at)
}

// StartFrom is StartWith for a run started from a saved skill or by a
// schedule: the run and its first journal record carry origin, so the
// journal says which skill version it ran and which schedule started it
// (whose RunAs is requester: the schedule itself approves nothing).
func (m *Machine) StartFrom(id, requester string, inputs map[string]string, origin Origin, at time.Time) Transition {
	r := &Run{ID: id, PlanDigest: m.digest, Requester: requester, State: Running, CreatedAt: at, UpdatedAt: at,
		Steps: map[string]*StepRun{}, Asks: map[string]*AskRun{}, External: m.plan.External, Origin: origin}
	if len(inputs) > 0 {
		r.Inputs = maps.Clone(inputs)
	}
	t := &tx{m: m, run: r, at: at}
	started := map[string]any{"plan_digest": m.digest}
	if origin.Skill != "" {
		started["skill"], started["skill_version"] = origin.Skill, origin.SkillVersion
	}
	if origin.Schedule != "" {
		started["schedule"], started["tick"] = origin.Schedule, origin.Tick.UTC().Format(time.RFC3339Nano)
	}
	t.record(JournalRunStarted, requester, started)
	t.activate(m.top)
	t.advance()
	return t.result()
}

// Place is where a step sits in its plan, for those who draw a run
// (traces, timelines): its phase ("" for the top, "ASK/OPTION" for a menu
// option's continuation, "ASK/then" for a question's) and its parallel
// group ("" when it runs on its own). An ask's freshness probe sits in
// the ask's phase, in no group.
type Place struct {
	Phase string
	Group string
}

// Place returns where step sits; false if the plan has no such step.
func (m *Machine) Place(step string) (Place, bool) {
	si, ok := m.steps[step]
	if !ok {
		return Place{}, false
	}
	return Place{Phase: si.phase.key, Group: si.step.ParallelGroup}, true
}

// PhaseSteps lists the ids of a phase's steps in plan order (probes
// excluded); nil for an unknown phase.
func (m *Machine) PhaseSteps(phase string) []string {
	ph, ok := m.phases[phase]
	if !ok {
		return nil
	}
	ids := make([]string, len(ph.steps))
	for i, s := range ph.steps {
		ids[i] = s.ID
	}
	return ids
}

// AskPhase returns the phase a stopping point sits in; false if the plan
// has no such stopping point.
func (m *Machine) AskPhase(ask string) (string, bool) {
	st, ok := m.stops[ask]
	if !ok {
		return "", false
	}
	return st.phase.key, true
}

// Step returns the plan's step (or an ask's freshness probe) by id; the
// caller must not change it.
func (m *Machine) Step(id string) (*plan.Step, bool) {
	si, ok := m.steps[id]
	if !ok {
		return nil, false
	}
	return si.step, true
}
