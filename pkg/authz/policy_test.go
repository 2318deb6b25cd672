package authz

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const validRows = `p, role:finance, acme, payments.pay, 500000
p2, acme, payments.pay, 1, requester+agent_owner, INR
g, alice, role:finance, acme, _, _
`

func TestParsePolicyRejects(t *testing.T) {
	if _, err := parsePolicy([]byte(validRows)); err != nil {
		t.Fatalf("the valid base policy: %v", err)
	}
	for _, c := range []struct{ name, extra, want string }{
		{"a grouping row without its window (trap 6)", "g, bob, role:finance, acme", "a g row has 6 fields"},
		{"a grouping row with one window field", "g, bob, role:finance, acme, _", "a g row has 6 fields"},
		{"an empty field", "g, bob, role:finance, acme, , _", "field 5 is empty"},
		{"a rule for a person", "p, bob, acme, notes.store, -", "granted to roles only"},
		{"a rule for the bare prefix", "p, role:, acme, payments.pay, 1", "granted to roles only"},
		{"a limit with an exponent", "p, role:cfo, acme, payments.pay, 1e6", "limit"},
		{"a limit with a sign", "p, role:cfo, acme, payments.pay, +5", "limit"},
		{"a negative limit", "p, role:cfo, acme, payments.pay, -5", "limit"},
		{"a fractional limit", "p, role:cfo, acme, payments.pay, 5.00", "limit"},
		{"a limit beyond int64", "p, role:cfo, acme, payments.pay, 9223372036854775808", "limit"},
		{"no limit on an action with an amount", "p, role:cfo, acme, payments.pay, -", "needs a limit"},
		{"a limit on an action without an amount", "p, role:m, acme, notes.store, 5\np2, acme, notes.store, 1, none, -", "limit must be -"},
		{"a rule without a floor", "p, role:m, acme, notes.store, -", "no floor"},
		{"a second floor", "p2, acme, payments.pay, 2, requester, INR", "a second floor"},
		{"a second rule for one role", "p, role:finance, acme, payments.pay, 600000", "two rules"},
		{"a repeated row", "g, alice, role:finance, acme, _, _", "repeats line 3"},
		{"quorum 0", "p2, acme, x.y, 0, none, -", "quorum"},
		{"quorum not a number", "p2, acme, x.y, two, none, -", "quorum"},
		{"an unknown separation", "p2, acme, x.y, 1, boss, -", "separation"},
		{"a repeated separation", "p2, acme, x.y, 1, requester+requester, -", "separation"},
		{"a bad currency", "p2, acme, x.y, 1, none, rupees", "currency"},
		{"an action that is not server.tool", "p2, acme, pay, 1, none, -", "server.tool"},
		{"a wildcard server", "p2, acme, *.pay, 1, none, -", "server.tool"},
		{"a wildcard inside a tool", "p2, acme, payments.p*y, 1, none, -", "server.tool"},
		{"a bad time", "g, bob, alice, acme, 2026-09-01, _", "RFC 3339"},
		{"an empty window", "g, bob, alice, acme, 2026-09-02T00:00:00Z, 2026-09-01T00:00:00Z", "empty"},
		{"a self link", "g, bob, bob, acme, _, _", "itself"},
		{"a role holding a person's authority", "g, role:finance, alice, acme, _, _", "cannot hold a person's authority"},
		{"an unknown row type", "p3, acme, x.y", "unknown row type"},
		{"a deny effect column", "p, role:finance, acme, notes.store, -, deny", "a p row has 5 fields"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := parsePolicy([]byte(validRows + c.extra + "\n"))
			if !errors.Is(err, ErrPolicy) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want ErrPolicy mentioning %q", err, c.want)
			}
		})
	}
}

func TestVersion(t *testing.T) {
	model := []byte(defaultModel)
	version := func(t *testing.T, src string) string {
		t.Helper()
		p, err := parsePolicy([]byte(src))
		if err != nil {
			t.Fatal(err)
		}
		return policyVersion(model, p.rows)
	}
	base := version(t, validRows)
	if len(base) != 64 || strings.Trim(base, "0123456789abcdef") != "" {
		t.Fatalf("version %q is not hex SHA-256", base)
	}
	lines := strings.Split(strings.TrimSpace(validRows), "\n")
	same := "# a comment\n\n" + lines[2] + "\n" + strings.ReplaceAll(lines[1], ", ", ",") + "\n   " + lines[0] + "\n"
	if v := version(t, same); v != base {
		t.Errorf("comments, spacing and order changed the version")
	}
	if v := version(t, strings.Replace(validRows, "500000", "500001", 1)); v == base {
		t.Errorf("a limit change kept the version")
	}
	if v := version(t, validRows+"g, bob, alice, acme, _, _\n"); v == base {
		t.Errorf("a new row kept the version")
	}
	p, _ := parsePolicy([]byte(validRows))
	if policyVersion(append([]byte("# edited\n"), model...), p.rows) == base {
		t.Errorf("a model change kept the version")
	}
	// Fields are length-prefixed: moving a comma changes the version.
	a := policyVersion(model, [][]string{{"g", "ab", "c", "d", "_", "_"}})
	b := policyVersion(model, [][]string{{"g", "a", "bc", "d", "_", "_"}})
	if a == b {
		t.Errorf("field boundaries do not count")
	}
}

// Every model that would answer a canary wrongly is refused, and the
// current policy stays.
func TestModelSelfCheck(t *testing.T) {
	if err := selfCheck([]byte(defaultModel)); err != nil {
		t.Fatalf("the default model fails its self-check: %v", err)
	}
	const sodReq = ` && !(separate(r.dom, r.act, "requester") && g(r.sub, r.requester, r.dom))`
	const sodOwner = ` && !(separate(r.dom, r.act, "agent_owner") && g(r.sub, r.owner, r.dom))`
	for _, c := range []struct{ name, old, new string }{
		{"no separation from the requester", sodReq, ""},
		{"no separation from the agent owner", sodOwner, ""},
		{"no limit", " && withinLimit(r.amt, p.limit)", ""},
		{"no role check", " && g(r.sub, p.sub, r.dom)", ""},
		{"no domain check", "r.dom == p.dom && ", ""},
		{"separation ignoring delegates", "g(r.sub, r.requester, r.dom)", "r.sub == r.requester"},
		{"allow unless denied", "e = some(where (p.eft == allow))", "e = !some(where (p.eft == deny))"},
		{"reordered request", "r = sub, dom, act, amt, requester, owner", "r = sub, dom, act, amt, owner, requester"},
		{"no window on roles", "g = _, _, _, (_, _)", "g = _, _, _"},
		{"a syntax error", "[matchers]", "[matchers"},
	} {
		t.Run(c.name, func(t *testing.T) {
			// The last occurrence: the header comment quotes the matcher.
			i := strings.LastIndex(defaultModel, c.old)
			if i < 0 {
				t.Fatalf("%q not in the default model", c.old)
			}
			bad := defaultModel[:i] + c.new + defaultModel[i+len(c.old):]
			if err := selfCheck([]byte(bad)); err == nil {
				t.Fatal("self-check passed")
			}
			dir := t.TempDir()
			mp := writeFile(t, filepath.Join(dir, "model.conf"), defaultModel)
			a, err := New(Config{ModelPath: mp, PolicyPath: copyPolicy(t, "rules.csv"), Now: newClock(t0).Now})
			if err != nil {
				t.Fatal(err)
			}
			v := a.Version()
			writeFile(t, mp, bad)
			if err := a.Reload(); !errors.Is(err, ErrPolicy) {
				t.Fatalf("Reload = %v, want ErrPolicy", err)
			}
			if a.Version() != v {
				t.Fatal("a refused model changed the version")
			}
			d, err := a.Authorize(t.Context(), Request{Actor: "alice", Matter: func() Matter { m := pay(1); m.Requester = "alice"; return m }()})
			if err != nil || d.Allowed {
				t.Fatalf("self-approval after a refused reload: allowed=%v err=%v", d.Allowed, err)
			}
		})
	}
}

func TestNewRefusesBadInput(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		name string
		cfg  Config
	}{
		{"no policy path", Config{}},
		{"a missing policy file", Config{PolicyPath: filepath.Join(dir, "nope.csv")}},
		{"a missing model file", Config{PolicyPath: copyPolicy(t, "rules.csv"), ModelPath: filepath.Join(dir, "nope.conf")}},
		{"an invalid policy", Config{PolicyPath: writeFile(t, filepath.Join(dir, "bad.csv"), "g, alice, role:finance, acme\n")}},
	} {
		if a, err := New(c.cfg); err == nil || a != nil {
			t.Errorf("%s: New = %v, %v; want an error", c.name, a, err)
		}
	}
}

// A bad file keeps the old policy; fixing it loads the new one.
func TestReloadKeepsThePolicyOnError(t *testing.T) {
	a := newAuthz(t, "rules.csv", newClock(t0))
	path := a.cfg.PolicyPath
	good, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	v0 := a.Version()
	if err := a.Reload(); err != nil || a.Version() != v0 {
		t.Fatalf("an unchanged file: err=%v, version changed=%v", err, a.Version() != v0)
	}
	// Drop alice's finance role but break a row: nothing of it applies.
	broken := strings.Replace(string(good), "g, alice, role:finance,    acme, _, _\n", "", 1) + "g, zed, role:finance, acme\n"
	writeFile(t, path, broken)
	for range 2 { // the second time from the remembered failure
		if err := a.Reload(); !errors.Is(err, ErrPolicy) {
			t.Fatalf("Reload = %v, want ErrPolicy", err)
		}
	}
	if a.Version() != v0 {
		t.Fatal("a bad file changed the version")
	}
	if d, _ := a.Authorize(t.Context(), Request{Actor: "alice", Matter: pay(1)}); !d.Allowed {
		t.Fatalf("the old policy is not in force: %s", d.Reason)
	}
	fixed := strings.Replace(string(good), "g, alice, role:finance,    acme, _, _\n", "", 1)
	writeFile(t, path, fixed)
	if err := a.Reload(); err != nil {
		t.Fatal(err)
	}
	if a.Version() == v0 {
		t.Fatal("the fixed file did not change the version")
	}
	d, err := a.Authorize(t.Context(), Request{Actor: "alice", Matter: pay(1)})
	if err != nil || d.Allowed || d.PolicyVersion != a.Version() {
		t.Fatalf("after the reload: %+v, %v", d, err)
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := a.Reload(); err == nil || a.Version() == v0 {
		t.Fatalf("a removed file: err=%v", err)
	}
}

func TestExamplePolicy(t *testing.T) {
	a := newAuthz(t, "policy.csv", newClock(t0))
	m := Matter{Domain: "acme", Action: "payments.pay", Amount: amount(485000), Currency: "INR", Requester: "bob", AgentOwner: "bob"}
	for _, c := range []struct {
		actor string
		allow bool
	}{{"alice", true}, {"carol", false}, {"dave", true}, {"bob", false}} {
		d, err := a.Authorize(t.Context(), Request{Actor: c.actor, Matter: m, Ask: RecipeAsk{Audience: "finance"}})
		if err != nil || d.Allowed != c.allow {
			t.Errorf("%s: %+v %v", c.actor, d, err)
		}
	}
	for _, act := range []string{"notes.store", "slack.slack_post_message", "github.create_commit", "github.push_branch"} {
		d, err := a.Authorize(t.Context(), Request{Actor: "bob", Matter: Matter{Domain: "acme", Action: act, Requester: "bob", AgentOwner: "bob"}, Ask: RecipeAsk{Audience: AudienceMe}})
		if err != nil || !d.Allowed {
			t.Errorf("bob's own %s: %+v %v", act, d, err)
		}
	}
	f, ok := a.Floor("acme", "payments.pay")
	if !ok || f.Quorum != 1 || f.Currency != "INR" || len(f.Rules) != 2 || f.Rules[1].Role != "finance" || *f.Rules[1].Limit != 500000 || f.Rules[0].Limit == nil {
		t.Fatalf("floor = %+v", f)
	}
	if _, ok := a.Floor("acme", "payments.refund"); ok {
		t.Fatal("a floor for an action the policy lacks")
	}
}
