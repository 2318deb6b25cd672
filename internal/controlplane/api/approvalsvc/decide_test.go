package approvalsvc

import (
	"testing"

	tollgatev1 "github.com/tollgate-dev/tollgate/gen/tollgate/v1"
	"github.com/tollgate-dev/tollgate/pkg/engine"
	"github.com/tollgate-dev/tollgate/pkg/plan"
)

// Every decision the API accepts (each field of DecideRequest's oneof,
// and each in-doubt option) maps to a decision kind: a new one added to
// the proto without a kind fails here (Decide refuses what it cannot
// judge).
func TestItem3_EveryDecideRequestHasAKind(t *testing.T) {
	oneof := (&tollgatev1.DecideRequest{}).ProtoReflect().Descriptor().Oneofs().ByName("decision")
	if oneof == nil {
		t.Fatal("DecideRequest has no oneof decision")
	}
	asks := []*engine.AskRun{
		{Type: plan.StopMenu, Options: []plan.Option{{ID: "1", Label: "Yes"}, {ID: "2", Label: "No"}}},
		{Type: engine.InDoubt, Options: []plan.Option{{ID: engine.DoubtRetry, Label: "retry"}, {ID: engine.DoubtRan, Label: "it ran"}, {ID: engine.DoubtStop, Label: "stop"}}},
	}
	fields := oneof.Fields()
	for i := range fields.Len() {
		f := fields.Get(i)
		typed := &tollgatev1.DecideRequest{}
		m := typed.ProtoReflect()
		m.Set(f, m.NewField(f))
		for _, a := range asks {
			if k := decisionOf(typed, a); k == "" {
				t.Errorf("DecideRequest.%s on a %s ask has no decision kind", f.Name(), a.Type)
			}
		}
	}
}
