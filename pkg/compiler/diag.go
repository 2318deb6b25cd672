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

type diags struct{ list Diagnostics }

func (d *diags) errorf(p Pos, code, format string, args ...any) {
	d.list = append(d.list, Diagnostic{Pos: p, Severity: Error, Code: code, Message: fmt.Sprintf(format, args...)})
}

func (d *diags) warnf(p Pos, code, format string, args ...any) {
	d.list = append(d.list, Diagnostic{Pos: p, Severity: Warning, Code: code, Message: fmt.Sprintf(format, args...)})
}
