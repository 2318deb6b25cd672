package engine

import (
	"fmt"

	"github.com/tollgate-dev/tollgate/pkg/limits"
	"github.com/tollgate-dev/tollgate/pkg/plan"
)

// The engine bounds the values it derives (package limits), so that no
// lease, result or decision packet it makes can exceed the message limit
// every process shares: a step whose args (or prompt) are longer than
// limits.MaxValueBytes once its references are resolved fails before it
// is leased; an ask whose governed payloads together are longer is never
// asked (the run fails, saying why); an output longer is not recorded
// (its step fails); an ask's evidence, all artifacts together, is at most
// limits.MaxValueBytes; error texts are cut to limits.MaxErrorBytes.

// dispatchTooLarge reports why d cannot be leased: what it carries after
// resolution is longer than a value may be.
func dispatchTooLarge(d Dispatch) error {
	if d.Kind == plan.KindProse {
		return limits.Value(d.Step+"'s prompt with its references resolved", len(d.Prompt))
	}
	return limits.Value(d.Step+"'s args with their references resolved", len(d.Args))
}

// payloadTooLarge reports why an ask governing ps cannot be asked.
func payloadTooLarge(ps []Payload) error {
	n := 0
	for _, p := range ps {
		n += len(p.Args)
	}
	return limits.Value("the governed steps' args with their references resolved", n)
}

// evidenceTooLarge reports why more artifacts cannot join an ask's.
func evidenceTooLarge(have, more []Evidence) error {
	n := 0
	for _, list := range [][]Evidence{have, more} {
		for _, e := range list {
			n += len(e.Content)
		}
	}
	if err := limits.Value("the ask's evidence (all artifacts together)", n); err != nil {
		return fmt.Errorf("%w: %w", ErrEvidence, err)
	}
	return nil
}

// boundResult is what an executor's report records: an output longer
// than a value may be is not recorded and fails the step instead; an
// error text is cut.
func boundResult(output []byte, errText string) ([]byte, string) {
	if errText == "" {
		if err := limits.Value("the output", len(output)); err != nil {
			return nil, "not recorded: " + err.Error()
		}
		return output, ""
	}
	return nil, limits.Truncate(errText, limits.MaxErrorBytes)
}
