package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	tollgatev1 "github.com/tollgate-dev/tollgate/gen/tollgate/v1"
	"github.com/tollgate-dev/tollgate/internal/executor"
)

// Issue 16: the input schema a real MCP server advertises in tools/list
// reaches the control plane through the executor's hello (catalog.yaml
// gives notes.store none), and nobody is asked to approve a call it
// refuses: a save whose text resolves to an object never opens its ask
// (the run fails naming the step, the field and why, and the notes file
// is never written), and literal args it refuses are refused at start
// with line:col.
func TestAdvertisedInputSchemaRefusesBeforeAnyAsk(t *testing.T) {
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
	start := func(recipe string) (*tollgatev1.StartRunResponse, error) {
		return runs.StartRun(ctx, &tollgatev1.StartRunRequest{Source: &tollgatev1.StartRunRequest_Recipe{Recipe: recipe}})
	}

	resp, err := start("cpu: mcp-monitor.get_cpu_info {}\nask me:\n  save the reading?\n  show: {cpu}\nsave: notes.store {\"text\": \"{cpu}\"}\n")
	if err != nil {
		t.Fatal(err)
	}
	r := waitRun(t, runs, resp.GetRun().GetId(), state(tollgatev1.RunState_RUN_STATE_FAILED))
	if len(r.GetAsks()) != 0 {
		t.Fatalf("an ask opened for a call notes.store refuses: %v", r.GetAsks())
	}
	for _, want := range []string{"`save` (notes·store)", "text", `want "string"`} {
		if !strings.Contains(r.GetStateReason(), want) {
			t.Fatalf("the reason %q should say %q", r.GetStateReason(), want)
		}
	}
	if _, err := os.Stat(notesFile); err == nil {
		t.Fatal("the notes file was written")
	}

	// The executor is connected (cpu ran on it): recipes compile against
	// the schema it advertised.
	_, err = start("ask me:\n  save?\nsave: notes.store {\"txt\": \"hello\"}\n")
	if status.Code(err) != codes.InvalidArgument {
		t.Fatalf("want the start refused: %v", err)
	}
	for _, want := range []string{"3:20", "passes `txt`", "3:19", "lacks `text`"} {
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("the refusal should say %q: %v", want, err)
		}
	}
}
