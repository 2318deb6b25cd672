package devstack

import (
	"context"
	"crypto/ed25519"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/tollgate-dev/tollgate/internal/controlplane"
	"github.com/tollgate-dev/tollgate/internal/executor"
	"github.com/tollgate-dev/tollgate/internal/telemetry"
)

// Executor builds the example MCP servers (from the source tree, when
// run from a checkout) and serves them through a real executor connected
// over loopback gRPC to the dev control plane, until ctx ends. It is
// controlplane.MainConfig's DevExecutor.
func Executor(ctx context.Context, d controlplane.DevExecutor) error {
	var servers []executor.MCPServer
	if _, err := os.Stat("examples/mcp/monitor"); err == nil {
		bin := filepath.Join(d.Home, "dev", "bin")
		for _, name := range []string{"monitor", "notes", "demo"} {
			out, err := exec.CommandContext(ctx, "go", "build", "-o", filepath.Join(bin, name), "./examples/mcp/"+name).CombinedOutput()
			if err != nil {
				return fmt.Errorf("build example MCP server %s: %v\n%s", name, err, out)
			}
		}
		effects := filepath.Join(d.Home, "demo-effects.jsonl")
		servers = append(servers,
			executor.MCPServer{Name: "mcp-monitor", Command: []string{filepath.Join(bin, "monitor")}},
			executor.MCPServer{Name: "notes", Command: []string{filepath.Join(bin, "notes"), "--file", filepath.Join(d.Home, "notes.jsonl")}})
		for _, s := range []string{"google-calendar", "gmail", "slack", "github", "erp", "payments"} {
			servers = append(servers, executor.MCPServer{Name: s, Command: []string{filepath.Join(bin, "demo"), "--server", s, "--log", effects}})
		}
		d.Log.Info("dev executor hosts the example MCP servers", "notes", filepath.Join(d.Home, "notes.jsonl"), "effects", effects)
	} else {
		d.Log.Warn("run from a checkout of the repository to host the example MCP servers; the dev executor hosts none")
	}
	tracing, err := telemetry.New(ctx, telemetry.Config{Endpoint: d.OTLPEndpoint, Service: "tollgate-executor", Instance: "dev-executor", Log: d.Log})
	if err != nil {
		return err
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = tracing.Shutdown(sctx)
	}()
	return executor.Serve(ctx, executor.ServeConfig{ID: "dev-executor", Addr: d.Addr, TLS: d.TLS,
		GrantKeys: map[string]ed25519.PublicKey{"grant": d.GrantKey}, MCPServers: servers, Log: d.Log, Capacity: 32, Tracing: tracing})
}
