package plan

import (
	"maps"
	"regexp"
	"slices"
	"strings"
)

// Ref is one reference to another step's output (or an ask's answer) inside
// args or a prompt: {id} or {id.field.sub}.
type Ref struct {
	ID    string // the step or ask named
	Field string // the dotted path after the id, or ""
}

// String renders the reference as written inside braces.
func (r Ref) String() string {
	if r.Field == "" {
		return r.ID
	}
	return r.ID + "." + r.Field
}

const identPattern = `[A-Za-z_][A-Za-z0-9_-]*`
const refPattern = identPattern + `(?:\.[A-Za-z0-9_-]+)*`

var identRe = regexp.MustCompile(`^` + identPattern + `$`)

// IsName reports whether s can be read by a reference as {s}: a letter or
// '_', then letters, digits, '_' and '-'.
func IsName(s string) bool { return identRe.MatchString(s) }

// refGroup matches "{a}", "{a.b}" and "{a, b.c}". Braces holding anything
// else (a JSON object, prose with spaces) are literal text.
var refGroup = regexp.MustCompile(`\{\s*(` + refPattern + `(?:\s*,\s*` + refPattern + `)*)\s*\}`)

// RefSpan is a reference group and its byte offsets in the scanned text.
type RefSpan struct {
	Start, End int // the braces included
	Refs       []Ref
}

// ScanRefs returns every reference group in s in order.
func ScanRefs(s string) []RefSpan {
	if !strings.Contains(s, "{") {
		return nil
	}
	var out []RefSpan
	for _, m := range refGroup.FindAllStringSubmatchIndex(s, -1) {
		inner := s[m[2]:m[3]]
		span := RefSpan{Start: m[0], End: m[1]}
		for _, part := range strings.Split(inner, ",") {
			span.Refs = append(span.Refs, ParseRef(strings.TrimSpace(part)))
		}
		out = append(out, span)
	}
	return out
}

// Refs returns every reference in s in order of appearance.
func Refs(s string) []Ref {
	var out []Ref
	for _, sp := range ScanRefs(s) {
		out = append(out, sp.Refs...)
	}
	return out
}

// ParseRef splits "id.field.sub" into its id and field path. It does not
// validate; callers check that the id names something.
func ParseRef(s string) Ref {
	id, field, _ := strings.Cut(s, ".")
	return Ref{ID: id, Field: field}
}

// ArgRefs returns the references inside the string values of a JSON args
// object (keys are never references).
func ArgRefs(args map[string]any) []Ref {
	var out []Ref
	var walk func(v any)
	walk = func(v any) {
		switch t := v.(type) {
		case string:
			out = append(out, Refs(t)...)
		case map[string]any:
			for _, k := range slices.Sorted(maps.Keys(t)) {
				walk(t[k])
			}
		case []any:
			for _, e := range t {
				walk(e)
			}
		}
	}
	walk(args)
	return out
}
