package authz

import (
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// t0 is the clock the rule tables run at.
var t0 = time.Date(2026, 9, 5, 12, 0, 0, 0, time.UTC)

// clock is a settable clock, safe for concurrent use.
type clock struct{ ns atomic.Int64 }

func newClock(t time.Time) *clock { c := &clock{}; c.Set(t); return c }
func (c *clock) Set(t time.Time)  { c.ns.Store(t.UnixNano()) }
func (c *clock) Now() time.Time   { return time.Unix(0, c.ns.Load()).UTC() }

// copyPolicy copies a testdata policy into a fresh directory, so a test may
// rewrite it.
func copyPolicy(t testing.TB, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return writeFile(t, filepath.Join(t.TempDir(), name), string(b))
}

// writeFile replaces path atomically (write, then rename), as an operator
// or a ConfigMap update does.
func writeFile(t testing.TB, path, content string) string {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
	return path
}

func newAuthz(t testing.TB, policyFile string, c *clock) *Authorizer {
	t.Helper()
	a, err := New(Config{PolicyPath: copyPolicy(t, policyFile), Now: c.Now})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return a
}

func amount(v int64) *int64 { return &v }

// pay is a payments.pay matter in acme with requester bob and owner olga.
func pay(v int64) Matter {
	return Matter{Domain: "acme", Action: "payments.pay", Amount: amount(v), Currency: "INR", Requester: "bob", AgentOwner: "olga"}
}
