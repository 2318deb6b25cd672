package e2e

import (
	"bufio"
	"context"
	"crypto/ed25519"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	tollgatev1 "github.com/tollgate-dev/tollgate/gen/tollgate/v1"
	"github.com/tollgate-dev/tollgate/internal/executor"
	"github.com/tollgate-dev/tollgate/pkg/grant"
)

func buildExample(t *testing.T, name string) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), name)
	if b, err := exec.Command("go", "build", "-o", out, "../../examples/mcp/"+name).CombinedOutput(); err != nil {
		t.Fatalf("build %s: %v\n%s", name, err, b)
	}
	return out
}

// mcpExecutor starts the executor runtime hosting real MCP servers over
// stdio, connected to the world's control plane over loopback gRPC.
func (w *world) mcpExecutor(t *testing.T, ctx context.Context, id string, servers []executor.MCPServer) {
	t.Helper()
	host, err := executor.StartMCP(ctx, servers)
	if err != nil {
		t.Fatal(err)
	}
	client := tollgatev1.NewExecutorServiceClient(w.execConn(t, id))
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		defer host.Close()
		_ = executor.Run(ctx, executor.Config{ID: id, Capacity: 16, Host: host, Prose: executor.Template{},
			Grants: grant.NewVerifier(map[string]ed25519.PublicKey{"cp": w.gpub}),
			Connect: func(ctx context.Context) (tollgatev1.ExecutorService_ConnectClient, error) {
				return client.Connect(ctx)
			}})
	}()
}

// graph-ask-demo through the real MCP servers: the probes read /proc, the
// run parks, and approval lets save run exactly once — its line appears in
// the notes file.
func TestGraphAskDemoWithRealMCPServers(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	notesFile := filepath.Join(t.TempDir(), "notes.jsonl")
	w.mcpExecutor(t, ctx, "edge-1", []executor.MCPServer{
		{Name: "mcp-monitor", Command: []string{buildExample(t, "monitor")}},
		{Name: "notes", Command: []string{buildExample(t, "notes"), "--file", notesFile}},
	})
	runs := tollgatev1.NewRunServiceClient(w.conn(t, "alice"))
	resp, err := runs.StartRun(ctx, &tollgatev1.StartRunRequest{Source: &tollgatev1.StartRunRequest_Skill{Skill: "graph-ask-demo"}})
	if err != nil {
		t.Fatal(err)
	}
	id := resp.GetRun().GetId()
	r := waitRun(t, runs, id, state(tollgatev1.RunState_RUN_STATE_PARKED))
	for _, s := range r.GetSteps() {
		if s.GetStepId() == "cpu" && !strings.Contains(s.GetAttempts()[0].GetOutputJson(), "core") {
			t.Fatalf("cpu read /proc through the MCP server: %s", s.GetAttempts()[0].GetOutputJson())
		}
	}
	if _, err := os.Stat(notesFile); err == nil {
		t.Fatal("I1: the notes file was written before the approval")
	}
	approvals := tollgatev1.NewApprovalServiceClient(w.conn(t, "alice"))
	if err := approveAsShown(t, ctx, approvals, id+"/ask_1"); err != nil {
		t.Fatal(err)
	}
	waitRun(t, runs, id, state(tollgatev1.RunState_RUN_STATE_COMPLETE))
	f, err := os.Open(notesFile)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	lines := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		lines++
		if !strings.Contains(sc.Text(), id+"/save") {
			t.Fatalf("the idempotency key run/step reached the tool: %s", sc.Text())
		}
	}
	if lines != 1 {
		t.Fatalf("save wrote %d lines, want exactly 1", lines)
	}
}

// Fan honesty through ONE stdio MCP server on one executor.
func TestFanThroughOneStdioMCPServer(t *testing.T) {
	// Not in parallel: it measures how long a fan takes, which other
	// tests sharing the two cores would stretch.
	w := newWorld(t, "  test:\n    - {name: sleep, annotations: {readOnlyHint: true}}\n")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w.mcpExecutor(t, ctx, "edge-1", []executor.MCPServer{{Name: "test", Command: []string{buildExample(t, "testserver"), "--file", filepath.Join(t.TempDir(), "m.json")}}})
	runs := tollgatev1.NewRunServiceClient(w.conn(t, "alice"))
	recipe := "together naps:\n  a: test.sleep {\"ms\": 400}\n  b: test.sleep {\"ms\": 270}\n  c: test.sleep {\"ms\": 80}\n"
	resp, err := runs.StartRun(ctx, &tollgatev1.StartRunRequest{Source: &tollgatev1.StartRunRequest_Recipe{Recipe: recipe}})
	if err != nil {
		t.Fatal(err)
	}
	r := waitRun(t, runs, resp.GetRun().GetId(), state(tollgatev1.RunState_RUN_STATE_COMPLETE))
	var first, last time.Time
	for _, s := range r.GetSteps() {
		for _, a := range s.GetAttempts() {
			if a.GetLeasedAt() == nil {
				continue
			}
			if st := a.GetLeasedAt().AsTime(); first.IsZero() || st.Before(first) {
				first = st
			}
			if fin := a.GetFinishedAt().AsTime(); fin.After(last) {
				last = fin
			}
		}
	}
	wall := last.Sub(first)
	if wall <= 400*time.Millisecond || wall > time.Duration(1.05*400)*time.Millisecond+20*time.Millisecond {
		t.Fatalf("fan wall clock %v: want about the slowest branch (400 ms), not the sum (750 ms)", wall)
	}
	t.Logf("fan through one stdio MCP server: wall %v", wall)
}
