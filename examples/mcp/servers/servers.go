// Package servers builds the example MCP servers into a binary: Tollgate's
// binaries run them as a hidden subcommand (`controlplane mcp-server NAME`,
// `executor mcp-server NAME`, see Command), and dev mode starts its
// executor's servers that way from its own executable, so it needs
// neither the source tree nor a Go toolchain. Each runs exactly as its
// command in ../NAME does.
package servers

import (
	"context"
	"fmt"
	"io"
	"os"
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

// Subcommand is the hidden subcommand of Tollgate's binaries that runs
// Command: `BINARY mcp-server NAME [FLAGS]`.
const Subcommand = "mcp-server"

// Command is the Subcommand: args are NAME and its flags; the server
// speaks MCP over stdin/stdout (os.Stdin when stdin is nil) until ctx
// ends or the client hangs up.
func Command(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return fmt.Errorf("%s NAME [FLAGS]: NAME is one of %s", Subcommand, strings.Join(Names(), ", "))
	}
	if stdin == nil {
		stdin = os.Stdin
	}
	return Run(ctx, args[0], args[1:], stdin, stdout, stderr)
}
