package executor

import (
	"context"
	"io"
	"strings"
	"testing"
)

// `executor mcp-server NAME` runs an example MCP server built into the
// binary (servers.Command), not the executor: it needs no --config.
func TestMainMCPServerSubcommand(t *testing.T) {
	var stderr strings.Builder
	err := Main(context.Background(), []string{"mcp-server", "nope"}, Options{Stdin: strings.NewReader(""), Stdout: io.Discard, Stderr: &stderr})
	if err == nil || !strings.Contains(err.Error(), `no example MCP server "nope"`) || strings.Contains(stderr.String(), "--config") {
		t.Fatalf("mcp-server nope: %v (stderr %q)", err, stderr.String())
	}
	// A known server serves until its client hangs up: here at once.
	if err := Main(context.Background(), []string{"mcp-server", "monitor"}, Options{Stdin: strings.NewReader(""), Stdout: io.Discard, Stderr: io.Discard}); err != nil {
		t.Fatalf("mcp-server monitor with stdin closed: %v", err)
	}
}
