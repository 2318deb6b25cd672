package servers

import (
	"context"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/examples/mcp/internal/mcptest"
)

// The subcommand serves each example server as its own command does:
// the tools and annotations catalog.yaml lists (what --dev's executor
// offers from the control plane's binary).
func TestCommandServesEachServer(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dir := t.TempDir()
	cases := []struct {
		server string
		args   []string
	}{
		{"mcp-monitor", []string{"monitor"}},
		{"notes", []string{"notes", "--file", filepath.Join(dir, "notes.jsonl")}},
	}
	for _, s := range DemoServers() {
		cases = append(cases, struct {
			server string
			args   []string
		}{s, []string{"demo", "--server", s, "--log", filepath.Join(dir, "effects.jsonl")}})
	}
	for _, c := range cases {
		cs := mcptest.ConnectPipes(t, ctx, func(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
			return Command(ctx, args, stdin, stdout, stderr)
		}, c.args...)
		mcptest.CheckCatalog(t, ctx, cs, c.server)
	}
}

func TestCommandNamesTheServers(t *testing.T) {
	for _, args := range [][]string{nil, {"nope"}} {
		err := Command(context.Background(), args, strings.NewReader(""), io.Discard, io.Discard)
		if err == nil || !strings.Contains(err.Error(), "demo, monitor, notes") {
			t.Errorf("Command %q: %v", args, err)
		}
	}
}
