// Package e2e drives the real binaries: a control plane process and the
// approvectl command, as a user on this machine would.
package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

var bin string // directory holding the built binaries

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "tollgate-e2e-")
	if err != nil {
		panic(err)
	}
	for _, name := range []string{"controlplane", "approvectl", "executor"} {
		out, err := exec.Command("go", "build", "-race", "-o", filepath.Join(dir, name), "../../cmd/"+name).CombinedOutput()
		if err != nil {
			fmt.Fprintf(os.Stderr, "build %s: %v\n%s", name, err, out)
			os.Exit(1)
		}
	}
	bin = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// plane is a running control plane process.
type plane struct {
	cmd  *exec.Cmd
	addr string
	// execAddr is the executor listener, when the plane serves one.
	execAddr string
	home     string
	// dir and env are the working directory and environment approvectl
	// runs with (ctl): the plane's own (empty: the test's, and os.Environ
	// with TOLLGATE_HOME).
	dir    string
	env    []string
	stderr *logBuffer
	done   chan error
}

// logBuffer holds a process's stderr, written by one goroutine and read
// by the test.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) WriteString(s string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf.WriteString(s)
}

// Write lets a process write its stderr here directly.
func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

var listenRe = regexp.MustCompile(`msg=serving listen=(\S+) executor_listen=(\S*)`)

// startPlane starts `controlplane args…` and waits until it listens.
func startPlane(t *testing.T, home string, args ...string) *plane {
	t.Helper()
	cmd := exec.Command(filepath.Join(bin, "controlplane"), args...)
	cmd.Env = append(os.Environ(), "TOLLGATE_HOME="+home)
	return startPlaneCmd(t, cmd, home)
}

// startPlaneCmd starts the control plane cmd (its Dir and Env set as the
// test wants; TOLLGATE_HOME=home) and waits until it listens; approvectl
// runs in the same directory and environment.
func startPlaneCmd(t *testing.T, cmd *exec.Cmd, home string) *plane {
	t.Helper()
	pr, pw := io.Pipe()
	p := &plane{cmd: cmd, home: home, dir: cmd.Dir, env: cmd.Env, stderr: &logBuffer{}, done: make(chan error, 1)}
	cmd.Stderr = pw
	cmd.Stdout = io.Discard
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	addr := make(chan []string, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			line := sc.Text()
			p.stderr.WriteString(line + "\n")
			if m := listenRe.FindStringSubmatch(line); m != nil {
				select {
				case addr <- m[1:]:
				default:
				}
			}
		}
	}()
	go func() { p.done <- cmd.Wait(); pw.Close() }()
	select {
	case a := <-addr:
		p.addr, p.execAddr = a[0], strings.Trim(a[1], `"`)
	case err := <-p.done:
		t.Fatalf("control plane exited before listening: %v\n%s", err, p.stderr)
	case <-time.After(30 * time.Second):
		t.Fatalf("control plane did not listen\n%s", p.stderr)
	}
	t.Cleanup(func() { p.stop(t) })
	return p
}

func (p *plane) stop(t *testing.T) {
	if p.cmd.ProcessState != nil {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(20 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

type result struct {
	stdout, stderr string
	code           int
}

// ctl runs approvectl against the plane.
func (p *plane) ctl(t *testing.T, stdin string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(bin, "approvectl"), append([]string{"--server", p.addr}, args...)...)
	env := p.env
	if env == nil {
		env = os.Environ()
	}
	cmd.Env = append(slices.Clip(env), "TOLLGATE_HOME="+p.home, "TOLLGATE_TOKEN=")
	cmd.Dir = p.dir
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	cmd.Stdin = strings.NewReader(stdin)
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return result{out.String(), errb.String(), code}
}

func (r result) json(t *testing.T, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(r.stdout), v); err != nil {
		t.Fatalf("not JSON (%v): %s\nstderr: %s", err, r.stdout, r.stderr)
	}
}

// A recipe that asks before anything runs, so a control plane without
// executors can park it.
const askFirst = `ask me as kind:
  which diagram should I draw?
  options: sequence | class | state
drawing: draw a {kind} diagram
`

func writeRecipe(t *testing.T, text string) string {
	path := filepath.Join(t.TempDir(), "diagram.recipe")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

type runOut struct {
	RunID string `json:"run_id"`
	State string `json:"state"`
	Steps []struct {
		ID       string `json:"id"`
		State    string `json:"state"`
		Executor string `json:"executor"`
		Attempts int    `json:"attempts"`
	} `json:"steps"`
	Asks []struct {
		AskID     string    `json:"ask_id"`
		State     string    `json:"state"`
		Title     string    `json:"title"`
		ExpiresAt time.Time `json:"expires_at"`
	} `json:"asks"`
}

func TestDevPlaneWithApprovectl(t *testing.T) {
	t.Parallel()
	p := startPlane(t, t.TempDir(), "--dev", "--listen", "127.0.0.1:0", "--executor-listen", "127.0.0.1:0")
	recipe := writeRecipe(t, askFirst)

	var run runOut
	r := p.ctl(t, "", "--as", "alice", "run", recipe, "-o", "json")
	if r.code != 0 {
		t.Fatalf("run: %d %s", r.code, r.stderr)
	}
	r.json(t, &run)
	if run.State != "parked" || len(run.Asks) != 1 || run.Asks[0].Title != "which diagram should I draw?" {
		t.Fatalf("%+v", run)
	}
	askID := run.Asks[0].AskID

	var inbox struct {
		Asks []struct {
			AskID     string    `json:"ask_id"`
			RunID     string    `json:"run_id"`
			Title     string    `json:"title"`
			State     string    `json:"state"`
			ExpiresAt time.Time `json:"expires_at"`
		} `json:"asks"`
	}
	p.ctl(t, "", "--as", "alice", "asks", "-o", "json").json(t, &inbox)
	if len(inbox.Asks) != 1 || inbox.Asks[0].AskID != askID || inbox.Asks[0].RunID != run.RunID || inbox.Asks[0].ExpiresAt.IsZero() {
		t.Fatalf("alice's inbox: %+v", inbox)
	}
	p.ctl(t, "", "--as", "bob", "asks", "-o", "json").json(t, &inbox)
	if len(inbox.Asks) != 0 {
		t.Fatalf("bob's inbox: %+v", inbox)
	}

	// Refusals exit non-zero and say why.
	// alice's `ask me` is nothing bob may see (visibility): not found.
	if r := p.ctl(t, "", "--as", "bob", "approve", askID, "--option", "2"); r.code != 1 || !strings.Contains(r.stderr, "not found") {
		t.Fatalf("bob approving: %d %q", r.code, r.stderr)
	}
	if r := p.ctl(t, "", "--as", "alice", "reject", askID); r.code != 2 || !strings.Contains(r.stderr, "--reason") {
		t.Fatalf("reject without reason: %d %q", r.code, r.stderr)
	}
	if r := p.ctl(t, "", "--token", "not-a-token", "runs"); r.code != 1 || !strings.Contains(r.stderr, "not signed in") {
		t.Fatalf("bad token: %d %q", r.code, r.stderr)
	}

	// The seed's reply script, on its own run: the response changes by the
	// third miss, no reply is ever empty, cancel drops the run and says
	// what ran.
	var seed runOut
	p.ctl(t, "", "--as", "alice", "run", recipe, "-o", "json").json(t, &seed)
	var kinds []string
	for _, text := range []string{"pick the right one", "did it run?", "help", "what now", "cancel"} {
		var a struct{ Kind, Message string }
		r := p.ctl(t, "", "--as", "alice", "answer", seed.Asks[0].AskID, text, "-o", "json")
		// A reply that matches nothing records nothing and says so with
		// exit 1 (issue 16); cancel drops the run: 0.
		if want := map[bool]int{true: 0, false: 1}[text == "cancel"]; r.code != want {
			t.Fatalf("answer %q: exit %d, want %d: %s", text, r.code, want, r.stderr)
		}
		r.json(t, &a)
		if a.Message == "" {
			t.Fatalf("empty reply to %q", text)
		}
		if text == "cancel" && !strings.Contains(a.Message, "Did not run: drawing") {
			t.Fatalf("cancel says what ran: %q", a.Message)
		}
		kinds = append(kinds, a.Kind)
	}
	if strings.Join(kinds, ",") != "no_match,no_match,escape_hint,escape_hint,dropped" {
		t.Fatalf("kinds: %v", kinds)
	}
	// /menu and menu behave the same.
	var m1, m2 struct{ Kind, Message string }
	p.ctl(t, "", "--as", "alice", "answer", askID, "menu", "-o", "json").json(t, &m1)
	p.ctl(t, "", "--as", "alice", "answer", askID, "/menu", "-o", "json").json(t, &m2)
	if m1 != m2 || m1.Kind != "reshown" {
		t.Fatalf("menu %+v vs /menu %+v", m1, m2)
	}
	// Interactive: one miss, then a label.
	r = p.ctl(t, "what now\nclass\n", "--as", "alice", "answer", askID)
	if r.code != 0 || !strings.Contains(r.stdout, "class") {
		t.Fatalf("interactive answer: %d %q %q", r.code, r.stdout, r.stderr)
	}
	if r := p.ctl(t, "", "--as", "alice", "approve", askID, "--option", "1"); r.code != 1 || !strings.Contains(r.stderr, "already decided") {
		t.Fatalf("second decision: %d %q", r.code, r.stderr)
	}

	p.ctl(t, "", "--as", "alice", "runs", "show", run.RunID, "-o", "json").json(t, &run)
	if run.State != "complete" || run.Asks[0].State != "answered" || run.Steps[0].ID != "drawing" || run.Steps[0].State != "succeeded" {
		t.Fatalf("after the answer the same run continues on the dev executor's template model: %+v", run)
	}
	show := p.ctl(t, "", "--as", "alice", "runs", "show", run.RunID)
	for _, want := range []string{"which diagram should I draw?", "answer by alice", "drawing"} {
		if !strings.Contains(show.stdout, want) {
			t.Errorf("runs show lacks %q:\n%s", want, show.stdout)
		}
	}
	if strings.Contains(show.stdout, "Nothing runs until") { // issue 16: untrue of a run
		t.Errorf("runs show of a finished run says nothing runs until the plan is started:\n%s", show.stdout)
	}

	run2 := seed
	var runs struct {
		Runs []struct {
			RunID string `json:"run_id"`
			State string `json:"state"`
		} `json:"runs"`
	}
	p.ctl(t, "", "--as", "alice", "runs", "--state", "cancelled", "-o", "json").json(t, &runs)
	if len(runs.Runs) != 1 || runs.Runs[0].RunID != run2.RunID {
		t.Fatalf("cancelled runs: %+v", runs)
	}
	if r := p.ctl(t, "", "--as", "alice", "audit"); r.code != 0 {
		t.Fatalf("audit: %d %s %s", r.code, r.stdout, r.stderr)
	}
}

func TestDevPlaneRefusesNonLoopback(t *testing.T) {
	t.Parallel()
	cmd := exec.Command(filepath.Join(bin, "controlplane"), "--dev", "--listen", "0.0.0.0:0")
	cmd.Env = append(os.Environ(), "TOLLGATE_HOME="+t.TempDir())
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "loopback only") {
		t.Fatalf("--dev on all interfaces must be refused: %v %s", err, out)
	}
}

// examplePolicy is the absolute path of examples/policy.csv.
func examplePolicy(t *testing.T) string {
	t.Helper()
	p, err := filepath.Abs("../../examples/policy.csv")
	if err != nil {
		t.Fatal(err)
	}
	return p
}
