package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// pathWithoutGo is PATH with every directory holding a `go` command left
// out, so a process started with it has no Go toolchain to call.
func pathWithoutGo(t *testing.T) string {
	t.Helper()
	var keep []string
	for _, dir := range filepath.SplitList(os.Getenv("PATH")) {
		if _, err := os.Stat(filepath.Join(dir, "go")); err == nil {
			continue
		}
		keep = append(keep, dir)
	}
	return strings.Join(keep, string(filepath.ListSeparator))
}

// envWithout is os.Environ without the variables named, and with extra.
func envWithout(names []string, extra ...string) []string {
	var out []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		drop := false
		for _, n := range names {
			drop = drop || name == n
		}
		if !drop {
			out = append(out, kv)
		}
	}
	return append(out, extra...)
}

// Issue 16: `controlplane --dev` started outside the checkout — from a
// fresh directory, its binary somewhere else, no Go toolchain on PATH —
// hosts the example MCP servers all the same (they are built into the
// binary), so graph-ask-demo runs its probes on the dev executor and
// parks at its ask. Before, the dev executor built the servers with
// `go build ./examples/mcp/…` relative to the working directory, hosted
// none, and the run stayed blocked.
func TestDevModeOutsideTheCheckout(t *testing.T) {
	home, cwd := t.TempDir(), t.TempDir()
	cmd := exec.Command(filepath.Join(bin, "controlplane"), "--dev", "--listen", "127.0.0.1:0", "--executor-listen", "127.0.0.1:0")
	cmd.Dir = cwd
	cmd.Env = envWithout([]string{"PATH", "GOROOT", "GOPATH", "GOFLAGS", "TOLLGATE_HOME"}, "PATH="+pathWithoutGo(t), "TOLLGATE_HOME="+home)
	p := startPlaneCmd(t, cmd, home)

	var run runOut
	r := p.ctl(t, "", "--as", "alice", "run", "graph-ask-demo", "-o", "json")
	if r.code != 0 {
		t.Fatalf("run graph-ask-demo: %d %s", r.code, r.stderr)
	}
	r.json(t, &run)
	c := &cluster{t: t, plane: p}
	run = c.until(run.RunID, "parked at its ask", func(r runOut) bool { return r.State == "parked" || r.State == "blocked" })
	if run.State != "parked" || len(run.Asks) != 1 || run.Asks[0].State != "pending" {
		t.Fatalf("graph-ask-demo from %s: want parked at its ask, got %+v\n%s", cwd, run, p.stderr)
	}
	for _, probe := range []string{"cpu", "mem"} {
		if st, ex, _ := stepOf(run, probe); st != "succeeded" || ex != "dev-executor" {
			t.Errorf("probe %s: %s on %q, want succeeded on dev-executor", probe, st, ex)
		}
	}
	if strings.Contains(p.stderr.String(), "hosts none") {
		t.Errorf("the dev executor says it hosts no servers:\n%s", p.stderr)
	}
}
