package compiler

import (
	"fmt"
	"strings"

	"github.com/tollgate-dev/tollgate/pkg/freshness"
	"github.com/tollgate-dev/tollgate/pkg/plan"
)

// MaxSourceBytes bounds a recipe; larger input is refused rather than
// parsed.
const MaxSourceBytes = 1 << 20

// Options configure one compilation.
type Options struct {
	// Catalog lists the tools the recipe may call and whether each is
	// read-only. A nil catalog knows no tools.
	Catalog *Catalog
	// Name names the plan when the source has no front matter name (for
	// example the skill's folder name).
	Name string
	// Inputs names the run inputs the recipe may read as {NAME}
	// (StartRun's inputs). They share one namespace with step and ask
	// ids: a step or ask of that name is an error. The plan lists those
	// it reads (plan.Plan.Inputs).
	Inputs []string
}

// Result is the outcome of a compilation. Plan is nil when Diagnostics
// hold an error.
type Result struct {
	Plan        *plan.Plan
	Digest      string // plan.Digest of Plan
	Diagnostics Diagnostics
	// Positions is where each step and stopping point of Plan comes from
	// in the source: an ask's line, and for a gate the compiler added, the
	// line of the first side effect it governs. A check made on the plan
	// later (e.g. who could decide a gate) reports its findings there.
	Positions map[string]Pos
}

// Compile compiles a recipe or a SKILL.md (front matter optional). It never
// panics on any input, and every plan it returns passes plan.Verify.
func Compile(src string, opts Options) Result {
	d := &diags{}
	if len(src) > MaxSourceBytes {
		d.errorf(Pos{Line: 1, Col: 1}, CodeSyntax, "the recipe is %d bytes; the limit is %d", len(src), MaxSourceBytes)
		return Result{Diagnostics: d.done()}
	}
	sk := splitSkill(src, d)
	name := sk.Name
	if name == "" {
		name = opts.Name
	}
	p := &parser{lines: splitLines(sk.Body, sk.BodyLine), d: d}
	root := p.phase(0, len(p.lines))
	if empty(root) {
		d.errorf(Pos{Line: sk.BodyLine, Col: 1}, CodeEmptyRecipe, "the recipe has no steps and no asks")
		return Result{Diagnostics: d.done()}
	}
	b := newBuilder(d, opts.Catalog)
	b.declareInputs(opts.Inputs)
	top := b.phase(root, nil, nil)
	b.resolve()
	walk(top, b.moves)
	if !d.list.HasErrors() {
		b.gates(top)
	}
	if d.list.HasErrors() {
		return Result{Diagnostics: d.done()}
	}
	steps, stops := convert(top)
	pl := &plan.Plan{Name: name, Description: sk.Description, InitialSteps: steps, StoppingPoints: stops, Notes: b.notes, Inputs: b.readInputs()}
	if pl.Notes == nil {
		pl.Notes = []plan.Note{}
	}
	if err := plan.Verify(pl); err != nil {
		d.errorf(Pos{Line: sk.BodyLine, Col: 1}, "internal", "the compiler built a plan that fails verification, which is a bug in Tollgate: %v", err)
		return Result{Diagnostics: d.done()}
	}
	digest, err := freshness.PlanDigest(pl)
	if err != nil {
		d.errorf(Pos{Line: sk.BodyLine, Col: 1}, "internal", "cannot digest the plan: %v", err)
		return Result{Diagnostics: d.done()}
	}
	return Result{Plan: pl, Digest: digest, Diagnostics: d.done(), Positions: b.positions()}
}

// positions maps every step and stopping point to its source position.
func (b *builder) positions() map[string]Pos {
	out := make(map[string]Pos, len(b.steps)+len(b.stops))
	for id, c := range b.steps {
		if c.src != nil {
			out[id] = c.src.pos
		}
	}
	for id, st := range b.stops {
		switch {
		case st.src != nil:
			out[id] = st.src.pos
		case len(st.governed) > 0 && st.governed[0].src != nil:
			out[id] = st.governed[0].src.pos
		}
	}
	return out
}

func empty(ph *srcPhase) bool {
	if ph.ask != nil {
		return false
	}
	for _, s := range ph.sections {
		if len(s.steps) > 0 {
			return false
		}
	}
	return true
}

func convert(ph *cphase) ([]plan.Step, []plan.StoppingPoint) {
	steps := make([]plan.Step, 0, len(ph.steps))
	for _, c := range ph.steps {
		steps = append(steps, c.ps)
	}
	stops := make([]plan.StoppingPoint, 0, len(ph.stops))
	for _, st := range ph.stops {
		sp := st.sp
		if sp.After == nil {
			sp.After = []string{}
		}
		for _, o := range st.opts {
			opt := plan.Option{ID: o.id, Label: o.label}
			if st.menu() {
				opt.Steps, opt.StoppingPoints = convert(o.ph)
			}
			sp.Options = append(sp.Options, opt)
		}
		if sp.Options == nil {
			sp.Options = []plan.Option{}
		}
		if st.then != nil {
			s, p := convert(st.then)
			sp.Then = &plan.Phase{Steps: s, StoppingPoints: p}
		}
		stops = append(stops, sp)
	}
	return steps, stops
}

// FormatDiagnostics renders diagnostics one per line, prefixed with file
// (which may be empty).
func FormatDiagnostics(file string, ds Diagnostics) string {
	var b strings.Builder
	for _, d := range ds {
		if file != "" {
			fmt.Fprintf(&b, "%s:", file)
		}
		fmt.Fprintf(&b, "%s\n", d)
	}
	return b.String()
}
