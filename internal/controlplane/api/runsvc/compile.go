package runsvc

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/tollgate-dev/tollgate/internal/controlplane/errkind"
	"github.com/tollgate-dev/tollgate/pkg/compiler"
	"github.com/tollgate-dev/tollgate/pkg/plan"
)

// compileKey is what a compilation depends on.
type compileKey struct {
	catalog *compiler.Catalog
	name    string
	src     string
	inputs  string // the run inputs' names (inputsKey)
}

// maxCompiledBytes bounds the recipe sources the compile cache holds as
// keys, on top of its bound in entries (Config.PlanCache): a few
// large recipes must not hold what many small ones would.
const maxCompiledBytes = 32 << 20

// compile compiles a recipe for a run with inputs (their names are what
// {NAME} may read), or returns the plan it compiled from the same source,
// name, inputs and catalog before (compiling is a pure function of them).
// Only plans are kept: a recipe that does not compile is compiled again,
// so its diagnostics are always fresh.
func (s *Service) compile(src, name string, inputs map[string]string) compiler.Result {
	k := compileKey{catalog: s.cfg.Catalog(), name: name, src: src, inputs: inputsKey(inputs)}
	if res, ok := s.compiled.Get(k); ok {
		return res
	}
	res := compiler.Compile(src, compiler.Options{Catalog: k.catalog, Name: name, Inputs: inputNames(inputs)})
	if res.Plan == nil {
		return res
	}
	s.compiled.Add(k, res)
	return res
}

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
