package authz

import (
	"bytes"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Item 16 (issue 13): an empty policy file, or one holding only comments or
// only people and no rule that lets anyone decide anything, is not a valid
// policy at startup unless the operator says so (AllowEmpty).
func TestItem16_EmptyPolicyFileIsRefusedAtStartup(t *testing.T) {
	for name, content := range map[string]string{
		"empty":          "",
		"comments only":  "# p, role:finance, acme, payments.pay, 500000\n\n",
		"no permissions": "g, alice, role:finance, acme, _, _\n",
	} {
		path := writeFile(t, filepath.Join(t.TempDir(), "policy.csv"), content)
		if _, err := New(Config{PolicyPath: path}); !errors.Is(err, ErrEmptyPolicy) {
			t.Errorf("%s policy at startup: want ErrEmptyPolicy, got %v", name, err)
		}
		a, err := New(Config{PolicyPath: path, AllowEmpty: true})
		if err != nil {
			t.Errorf("%s policy with AllowEmpty: %v", name, err)
			continue
		}
		if d, _ := a.Authorize(t.Context(), Request{Actor: "alice", Matter: pay(1)}); d.Allowed {
			t.Errorf("%s policy allowed alice", name)
		}
	}
}

// Item 16 (issue 13): a reload that would drop every rule (an emptied or
// truncated file) or more than MaxDrop of them keeps the last good policy
// in force, logs an error, and shows in Health until a valid file comes.
func TestItem16_ReloadThatDropsMostRulesKeepsTheLastGoodPolicy(t *testing.T) {
	var logs bytes.Buffer
	path := copyPolicy(t, "rules.csv")
	a, err := New(Config{PolicyPath: path, Now: newClock(t0).Now, Log: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	orig, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	v0 := a.Version()
	allowed := func() bool {
		d, _ := a.Authorize(t.Context(), Request{Actor: "carol", Matter: pay(1)})
		return d.Allowed && d.PolicyVersion == v0
	}
	lines := strings.SplitAfter(string(orig), "\n")
	for i, bad := range []string{
		"",                                  // emptied
		"# nothing here yet\n",              // a comment only
		strings.Join(lines[:6], ""),         // truncated at a line: 5 of 26 rules
		string(orig[:len(orig)*2/5]) + "\n", // truncated mid-file
	} {
		writeFile(t, path, bad)
		err := a.Reload()
		if err == nil {
			t.Fatalf("bad file %d was loaded; version %s", i, a.Version())
		}
		if a.Version() != v0 || !allowed() {
			t.Fatalf("bad file %d: the last good policy is no longer in force (%v)", i, err)
		}
		if h := a.Health(); !h.Stale || h.Refused != uint64(i+1) {
			t.Fatalf("bad file %d: health %+v, want stale and %d refused", i, h, i+1)
		}
	}
	if !strings.Contains(logs.String(), "level=ERROR") || !strings.Contains(logs.String(), "current policy stays") {
		t.Fatalf("a refused reload is logged as an error:\n%s", logs.String())
	}
	// Dropping a few rules is an ordinary edit.
	writeFile(t, path, strings.Replace(string(orig), "g, erin,  role:finance,    acme, _, _\n", "", 1))
	if err := a.Reload(); err != nil || a.Version() == v0 {
		t.Fatalf("a small edit: %v", err)
	}
	if h := a.Health(); h.Stale {
		t.Fatalf("a valid file clears the state: %+v", h)
	}
}

// Item 16: with AllowEmpty an operator may empty the policy on purpose.
func TestItem16_AllowEmptyLetsAReloadEmptyThePolicy(t *testing.T) {
	path := copyPolicy(t, "rules.csv")
	a, err := New(Config{PolicyPath: path, Now: newClock(t0).Now, AllowEmpty: true})
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, path, "")
	if err := a.Reload(); err != nil {
		t.Fatalf("emptying with AllowEmpty: %v", err)
	}
	if d, _ := a.Authorize(t.Context(), Request{Actor: "carol", Matter: pay(1)}); d.Allowed {
		t.Fatal("the empty policy is in force")
	}
}

// The decision itself is a pure function of the two rule sets.
func TestGuardAccept(t *testing.T) {
	rule := func(s string) []string { return strings.Split(s, ",") }
	cur := [][]string{rule("p,role:a,acme,x.y,-"), rule("p2,acme,x.y,1,none,-"), rule("g,al,role:a,acme,_,_"), rule("g,bo,role:a,acme,_,_")}
	for _, tc := range []struct {
		name  string
		g     Guard
		cur   [][]string
		next  [][]string
		want  error
		inMsg string
	}{
		{"startup, rules", Guard{}, nil, cur, nil, ""},
		{"startup, empty", Guard{}, nil, nil, ErrEmptyPolicy, "no p rule"},
		{"startup, empty allowed", Guard{AllowEmpty: true}, nil, nil, nil, ""},
		{"same", Guard{}, cur, cur, nil, ""},
		{"drops half", Guard{}, cur, cur[:2], nil, ""},
		{"drops three of four", Guard{}, cur, cur[:1], ErrPolicyShrank, "3 of 4"},
		{"drops three of four, max 0.8", Guard{MaxDrop: 0.8}, cur, cur[:1], nil, ""},
		{"emptied", Guard{MaxDrop: 1}, cur, nil, ErrEmptyPolicy, ""},
		{"emptied, allowed", Guard{AllowEmpty: true}, cur, nil, nil, ""},
		{"replaced wholesale", Guard{}, cur, [][]string{rule("p,role:b,acme,x.y,-"), rule("p2,acme,x.y,1,none,-")}, ErrPolicyShrank, "3 of 4"},
	} {
		err := tc.g.Accept(tc.cur, tc.next)
		if !errors.Is(err, tc.want) || (tc.want == nil) != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.inMsg)) {
			t.Errorf("%s: got %v, want %v (%q)", tc.name, err, tc.want, tc.inMsg)
		}
	}
}
