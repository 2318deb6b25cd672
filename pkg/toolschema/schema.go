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
	"net/url"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/tollgate-dev/tollgate/pkg/limits"
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
	if err := bounded(raw); err != nil {
		return nil, fmt.Errorf("input schema: %w", err)
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

// MaxSchemaBytes bounds an input schema's JSON text. An executor's hello
// carries it, and every compile and run checks args against it.
const MaxSchemaBytes = 256 << 10

// maxExpanded bounds the schema nodes one validation can visit with every
// $ref followed (bounded). Real tool schemas are far below it.
const maxExpanded = 20_000

// bounded refuses a schema whose validation would not end, or not soon:
// jsonschema-go follows $ref with neither a cycle guard (a schema that
// reaches itself through $ref recurses until the goroutine stack
// overflows, which kills the process) nor memo (a chain of allOf pairs
// doubles the work per link). It counts the schema's nodes with each $ref
// replaced by its target, and refuses a cycle, a count over maxExpanded,
// and any reference it cannot follow itself: only "#" and "#/json/pointer"
// into the document, with no nested $id changing what they are relative
// to, and no $dynamicRef or $recursiveRef (whose target depends on the
// path taken). The schema's server still checks its own input.
func bounded(raw []byte) error {
	if len(raw) > MaxSchemaBytes {
		return fmt.Errorf("%d bytes, over the %d taken", len(raw), MaxSchemaBytes)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var root any
	if err := dec.Decode(&root); err != nil {
		return err
	}
	w := &refWalk{root: root, memo: map[string]int{}, visiting: map[string]bool{}}
	_, err := w.cost(root, true)
	return err
}

type refWalk struct {
	root     any
	memo     map[string]int // a $ref target's cost, refs followed
	visiting map[string]bool
}

func (w *refWalk) cost(v any, isRoot bool) (int, error) {
	n := 1
	add := func(c int) error {
		if n += c; n > maxExpanded {
			return fmt.Errorf("with its $refs followed it has more than %d subschemas", maxExpanded)
		}
		return nil
	}
	switch x := v.(type) {
	case map[string]any:
		for _, k := range slices.Sorted(maps.Keys(x)) {
			e := x[k]
			ref, isStr := e.(string)
			switch {
			case (k == "$dynamicRef" || k == "$recursiveRef") && isStr:
				return 0, fmt.Errorf("%s %q is not followed here", k, limits.Short(ref))
			case k == "$id" && isStr && !isRoot:
				return 0, fmt.Errorf("a nested $id (%q) is not followed here", limits.Short(ref))
			case k == "$ref" && isStr:
				c, err := w.ref(ref)
				if err != nil {
					return 0, err
				}
				if err := add(c); err != nil {
					return 0, err
				}
			default:
				c, err := w.cost(e, false)
				if err != nil {
					return 0, err
				}
				if err := add(c); err != nil {
					return 0, err
				}
			}
		}
	case []any:
		for _, e := range x {
			c, err := w.cost(e, false)
			if err != nil {
				return 0, err
			}
			if err := add(c); err != nil {
				return 0, err
			}
		}
	default:
		return 0, nil
	}
	return n, nil
}

// ref is the cost of the $ref target ref.
func (w *refWalk) ref(ref string) (int, error) {
	frag, ok := strings.CutPrefix(ref, "#")
	if !ok || (frag != "" && !strings.HasPrefix(frag, "/")) {
		return 0, fmt.Errorf("$ref %q is not followed here (only #/json/pointer into the schema)", limits.Short(ref))
	}
	ptr, err := url.PathUnescape(frag)
	if err != nil {
		return 0, fmt.Errorf("$ref %q: %w", limits.Short(ref), err)
	}
	if c, ok := w.memo[ptr]; ok {
		return c, nil
	}
	if w.visiting[ptr] {
		return 0, fmt.Errorf("$ref %q refers to itself, directly or through others", limits.Short(ref))
	}
	target, ok := pointer(w.root, ptr)
	if !ok {
		return 0, fmt.Errorf("$ref %q names nothing in the schema", limits.Short(ref))
	}
	w.visiting[ptr] = true
	c, err := w.cost(target, ptr == "")
	delete(w.visiting, ptr)
	if err != nil {
		return 0, err
	}
	w.memo[ptr] = c
	return c, nil
}

// pointer follows a JSON pointer (RFC 6901) from root.
func pointer(root any, ptr string) (any, bool) {
	v := root
	if ptr == "" {
		return v, true
	}
	for _, tok := range strings.Split(ptr[1:], "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		switch x := v.(type) {
		case map[string]any:
			e, ok := x[tok]
			if !ok {
				return nil, false
			}
			v = e
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(x) || strconv.Itoa(i) != tok {
				return nil, false
			}
			v = x[i]
		default:
			return nil, false
		}
	}
	return v, true
}
