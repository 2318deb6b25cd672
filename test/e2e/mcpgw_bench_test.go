package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tollgate-dev/tollgate/internal/controlplane"
	"github.com/tollgate-dev/tollgate/internal/identity"
)

// BenchmarkMCPGatewayReadOnlyCall: a read-only tool call through the MCP
// gateway (agent → gateway over streamable HTTP → a one-step run on Redis
// → leased to an executor over gRPC → the tool → back) against the same
// call to an MCP server serving that tool directly over streamable HTTP,
// one after the other on the same machine. Reports each side's p50/p99
// and the gateway's p50 overhead.
func BenchmarkMCPGatewayReadOnlyCall(b *testing.B) {
	w, _ := benchWorld(b, "everysec")
	gw := w.srv.MCPGateway(controlplane.MCPOptions{Refresh: 50 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { _ = gw.Run(ctx) })
	hs := httptest.NewServer(gw.Handler())
	b.Cleanup(func() { hs.Close(); cancel(); wg.Wait() })
	tok, err := identity.Mint(w.priv, "k", "i", "a", "alice", time.Hour, time.Now())
	if err != nil {
		b.Fatal(err)
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, nil)
	viaGW, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: hs.URL, HTTPClient: &http.Client{Transport: bearerRT{tok}}}, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer viaGW.Close()
	// The same tool, served directly: what the executor's stub answers.
	direct := mcp.NewServer(&mcp.Implementation{Name: "mcp-monitor", Version: "1"}, nil)
	direct.AddTool(&mcp.Tool{Name: "get_cpu_info", InputSchema: json.RawMessage(`{"type":"object"}`), Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			out, err := w.tools.Call(ctx, "mcp-monitor", "get_cpu_info", req.Params.Arguments, "")
			if err != nil {
				return nil, err
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(out)}}, StructuredContent: json.RawMessage(out)}, nil
		})
	ds := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return direct }, nil))
	defer ds.Close()
	straight, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: ds.URL}, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer straight.Close()
	// The executor's tools reach the gateway's list.
	for {
		res, err := viaGW.ListTools(ctx, nil)
		if err != nil {
			b.Fatal(err)
		}
		if len(res.Tools) > 3 {
			break
		}
		time.Sleep(20 * time.Millisecond) // polling a list the executor's hello fills
	}
	call := func(s *mcp.ClientSession, name string) time.Duration {
		t0 := time.Now()
		res, err := s.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: map[string]any{}})
		if err != nil || res.IsError {
			b.Fatalf("%s: %v %v", name, err, res)
		}
		return time.Since(t0)
	}
	for range 20 { // warm both paths
		call(viaGW, "mcp-monitor.get_cpu_info")
		call(straight, "get_cpu_info")
	}
	gwT, directT := make([]time.Duration, 0, b.N), make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for b.Loop() {
		gwT = append(gwT, call(viaGW, "mcp-monitor.get_cpu_info"))
		directT = append(directT, call(straight, "get_cpu_info"))
	}
	b.StopTimer()
	percentiles(b, directT, "direct-")
	percentiles(b, gwT, "gateway-")
	p50 := func(ds []time.Duration) float64 {
		return float64(ds[len(ds)/2].Microseconds()) / 1000 // sorted by percentiles
	}
	b.ReportMetric(p50(gwT)-p50(directT), "overhead-p50-ms")
	b.ReportMetric(float64(gwT[len(gwT)*99/100].Microseconds()-directT[len(directT)*99/100].Microseconds())/1000, "overhead-p99-ms")
}
