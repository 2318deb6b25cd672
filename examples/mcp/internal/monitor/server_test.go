package monitor

import (
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/goleak"

	"github.com/tollgate-dev/tollgate/examples/mcp/internal/mcptest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The built binary over stdio: tools and annotations as catalog.yaml says,
// and both tools answer from the real /proc.
func TestBinaryStdio(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc")
	}
	ctx := t.Context()
	cs := mcptest.ConnectCommand(t, ctx, mcptest.Build(t, "../../monitor"))
	if got := cs.InitializeResult().ServerInfo.Name; got != ServerName {
		t.Errorf("server name = %q, want %q", got, ServerName)
	}
	mcptest.CheckCatalog(t, ctx, cs, ServerName)

	var cpu CPUInfo
	mcptest.Decode(t, mcptest.Call(t, ctx, cs, "get_cpu_info", map[string]any{}, nil), &cpu)
	if cpu.Cores < 1 || cpu.Load1 < 0 || cpu.Load5 < 0 || cpu.Load15 < 0 {
		t.Errorf("get_cpu_info = %+v", cpu)
	}
	var mem MemoryInfo
	mcptest.Decode(t, mcptest.Call(t, ctx, cs, "get_memory_info", nil, nil), &mem)
	if mem.TotalBytes == 0 || mem.AvailableBytes > mem.TotalBytes || mem.UsedPercent < 0 || mem.UsedPercent > 100 {
		t.Errorf("get_memory_info = %+v", mem)
	}
}

// Parsing, on a fixed /proc, in-process over pipes.
func TestParseFixedProc(t *testing.T) {
	proc := t.TempDir()
	write := func(name, s string) {
		if err := os.WriteFile(filepath.Join(proc, name), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("cpuinfo", "processor\t: 0\nmodel name\t: Test CPU @ 2.00GHz\ncpu cores\t: 2\n\n"+
		"processor\t: 1\nmodel name\t: Test CPU @ 2.00GHz\n\n"+
		"processor\t: 2\nmodel name\t: Test CPU @ 2.00GHz\n\n")
	write("loadavg", "0.52 0.58 0.59 1/389 12345\n")
	write("meminfo", "MemTotal:        8000000 kB\nMemFree:          100000 kB\nMemAvailable:    2000000 kB\n")

	ctx := t.Context()
	cs := mcptest.ConnectPipes(t, ctx, Run, "--proc", proc)
	mcptest.CheckCatalog(t, ctx, cs, ServerName)

	var cpu CPUInfo
	mcptest.Decode(t, mcptest.Call(t, ctx, cs, "get_cpu_info", nil, nil), &cpu)
	want := CPUInfo{ModelName: "Test CPU @ 2.00GHz", Cores: 3, Load1: 0.52, Load5: 0.58, Load15: 0.59}
	if cpu != want {
		t.Errorf("get_cpu_info = %+v, want %+v", cpu, want)
	}
	var mem MemoryInfo
	mcptest.Decode(t, mcptest.Call(t, ctx, cs, "get_memory_info", nil, nil), &mem)
	wantMem := MemoryInfo{TotalBytes: 8000000 * 1024, AvailableBytes: 2000000 * 1024, UsedBytes: 6000000 * 1024, UsedPercent: 75}
	if mem != wantMem {
		t.Errorf("get_memory_info = %+v, want %+v", mem, wantMem)
	}

	// A /proc file gone is a tool error, not a protocol error.
	if err := os.Remove(filepath.Join(proc, "meminfo")); err != nil {
		t.Fatal(err)
	}
	if res := mcptest.Call(t, ctx, cs, "get_memory_info", nil, nil); !res.IsError {
		t.Errorf("get_memory_info without meminfo: IsError = false, text %s", mcptest.Text(res))
	}
}

// --http serves the same tools over streamable HTTP.
func TestHTTP(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc")
	}
	ctx := t.Context()
	url, stop := mcptest.StartHTTP(t, ctx, Run)
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	cs, err := mcptest.Client().Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{Transport: tr}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	mcptest.CheckCatalog(t, ctx, cs, ServerName)
	var cpu CPUInfo
	mcptest.Decode(t, mcptest.Call(t, ctx, cs, "get_cpu_info", nil, nil), &cpu)
	if cpu.Cores < 1 {
		t.Errorf("get_cpu_info = %+v", cpu)
	}
	if err := cs.Close(); err != nil {
		t.Errorf("close session: %v", err)
	}
	if err := stop(); err != nil {
		t.Errorf("run: %v", err)
	}
}
