// Package toolschema checks a tool call's args against the tool's MCP input
// JSON Schema, so a call that cannot run is refused before anyone is asked
// to approve it: by the compiler on the args a recipe writes literally, and
// by the engine on the args resolved when an ask opens. It names the field
// at fault and why. It does no I/O: a schema that refers to another
// document ($ref to a URL) is refused when parsed, never fetched.
//
// Validation is github.com/google/jsonschema-go's (what the MCP Go SDK
// validates tool input with), so what passes here is what the tool's
// server accepts.
package toolschema

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
)

// Schema is one tool's input schema, parsed and resolved. It is immutable
// and safe to share.
type Schema struct {
	raw   string
	props map[string]bool
	// closed: additionalProperties is false and no patternProperties, so a
	// property the schema does not name is refused.
	closed   bool
	required []string
	// full validates a whole call; probe validates one property at a time
	// (the root's required, additionalProperties and combinators dropped),
	// so a problem is put on the field it is about.
	full, probe *jsonschema.Resolved
}

// Problem is one reason a call's args do not fit the schema. Field is the
// top-level property at fault ("" when the schema refuses the call as a
// whole).
type Problem struct {
	Kind   Kind
	Field  string
	Reason string
}

// Kind says what is wrong, so a caller can say what to do about it.
type Kind int

// Kinds of problem.
const (
	Invalid Kind = iota // the value (or the call) does not fit
	Missing             // a required field is absent
	Unknown             // a field the schema does not take (additionalProperties: false)
)

func (p Problem) String() string {
	if p.Field == "" {
		return p.Reason
	}
	return fmt.Sprintf("%s: %s", p.Field, p.Reason)
}

// Problems is what Check found, in field order; nil when the args fit.
type Problems []Problem

func (ps Problems) Error() string {
	parts := make([]string, len(ps))
	for i, p := range ps {
		parts[i] = p.String()
	}
	return strings.Join(parts, "; ")
}

// Parse reads an input schema given as JSON text. Empty text (or JSON
// null) is no schema: nil, nil.
func Parse(raw []byte) (*Schema, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(raw, &top); err != nil {
		return nil, fmt.Errorf("input schema is not a JSON object: %w", err)
	}
	full, root, err := resolve(raw)
	if err != nil {
		return nil, err
	}
	for _, k := range []string{"required", "additionalProperties", "unevaluatedProperties", "minProperties", "maxProperties",
		"dependentRequired", "dependentSchemas", "dependencies", "allOf", "anyOf", "oneOf", "not", "if", "then", "else"} {
		delete(top, k)
	}
	probeRaw, err := json.Marshal(top)
	if err != nil {
		return nil, err
	}
	probe, _, err := resolve(probeRaw)
	if err != nil {
		return nil, err
	}
	s := &Schema{raw: string(raw), props: map[string]bool{}, required: slices.Clone(root.Required), full: full, probe: probe}
	for k := range root.Properties {
		s.props[k] = true
	}
	if ap := root.AdditionalProperties; ap != nil && ap.Not != nil && isEmpty(ap.Not) && len(root.PatternProperties) == 0 {
		s.closed = true
	}
	return s, nil
}

func resolve(raw []byte) (*jsonschema.Resolved, *jsonschema.Schema, error) {
	var root jsonschema.Schema
	if err := json.Unmarshal(raw, &root); err != nil {
		return nil, nil, fmt.Errorf("input schema: %w", err)
	}
	// No loader: a remote $ref fails here rather than being fetched.
	r, err := root.Resolve(nil)
	if err != nil {
		return nil, nil, fmt.Errorf("input schema: %w", err)
	}
	return r, &root, nil
}

// isEmpty reports whether s is the empty schema {} (so {"not": {}} is how
// jsonschema-go reads `false`).
func isEmpty(s *jsonschema.Schema) bool { return reflect.ValueOf(*s).IsZero() }

// JSON is the schema as it was given.
func (s *Schema) JSON() string {
	if s == nil {
		return ""
	}
	return s.raw
}

// Check reports what in args (a JSON object) the schema refuses. open, if
// not nil, names the fields whose values are not known yet (they read an
// earlier step): they count as present, their values go unchecked, and
// the call as a whole is then checked only field by field. A nil Schema
// accepts everything.
func (s *Schema) Check(args []byte, open func(field string) bool) Problems {
	if s == nil {
		return nil
	}
	var m map[string]any
	if len(bytes.TrimSpace(args)) == 0 {
		m = map[string]any{}
	} else if err := json.Unmarshal(args, &m); err != nil || m == nil {
		return Problems{{Reason: "the args are not a JSON object"}}
	}
	var out Problems
	for _, f := range s.required {
		if _, ok := m[f]; !ok {
			out = append(out, Problem{Kind: Missing, Field: f, Reason: "required, and missing"})
		}
	}
	partial := false
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if s.closed && !s.props[k] {
			out = append(out, Problem{Kind: Unknown, Field: k, Reason: fmt.Sprintf("not an argument the tool takes (it takes %s)", strings.Join(slices.Sorted(maps.Keys(s.props)), ", "))})
			continue
		}
		if open != nil && open(k) {
			partial = true
			continue
		}
		if err := s.probe.Validate(map[string]any{k: m[k]}); err != nil {
			out = append(out, Problem{Field: k, Reason: innermost(err)})
		}
	}
	if len(out) == 0 && !partial {
		if err := s.full.Validate(m); err != nil {
			out = append(out, Problem{Reason: innermost(err)})
		}
	}
	return out
}

// innermost is the validator's own reason, without the "validating …:"
// prefixes each enclosing schema adds.
func innermost(err error) string {
	for {
		next := errors.Unwrap(err)
		if next == nil {
			return err.Error()
		}
		err = next
	}
}
