package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// vendor-payment end to end, under the dev policy, with real executors,
// the ERP and payments stand-ins and approvectl: authority at decision
// time, freshness at consumption, amendment.
func TestVendorPaymentEndToEnd(t *testing.T) {
	t.Parallel()
	c := newCluster(t, "edge-1")
	var run runOut
	c.plane.ctl(t, "", "--as", "alice", "run", "vendor-payment", "-o", "json").json(t, &run)
	id := run.RunID
	c.until(id, "parked", func(r runOut) bool { return r.State == "parked" })
	ask := id + "/ask_1"
	for who, why := range map[string]string{"alice": "separation of duties", "bob": "over what bob may approve"} {
		res := c.plane.ctl(t, "", "--as", who, "approve", ask)
		if res.code == 0 || !strings.Contains(res.stderr, why) {
			t.Fatalf("%s approving: exit %d, %s", who, res.code, res.stderr)
		}
	}
	// The bank account changes after the ask opened; dave approves.
	c.setVendorAccount("XXXX7731")
	if res := c.plane.ctl(t, "", "--as", "dave", "approve", ask); res.code != 0 {
		t.Fatalf("dave approving: %s", res.stderr)
	}
	r := c.until(id, "asked again", func(r runOut) bool {
		stale, again := false, false
		for _, a := range r.Asks {
			stale = stale || (a.AskID == ask+"~1" && a.State == "stale")
			again = again || (a.AskID == ask && a.State == "pending")
		}
		return stale && again
	})
	if b, _ := os.ReadFile(c.effects); strings.Contains(string(b), "pay") {
		t.Fatalf("payments.pay ran with the old account: %s", b)
	}
	show := c.plane.ctl(t, "", "--as", "dave", "asks", "show", ask+"~1")
	if !strings.Contains(show.stdout, "bank_account ending 2048 → ending 7731") {
		t.Fatalf("the stale ask says what changed:\n%s%s", show.stdout, show.stderr)
	}
	if res := c.plane.ctl(t, "", "--as", "dave", "amend", ask, "amount", "500000"); res.code == 0 || !strings.Contains(res.stderr, "out of bounds") {
		t.Fatalf("amend out of bounds: exit %d %s", res.code, res.stderr)
	}
	if res := c.plane.ctl(t, "", "--as", "dave", "amend", ask, "amount", "400000"); res.code != 0 || !strings.Contains(res.stdout, "sha256:") {
		t.Fatalf("amend: exit %d %s %s", res.code, res.stdout, res.stderr)
	}
	if res := c.plane.ctl(t, "", "--as", "dave", "approve", ask); res.code != 0 {
		t.Fatalf("dave approving again: %s", res.stderr)
	}
	c.until(id, "complete", func(r runOut) bool { return r.State == "complete" })
	b, _ := os.ReadFile(c.effects)
	lines := strings.Count(string(b), "\n")
	if lines != 1 || !strings.Contains(string(b), `"amount":400000`) || !strings.Contains(string(b), "XXXX7731") {
		t.Fatalf("pay ran once, amended, to the new account:\n%s", b)
	}
	_ = r
	auditClean(t, c.plane, "dave", id)
}

// approvectl watch shows the inbox live, one JSON object per line.
func TestApprovectlWatch(t *testing.T) {
	t.Parallel()
	p := startPlane(t, t.TempDir(), "--dev", "--listen", "127.0.0.1:0", "--executor-listen", "127.0.0.1:0")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(bin, "approvectl"), "--server", p.addr, "--as", "dave", "watch", "-o", "json")
	cmd.Env = append(os.Environ(), "TOLLGATE_HOME="+p.home, "TOLLGATE_TOKEN=")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); _ = cmd.Wait() }()
	lines := bufio.NewScanner(out)
	next := func() map[string]any {
		t.Helper()
		if !lines.Scan() {
			t.Fatalf("watch ended: %v", lines.Err())
		}
		var m map[string]any
		if err := json.Unmarshal(lines.Bytes(), &m); err != nil {
			t.Fatalf("not a JSON line: %q", lines.Text())
		}
		return m
	}
	if m := next(); m["change"] != "synced" {
		t.Fatalf("first the (empty) inbox, then synced: %v", m)
	}
	// A gate that opens at once (no executor needed before it).
	recipe := writeRecipe(t, "ask finance:\n  pay V-1?\nb: payments.pay {\"vendor\": \"V-1\", \"invoice\": \"I-1\", \"amount\": 5000, \"currency\": \"INR\", \"bank_account\": \"X\"}\n")
	var run runOut
	p.ctl(t, "", "--as", "alice", "run", recipe, "-o", "json").json(t, &run)
	m := next()
	ask, _ := m["ask"].(map[string]any)
	if m["change"] != "added" || ask["ask_id"] != run.RunID+"/ask_1" {
		t.Fatalf("the ask arrives for dave: %v", m)
	}
}
