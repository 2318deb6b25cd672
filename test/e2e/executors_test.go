package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/internal/identity"
	"github.com/tollgate-dev/tollgate/internal/redistest"
)

// cluster is a control plane on real Redis and executor processes, all
// real binaries.
type cluster struct {
	t     *testing.T
	plane *plane
	redis *redistest.Server
	home  string
	execs map[string]*exec.Cmd
	marks string
	notes string
	// vendors is the ERP stand-in's vendor file (re-read on every call);
	// effects is where the demo servers log side effects.
	vendors string
	effects string

	// pki, servers and telemetry are what startExecutor configures an
	// executor with.
	pki       identity.DevPKI
	servers   string
	telemetry string
	// planeArgs are the control plane's flags: another replica on the
	// same Redis starts with them too (startReplica).
	planeArgs []string
}

const testCatalog = `
  test:
    - {name: sleep, annotations: {readOnlyHint: true}}
    - {name: mark, annotations: {readOnlyHint: false, idempotentHint: false}}
    - {name: fail, annotations: {readOnlyHint: true}}
`

func newCluster(t *testing.T, executors ...string) *cluster {
	t.Helper()
	return newClusterWith(t, nil, executors...)
}

// newClusterWith is newCluster with more control plane flags.
func newClusterWith(t *testing.T, planeArgs []string, executors ...string) *cluster {
	t.Helper()
	return newClusterSpec(t, clusterSpec{planeArgs: planeArgs, start: executors})
}

// clusterSpec says how to build a cluster: control plane flags, the test
// server's entries in the control plane's catalog (default testCatalog),
// executors started at once and executors given certificates only, for
// the test to start with startExecutor.
type clusterSpec struct {
	planeArgs    []string
	testCatalog  string
	start, later []string
	// markFloor is test.mark's p2 row (default: quorum 1, separate from
	// nobody).
	markFloor string
	// slack adds the Slack stand-in (its posts in the effects log) to
	// every executor's servers.
	slack bool
}

func newClusterSpec(t *testing.T, spec clusterSpec) *cluster {
	t.Helper()
	c := prepareCluster(t, spec, redistest.Start(t))
	c.plane = startPlane(t, c.home, c.planeArgs...)
	for _, id := range spec.start {
		c.startExecutor(id, os.Stderr)
	}
	return c
}

// prepareCluster writes everything a cluster on redis needs (dev
// identities, policy, catalog, executor certificates for spec.start and
// spec.later, the MCP servers' config) and returns it with no process
// started: planeArgs are the control plane's flags.
func prepareCluster(t *testing.T, spec clusterSpec, redis *redistest.Server) *cluster {
	t.Helper()
	planeArgs, executors := spec.planeArgs, spec.start
	if spec.testCatalog == "" {
		spec.testCatalog = testCatalog
	}
	if spec.markFloor == "" {
		spec.markFloor = "p2, acme, test.mark, 1, none, -\n"
	}
	home := t.TempDir()
	if _, err := identity.MintDev(filepath.Join(home, "dev"), []string{"alice", "bob", "carol", "dave", "audrey", "otto", "mallory", "alice-agent"}, "tollgate-dev", "tollgate", time.Hour, time.Now()); err != nil {
		t.Fatal(err)
	}
	pub, _ := os.ReadFile(filepath.Join(home, "dev", "signing.pub"))
	jwtKey := filepath.Join(home, "dev.pem")
	os.WriteFile(jwtKey, pub, 0o644)
	// The example policy, and members may mark (the test server's side
	// effect), by default without asking.
	pol, _ := os.ReadFile(examplePolicy(t))
	policy := filepath.Join(home, "policy.csv")
	os.WriteFile(policy, append(pol, "p,  role:member, acme, test.mark, -\n"+spec.markFloor...), 0o644)
	cat, _ := os.ReadFile("../../examples/catalog.yaml")
	catalog := filepath.Join(home, "catalog.yaml")
	os.WriteFile(catalog, append(cat, spec.testCatalog...), 0o644)
	c := &cluster{t: t, redis: redis, home: home, execs: map[string]*exec.Cmd{}, marks: filepath.Join(home, "marks.json"), notes: filepath.Join(home, "notes.jsonl"),
		vendors: filepath.Join(home, "vendors.json"), effects: filepath.Join(home, "effects.jsonl")}
	c.setVendorAccount("XXXX2048")
	pki, err := identity.MintDevPKI(filepath.Join(home, "pki"), identity.DefaultTrustDomain, append(slices.Clip(executors), spec.later...), time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	c.planeArgs = append([]string{"--redis", redis.URL(), "--listen", "127.0.0.1:0", "--jwt-key", jwtKey,
		"--executor-listen", "127.0.0.1:0", "--executor-cert", pki.Server.Cert, "--executor-key", pki.Server.Key, "--executor-ca", pki.CA,
		"--grant-key", filepath.Join(home, "grant.key"), "--policy", policy, "--lease-ttl", "1s", "--catalog", catalog,
		// A production control plane serves only the skills it is given:
		// these are the examples, as an operator's GitOps directory.
		"--skills-dir", exampleSkills(t)}, planeArgs...)
	servers := fmt.Sprintf(`
  - {name: test, command: [%q, "--file", %q]}
  - {name: mcp-monitor, command: [%q]}
  - {name: notes, command: [%q, "--file", %q]}
  - {name: erp, command: [%q, "--server", "erp", "--vendors", %q, "--log", %q]}
  - {name: payments, command: [%q, "--server", "payments", "--log", %q]}
`, buildExample(t, "testserver"), c.marks, buildExample(t, "monitor"), buildExample(t, "notes"), c.notes,
		buildExample(t, "demo"), c.vendors, c.effects, buildExample(t, "demo"), c.effects)
	if spec.slack {
		servers += fmt.Sprintf("  - {name: slack, command: [%q, \"--server\", \"slack\", \"--log\", %q]}\n", buildExample(t, "demo"), c.effects)
	}
	// Executors send spans where the control plane does.
	telemetry := ""
	if i := slices.Index(planeArgs, "--otlp-endpoint"); i >= 0 && i+1 < len(planeArgs) {
		telemetry = fmt.Sprintf("telemetry: {otlp_endpoint: %q}\n", planeArgs[i+1])
	}
	c.pki, c.servers, c.telemetry = pki, servers, telemetry
	return c
}

// startExecutor starts executor id (its certificate was minted with the
// cluster), its stderr to stderr.
// exampleSkills is examples/skills, absolute.
func exampleSkills(t *testing.T) string {
	t.Helper()
	p, err := filepath.Abs("../../examples/skills")
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func (c *cluster) startExecutor(id string, stderr io.Writer) {
	c.t.Helper()
	c.startExecutorOn(id, stderr, c.plane)
}

// startExecutorOn starts executor id configured with the executor
// listeners of planes, the first as control_plane and the others as
// control_planes (replicas to turn to).
func (c *cluster) startExecutorOn(id string, stderr io.Writer, planes ...*plane) {
	c.t.Helper()
	addrs := make([]string, len(planes))
	for i, p := range planes {
		addrs[i] = p.execAddr
	}
	cmd := exec.Command(filepath.Join(bin, "executor"), "--config", c.executorConfig(id, addrs, c.servers))
	cmd.Stderr = stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // kill -9 takes its MCP servers too
	if err := cmd.Start(); err != nil {
		c.t.Fatal(err)
	}
	c.execs[id] = cmd
	c.t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
	})
}

// executorConfig writes executor id's config file and returns its path:
// its certificate, the executor listeners addrs (the first as
// control_plane, the others as control_planes to turn to) and servers
// (the mcp_servers entries).
func (c *cluster) executorConfig(id string, addrs []string, servers string) string {
	c.t.Helper()
	others := ""
	for _, a := range addrs[1:] {
		others += fmt.Sprintf("%q, ", a)
	}
	cfg := filepath.Join(c.home, id+".yaml")
	err := os.WriteFile(cfg, []byte(fmt.Sprintf("id: %s\ncontrol_plane: %s\ncontrol_planes: [%s]\ntls: {cert: %s, key: %s, ca: %s}\ngrant_keys: {grant: %s}\ncapacity: 8\n%smcp_servers:%s",
		id, addrs[0], strings.TrimSuffix(others, ", "), c.pki.Executors[id].Cert, c.pki.Executors[id].Key, c.pki.CA, filepath.Join(c.home, "grant.pub"), c.telemetry, servers)), 0o644)
	if err != nil {
		c.t.Fatal(err)
	}
	return cfg
}

// setVendorAccount rewrites V-1187's bank account in the ERP stand-in.
func (c *cluster) setVendorAccount(account string) {
	c.t.Helper()
	b := fmt.Appendf(nil, `{"V-1187": {"id": "V-1187", "name": "Kaveri Precision Components Pvt Ltd", "bank_account": %q, "status": "active"}}`, account)
	if err := os.WriteFile(c.vendors, b, 0o644); err != nil {
		c.t.Fatal(err)
	}
}

// until polls a run (through approvectl, as a script would) until pred.
func (c *cluster) until(id string, what string, pred func(runOut) bool) runOut {
	c.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var r runOut
		res := c.plane.ctl(c.t, "", "--as", "alice", "runs", "show", id, "-o", "json")
		if res.code != 0 && strings.Contains(res.stderr, "unavailable") && time.Now().Before(deadline) {
			// The store is coming back (a test restarts Redis): a script
			// retries, and so does this.
			<-time.After(50 * time.Millisecond)
			continue
		}
		res.json(c.t, &r)
		if pred(r) {
			return r
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("run %s never got %s: %+v", id, what, r)
		}
		<-time.After(50 * time.Millisecond)
	}
}

// startReplica starts another control plane on the cluster's Redis, with
// the same flags: a second replica of one control plane.
func (c *cluster) startReplica() *plane {
	c.t.Helper()
	return startPlane(c.t, c.home, c.planeArgs...)
}

func (c *cluster) start(recipe string) string {
	c.t.Helper()
	var r runOut
	res := c.plane.ctl(c.t, "", "--as", "alice", "run", writeRecipe(c.t, recipe), "-o", "json")
	if res.code != 0 {
		c.t.Fatalf("run: %s", res.stderr)
	}
	res.json(c.t, &r)
	return r.RunID
}

func stepOf(r runOut, id string) (state, executor string, attempts int) {
	for _, s := range r.Steps {
		if s.ID == id {
			return s.State, s.Executor, s.Attempts
		}
	}
	return "", "", 0
}

func TestTwoExecutorsOnRedis(t *testing.T) {
	t.Parallel()
	c := newCluster(t, "edge-1", "edge-2")

	// graph-ask-demo: the probes run on executors, the run parks, approval
	// lets save run exactly once.
	var run runOut
	c.plane.ctl(t, "", "--as", "alice", "run", "graph-ask-demo", "-o", "json").json(t, &run)
	c.until(run.RunID, "parked", func(r runOut) bool { return r.State == "parked" })
	if r := c.plane.ctl(t, "", "--as", "alice", "approve", run.RunID+"/ask_1"); r.code != 0 {
		t.Fatal(r.stderr)
	}
	c.until(run.RunID, "complete", func(r runOut) bool { return r.State == "complete" })
	b, _ := os.ReadFile(c.notes)
	if n := strings.Count(string(b), "\n"); n != 1 {
		t.Fatalf("save wrote %d lines", n)
	}

	// kill -9 an executor during a read-only step: it is leased again, to
	// the other executor, with a higher fence.
	id := c.start("s: test.sleep {\"ms\": 3000}\n")
	r := c.until(id, "leased", func(r runOut) bool { st, _, _ := stepOf(r, "s"); return st == "leased" || st == "started" })
	_, holder, _ := stepOf(r, "s")
	syscall.Kill(-c.execs[holder].Process.Pid, syscall.SIGKILL)
	r = c.until(id, "complete after a re-lease", func(r runOut) bool { return r.State == "complete" })
	if _, other, attempts := stepOf(r, "s"); attempts != 2 || other == holder {
		t.Fatalf("re-leased to the other executor with fence 2: %s after %s, %d attempts", other, holder, attempts)
	}
	auditClean(t, c.plane, "alice")
}

// killAfterStart starts a side-effecting step, kills its executor with
// SIGKILL once the effect has happened, and returns the run and its
// in-doubt ask.
func killAfterStart(t *testing.T, c *cluster) (id, doubt, killed string) {
	t.Helper()
	id = c.start("m: test.mark {\"name\": \"effect\", \"hold_ms\": 20000} without asking\n")
	r := c.until(id, "started", func(r runOut) bool { st, _, _ := stepOf(r, "m"); return st == "started" })
	c.waitMark("effect", 1)
	_, killed, _ = stepOf(r, "m")
	syscall.Kill(-c.execs[killed].Process.Pid, syscall.SIGKILL)
	r = c.until(id, "parked in doubt", func(r runOut) bool { return r.State == "parked" })
	if st, _, attempts := stepOf(r, "m"); st != "in_doubt" || attempts != 1 {
		t.Fatalf("the started side effect is in doubt, not re-run: %s, %d attempts", st, attempts)
	}
	for _, a := range r.Asks {
		if strings.Contains(a.AskID, "doubt_m_1") {
			doubt = a.AskID
		}
	}
	if doubt == "" {
		t.Fatalf("an in-doubt ask opens: %+v", r.Asks)
	}
	return id, doubt, killed
}

// waitMark waits until the test MCP server has counted n calls of name
// (the counter is written before the tool holds).
func (c *cluster) waitMark(name string, n int) {
	c.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for c.mark(name) < n {
		if time.Now().After(deadline) {
			c.t.Fatalf("mark %s never reached %d (at %d)", name, n, c.mark(name))
		}
		<-time.After(20 * time.Millisecond)
	}
}

func TestKilledExecutorAfterStartIsInDoubt(t *testing.T) {
	t.Parallel()
	c := newCluster(t, "edge-1", "edge-2")
	id, doubt, _ := killAfterStart(t, c)
	if res := c.plane.ctl(t, "", "--as", "alice", "answer", doubt, "it ran"); res.code != 0 {
		t.Fatalf("%s %s", res.stdout, res.stderr)
	}
	c.until(id, "complete", func(r runOut) bool { return r.State == "complete" })
	if n := c.mark("effect"); n != 1 {
		t.Fatalf("the marker count stays 1, got %d", n)
	}
	auditClean(t, c.plane, "alice", id)
}

// "retry" on an in-doubt step is a person's decision to run the effect
// again: it runs once more, on the surviving executor, under a new grant
// and a higher fence.
func TestInDoubtRetryRunsAgainOnce(t *testing.T) {
	t.Parallel()
	c := newCluster(t, "edge-1", "edge-2")
	id, doubt, killed := killAfterStart(t, c)
	if res := c.plane.ctl(t, "", "--as", "alice", "answer", doubt, "retry"); res.code != 0 {
		t.Fatalf("%s %s", res.stdout, res.stderr)
	}
	r := c.until(id, "started again", func(r runOut) bool {
		st, _, attempts := stepOf(r, "m")
		return st == "started" && attempts == 2
	})
	c.waitMark("effect", 2)
	if _, holder, _ := stepOf(r, "m"); holder == killed {
		t.Fatalf("the retry went to the killed executor %s", holder)
	}
	if res := c.plane.ctl(t, "", "--as", "alice", "runs", "cancel", id); res.code != 0 {
		t.Fatalf("%s %s", res.stdout, res.stderr)
	}
	c.until(id, "cancelled", func(r runOut) bool { return r.State == "cancelled" })
	if n := c.mark("effect"); n != 2 {
		t.Fatalf("retry ran the effect once more: marker %d, want 2", n)
	}
	// Item 6: the decided retry is the approval of the second attempt.
	auditClean(t, c.plane, "alice", id)
}

// mark reads a counter of the test MCP server's file.
func (c *cluster) mark(name string) int {
	b, err := os.ReadFile(c.marks)
	if err != nil {
		return 0
	}
	var m map[string]int
	_ = json.Unmarshal(b, &m)
	return m[name]
}

// SIGSTOP an executor past its lease TTL, then SIGCONT: the step was
// leased again elsewhere, and the stopped executor's late result is
// refused — nothing changes.
func TestStoppedExecutorsLateResultIsRefused(t *testing.T) {
	t.Parallel()
	c := newCluster(t, "edge-1", "edge-2")
	id := c.start("s: test.sleep {\"ms\": 2500}\n")
	r := c.until(id, "leased", func(r runOut) bool { st, _, _ := stepOf(r, "s"); return st == "leased" })
	_, holder, _ := stepOf(r, "s")
	pgid := -c.execs[holder].Process.Pid
	syscall.Kill(pgid, syscall.SIGSTOP)
	r = c.until(id, "complete on the other executor", func(r runOut) bool { return r.State == "complete" })
	_, other, attempts := stepOf(r, "s")
	if other == holder || attempts != 2 {
		t.Fatalf("re-leased past the TTL to the other executor: %s after %s, %d attempts", other, holder, attempts)
	}
	before := c.plane.ctl(t, "", "--as", "alice", "runs", "show", id, "-o", "json").stdout
	syscall.Kill(pgid, syscall.SIGCONT)
	// The stopped executor wakes, finishes its sleep and reports attempt 1;
	// the control plane refuses it. Wait until it has tried.
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(c.plane.stderr.String(), "stale fence") {
		if time.Now().After(deadline) {
			t.Fatalf("the late result never arrived:\n%s", c.plane.stderr)
		}
		<-time.After(50 * time.Millisecond)
	}
	after := c.plane.ctl(t, "", "--as", "alice", "runs", "show", id, "-o", "json").stdout
	if before != after {
		t.Fatalf("a late result changed the run:\n%s\n---\n%s", before, after)
	}
	auditClean(t, c.plane, "alice", id)
}
