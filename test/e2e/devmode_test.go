package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/internal/approvectl"
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
	t.Parallel()
	home, cwd := t.TempDir(), t.TempDir()
	cmd := exec.Command(filepath.Join(bin, "controlplane"), "--dev", "--listen", "127.0.0.1:0", "--executor-listen", "127.0.0.1:0")
	cmd.Dir = cwd
	cmd.Env = envWithout([]string{"PATH", "GOROOT", "GOPATH", "GOFLAGS", "TOLLGATE_HOME"}, "PATH="+pathWithoutGo(t), "TOLLGATE_HOME="+home)
	p := startPlaneCmd(t, cmd, home)

	// The dev executor connects once its MCP servers answered tools/list:
	// with every example tool (a run started before then is blocked
	// until it does, and run --wait stops there).
	if line := waitLog(t, "the dev executor connects", p.stderr, "executor connected", "executor=dev-executor"); strings.Contains(line, "tools=0 ") {
		t.Fatalf("the dev executor hosts no tools: %s\n%s", line, p.stderr)
	}

	// run --wait stops at the ask and says so with its exit code.
	var run runOut
	r := p.ctl(t, "", "--as", "alice", "run", "graph-ask-demo", "--wait", "-o", "json")
	r.json(t, &run)
	if r.code != approvectl.ExitParked || run.State != "parked" || len(run.Asks) != 1 || run.Asks[0].State != "pending" {
		t.Fatalf("graph-ask-demo from %s: want parked at its ask (exit %d), got exit %d %+v\n%s\n%s", cwd, approvectl.ExitParked, r.code, run, r.stderr, p.stderr)
	}
	for _, probe := range []string{"cpu", "mem"} {
		if st, ex, _ := stepOf(run, probe); st != "succeeded" || ex != "dev-executor" {
			t.Errorf("probe %s: %s on %q, want succeeded on dev-executor", probe, st, ex)
		}
	}

	// A step nobody connected can take: the run is blocked, and every
	// surface says which step waits for what, and what is connected.
	recipe := writeRecipe(t, "cpu: mcp-monitor.get_cpu_info {}\n  on: gpu\n")
	w := p.ctl(t, "", "--as", "alice", "run", recipe, "--wait")
	for _, want := range []string{"blocked", "cpu", "mcp-monitor·get_cpu_info on gpu", "no connected executor labelled gpu offers mcp-monitor·get_cpu_info (dev-executor offers it without the label)", "connected executors:", "dev-executor"} {
		if !strings.Contains(w.stdout, want) {
			t.Errorf("run --wait of a blocked run lacks %q:\n%s", want, w.stdout)
		}
	}
	if w.code != approvectl.ExitBlocked {
		t.Errorf("run --wait of a blocked run: exit %d, want %d\n%s", w.code, approvectl.ExitBlocked, w.stderr)
	}
	var runs struct {
		Runs []struct {
			RunID string `json:"run_id"`
			State string `json:"state"`
		} `json:"runs"`
	}
	p.ctl(t, "", "--as", "alice", "runs", "--state", "blocked", "-o", "json").json(t, &runs)
	if len(runs.Runs) != 1 {
		t.Fatalf("blocked runs: %+v", runs)
	}
	id := runs.Runs[0].RunID
	show := p.ctl(t, "", "--as", "alice", "runs", "show", id)
	for _, want := range []string{"waiting for an executor that offers mcp-monitor·get_cpu_info (label gpu)", "labelled gpu", "dev-executor  prose  tools ", "mcp-monitor·get_cpu_info"} {
		if !strings.Contains(show.stdout, want) {
			t.Errorf("runs show of a blocked run lacks %q:\n%s", want, show.stdout)
		}
	}
	var blocked struct {
		State   string `json:"state"`
		Reason  string `json:"reason"`
		Blocked []struct {
			StepID string `json:"step_id"`
			Server string `json:"server"`
			Tool   string `json:"tool"`
			Label  string `json:"label"`
			Reason string `json:"reason"`
		} `json:"blocked"`
		Executors []struct {
			ID    string   `json:"id"`
			Tools []string `json:"tools"`
		} `json:"executors"`
	}
	p.ctl(t, "", "--as", "alice", "runs", "show", id, "-o", "json").json(t, &blocked)
	if blocked.State != "blocked" || len(blocked.Blocked) != 1 || len(blocked.Executors) != 1 {
		t.Fatalf("runs show -o json of a blocked run: %+v", blocked)
	}
	if b := blocked.Blocked[0]; b.StepID != "cpu" || b.Server != "mcp-monitor" || b.Tool != "get_cpu_info" || b.Label != "gpu" || !strings.Contains(b.Reason, "labelled gpu") {
		t.Errorf("the blocked step: %+v", b)
	}
	if e := blocked.Executors[0]; e.ID != "dev-executor" || !slices.Contains(e.Tools, "mcp-monitor.get_cpu_info") || !slices.Contains(e.Tools, "payments.pay") {
		t.Errorf("the connected executor: %+v", e)
	}
}

// Issue 16: run --wait never tells anyone to answer an ask a standing
// approval decided as it opened: the run goes on, and the timeline names
// the standing approval and its granter.
func TestDevModeStandingApprovalRunWait(t *testing.T) {
	t.Parallel()
	p := startPlane(t, t.TempDir(), "--dev", "--listen", "127.0.0.1:0", "--executor-listen", "127.0.0.1:0")
	waitLog(t, "the dev executor connects", p.stderr, "executor connected", "executor=dev-executor")

	var first runOut
	r := p.ctl(t, "", "--as", "alice", "run", "vendor-payment", "--wait", "-o", "json")
	r.json(t, &first)
	if r.code != approvectl.ExitParked || first.State != "parked" || len(first.Asks) != 1 {
		t.Fatalf("vendor-payment parks at finance's ask (exit %d): exit %d %+v\n%s", approvectl.ExitParked, r.code, first, r.stderr)
	}
	if r := p.ctl(t, "", "--as", "dave", "approve", first.Asks[0].AskID, "--until", "720h",
		"--scope", "payments.pay vendor=V-1187 amount<=500000", "--reason", "the monthly invoice"); r.code != 0 {
		t.Fatalf("dave approves with a standing approval: %d %s", r.code, r.stderr)
	}

	w := p.ctl(t, "", "--as", "alice", "run", "vendor-payment", "--wait")
	if w.code != 0 || !strings.Contains(w.stdout, ": complete") {
		t.Fatalf("the next run's ask is decided by the standing approval; run --wait follows it to the end: exit %d\n%s%s", w.code, w.stdout, w.stderr)
	}
	for _, never := range []string{"approvectl approve", "waiting on a person", "  parked  "} {
		if strings.Contains(w.stdout, never) {
			t.Errorf("run --wait says %q of an ask a standing approval decided:\n%s", never, w.stdout)
		}
	}
	id := regexp.MustCompile(`run (\S+): complete`).FindStringSubmatch(w.stdout)
	if id == nil {
		t.Fatalf("no run id in:\n%s", w.stdout)
	}
	show := p.ctl(t, "", "--as", "alice", "runs", "show", id[1])
	if !regexp.MustCompile(`approve automatically, by standing approval sx_\S+ \(payments\.pay vendor=V-1187 amount<=500000\) granted by dave`).MatchString(show.stdout) {
		t.Errorf("the timeline names the standing approval and its granter:\n%s", show.stdout)
	}
}
