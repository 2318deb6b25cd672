// Package servers builds the example MCP servers into a binary: Tollgate's
// dev mode runs them from its own executable (`controlplane mcp-server
// NAME`, `executor mcp-server NAME`), so it needs neither the source tree
// nor a Go toolchain. Each runs exactly as its command in ../NAME does.
package servers

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/tollgate-dev/tollgate/examples/mcp/internal/demo"
	"github.com/tollgate-dev/tollgate/examples/mcp/internal/monitor"
	"github.com/tollgate-dev/tollgate/examples/mcp/internal/notes"
)

// runFunc is one server's command line: it serves MCP over stdin/stdout
// (or --http) until ctx ends or the client hangs up.
type runFunc func(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error

// Names lists the servers Run knows, by their directory's name under
// examples/mcp, sorted.
func Names() []string { return []string{"demo", "monitor", "notes"} }

func lookup(name string) (runFunc, bool) {
	switch name {
	case "demo":
		return demo.Run, true
	case "monitor":
		return monitor.Run, true
	case "notes":
		return notes.Run, true
	}
	return nil, false
}

// DemoServers are the names demo's --server accepts (the stand-ins).
func DemoServers() []string { return slices.Clone(demo.Servers) }

// Run runs server name with its flags args (see ../README.md).
func Run(ctx context.Context, name string, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	run, ok := lookup(name)
	if !ok {
		return fmt.Errorf("no example MCP server %q; there are %s", name, strings.Join(Names(), ", "))
	}
	return run(ctx, args, stdin, stdout, stderr)
}
