package engine

import "github.com/tollgate-dev/tollgate/pkg/plan"

// ResolveInputs is args with the run's inputs put in as the run puts them
// in when the step runs (an input the plan declares but the run was not
// given reads as null); every other reference is left as written. It is
// what starting a run judges a `without asking` step on: the compiler
// lets such a step read only inputs, known at the start.
func ResolveInputs(p *plan.Plan, args plan.Object, inputs map[string]string) plan.Object {
	declared := make(map[string]bool, len(p.Inputs))
	for _, n := range p.Inputs {
		declared[n] = true
	}
	return resolveArgs(args, func(r plan.Ref) any {
		if !declared[r.ID] {
			return "{" + r.String() + "}"
		}
		if v, ok := inputs[r.ID]; ok {
			return v
		}
		return nil
	})
}
