package devstack

import (
	"context"
	"crypto/ed25519"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/tollgate-dev/tollgate/examples/mcp/servers"
	"github.com/tollgate-dev/tollgate/internal/controlplane"
	"github.com/tollgate-dev/tollgate/internal/executor"
	"github.com/tollgate-dev/tollgate/internal/telemetry"
)

// Executor serves the example MCP servers through a real executor
// connected over loopback gRPC to the dev control plane, until ctx ends.
// The servers are built into the control plane's binary: each is started
// as `EXECUTABLE mcp-server NAME …` (servers.Subcommand), so
// dev mode works from any working directory, after `go install` or in a
// container, with no source tree and no Go toolchain. It is
// controlplane.MainConfig's DevExecutor.
func Executor(ctx context.Context, d controlplane.DevExecutor) error {
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find this executable to start the example MCP servers from: %w", err)
	}
	tracing, err := telemetry.New(ctx, telemetry.Config{Endpoint: d.OTLPEndpoint, Insecure: d.OTLPInsecure, Service: "tollgate-executor", Instance: "dev-executor", Log: d.Log})
	if err != nil {
		return err
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = tracing.Shutdown(sctx)
	}()
	notes, effects := filepath.Join(d.Home, "notes.jsonl"), filepath.Join(d.Home, "demo-effects.jsonl")
	d.Log.Info("dev executor hosts the example MCP servers", "notes", notes, "effects", effects)
	return executor.Serve(ctx, executor.ServeConfig{ID: "dev-executor", Addr: d.Addr, TLS: d.TLS,
		GrantKeys: map[string]ed25519.PublicKey{"grant": d.GrantKey}, MCPServers: MCPServers(self, notes, effects), Log: d.Log, Capacity: 32, Tracing: tracing})
}

// MCPServers are the example MCP servers as the dev executor hosts them,
// each a stdio command of the binary self (its mcp-server subcommand):
// mcp-monitor, notes (appending to the file notes) and the demo stand-ins
// (recording side effects in the file effects).
func MCPServers(self, notes, effects string) []executor.MCPServer {
	cmd := func(args ...string) []string {
		return append([]string{self, servers.Subcommand}, args...)
	}
	out := []executor.MCPServer{
		{Name: "mcp-monitor", Command: cmd("monitor")},
		{Name: "notes", Command: cmd("notes", "--file", notes)},
	}
	for _, s := range servers.DemoServers() {
		out = append(out, executor.MCPServer{Name: s, Command: cmd("demo", "--server", s, "--log", effects)})
	}
	return out
}
