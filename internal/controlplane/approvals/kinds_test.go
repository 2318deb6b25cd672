package approvals

import (
	"slices"
	"testing"

	"github.com/tollgate-dev/tollgate/pkg/engine"
	"github.com/tollgate-dev/tollgate/pkg/plan"
)

// Item 3: decision-time authority is one function. This table is every
// decision kind against every type of ask the engine opens, with the
// authority each needs. It is checked against needFor, and it must be
// complete: a decision kind (Kinds) or ask type (engine.AskTypes) added
// without a row here fails the test.
func TestItem3_EveryDecisionKindAgainstEveryAskType(t *testing.T) {
	const (
		P  = needPolicy
		RP = needRequesterOrPolicy
		NA = notApplicable
	)
	types := []plan.StopType{plan.StopMenu, plan.StopChoice, plan.StopText, engine.Gate, engine.InDoubt}
	table := map[Kind][]need{
		//                  menu choice text gate in_doubt
		Approve:         {P, P, NA, P, NA},
		Reject:          {P, P, P, P, NA},
		Amend:           {P, P, P, P, NA},
		RequestEvidence: {P, P, P, P, NA},
		Delegate:        {P, P, P, P, NA},
		GrantStanding:   {P, NA, NA, NA, NA},
		ApplyStanding:   {P, NA, NA, NA, NA},
		Revoke:          {P, P, P, P, NA},
		TextAnswer:      {NA, NA, P, NA, NA},
		Reply:           {P, P, P, P, RP},
		Retry:           {NA, NA, NA, NA, P},
		ItRan:           {NA, NA, NA, NA, RP},
		Stop:            {NA, NA, NA, NA, RP},
	}
	if got := engine.AskTypes(); !slices.Equal(got, types) {
		t.Fatalf("the engine opens asks of types %v; this table has columns %v: add a column (and a row entry per kind)", got, types)
	}
	for _, k := range Kinds() {
		row, ok := table[k]
		if !ok {
			t.Errorf("decision kind %q has no row: say what authority it needs on each ask type", k)
			continue
		}
		for i, ty := range types {
			if got := needFor(k, ty); got != row[i] {
				t.Errorf("%s on a %s ask: needFor says %q, the table %q", k, ty, got, row[i])
			}
		}
	}
	for k := range table {
		if !slices.Contains(Kinds(), k) {
			t.Errorf("row %q is not a decision kind the code knows", k)
		}
	}
	// Unknown types and kinds are nobody's to decide.
	if needFor(Approve, "mystery") != NA || needFor("mystery", plan.StopMenu) != NA {
		t.Error("an unknown ask type or decision kind must not be decidable")
	}
	// Approving kinds bind payload and evidence (I6).
	for _, k := range Kinds() {
		want := k == Approve || k == GrantStanding || k == Retry
		if k.Approves() != want {
			t.Errorf("%s Approves() = %v", k, k.Approves())
		}
	}
}

// Item 3: every option of an in-doubt ask, and a gate's No, is its own
// decision kind (the API's mapping of DecideRequest is tested where it
// lives, in the control plane).
func TestItem3_EveryOptionHasAKind(t *testing.T) {
	menu := &engine.AskRun{Type: plan.StopMenu, Options: []plan.Option{{ID: "1", Label: "Yes"}, {ID: "2", Label: "No"}}}
	doubt := &engine.AskRun{Type: engine.InDoubt, Options: []plan.Option{{ID: engine.DoubtRetry, Label: "retry"}, {ID: engine.DoubtRan, Label: "it ran"}, {ID: engine.DoubtStop, Label: "stop"}}}
	if k := OptionKind(doubt, engine.DoubtRetry); k != Retry {
		t.Errorf("retry is %s", k)
	}
	if k := OptionKind(doubt, engine.DoubtRan); k != ItRan {
		t.Errorf("it ran is %s", k)
	}
	if k := OptionKind(doubt, engine.DoubtStop); k != Stop {
		t.Errorf("stop is %s", k)
	}
	if k := OptionKind(menu, "2"); k != Reject {
		t.Errorf("a gate's No is %s", k)
	}
}
