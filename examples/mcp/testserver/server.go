package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tollgate-dev/tollgate/examples/mcp/internal/serve"
)

// ServerName is the server's MCP name.
const ServerName = "test"

// maxSleep bounds a sleep call.
const maxSleep = 10 * time.Minute

// run parses flags and serves until ctx ends or the client hangs up.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet(ServerName, flag.ContinueOnError)
	fs.SetOutput(stderr)
	httpAddr := fs.String("http", "", "serve streamable HTTP on `ADDR` instead of stdio")
	file := fs.String("file", "", "JSON `FILE` holding mark's counters (required)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	if *file == "" {
		return errors.New("--file is required")
	}
	return serve.Run(ctx, newServer(&counters{path: *file}), *httpAddr, stdin, stdout, stderr)
}

// SleepArgs are sleep's arguments.
type SleepArgs struct {
	Ms int `json:"ms" jsonschema:"milliseconds to sleep, 0 to 600000"`
}

// SleepResult is sleep's result.
type SleepResult struct {
	SleptMs int `json:"slept_ms"`
}

// MarkArgs are mark's arguments.
type MarkArgs struct {
	Name string `json:"name" jsonschema:"the counter to increment"`
	// HoldMs keeps the call open this long after counting, so a test can
	// lose the executor after the effect happened and before its result.
	HoldMs int `json:"hold_ms,omitempty" jsonschema:"milliseconds to wait after counting before answering"`
}

// MarkResult is mark's result.
type MarkResult struct {
	Name  string `json:"name"`
	Count int64  `json:"count" jsonschema:"the counter's value after this call"`
}

// FailArgs are fail's arguments.
type FailArgs struct {
	Message string `json:"message" jsonschema:"the error message to fail with"`
}

func newServer(c *counters) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: ServerName, Version: "0.1.0"}, nil)
	mcp.AddTool(s, &mcp.Tool{
		Name:        "sleep",
		Description: "Sleep for ms milliseconds, or until the call is cancelled.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true},
	}, func(ctx context.Context, _ *mcp.CallToolRequest, in SleepArgs) (*mcp.CallToolResult, SleepResult, error) {
		d := time.Duration(in.Ms) * time.Millisecond
		if in.Ms < 0 || d > maxSleep {
			return nil, SleepResult{}, fmt.Errorf("ms must be between 0 and %d", maxSleep.Milliseconds())
		}
		timer := time.NewTimer(d)
		defer timer.Stop()
		select {
		case <-timer.C:
			return nil, SleepResult{SleptMs: in.Ms}, nil
		case <-ctx.Done():
			return nil, SleepResult{}, ctx.Err()
		}
	})
	mcp.AddTool(s, &mcp.Tool{
		Name:        "mark",
		Description: "Increment the named counter, persisted in the server's file, and return its new value.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: false, DestructiveHint: serve.Ptr(false), IdempotentHint: false, OpenWorldHint: serve.Ptr(false)},
	}, func(ctx context.Context, _ *mcp.CallToolRequest, in MarkArgs) (*mcp.CallToolResult, MarkResult, error) {
		if in.Name == "" {
			return nil, MarkResult{}, errors.New("name is empty")
		}
		n, err := c.increment(in.Name)
		if err != nil {
			return nil, MarkResult{}, err
		}
		if in.HoldMs > 0 {
			select {
			case <-time.After(time.Duration(in.HoldMs) * time.Millisecond):
			case <-ctx.Done():
				return nil, MarkResult{}, ctx.Err()
			}
		}
		return nil, MarkResult{Name: in.Name, Count: n}, nil
	})
	mcp.AddTool(s, &mcp.Tool{
		Name:        "fail",
		Description: "Always fail with the given message (a tool error, not a protocol error).",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true},
	}, func(ctx context.Context, _ *mcp.CallToolRequest, in FailArgs) (*mcp.CallToolResult, any, error) {
		msg := in.Message
		if msg == "" {
			msg = "failed as asked"
		}
		return nil, nil, errors.New(msg)
	})
	return s
}

// counters is mark's state: a JSON object of name -> count in a file, read
// afresh and replaced atomically (temp file, fsync, rename, fsync of the
// directory) on every increment, so a count survives restarts and crashes.
// The mutex serialises this process's calls; run one server per file.
type counters struct {
	path string
	mu   sync.Mutex
}

func (c *counters) increment(name string) (int64, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	counts := map[string]int64{}
	data, err := os.ReadFile(c.path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return 0, err
	default:
		if err := json.Unmarshal(data, &counts); err != nil {
			return 0, fmt.Errorf("%s: %w", c.path, err)
		}
	}
	counts[name]++
	data, err = json.MarshalIndent(counts, "", "  ")
	if err != nil {
		return 0, err
	}
	if err := writeFileAtomic(c.path, append(data, '\n')); err != nil {
		return 0, err
	}
	return counts[name], nil
}

func writeFileAtomic(path string, data []byte) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // a no-op once renamed
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
