package plan

import (
	"slices"
	"testing"
)

// Steps behind an option and in the phase after a stopping point are
// listed, depth first, after the initial steps.
func TestAllStepsReachesEveryPhase(t *testing.T) {
	p := &Plan{
		InitialSteps: []Step{{ID: "a"}},
		StoppingPoints: []StoppingPoint{{
			ID: "ask_1", Type: StopMenu,
			Options: []Option{{ID: "1", Steps: []Step{{ID: "b"}}, StoppingPoints: []StoppingPoint{{ID: "ask_2", Then: &Phase{Steps: []Step{{ID: "c"}}}}}}},
			Then:    &Phase{Steps: []Step{{ID: "d"}}},
		}},
	}
	var ids []string
	for _, s := range p.AllSteps() {
		ids = append(ids, s.ID)
	}
	if !slices.Equal(ids, []string{"a", "b", "c", "d"}) {
		t.Fatalf("steps: %v", ids)
	}
}
