package controlplane

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/tollgate-dev/tollgate/internal/controlplane/errkind"
	"github.com/tollgate-dev/tollgate/pkg/plan"
)

// MaxInputs bounds the number of named inputs of one StartRun; more is
// INVALID_ARGUMENT. Byte sizes of the values are bounded where they enter
// (StartRun), apart from this count.
const MaxInputs = 256

// maxInputName bounds an input's name, like a gate's.
const maxInputName = 64

// checkInputNames checks StartRun's inputs before anything is compiled:
// at most MaxInputs, each named so a reference can read it as {NAME}. A
// name that collides with a step or ask id is the compiler's to report
// (compiler.Options.Inputs), naming both.
func checkInputNames(inputs map[string]string) error {
	if len(inputs) > MaxInputs {
		return fmt.Errorf("%d inputs; a run takes at most %d: %w", len(inputs), MaxInputs, errkind.Invalid)
	}
	for _, n := range inputNames(inputs) {
		if len(n) > maxInputName {
			return fmt.Errorf("input %q… is longer than %d bytes: %w", n[:maxInputName], maxInputName, errkind.Invalid)
		}
		if !plan.IsName(n) {
			return fmt.Errorf("input %q is not a name a reference can read: use a letter or '_', then letters, digits, '_' or '-': %w", n, errkind.Invalid)
		}
	}
	return nil
}

// inputNames lists the inputs' names, sorted.
func inputNames(inputs map[string]string) []string {
	return slices.Sorted(maps.Keys(inputs))
}

// inputsKey is the input names as part of a compile cache key.
func inputsKey(inputs map[string]string) string {
	return strings.Join(inputNames(inputs), "\x00")
}
