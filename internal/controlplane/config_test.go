package controlplane

import (
	"context"
	"flag"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// Every row of the settings table reaches its field from the config file,
// and from its flag; the flag wins; lists add up. Until the table, three
// keys (deadline_pass, drain_timeout, lease_ttl) were accepted in the file
// and then ignored.
func TestSettingsTableDrivesFlagsAndFile(t *testing.T) {
	var probe Options
	rows := probe.settings()
	keys, flags := map[string]bool{}, map[string]bool{}
	for _, s := range rows {
		if keys[s.key] || (s.flag != "" && flags[s.flag]) {
			t.Fatalf("setting %s/%s named twice", s.key, s.flag)
		}
		keys[s.key], flags[s.flag] = true, true
	}
	// The table covers every field of Options.
	if n := reflect.TypeOf(Options{}).NumField(); n != len(rows) {
		t.Fatalf("Options has %d fields, the table %d rows", n, len(rows))
	}
	file := `deadline_pass: 3s
drain_timeout: 4s
lease_ttl: 5s
listen: 127.0.0.1:1
domain: from-file
catalogs: [b.yaml]
webhooks:
  - name: pager
    url: http://127.0.0.1:9/hook
    secret_file: s
`
	path := filepath.Join(t.TempDir(), "cp.yaml")
	if err := os.WriteFile(path, []byte(file), 0o600); err != nil {
		t.Fatal(err)
	}
	var o Options
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	o.register(fs)
	if err := fs.Parse([]string{"--domain", "from-flag", "--catalog", "a.yaml"}); err != nil {
		t.Fatal(err)
	}
	if err := o.load(path, fs); err != nil {
		t.Fatal(err)
	}
	if o.DeadlinePass != 3*time.Second || o.DrainTimeout != 4*time.Second || o.LeaseTTL != 5*time.Second {
		t.Errorf("durations from the file: deadline_pass %v, drain_timeout %v, lease_ttl %v", o.DeadlinePass, o.DrainTimeout, o.LeaseTTL)
	}
	if o.Listen != "127.0.0.1:1" || o.Domain != "from-flag" {
		t.Errorf("listen %q (want the file's), domain %q (want the flag's)", o.Listen, o.Domain)
	}
	if !reflect.DeepEqual(o.Catalogs, []string{"a.yaml", "b.yaml"}) {
		t.Errorf("catalogs %v: want the flag's then the file's", o.Catalogs)
	}
	if len(o.Webhooks) != 1 || o.Webhooks[0].Name != "pager" || o.Webhooks[0].SecretFile != "s" {
		t.Errorf("webhooks %+v", o.Webhooks)
	}
	// Defaults come from the table when neither says anything.
	if o.TrustDomain == "" || o.TraceSample != 1 || o.AskExpiry == 0 {
		t.Errorf("defaults not applied: trust_domain %q, trace_sample %v, ask_expiry %v", o.TrustDomain, o.TraceSample, o.AskExpiry)
	}
}

// A key the table does not know fails the start, naming its line.
func TestConfigFileUnknownKeyNamesItsLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cp.yaml")
	if err := os.WriteFile(path, []byte("listen: x\nlese_ttl: 5s\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var o Options
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	o.register(fs)
	err := o.load(path, fs)
	if err == nil || !strings.Contains(err.Error(), "line 2") || !strings.Contains(err.Error(), `"lese_ttl"`) {
		t.Fatalf("unknown key: %v", err)
	}
	if err := os.WriteFile(path, []byte("lease_ttl: soon\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := o.load(path, fs); err == nil || !strings.Contains(err.Error(), "line 1") || !strings.Contains(err.Error(), "lease_ttl") {
		t.Fatalf("bad value: %v", err)
	}
}

// A replica's name travels in hints and store keys: one that could break
// them is refused at start, with the rule.
func TestReplicaNameIsChecked(t *testing.T) {
	for _, bad := range []string{"cp a", "cp\na", strings.Repeat("x", 65), "ü"} {
		err := Run(context.Background(), []string{"--dev", "--replica", bad}, MainConfig{Stdout: io.Discard, Stderr: io.Discard, Getenv: func(string) string { return "" }})
		if err == nil || !strings.Contains(err.Error(), "a replica's name is") {
			t.Errorf("--replica %q: %v", bad, err)
		}
	}
}
