package compiler

import (
	"os"
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/pkg/plan"
)

func exampleCatalog(t testing.TB) *Catalog {
	t.Helper()
	b, err := os.ReadFile("../../examples/catalog.yaml")
	if err != nil {
		t.Fatal(err)
	}
	c, err := ParseCatalog(b)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// located is a step or stopping point with the path of gates around it.
type located struct {
	step *plan.Step
	stop *plan.StoppingPoint
	// path lists the enclosing stopping points, outermost first, each with
	// the option label taken ("" for a question's then).
	path []hop
	// phaseSteps are the sibling steps of the phase it sits in.
	phaseSteps []plan.Step
}

type hop struct {
	stop  *plan.StoppingPoint
	label string
}

// index maps every id in the plan to where it sits.
func index(p *plan.Plan) map[string]located {
	out := map[string]located{}
	var walk func(steps []plan.Step, stops []plan.StoppingPoint, path []hop)
	walk = func(steps []plan.Step, stops []plan.StoppingPoint, path []hop) {
		for i := range steps {
			out[steps[i].ID] = located{step: &steps[i], path: path, phaseSteps: steps}
		}
		for i := range stops {
			sp := &stops[i]
			out[sp.ID] = located{stop: sp, path: path, phaseSteps: steps}
			for _, o := range sp.Options {
				walk(o.Steps, o.StoppingPoints, append(append([]hop(nil), path...), hop{sp, o.Label}))
			}
			if sp.Then != nil {
				walk(sp.Then.Steps, sp.Then.StoppingPoints, append(append([]hop(nil), path...), hop{sp, ""}))
			}
		}
	}
	walk(p.InitialSteps, p.StoppingPoints, nil)
	return out
}

// gatedBy returns the innermost approval gate around l and the option.
func (l located) gatedBy() (*plan.StoppingPoint, string) {
	for i := len(l.path) - 1; i >= 0; i-- {
		if l.path[i].stop.Type == plan.StopMenu {
			return l.path[i].stop, l.path[i].label
		}
	}
	return nil, ""
}

func mustCompile(t testing.TB, src string, cat *Catalog) *plan.Plan {
	t.Helper()
	r := Compile(src, Options{Catalog: cat, Name: "test"})
	if r.Plan == nil {
		t.Fatalf("does not compile:\n%s", FormatDiagnostics("", r.Diagnostics))
	}
	return r.Plan
}

func hasNote(p *plan.Plan, code, step, substr string) bool {
	for _, n := range p.Notes {
		if n.Code == code && n.Step == step && strings.Contains(n.Message, substr) {
			return true
		}
	}
	return false
}
