package executor

import (
	"os"
	"strings"
	"testing"
)

// FuzzParseConfig: whatever an executor's YAML file holds, it is parsed or
// refused, never a panic; what it accepts names no field it does not know
// (KnownFields), and no ${…} is left in what it expanded.
func FuzzParseConfig(f *testing.F) {
	if b, err := os.ReadFile("../../examples/executor.yaml"); err == nil {
		f.Add(b)
	}
	f.Add([]byte("id: e\ncontrol_plane: x:1\ntls: {cert: ${A:-~/c}, key: k, ca: c}\nmcp_servers: [{name: n, command: [\"${B}\"]}]\n"))
	f.Add([]byte("id: [\n"))
	f.Add([]byte("unknown: 1\n"))
	getenv := func(n string) string {
		if n == "B" {
			return "bee"
		}
		return ""
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		fc, err := parseConfig(b, "fuzz.yaml", getenv)
		if err != nil {
			return
		}
		for _, s := range []string{fc.TLS.Cert, fc.TLS.Key, fc.TLS.CA} {
			if strings.Contains(s, "${") {
				t.Fatalf("%q was left unexpanded", s)
			}
		}
	})
}

// FuzzExpandVars: text without "${" is itself; a leading ${A} is A's
// value; nothing panics.
func FuzzExpandVars(f *testing.F) {
	for _, s := range []string{"plain $HOME", "${A}", "${A:-d}/x", "${", "a${B:-}b", "${:-}"} {
		f.Add(s)
	}
	getenv := func(n string) string {
		if n == "A" {
			return "aye"
		}
		return ""
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := expandVars(s, getenv)
		if !strings.Contains(s, "${") && (err != nil || got != s) {
			t.Fatalf("expandVars(%q) = %q, %v; want it unchanged", s, got, err)
		}
		if err == nil && strings.HasPrefix(s, "${A}") && !strings.HasPrefix(got, "aye") {
			t.Fatalf("expandVars(%q) = %q: ${A} not expanded", s, got)
		}
	})
}
