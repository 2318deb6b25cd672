package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/internal/identity"
	"github.com/tollgate-dev/tollgate/internal/redistest"
)

// prodKeys mints a signing key and user tokens the way an operator would,
// and returns the public key file for --jwt-key (its name is the key id).
func prodKeys(t *testing.T, home string) string {
	t.Helper()
	b, err := identity.MintDev(filepath.Join(home, "dev"), []string{"alice", "bob"}, "tollgate-dev", "tollgate", time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	pub, err := os.ReadFile(b.PublicKeyPath)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(home, b.KeyID+".pem")
	if err := os.WriteFile(path, pub, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// kill -9 the control plane while runs are parked; restart it on the same
// Redis: the asks are listed and answerable, answering continues the same
// run, and an ask whose deadline passed while it was down is refused as
// expired, the run ending as its on expiry says.
func TestKill9WithRedis(t *testing.T) {
	t.Parallel()
	redis := redistest.Start(t)
	home := t.TempDir()
	key := prodKeys(t, home)
	args := []string{"--redis", redis.URL(), "--listen", "127.0.0.1:0", "--jwt-key", key, "--grant-key", filepath.Join(home, "grant.key"), "--policy", examplePolicy(t)}
	p := startPlane(t, home, args...)

	gate := writeRecipe(t, "ask me:\n  go ahead?\n  expires: 1h\nw: notes.store {\"text\":\"hi\"}\n")
	short := writeRecipe(t, "ask me:\n  quick?\n  expires: 2s\n  on expiry: cancel\nw: notes.store {\"text\":\"late\"}\n")
	var run, late runOut
	p.ctl(t, "", "--as", "alice", "run", gate, "-o", "json").json(t, &run)
	p.ctl(t, "", "--as", "alice", "run", short, "-o", "json").json(t, &late)
	if run.State != "parked" || late.State != "parked" {
		t.Fatalf("%+v %+v", run, late)
	}

	if err := p.cmd.Process.Kill(); err != nil { // SIGKILL: no drain, no goodbye
		t.Fatal(err)
	}
	<-p.done
	// Wait, by Redis's own clock, until the short ask's deadline has passed
	// while no control plane runs.
	deadline := time.Now().Add(30 * time.Second)
	for {
		out, err := redis.Do("TIME")
		if err != nil {
			t.Fatal(err)
		}
		secs, _ := strconv.ParseInt(strings.Fields(out)[0], 10, 64)
		if time.Unix(secs, 0).After(late.Asks[0].ExpiresAt) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("redis clock did not pass the deadline")
		}
		<-time.After(100 * time.Millisecond)
	}

	p2 := startPlane(t, home, args...)
	var inbox struct {
		Asks []struct {
			AskID string `json:"ask_id"`
		} `json:"asks"`
	}
	p2.ctl(t, "", "--as", "alice", "asks", "-o", "json").json(t, &inbox)
	if len(inbox.Asks) != 1 || inbox.Asks[0].AskID != run.Asks[0].AskID {
		t.Fatalf("after the restart the live ask is listed (and the expired one is not): %+v", inbox)
	}
	if r := p2.ctl(t, "", "--as", "alice", "approve", run.Asks[0].AskID); r.code != 0 {
		t.Fatalf("approve after restart: %d %s", r.code, r.stderr)
	}
	var after runOut
	p2.ctl(t, "", "--as", "alice", "runs", "show", run.RunID, "-o", "json").json(t, &after)
	if after.RunID != run.RunID || after.Asks[0].State != "consumed" || after.State != "blocked" {
		t.Fatalf("the same run continues (w is runnable; no executor yet): %+v", after)
	}
	r := p2.ctl(t, "", "--as", "alice", "approve", late.Asks[0].AskID)
	if r.code != 1 || !strings.Contains(r.stderr, "expired") {
		t.Fatalf("the ask that expired while down: %d %q", r.code, r.stderr)
	}
	p2.ctl(t, "", "--as", "alice", "runs", "show", late.RunID, "-o", "json").json(t, &late)
	if late.State != "cancelled" {
		t.Fatalf("on expiry: cancel → %s", late.State)
	}
	if !strings.Contains(p2.stderr.String(), "ask expired") || !strings.Contains(p2.stderr.String(), "idle_ms=") {
		t.Fatalf("the expiry is logged with its idle time:\n%s", p2.stderr)
	}
	if r := p2.ctl(t, "", "--as", "alice", "audit"); r.code != 0 {
		t.Fatalf("audit: %s %s", r.stdout, r.stderr)
	}
}

// startFails runs the control plane expecting it to refuse to start.
func startFails(t *testing.T, home string, args ...string) string {
	t.Helper()
	cmd := exec.Command(filepath.Join(bin, "controlplane"), args...)
	cmd.Env = append(os.Environ(), "TOLLGATE_HOME="+home)
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("controlplane %v started; it should have refused", args)
	}
	return string(out)
}

func TestRedisRefusesVolatileServer(t *testing.T) {
	t.Parallel()
	redis := redistest.Start(t, redistest.Volatile())
	home := t.TempDir()
	key := prodKeys(t, home)
	r := startFails(t, home, "--redis", redis.URL(), "--listen", "127.0.0.1:0", "--jwt-key", key, "--grant-key", filepath.Join(home, "grant.key"), "--policy", examplePolicy(t))
	if !strings.Contains(r, "appendonly") {
		t.Fatalf("a Redis that keeps nothing on disk must be refused: %s", r)
	}
	p := startPlane(t, home, "--redis", redis.URL(), "--listen", "127.0.0.1:0", "--jwt-key", key, "--allow-volatile-store", "--grant-key", filepath.Join(home, "grant.key"), "--policy", examplePolicy(t))
	if r := p.ctl(t, "", "--as", "alice", "runs"); r.code != 0 {
		t.Fatalf("%d %s", r.code, r.stderr)
	}
}
