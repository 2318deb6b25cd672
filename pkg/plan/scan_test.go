package plan

import (
	"slices"
	"testing"
)

// The fast path and the decoding path agree: on every input where the scan
// claims canonical form, the canonical re-encoding is byte-identical and
// the references found are the same.
func FuzzCanonicalScan(f *testing.F) {
	for _, s := range []string{`{}`, `{"a":1,"b":"{x}"}`, `{"b":1,"a":2}`, `{"a":[1,{"c":"{y.z}"}],"b":null}`,
		`{"a":"\u007bx}"}`, `{"a":-0.5e+3}`, `{ "a":1}`, `{"a":1}x`, `{"a":01}`, `{"a":"é{x}"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		var fast []Ref
		if !canonicalScan(raw, func(s string) { fast = append(fast, Refs(s)...) }) {
			return
		}
		m, err := DecodeObject(raw)
		if err != nil {
			t.Fatalf("scan accepted %q, decoder refuses: %v", raw, err)
		}
		if got := AppendCanonical(nil, m); string(got) != string(raw) {
			t.Fatalf("scan called %q canonical, encoder writes %q", raw, got)
		}
		slow := ArgRefs(m)
		key := func(rs []Ref) []string {
			var out []string
			for _, r := range rs {
				out = append(out, r.String())
			}
			slices.Sort(out)
			return out
		}
		if !slices.Equal(key(fast), key(slow)) {
			t.Fatalf("refs differ: %v vs %v", fast, slow)
		}
	})
}
