package e2e

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	tollgatev1 "github.com/tollgate-dev/tollgate/gen/tollgate/v1"
	"github.com/tollgate-dev/tollgate/internal/identity"
)

// laxTestCatalog is the control plane's catalog entry for the test MCP
// server that wrongly calls mark read-only; the server itself advertises
// mark with readOnlyHint false.
const laxTestCatalog = `
  test:
    - {name: sleep, annotations: {readOnlyHint: true}}
    - {name: mark, annotations: {readOnlyHint: true, idempotentHint: true}}
`

// stepErrors reads each step's latest error from `runs show -o json`.
func (c *cluster) stepErrors(id string) map[string]string {
	c.t.Helper()
	var r struct {
		Steps []struct {
			ID    string `json:"id"`
			Error string `json:"error"`
		} `json:"steps"`
	}
	c.plane.ctl(c.t, "", "--as", "alice", "runs", "show", id, "-o", "json").json(c.t, &r)
	out := map[string]string{}
	for _, s := range r.Steps {
		out[s.ID] = s.Error
	}
	return out
}

// waitLog waits until the process log holds every one of want on one line.
func waitLog(t *testing.T, what string, log interface{ String() string }, want ...string) string {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		for _, line := range strings.Split(log.String(), "\n") {
			all := true
			for _, w := range want {
				all = all && strings.Contains(line, w)
			}
			if all {
				return line
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: no log line with %q:\n%s", what, want, log)
		}
		<-time.After(20 * time.Millisecond)
	}
}

// Item 4 (I2), with real processes: the control plane's catalog wrongly
// marks test.mark read-only; the executor's test MCP server says it is not.
// A run compiled before any executor connected (no gate: the catalog said
// read-only) is not leased once the executor says otherwise: the step fails
// with the reason and the mark never happens. The plane warns, naming both
// views. The same recipe started again compiles behind an approval, runs
// mark once only after it, and the audit is clean.
func TestItem4_LaxCatalogCannotSkipTheGate(t *testing.T) {
	t.Parallel()
	c := newClusterSpec(t, clusterSpec{testCatalog: laxTestCatalog, later: []string{"edge-1"}})
	const recipe = "m: test.mark {\"name\": \"lax\"}\n"
	first := c.start(recipe)
	c.until(first, "blocked with no executor", func(r runOut) bool { return r.State == "blocked" })

	c.startExecutor("edge-1", os.Stderr)
	r := c.until(first, "failed", func(r runOut) bool { return r.State == "failed" || r.State == "complete" })
	if n := c.mark("lax"); n != 0 || r.State != "failed" {
		t.Fatalf("I2: with no approval, test.mark ran %d times (run %s)", n, r.State)
	}
	t.Logf("the plane warned: %s", waitLog(t, "the plane warns about the catalog", c.plane.stderr, "WARN", "disagree", "tool=test.mark", "catalog_says=read-only",
		"executor=edge-1", `executor_says=side-effecting`, "using=side-effecting"))
	if st, _, _ := stepOf(r, "m"); st != "failed" {
		t.Fatalf("step m: %s", st)
	}
	if e := c.stepErrors(first)["m"]; !strings.Contains(e, "edge-1") || !strings.Contains(e, "test.mark is side-effecting") || !strings.Contains(e, "no approval governs") {
		t.Fatalf("the step's error says why: %q", e)
	}
	t.Logf("the plane warned: %s", waitLog(t, "the plane says it refused the lease", c.plane.stderr, "refused to lease", "tool=test.mark", "executor=edge-1"))

	second := c.start(recipe)
	r = c.until(second, "parked at a gate", func(r runOut) bool { return r.State == "parked" || r.State == "complete" })
	var gate string
	for _, a := range r.Asks {
		if a.State == "pending" {
			gate = a.AskID
		}
	}
	if r.State != "parked" || gate == "" || c.mark("lax") != 0 {
		t.Fatalf("I1: the new run compiles mark behind a gate and waits: %+v, mark %d", r, c.mark("lax"))
	}
	if res := c.plane.ctl(t, "", "--as", "alice", "approve", gate); res.code != 0 {
		t.Fatalf("approve: %s %s", res.stdout, res.stderr)
	}
	c.until(second, "complete", func(r runOut) bool { return r.State == "complete" })
	if n := c.mark("lax"); n != 1 {
		t.Fatalf("after the approval mark runs exactly once, got %d", n)
	}
	if res := c.plane.ctl(t, "", "--as", "alice", "audit"); res.code != 0 {
		t.Fatalf("audit: %d %s %s", res.code, res.stdout, res.stderr)
	}
}

// buggyPlane plays a control plane with a bug: it leases test.mark as
// read-only, with no grant, to the first executor that connects, and
// hands back what the executor answers.
type buggyPlane struct {
	tollgatev1.UnimplementedExecutorServiceServer
	up chan *tollgatev1.ExecutorMessage
}

func (b *buggyPlane) Connect(stream tollgatev1.ExecutorService_ConnectServer) error {
	if _, err := stream.Recv(); err != nil { // hello
		return err
	}
	if err := stream.Send(&tollgatev1.ControlMessage{Message: &tollgatev1.ControlMessage_Welcome{Welcome: &tollgatev1.Welcome{SessionId: "s"}}}); err != nil {
		return err
	}
	if err := stream.Send(&tollgatev1.ControlMessage{Message: &tollgatev1.ControlMessage_Lease{Lease: &tollgatev1.Lease{
		LeaseId: "r/m/1", Fence: 1, RunId: "r", StepId: "m", Attempt: 1, Kind: tollgatev1.StepKind_STEP_KIND_TOOL,
		Server: "test", Tool: "mark", ArgsJson: `{"name":"buggy"}`, SideEffect: false, IdempotencyKey: "r/m"}}}); err != nil {
		return err
	}
	for {
		m, err := stream.Recv()
		if err != nil {
			return err
		}
		if m.GetHeartbeat() == nil {
			b.up <- m
		}
	}
}

// Item 4 (I2), with real processes: a real executor hosting the real test
// MCP server refuses test.mark leased as read-only with no grant by a
// control plane with a bug, says why (naming the tool), and the mark never
// happens.
func TestItem4_ExecutorRefusesAnUngrantedSideEffectFromABuggyPlane(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	pki, err := identity.MintDevPKI(filepath.Join(home, "pki"), identity.DefaultTrustDomain, []string{"edge-1"}, time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	serverTLS, err := identity.ServerTLS(pki.Server.Cert, pki.Server.Key, pki.CA, nil)
	if err != nil {
		t.Fatal(err)
	}
	bp := &buggyPlane{up: make(chan *tollgatev1.ExecutorMessage, 16)}
	gs := grpc.NewServer(grpc.Creds(credentials.NewTLS(serverTLS)))
	tollgatev1.RegisterExecutorServiceServer(gs, bp)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = gs.Serve(lis) }()
	defer gs.Stop()

	pub, _, _ := ed25519.GenerateKey(rand.Reader)
	der, _ := x509.MarshalPKIXPublicKey(pub)
	grantPub := filepath.Join(home, "grant.pub")
	os.WriteFile(grantPub, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), 0o644)
	marks := filepath.Join(home, "marks.json")
	cfg := filepath.Join(home, "edge-1.yaml")
	os.WriteFile(cfg, fmt.Appendf(nil, "id: edge-1\ncontrol_plane: %s\ntls: {cert: %s, key: %s, ca: %s}\ngrant_keys: {cp: %s}\nmcp_servers:\n  - {name: test, command: [%q, \"--file\", %q]}\n",
		lis.Addr(), pki.Executors["edge-1"].Cert, pki.Executors["edge-1"].Key, pki.CA, grantPub, buildExample(t, "testserver"), marks), 0o644)
	stderr := &logBuffer{}
	cmd := exec.Command(filepath.Join(bin, "executor"), "--config", cfg)
	cmd.Stderr = writerFunc(func(b []byte) (int, error) { stderr.WriteString(string(b)); return len(b), nil })
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); _ = cmd.Wait() }()

	var m *tollgatev1.ExecutorMessage
	select {
	case m = <-bp.up:
	case <-time.After(30 * time.Second):
		t.Fatalf("the executor never answered the lease:\n%s", stderr)
	}
	ref := m.GetResult().GetRefusal()
	if ref == nil || ref.GetReason() != tollgatev1.RefusalReason_REFUSAL_REASON_GRANT_MISSING {
		if m.GetAck() != nil { // it is running the call: wait for its result, then read the counter
			select {
			case m = <-bp.up:
			case <-time.After(10 * time.Second):
			}
		}
		b, _ := os.ReadFile(marks)
		t.Fatalf("I2: the executor did not refuse test.mark leased read-only with no grant: %v (marks: %s)", m, b)
	}
	for _, w := range []string{"test.mark", "side-effecting", "read-only", "grant"} {
		if !strings.Contains(ref.GetMessage(), w) {
			t.Fatalf("the refusal %q does not say %q", ref.GetMessage(), w)
		}
	}
	t.Logf("the executor refused: %s", waitLog(t, "the executor logs its refusal", stderr, "WARN", "refused a side-effecting lease", "tool=test.mark", "lease_side_effect=false"))
	var counts map[string]int
	if b, err := os.ReadFile(marks); err == nil {
		_ = json.Unmarshal(b, &counts)
	}
	if counts["buggy"] != 0 {
		t.Fatalf("I2: test.mark ran %d times", counts["buggy"])
	}
}

// The catalog is read again while the plane runs (a ConfigMap edit): a run
// compiled under the lax catalog, before the reload, is not leased once
// the reloaded catalog calls test.mark side-effecting — the step fails with
// the reason and mark never happens. The same recipe started again
// compiles behind an approval; the audit is clean.
func TestReloadedCatalogCannotSkipTheGate(t *testing.T) {
	t.Parallel()
	c := newClusterSpec(t, clusterSpec{testCatalog: laxTestCatalog, later: []string{"edge-1"}})
	const recipe = "m: test.mark {\"name\": \"reloaded\"}\n"
	first := c.start(recipe)
	c.until(first, "blocked with no executor", func(r runOut) bool { return r.State == "blocked" })

	cat, err := os.ReadFile("../../examples/catalog.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(c.home, "catalog.yaml"), append(cat, testCatalog...), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("the plane reloaded: %s", waitLog(t, "the plane reloads the catalog", c.plane.stderr, "tool catalog reloaded", "compiles_differently=true"))

	c.startExecutor("edge-1", os.Stderr)
	r := c.until(first, "failed", func(r runOut) bool { return r.State == "failed" || r.State == "complete" })
	if n := c.mark("reloaded"); n != 0 || r.State != "failed" {
		t.Fatalf("I2: with no approval, test.mark ran %d times (run %s)", n, r.State)
	}
	if e := c.stepErrors(first)["m"]; !strings.Contains(e, "tool catalog, reloaded since") || !strings.Contains(e, "no approval governs") {
		t.Fatalf("the step's error says why: %q", e)
	}
	second := c.start(recipe)
	r = c.until(second, "parked at a gate", func(r runOut) bool { return r.State == "parked" || r.State == "complete" })
	if r.State != "parked" || c.mark("reloaded") != 0 {
		t.Fatalf("I1: the new run compiles mark behind a gate and waits: %+v, mark %d", r, c.mark("reloaded"))
	}
	if res := c.plane.ctl(t, "", "--as", "alice", "audit"); res.code != 0 {
		t.Fatalf("audit: %d %s %s", res.code, res.stdout, res.stderr)
	}
}
