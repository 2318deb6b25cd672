package e2e

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// script is a run of examples/scripts/claims-review.sh, the seed's shape:
// extract, gate, adjudicate, gate, fix plan, gate, commit, gate.
type script struct {
	cmd    *exec.Cmd
	out    *logBuffer
	exited chan struct{} // closed once code is set
	code   int
}

func runScript(t *testing.T, p *plane, key, work string) *script {
	t.Helper()
	path, err := filepath.Abs("../../examples/scripts/claims-review.sh")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("bash", path)
	cmd.Env = append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"), "TOLLGATE_HOME="+p.home,
		"TOLLGATE_SERVER="+p.addr, "TOLLGATE_TOKEN=", "TOLLGATE_RUN=", "RUN_KEY="+key, "WORK="+work)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // kill the script and its approvectl together
	s := &script{cmd: cmd, out: &logBuffer{}, exited: make(chan struct{})}
	w := writerFunc(func(b []byte) (int, error) { s.out.WriteString(string(b)); return len(b), nil })
	cmd.Stdout, cmd.Stderr = w, w
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		err := cmd.Wait()
		if ee, ok := err.(*exec.ExitError); ok {
			s.code = ee.ExitCode()
		}
		close(s.exited)
	}()
	t.Cleanup(func() { s.kill() })
	return s
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(b []byte) (int, error) { return f(b) }

func (s *script) kill() {
	select {
	case <-s.exited:
	default:
		_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
	}
}

func (s *script) wait(t *testing.T) int {
	t.Helper()
	select {
	case <-s.exited:
		return s.code
	case <-time.After(60 * time.Second):
		t.Fatalf("script did not end\n%s", s.out)
		return -1
	}
}

// runID is the id the script printed ("run ID" on stderr).
func (s *script) runID(t *testing.T) string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		for _, l := range strings.Split(s.out.String(), "\n") {
			if id, ok := strings.CutPrefix(l, "run "); ok && strings.HasPrefix(id, "r_") {
				return strings.TrimSpace(id)
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("the script printed no run id\n%s", s.out)
	return ""
}

// parkedAt waits until the run is parked with gate pending, and returns
// the run as approvectl shows it.
func parkedAt(t *testing.T, p *plane, run, gate string, s *script) runOut {
	t.Helper()
	deadline := time.Now().Add(45 * time.Second)
	var r runOut
	for time.Now().Before(deadline) {
		res := p.ctl(t, "", "--as", "bob", "runs", "show", run, "-o", "json")
		if res.code == 0 {
			r = runOut{}
			res.json(t, &r)
			for _, a := range r.Asks {
				if a.AskID == run+"/"+gate && a.State == "pending" {
					if r.State != "parked" {
						t.Fatalf("gate %s is pending but the run is %s", gate, r.State)
					}
					return r
				}
			}
			if r.State == "failed" {
				t.Fatalf("run failed while waiting for gate %s", gate)
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("run %s never parked at %s (last %+v)\nscript:\n%s", run, gate, r, s.out)
	return r
}

func count(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	return bytes.Count(b, []byte("ran\n"))
}

// The seed's script against a real control plane: it parks at each gate;
// the script's own identity cannot approve (separation of duties); bob
// approves from approvectl; killed while waiting and re-run, it skips the
// steps it did and the gates already decided; one run holds all four
// gates, each decision with its actor; the approved commit gate's grant is
// accepted once for the commit it approved and refused for a replay or
// another payload.
func TestScriptWithFourGates(t *testing.T) {
	t.Parallel()
	p := startPlane(t, t.TempDir(), "--dev", "--listen", "127.0.0.1:0", "--executor-listen", "127.0.0.1:0")
	work := t.TempDir()
	s := runScript(t, p, "claims-1", work)
	run := s.runID(t)

	parkedAt(t, p, run, "claims", s)
	show := p.ctl(t, "", "--as", "bob", "runs", "show", run)
	for _, want := range []string{"parked", "waiting at gate claims: Are these the claims to check?", "read   claims.txt (text/plain",
		"sha256:", "who    ", "reviewer", "until  ", "approve: approvectl approve " + run + "/claims", "reject:  approvectl reject " + run + "/claims --reason"} {
		if !strings.Contains(show.stdout, want) {
			t.Fatalf("runs show lacks %q:\n%s%s", want, show.stdout, show.stderr)
		}
	}
	if res := p.ctl(t, "", "--as", "alice", "approve", run+"/claims"); res.code != 1 || !strings.Contains(res.stderr, "permission denied") {
		t.Fatalf("the script's identity approved its own gate: code %d\n%s", res.code, res.stderr)
	}
	if res := p.ctl(t, "", "--as", "bob", "approve", run+"/claims"); res.code != 0 {
		t.Fatalf("bob approves claims: %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	parkedAt(t, p, run, "adjudication", s)

	// The script dies while it waits (a CI job timed out); the gate is
	// still answerable, and a re-run picks up where it was.
	s.kill()
	s.wait(t)
	if res := p.ctl(t, "", "--as", "bob", "approve", run+"/adjudication"); res.code != 0 {
		t.Fatalf("bob approves adjudication: %d\n%s", res.code, res.stderr)
	}
	s = runScript(t, p, "claims-1", work)
	if again := s.runID(t); again != run {
		t.Fatalf("the re-run found run %s, not %s", again, run)
	}
	parkedAt(t, p, run, "fix-plan", s)
	if e, a := count(t, filepath.Join(work, "extract.log")), count(t, filepath.Join(work, "adjudicate.log")); e != 1 || a != 1 {
		t.Fatalf("re-run redid work: extract ran %d times, adjudicate %d", e, a)
	}
	out := s.out.String()
	for _, want := range []string{"step extract: already completed", "step adjudicate: already completed", "gate claims: approved by bob", "not asked again"} {
		if !strings.Contains(out, want) {
			t.Fatalf("re-run output lacks %q:\n%s", want, out)
		}
	}
	if res := p.ctl(t, "", "--as", "bob", "approve", run+"/fix-plan"); res.code != 0 {
		t.Fatalf("bob approves fix-plan: %d\n%s", res.code, res.stderr)
	}
	parkedAt(t, p, run, "commit", s)
	if res := p.ctl(t, "", "--as", "bob", "approve", run+"/commit"); res.code != 0 {
		t.Fatalf("bob approves commit: %d\n%s", res.code, res.stderr)
	}
	if code := s.wait(t); code != 0 {
		t.Fatalf("script exit %d\n%s", code, s.out)
	}

	var r runOut
	p.ctl(t, "", "--as", "bob", "runs", "show", run, "-o", "json").json(t, &r)
	if r.State != "complete" || len(r.Asks) != 4 {
		t.Fatalf("run %s with %d gates, want complete with 4", r.State, len(r.Asks))
	}
	var full struct {
		Asks []struct {
			AskID     string `json:"ask_id"`
			Decisions []struct {
				Kind  string    `json:"kind"`
				Actor string    `json:"actor"`
				Time  time.Time `json:"time"`
			} `json:"decisions"`
		} `json:"asks"`
	}
	p.ctl(t, "", "--as", "bob", "runs", "show", run, "-o", "json").json(t, &full)
	for _, a := range full.Asks {
		if len(a.Decisions) != 1 || a.Decisions[0].Actor != "bob" || a.Decisions[0].Time.IsZero() {
			t.Fatalf("gate %s decisions: %+v", a.AskID, a.Decisions)
		}
	}
	auditClean(t, p, "bob", run)
	for _, step := range []string{"extract", "adjudicate", "fix-plan", "commit"} {
		if n := count(t, filepath.Join(work, step+".log")); n != 1 {
			t.Fatalf("%s ran %d times", step, n)
		}
	}

	// The service that pushes the commit checks the grant.
	key := filepath.Join(p.home, "dev", "grant.pub")
	verify := func(artifact string) result {
		return p.ctl(t, "", "grant", "verify", "--grant", filepath.Join(work, "grant.json"), "--key", key, "--action", "gate.commit", "--artifact", artifact,
			"--ledger", filepath.Join(work, "ledger.json"))
	}
	other := filepath.Join(t.TempDir(), "commit.diff")
	if err := os.WriteFile(other, []byte("diff --git a/other b/other\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if res := verify(other); res.code != 1 || !strings.Contains(res.stderr, "args differ") {
		t.Fatalf("a grant for another payload: %d %s", res.code, res.stderr)
	}
	if res := verify(filepath.Join(work, "commit.diff")); res.code != 0 {
		t.Fatalf("the approved commit's grant: %d %s", res.code, res.stderr)
	}
	if res := verify(filepath.Join(work, "commit.diff")); res.code != 1 || !strings.Contains(res.stderr, "already used") {
		t.Fatalf("a replayed grant: %d %s", res.code, res.stderr)
	}
	auditClean(t, p, "bob", run)
}

// Rejecting the third gate ends the script with the rejected code and the
// run rejected, with the reason shown.
func TestScriptGateRejected(t *testing.T) {
	t.Parallel()
	p := startPlane(t, t.TempDir(), "--dev", "--listen", "127.0.0.1:0", "--executor-listen", "127.0.0.1:0")
	work := t.TempDir()
	s := runScript(t, p, "claims-2", work)
	run := s.runID(t)
	for _, g := range []string{"claims", "adjudication"} {
		parkedAt(t, p, run, g, s)
		if res := p.ctl(t, "", "--as", "bob", "approve", run+"/"+g); res.code != 0 {
			t.Fatalf("approve %s: %s", g, res.stderr)
		}
	}
	parkedAt(t, p, run, "fix-plan", s)
	if res := p.ctl(t, "", "--as", "bob", "reject", run+"/fix-plan", "--reason", "the plan rewrites the wrong section"); res.code != 0 {
		t.Fatalf("reject: %d %s", res.code, res.stderr)
	}
	if code := s.wait(t); code != 5 {
		t.Fatalf("script exit %d, want 5 (rejected)\n%s", code, s.out)
	}
	if !strings.Contains(s.out.String(), "rejected by bob: the plan rewrites the wrong section") {
		t.Fatalf("the reason is not shown:\n%s", s.out)
	}
	var r struct {
		State  string `json:"state"`
		Reason string `json:"reason"`
	}
	p.ctl(t, "", "--as", "bob", "runs", "show", run, "-o", "json").json(t, &r)
	if r.State != "rejected" || !strings.Contains(r.Reason, "the plan rewrites the wrong section") {
		t.Fatalf("run %s (%s), want rejected with the reason", r.State, r.Reason)
	}
	if n := count(t, filepath.Join(work, "commit.log")); n != 0 {
		t.Fatalf("commit ran %d times after the rejection", n)
	}
	auditClean(t, p, "bob", run)
}

// A gate nobody decides in time ends the script with the expired code and
// the run expired (never failed).
func TestGateExpires(t *testing.T) {
	t.Parallel()
	p := startPlane(t, t.TempDir(), "--dev", "--listen", "127.0.0.1:0", "--executor-listen", "127.0.0.1:0")
	res := p.ctl(t, "", "--as", "alice", "gate", "claims", "--summary", "nobody will answer", "--expires", "1500ms", "-o", "json")
	if res.code != 6 {
		t.Fatalf("exit %d, want 6 (expired)\n%s%s", res.code, res.stdout, res.stderr)
	}
	var g struct {
		RunID   string `json:"run_id"`
		Outcome string `json:"outcome"`
	}
	if err := json.Unmarshal([]byte(res.stdout), &g); err != nil || g.Outcome != "expired" {
		t.Fatalf("output %q (%v)", res.stdout, err)
	}
	var r runOut
	p.ctl(t, "", "--as", "bob", "runs", "show", g.RunID, "-o", "json").json(t, &r)
	if r.State != "expired" {
		t.Fatalf("run %s, want expired", r.State)
	}
	// Asked again by name on the ended run, the gate answers at once.
	if res := p.ctl(t, "", "--as", "alice", "gate", "claims", "--summary", "again", "--run", g.RunID); res.code != 6 || !strings.Contains(res.stderr, "not asked again") {
		t.Fatalf("the decided gate again: %d %s", res.code, res.stderr)
	}
}
