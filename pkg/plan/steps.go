package plan

// AllSteps lists every step of the plan at any depth: the initial steps,
// then, stopping point by stopping point, each option's continuation and
// the phase after it, depth first. Callers that ask "does any step of this
// plan …" (a side effect started unasked, the steps a cancel reports) see
// every step the run could reach, not only the first phase.
func (p *Plan) AllSteps() []Step {
	var out []Step
	var walk func(steps []Step, stops []StoppingPoint)
	walk = func(steps []Step, stops []StoppingPoint) {
		out = append(out, steps...)
		for _, sp := range stops {
			for _, o := range sp.Options {
				walk(o.Steps, o.StoppingPoints)
			}
			if sp.Then != nil {
				walk(sp.Then.Steps, sp.Then.StoppingPoints)
			}
		}
	}
	walk(p.InitialSteps, p.StoppingPoints)
	return out
}

// AllStops lists every stopping point of the plan at any depth, in the
// order AllSteps walks them.
func (p *Plan) AllStops() []*StoppingPoint {
	var out []*StoppingPoint
	var walk func(stops []StoppingPoint)
	walk = func(stops []StoppingPoint) {
		for i := range stops {
			sp := &stops[i]
			out = append(out, sp)
			for _, o := range sp.Options {
				walk(o.StoppingPoints)
			}
			if sp.Then != nil {
				walk(sp.Then.StoppingPoints)
			}
		}
	}
	walk(p.StoppingPoints)
	return out
}
