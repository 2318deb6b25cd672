package controlplane

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/examples"
)

// --dev keeps a dev policy the user edited, and says when the copy in use
// is not this release's: a copy from an older release lacks rows this
// release's examples need (the reviewer rows for gates from code), and
// nothing else would tell them why a gate is refused.
func TestDevSaysWhenItsPolicyCopyIsNotThisReleases(t *testing.T) {
	for _, tc := range []struct {
		name, existing, says string
	}{
		{"fresh", "", "(edit it: reloaded within a second)"},
		{"this release's", string(examples.Policy), "(edit it: reloaded within a second)"},
		{"an older copy", "p, role:finance, acme, payments.pay, 100\n", "your copy, not this release's dev policy: delete it"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			home := t.TempDir()
			if tc.existing != "" {
				if err := os.MkdirAll(filepath.Join(home, "dev"), 0o700); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(home, "dev", "policy.csv"), []byte(tc.existing), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			var out bytes.Buffer
			var o Options
			fs := flag.NewFlagSet("t", flag.ContinueOnError)
			o.register(fs)
			if err := fs.Parse([]string{"--dev", "--listen", "127.0.0.1:0"}); err != nil {
				t.Fatal(err)
			}
			o.Home = home
			if _, _, err := setUpDev(MainConfig{Stdout: &out, Stderr: &out}, &o, defaultDev()); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(out.String(), tc.says) {
				t.Errorf("banner lacks %q:\n%s", tc.says, out.String())
			}
			got, _ := os.ReadFile(filepath.Join(home, "dev", "policy.csv"))
			if want := cmpOr(tc.existing, string(examples.Policy)); string(got) != want {
				t.Errorf("the policy copy was changed")
			}
		})
	}
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
