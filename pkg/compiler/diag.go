package compiler

import (
	"fmt"
	"sort"
)

// Severity says whether a diagnostic stops compilation.
type Severity string

// Severities.
const (
	Error   Severity = "error"   // the recipe does not compile
	Warning Severity = "warning" // it compiles; the author should look
)

// Pos is a 1-based line and column in the source file (front matter
// included, so editors jump to the right place). Column counts characters.
type Pos struct {
	Line int `json:"line"`
	Col  int `json:"col"`
}

func (p Pos) String() string { return fmt.Sprintf("%d:%d", p.Line, p.Col) }

// Diagnostic codes are stable: scripts and tests match on them, never on
// the message.
const (
	CodeSyntax          = "syntax"
	CodeUnknownTool     = "unknown-tool"
	CodeUnknownRef      = "unknown-ref"
	CodeHiddenRef       = "unreachable-ref"
	CodeCircularRef     = "circular-ref"
	CodeDuplicateID     = "duplicate-id"
	CodeReservedID      = "reserved-id"
	CodeImpossibleNeed  = "impossible-need"
	CodeBadArgs         = "bad-args"
	CodeBadDuration     = "bad-duration"
	CodeBadSetting      = "bad-setting"
	CodeFanSelfRef      = "fan-reads-sibling"
	CodeEffectBeforeAsk = "effect-before-ask"
	CodeGatedDependent  = "reads-gated-step"
	CodeWriteReadOnly   = "write-declared-read-only"
	CodeEmptyRecipe     = "empty-recipe"
	CodeFrontMatter     = "front-matter"
	CodeTooManyErrors   = "too-many-errors"
	CodeArgsSchema      = "args-against-schema" // literal args the tool's input schema refuses
	CodeUnaskedUnknown  = "unasked-not-known"   // a `without asking` step whose args read earlier steps or answers
)

// Diagnostic is one thing the compiler has to say about a recipe.
type Diagnostic struct {
	Pos      Pos      `json:"pos"`
	Severity Severity `json:"severity"`
	Code     string   `json:"code"`
	Message  string   `json:"message"`
}

func (d Diagnostic) String() string {
	return fmt.Sprintf("%s: %s: %s [%s]", d.Pos, d.Severity, d.Message, d.Code)
}

// Diagnostics is a list with helpers.
type Diagnostics []Diagnostic

// HasErrors reports whether any diagnostic is an error.
func (ds Diagnostics) HasErrors() bool {
	for _, d := range ds {
		if d.Severity == Error {
			return true
		}
	}
	return false
}

func (ds Diagnostics) sorted() Diagnostics {
	out := append(Diagnostics(nil), ds...)
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Pos.Line != out[j].Pos.Line {
			return out[i].Pos.Line < out[j].Pos.Line
		}
		return out[i].Pos.Col < out[j].Pos.Col
	})
	return out
}

// MaxErrors caps the errors reported for one recipe; past it one more
// diagnostic says how many were left out.
const MaxErrors = 100

type diags struct {
	list    Diagnostics
	errors  int
	dropped int
}

func (d *diags) errorf(p Pos, code, format string, args ...any) {
	d.errors++
	if d.errors > MaxErrors {
		d.dropped++
		return
	}
	d.list = append(d.list, Diagnostic{Pos: p, Severity: Error, Code: code, Message: fmt.Sprintf(format, args...)})
}

// full reports whether no more errors will be recorded; callers may skip
// costly work (such as suggestions) then.
func (d *diags) full() bool { return d.errors >= MaxErrors }

// done returns the diagnostics sorted, with a last line for any left out.
func (d *diags) done() Diagnostics {
	out := d.list.sorted()
	if d.dropped > 0 {
		last := Pos{Line: 1, Col: 1}
		if len(out) > 0 {
			last = out[len(out)-1].Pos
		}
		out = append(out, Diagnostic{Pos: last, Severity: Error, Code: CodeTooManyErrors,
			Message: fmt.Sprintf("%d more errors not shown; fix the ones above first", d.dropped)})
	}
	return out
}

func (d *diags) warnf(p Pos, code, format string, args ...any) {
	d.list = append(d.list, Diagnostic{Pos: p, Severity: Warning, Code: code, Message: fmt.Sprintf(format, args...)})
}
