package controlplane

import (
	"crypto/tls"
	"fmt"
	"net"
	"time"

	"github.com/tollgate-dev/tollgate/internal/controlplane/dispatch"
	"github.com/tollgate-dev/tollgate/internal/controlplane/mcpgw"
	"github.com/tollgate-dev/tollgate/internal/identity"
)

// MCPOptions configure the MCP gateway (mcpgw).
type MCPOptions struct {
	// AskURL is an ask's page in the web inbox (nil: none).
	AskURL func(askID string) string
	// Pending answers a call that waits for a person at once.
	Pending bool
	// Progress and Refresh: see mcpgw.Config (0: its defaults).
	Progress, Refresh time.Duration
}

// MCPGateway is the MCP gateway in front of this server: calls start
// runs through its one start path, as its callers, and read them through
// its runner; tools are those its executors offer. Serve its Handler,
// and run its Run for as long (it is one of the server's Background
// tasks in the binary, run.go).
func (s *Server) MCPGateway(o MCPOptions) *mcpgw.Gateway {
	var tools mcpgw.Tools = noTools{}
	if s.execs != nil {
		tools = s.execs
	}
	return mcpgw.New(mcpgw.Config{Verifier: s.cfg.Verifier, Starter: s.runs, Runs: s.Runner, Lister: s.cfg.Store, Policy: s.desk, Tools: tools,
		Catalog: s.catalogOf, Readers: s.readers, Answers: s.local, Slot: s.watches.Slot, AskURL: o.AskURL, Pending: o.Pending, Progress: o.Progress, Refresh: o.Refresh, Log: s.log})
}

// noTools offers none: a server whose Dispatcher is external lists only
// Tollgate's own tools.
type noTools struct{}

func (noTools) Offered() []dispatch.Offer { return nil }

// mcpListen listens for the MCP gateway (nil when --mcp-listen is not
// given): TLS with the API's certificate when it has one; plain HTTP only
// on loopback, since bearer tokens cross it.
func mcpListen(o *Options, apiTLS *tls.Config) (net.Listener, error) {
	if o.MCPListen == "" {
		return nil, nil
	}
	if apiTLS == nil && !identity.Loopback(o.MCPListen) {
		return nil, fmt.Errorf("--mcp-listen %s is off loopback and would take bearer tokens over plain http: give --tls-cert, or listen on loopback behind a proxy that terminates TLS", o.MCPListen)
	}
	lis, err := net.Listen("tcp", o.MCPListen)
	if err != nil {
		return nil, fmt.Errorf("mcp listen: %w", err)
	}
	if apiTLS != nil {
		lis = tls.NewListener(lis, apiTLS)
	}
	return lis, nil
}

// mcpURL is the gateway's address as a client reaches it.
func mcpURL(lis net.Listener, apiTLS *tls.Config) string {
	scheme := "http"
	if apiTLS != nil {
		scheme = "https"
	}
	return scheme + "://" + lis.Addr().String() + "/mcp"
}
