package toolschema

import (
	"fmt"
	"strings"
	"testing"
)

// TestParseBounded: a schema comes from an executor's hello, so it must
// not be able to crash or stall the control plane that checks args
// against it. jsonschema-go follows $ref without a cycle guard (a
// self-reference overflows the goroutine stack, which kills the process)
// and without memo (a chain of allOf pairs doubles the work per link).
func TestParseBounded(t *testing.T) {
	var chain []string
	const links = 40 // 2^40 validations if accepted
	for i := range links {
		chain = append(chain, fmt.Sprintf(`"d%d":{"allOf":[{"$ref":"#/$defs/d%d"},{"$ref":"#/$defs/d%d"}]}`, i, i+1, i+1))
	}
	chain = append(chain, fmt.Sprintf(`"d%d":{"type":"string"}`, links))
	bomb := `{"type":"object","properties":{"x":{"$ref":"#/$defs/d0"}},"$defs":{` + strings.Join(chain, ",") + `}}`
	huge := `{"type":"object","description":"` + strings.Repeat("x", MaxSchemaBytes) + `"}`
	for name, raw := range map[string]string{
		"self reference":    `{"type":"object","properties":{"x":{"$ref":"#/properties/x"}}}`,
		"root reference":    `{"type":"object","properties":{"x":{"allOf":[{"$ref":"#"}]}}}`,
		"mutual reference":  `{"properties":{"x":{"$ref":"#/$defs/a"}},"$defs":{"a":{"$ref":"#/$defs/b"},"b":{"anyOf":[{"$ref":"#/$defs/a"}]}}}`,
		"doubling chain":    bomb,
		"too large":         huge,
		"anchor reference":  `{"properties":{"x":{"$ref":"#a"}},"$defs":{"a":{"$anchor":"a","type":"string"}}}`,
		"dynamic reference": `{"$dynamicAnchor":"n","properties":{"x":{"$dynamicRef":"#n"}}}`,
	} {
		t.Run(name, func(t *testing.T) {
			if s, err := Parse([]byte(raw)); err == nil {
				t.Fatalf("accepted (a Check would not return): %v", s != nil)
			}
		})
	}
	// Shared definitions referred to many times are fine: each costs its
	// size once per use, and that stays small.
	s, err := Parse([]byte(`{"type":"object","properties":{"a":{"$ref":"#/$defs/id"},"b":{"$ref":"#/$defs/id"},
		"c":{"type":"array","items":{"$ref":"#/$defs/id"}}},"$defs":{"id":{"type":"string","pattern":"^[a-z]+$"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if ps := s.Check([]byte(`{"a":"x","b":"Y","c":["z"]}`), nil); len(ps) != 1 || ps[0].Field != "b" {
		t.Fatalf("shared $defs: %v", ps)
	}
}
