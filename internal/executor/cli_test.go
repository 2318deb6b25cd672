package executor

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// The example config in the repository stays valid.
func TestExampleConfigParses(t *testing.T) {
	b, err := os.ReadFile("../../examples/executor.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var fc FileConfig
	dec := yaml.NewDecoder(strings.NewReader(string(b)))
	dec.KnownFields(true)
	if err := dec.Decode(&fc); err != nil {
		t.Fatal(err)
	}
	if fc.ID == "" || fc.ControlPlane == "" || len(fc.MCPServers) == 0 || fc.GrantKeys["grant"] == "" {
		t.Fatalf("%+v", fc)
	}
}

// Issue 16: the example config follows $TOLLGATE_HOME (default
// ~/.tollgate) for its certificates, grant key and notes file, and
// writes nothing into the checkout.
func TestExampleConfigFollowsTollgateHome(t *testing.T) {
	env := func(home string) func(string) string {
		return func(k string) string {
			if k == "TOLLGATE_HOME" {
				return home
			}
			return ""
		}
	}
	fc, err := LoadConfig("../../examples/executor.yaml", env("/srv/tg"))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{fc.TLS.Cert, fc.TLS.Key, fc.TLS.CA, fc.GrantKeys["grant"]} {
		if !strings.HasPrefix(p, "/srv/tg/dev/") {
			t.Errorf("%q is not under $TOLLGATE_HOME/dev", p)
		}
	}
	var notes []string
	for _, m := range fc.MCPServers {
		if m.Name == "notes" {
			notes = m.Command
		}
	}
	if !slices.Contains(notes, "/srv/tg/notes.jsonl") || slices.ContainsFunc(notes, func(a string) bool { return strings.HasPrefix(a, "./") && strings.HasSuffix(a, ".jsonl") }) {
		t.Errorf("notes writes outside $TOLLGATE_HOME: %q", notes)
	}
	home, err := os.UserHomeDir()
	if err != nil {
		t.Skip("no home directory")
	}
	fc, err = LoadConfig("../../examples/executor.yaml", env(""))
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(home, ".tollgate", "dev", "pki", "ca.pem"); fc.TLS.CA != want {
		t.Errorf("without $TOLLGATE_HOME: %q, want %q", fc.TLS.CA, want)
	}
}

func TestExpandVars(t *testing.T) {
	env := func(k string) string { return map[string]string{"A": "x", "B": ""}[k] }
	for in, want := range map[string]string{
		"${A}/f": "x/f", "${B:-d}/f": "d/f", "${A:-d}": "x", "$A and $": "$A and $", "a${A}b${A}c": "axbxc", "": "",
	} {
		if got, err := expandVars(in, env); err != nil || got != want {
			t.Errorf("expandVars(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"${B}", "${A", "${NOPE}/x"} {
		if _, err := expandVars(in, env); err == nil {
			t.Errorf("expandVars(%q): want an error", in)
		}
	}
}
