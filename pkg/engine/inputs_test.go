package engine

import (
	"testing"

	"github.com/tollgate-dev/tollgate/pkg/plan"
)

// ResolveInputs puts in the run's inputs as a dispatch does, and leaves
// every other reference as written.
func TestResolveInputs(t *testing.T) {
	p := &plan.Plan{Inputs: []string{"who", "gone"}}
	got := ResolveInputs(p, plan.Object(`{"a":"{who}","b":"for {who} and {step.x}","c":"{gone}","d":"{step}","n":[1,"{who}"]}`), map[string]string{"who": "bob"})
	want := `{"a":"bob","b":"for bob and {step.x}","c":null,"d":"{step}","n":[1,"bob"]}`
	if string(got) != want {
		t.Fatalf("got %s\nwant %s", got, want)
	}
}
