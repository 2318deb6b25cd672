package executor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// MCPServer is one MCP server an executor hosts: a command it starts and
// talks to over stdio, or a streamable-HTTP URL it reaches.
type MCPServer struct {
	Name    string   `yaml:"name"`    // the SERVER of SERVER.TOOL in recipes
	Command []string `yaml:"command"` // stdio: argv
	Env     []string `yaml:"env"`     // extra KEY=VALUE for the command
	URL     string   `yaml:"url"`     // streamable HTTP endpoint
}

// MCPHost calls tools on MCP servers through the official Go SDK. One
// session per server carries concurrent calls (the SDK runs them at once).
type MCPHost struct {
	mu       sync.Mutex
	sessions map[string]*mcp.ClientSession
	tools    []ToolSpec
}

// IdempotencyMetaKey is the _meta key carrying "run/step" on every call.
const IdempotencyMetaKey = "tollgate/idempotency_key"

// StartMCP connects to every server and lists its tools. On error it
// closes what it opened.
func StartMCP(ctx context.Context, servers []MCPServer) (*MCPHost, error) {
	h := &MCPHost{sessions: map[string]*mcp.ClientSession{}}
	client := mcp.NewClient(&mcp.Implementation{Name: "tollgate-executor", Version: "dev"}, nil)
	for _, s := range servers {
		var transport mcp.Transport
		switch {
		case len(s.Command) > 0:
			cmd := exec.Command(s.Command[0], s.Command[1:]...)
			cmd.Env = append(os.Environ(), s.Env...)
			cmd.Stderr = os.Stderr
			transport = &mcp.CommandTransport{Command: cmd}
		case s.URL != "":
			transport = &mcp.StreamableClientTransport{Endpoint: s.URL}
		default:
			h.Close()
			return nil, fmt.Errorf("mcp server %q: give a command or a url", s.Name)
		}
		cs, err := client.Connect(ctx, transport, nil)
		if err != nil {
			h.Close()
			return nil, fmt.Errorf("connect mcp server %q: %w", s.Name, err)
		}
		h.sessions[s.Name] = cs
		res, err := cs.ListTools(ctx, nil)
		if err != nil {
			h.Close()
			return nil, fmt.Errorf("list tools of %q: %w", s.Name, err)
		}
		for _, t := range res.Tools {
			spec := ToolSpec{Server: s.Name, Name: t.Name, Description: t.Description}
			if a := t.Annotations; a != nil {
				spec.ReadOnly, spec.Idempotent, spec.Destructive, spec.OpenWorld = a.ReadOnlyHint, a.IdempotentHint, a.DestructiveHint, a.OpenWorldHint
			}
			if t.InputSchema != nil {
				// As the server sent it (the SDK decodes it to a map); a
				// schema that does not encode is left out, not fatal: the
				// server still checks its own input.
				if js, err := json.Marshal(t.InputSchema); err == nil {
					spec.InputSchema = string(js)
				}
			}
			h.tools = append(h.tools, spec)
		}
	}
	return h, nil
}

// Tools implements Host.
func (h *MCPHost) Tools() []ToolSpec { return h.tools }

// Call implements Host. A tool's own failure (IsError) is a *ToolError; an
// unknown tool or bad request is a *TransportError whose outcome is known
// (nothing ran); a lost connection mid-call is one whose outcome is
// unknown.
func (h *MCPHost) Call(ctx context.Context, server, tool string, args json.RawMessage, key string) (json.RawMessage, error) {
	h.mu.Lock()
	cs, ok := h.sessions[server]
	h.mu.Unlock()
	if !ok {
		return nil, &TransportError{Message: fmt.Sprintf("this executor hosts no server %q", server)}
	}
	// A fresh params and _meta map per call: the SDK writes into them.
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args, Meta: mcp.Meta{IdempotencyMetaKey: key}})
	if err != nil {
		var rpc *jsonrpc.Error
		if errors.As(err, &rpc) {
			return nil, &TransportError{Message: fmt.Sprintf("%s.%s refused the call: %v", server, tool, err)}
		}
		return nil, &TransportError{Message: fmt.Sprintf("%s.%s: %v", server, tool, err), OutcomeUnknown: true}
	}
	if res.IsError {
		return nil, &ToolError{Message: textOf(res)}
	}
	if res.StructuredContent != nil {
		return json.Marshal(res.StructuredContent)
	}
	return json.Marshal(textOf(res))
}

func textOf(res *mcp.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, t.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// Close ends every session (and so the stdio servers).
func (h *MCPHost) Close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for name, cs := range h.sessions {
		_ = cs.Close()
		delete(h.sessions, name)
	}
}
