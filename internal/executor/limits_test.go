package executor

import (
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	tollgatev1 "github.com/tollgate-dev/tollgate/gen/tollgate/v1"
	"github.com/tollgate-dev/tollgate/pkg/limits"
)

// TestItem9_ResultsAlwaysFitTheStream: an output longer than a value may
// be, or a tool's error of many megabytes, never makes a result the
// stream cannot carry: the output becomes a tool error saying why, and
// error messages are cut.
func TestItem9_ResultsAlwaysFitTheStream(t *testing.T) {
	out := boundResult(&tollgatev1.Result{Outcome: &tollgatev1.Result_OutputJson{OutputJson: `"` + strings.Repeat("o", 5<<20) + `"`}})
	if msg := out.GetToolError().GetMessage(); !strings.Contains(msg, "the output: 5242882 bytes, over the limit of 1048576") {
		t.Fatalf("an oversized output: %v", out)
	}
	for _, r := range []*tollgatev1.Result{
		{Outcome: &tollgatev1.Result_ToolError{ToolError: &tollgatev1.ToolError{Message: strings.Repeat("e", 5<<20)}}},
		{Outcome: &tollgatev1.Result_TransportError{TransportError: &tollgatev1.TransportError{Message: strings.Repeat("e", 5<<20)}}},
		{Outcome: &tollgatev1.Result_Refusal{Refusal: &tollgatev1.Refusal{Message: strings.Repeat("e", 5<<20)}}},
	} {
		msg := &tollgatev1.ExecutorMessage{Message: &tollgatev1.ExecutorMessage_Result{Result: boundResult(r)}}
		if n := proto.Size(msg); n > limits.MaxErrorBytes+64 {
			t.Fatalf("%T: a result of %d bytes", r.GetOutcome(), n)
		}
	}
	ok := boundResult(&tollgatev1.Result{Outcome: &tollgatev1.Result_OutputJson{OutputJson: `{"fine":true}`}})
	if ok.GetOutputJson() != `{"fine":true}` {
		t.Fatalf("an output within the limit changed: %v", ok)
	}
}
