package executor

import (
	"fmt"

	tollgatev1 "github.com/tollgate-dev/tollgate/gen/tollgate/v1"
	"github.com/tollgate-dev/tollgate/pkg/limits"
)

// boundResult keeps a result within the limits every Tollgate process
// shares (package limits), so sending it can never exceed the stream's
// message limit and tear down the stream every other lease shares: an
// output longer than limits.MaxValueBytes becomes a tool error saying so
// (the step fails, with that reason), and error messages are cut to
// limits.MaxErrorBytes.
func boundResult(res *tollgatev1.Result) *tollgatev1.Result {
	switch o := res.GetOutcome().(type) {
	case *tollgatev1.Result_OutputJson:
		if err := limits.Value("the output", len(o.OutputJson)); err != nil {
			res.Outcome = &tollgatev1.Result_ToolError{ToolError: &tollgatev1.ToolError{Message: fmt.Sprintf("not reported: %v", err)}}
		}
	case *tollgatev1.Result_ToolError:
		o.ToolError.Message = limits.Truncate(o.ToolError.GetMessage(), limits.MaxErrorBytes)
	case *tollgatev1.Result_TransportError:
		o.TransportError.Message = limits.Truncate(o.TransportError.GetMessage(), limits.MaxErrorBytes)
	case *tollgatev1.Result_Refusal:
		o.Refusal.Message = limits.Truncate(o.Refusal.GetMessage(), limits.MaxErrorBytes)
	}
	return res
}
