package plan

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"unicode/utf8"
)

// Object is a JSON object held as bytes (step args, probe args). It always
// encodes canonically — keys sorted, no insignificant whitespace, numbers as
// written, no HTML escaping — so a plan's JSON, and so its digest, does not
// depend on how the object was first written.
type Object []byte

// MarshalJSON writes the object canonically. Empty means {}.
func (o Object) MarshalJSON() ([]byte, error) {
	if len(bytes.TrimSpace(o)) == 0 {
		return []byte("{}"), nil
	}
	if canonicalScan(o, nil) {
		return o, nil
	}
	v, err := DecodeObject(o)
	if err != nil {
		return nil, err
	}
	return AppendCanonical(nil, v), nil
}

// UnmarshalJSON keeps a copy of the bytes; it must be an object.
func (o *Object) UnmarshalJSON(b []byte) error {
	if t := bytes.TrimSpace(b); len(t) == 0 || t[0] != '{' {
		if string(t) == "null" {
			*o = nil
			return nil
		}
		return fmt.Errorf("not a JSON object")
	}
	*o = append((*o)[:0], b...)
	return nil
}

// ObjectRefs returns the references inside the string values of raw, a
// JSON object (keys are never references).
func ObjectRefs(raw []byte) ([]Ref, error) {
	var out []Ref
	if canonicalScan(raw, func(s string) { out = append(out, Refs(s)...) }) {
		return out, nil
	}
	m, err := DecodeObject(raw)
	if err != nil {
		return nil, err
	}
	return ArgRefs(m), nil
}

// DecodeObject reads raw as a JSON object with numbers kept as
// json.Number. Empty means {}.
func DecodeObject(raw []byte) (map[string]any, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return map[string]any{}, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("not a JSON object: %w", err)
	}
	if m == nil {
		return nil, fmt.Errorf("not a JSON object")
	}
	if dec.More() {
		return nil, fmt.Errorf("not a JSON object: data after the closing brace")
	}
	return m, nil
}

// AppendCanonicalObject appends the canonical JSON of raw, a JSON object,
// and reports whether raw is one (if not, dst is returned unchanged). An
// object already in canonical form is copied without being decoded.
func AppendCanonicalObject(dst []byte, raw []byte) ([]byte, bool) {
	if canonicalScan(raw, nil) {
		return append(dst, raw...), true
	}
	m, err := DecodeObject(raw)
	if err != nil {
		return dst, false
	}
	return AppendCanonical(dst, m), true
}

// AppendCanonical appends the canonical JSON of v, a value as decoded by
// DecodeObject (maps, slices, strings, json.Number, bools, nil).
func AppendCanonical(dst []byte, v any) []byte {
	switch t := v.(type) {
	case nil:
		return append(dst, "null"...)
	case bool:
		return strconv.AppendBool(dst, t)
	case json.Number:
		return append(dst, t...)
	case float64:
		return strconv.AppendFloat(dst, t, 'g', -1, 64)
	case int:
		return strconv.AppendInt(dst, int64(t), 10)
	case int64:
		return strconv.AppendInt(dst, t, 10)
	case string:
		return appendString(dst, t)
	case []any:
		dst = append(dst, '[')
		for i, e := range t {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = AppendCanonical(dst, e)
		}
		return append(dst, ']')
	case map[string]any:
		dst = append(dst, '{')
		for i, k := range slices.Sorted(maps.Keys(t)) {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendString(dst, k)
			dst = append(dst, ':')
			dst = AppendCanonical(dst, t[k])
		}
		return append(dst, '}')
	default:
		b, err := json.Marshal(t)
		if err != nil {
			return append(dst, "null"...)
		}
		return append(dst, b...)
	}
}

// appendString writes s as a JSON string, escaping only what JSON requires.
func appendString(dst []byte, s string) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				dst = append(dst, '\\', c)
			case c == '\n':
				dst = append(dst, '\\', 'n')
			case c == '\r':
				dst = append(dst, '\\', 'r')
			case c == '\t':
				dst = append(dst, '\\', 't')
			case c < 0x20:
				dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			default:
				dst = append(dst, c)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, `\ufffd`...)
		} else {
			dst = append(dst, s[i:i+size]...)
		}
		i += size
	}
	return append(dst, '"')
}
