package answer_test

import (
	"fmt"

	"github.com/tollgate-dev/tollgate/pkg/answer"
)

func ExampleMatch() {
	ask := answer.Ask{
		Title:   "save this reading?",
		Options: []answer.Option{{ID: "yes", Label: "Yes"}, {ID: "no", Label: "No"}},
	}
	misses := 0 // stored with the parked ask by the caller
	for _, text := range []string{"2 no add it to #alpha-testing", "/menu", "did it run?", "what now", "/2"} {
		r := answer.Match(ask, text, misses)
		misses = r.Misses
		fmt.Printf("%-11s misses=%d option=%q\n", r.Kind, r.Misses, r.Option.ID)
	}
	// Output:
	// NO_MATCH    misses=1 option=""
	// RESHOWN     misses=1 option=""
	// NO_MATCH    misses=2 option=""
	// ESCAPE_HINT misses=3 option=""
	// SELECTED    misses=0 option="no"
}
