// Package monitor is the "mcp-monitor" example MCP server (../../monitor is
// its command; servers builds it into Tollgate's binaries).
package monitor

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tollgate-dev/tollgate/examples/mcp/internal/serve"
)

// ServerName is the name catalog.yaml knows this server by.
const ServerName = "mcp-monitor"

// Run parses flags and serves until ctx ends or the client hangs up.
func Run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet(ServerName, flag.ContinueOnError)
	fs.SetOutput(stderr)
	httpAddr := fs.String("http", "", "serve streamable HTTP on `ADDR` (e.g. 127.0.0.1:8931) instead of stdio")
	proc := fs.String("proc", "/proc", "`DIR` to read cpuinfo, loadavg and meminfo from")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	return serve.Run(ctx, newServer(*proc), *httpAddr, stdin, stdout, stderr)
}

// CPUInfo is get_cpu_info's result.
type CPUInfo struct {
	ModelName string  `json:"model_name" jsonschema:"CPU model name from /proc/cpuinfo (empty if the kernel gives none)"`
	Cores     int     `json:"cores" jsonschema:"logical CPUs listed in /proc/cpuinfo"`
	Load1     float64 `json:"load_1m" jsonschema:"1-minute load average"`
	Load5     float64 `json:"load_5m" jsonschema:"5-minute load average"`
	Load15    float64 `json:"load_15m" jsonschema:"15-minute load average"`
}

// MemoryInfo is get_memory_info's result.
type MemoryInfo struct {
	TotalBytes     uint64  `json:"total_bytes" jsonschema:"MemTotal"`
	AvailableBytes uint64  `json:"available_bytes" jsonschema:"MemAvailable"`
	UsedBytes      uint64  `json:"used_bytes" jsonschema:"total minus available"`
	UsedPercent    float64 `json:"used_percent" jsonschema:"used as a percentage of total, two decimals"`
}

// readOnly is what both tools advertise. catalog.yaml lists only
// readOnlyHint for them, and the tests compare against it exactly, so
// idempotentHint stays unset (false) here; see README.md.
func readOnly() *mcp.ToolAnnotations {
	return &mcp.ToolAnnotations{ReadOnlyHint: true}
}

func newServer(proc string) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: ServerName, Version: "0.1.0"}, nil)
	mcp.AddTool(s, &mcp.Tool{
		Name:        "get_cpu_info",
		Description: "CPU model name, logical core count and load averages of this machine.",
		Annotations: readOnly(),
	}, func(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, CPUInfo, error) {
		info, err := readCPU(proc)
		return nil, info, err
	})
	mcp.AddTool(s, &mcp.Tool{
		Name:        "get_memory_info",
		Description: "Total and available memory of this machine, and the percentage in use.",
		Annotations: readOnly(),
	}, func(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, MemoryInfo, error) {
		info, err := readMemory(proc)
		return nil, info, err
	})
	return s
}

func readCPU(proc string) (CPUInfo, error) {
	var info CPUInfo
	cpuinfo, err := os.ReadFile(filepath.Join(proc, "cpuinfo"))
	if err != nil {
		return info, err
	}
	sc := bufio.NewScanner(bytes.NewReader(cpuinfo))
	for sc.Scan() {
		key, val, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		key, val = strings.TrimSpace(key), strings.TrimSpace(val)
		switch key {
		case "processor":
			info.Cores++
		case "model name", "Model", "Hardware", "cpu model":
			if info.ModelName == "" {
				info.ModelName = val
			}
		}
	}
	if err := sc.Err(); err != nil {
		return info, err
	}
	loadavg, err := os.ReadFile(filepath.Join(proc, "loadavg"))
	if err != nil {
		return info, err
	}
	f := strings.Fields(string(loadavg))
	if len(f) < 3 {
		return info, fmt.Errorf("loadavg: want 3 numbers, got %q", loadavg)
	}
	for i, dst := range []*float64{&info.Load1, &info.Load5, &info.Load15} {
		if *dst, err = strconv.ParseFloat(f[i], 64); err != nil {
			return info, fmt.Errorf("loadavg: %w", err)
		}
	}
	return info, nil
}

func readMemory(proc string) (MemoryInfo, error) {
	var info MemoryInfo
	meminfo, err := os.ReadFile(filepath.Join(proc, "meminfo"))
	if err != nil {
		return info, err
	}
	kb := map[string]uint64{}
	sc := bufio.NewScanner(bytes.NewReader(meminfo))
	for sc.Scan() {
		key, val, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		f := strings.Fields(val)
		if len(f) == 0 {
			continue
		}
		n, err := strconv.ParseUint(f[0], 10, 64)
		if err != nil {
			continue
		}
		kb[key] = n
	}
	if err := sc.Err(); err != nil {
		return info, err
	}
	total, ok := kb["MemTotal"]
	if !ok || total == 0 {
		return info, errors.New("meminfo: no MemTotal")
	}
	avail, ok := kb["MemAvailable"]
	if !ok { // kernels before 3.14
		avail = kb["MemFree"] + kb["Buffers"] + kb["Cached"]
	}
	avail = min(avail, total)
	info.TotalBytes = total * 1024
	info.AvailableBytes = avail * 1024
	info.UsedBytes = info.TotalBytes - info.AvailableBytes
	info.UsedPercent = float64(int64(float64(info.UsedBytes)/float64(info.TotalBytes)*10000+0.5)) / 100
	return info, nil
}
