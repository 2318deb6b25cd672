// Package notes is the "notes" example MCP server (../../notes is its
// command; servers builds it into Tollgate's binaries).
package notes

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tollgate-dev/tollgate/examples/mcp/internal/jsonl"
	"github.com/tollgate-dev/tollgate/examples/mcp/internal/serve"
)

// ServerName is the name catalog.yaml knows this server by.
const ServerName = "notes"

// Run parses flags and serves until ctx ends or the client hangs up.
func Run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet(ServerName, flag.ContinueOnError)
	fs.SetOutput(stderr)
	httpAddr := fs.String("http", "", "serve streamable HTTP on `ADDR` (e.g. 127.0.0.1:8932) instead of stdio")
	file := fs.String("file", serve.HomeFile("notes.jsonl"), "JSONL `FILE` the notes are appended to")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	return serve.Run(ctx, newServer(jsonl.New(*file)), *httpAddr, stdin, stdout, stderr)
}

// Note is one line of the notes file.
type Note struct {
	Time           time.Time `json:"time"`
	Text           string    `json:"text"`
	IdempotencyKey string    `json:"idempotency_key,omitempty"`
}

// StoreArgs are store's arguments.
type StoreArgs struct {
	Text string `json:"text" jsonschema:"the note"`
}

// SearchArgs are search's arguments.
type SearchArgs struct {
	Query string `json:"query" jsonschema:"case-insensitive text to look for; empty matches every note"`
}

// SearchResult is search's result.
type SearchResult struct {
	Matches []Note `json:"matches"`
	Count   int    `json:"count"`
}

func newServer(log *jsonl.Log) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: ServerName, Version: "0.1.0"}, nil)
	mcp.AddTool(s, &mcp.Tool{
		Name:        "store",
		Description: "Append a note. Each call adds a new line, so a repeated call stores the note twice.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: false, DestructiveHint: serve.Ptr(false), IdempotentHint: false},
	}, func(ctx context.Context, req *mcp.CallToolRequest, in StoreArgs) (*mcp.CallToolResult, Note, error) {
		if strings.TrimSpace(in.Text) == "" {
			return nil, Note{}, errors.New("store: text is empty")
		}
		n := Note{Time: time.Now().UTC(), Text: in.Text, IdempotencyKey: serve.IdempotencyKey(req)}
		if err := log.Append(n); err != nil {
			return nil, Note{}, fmt.Errorf("store: %w", err)
		}
		return nil, n, nil
	})
	mcp.AddTool(s, &mcp.Tool{
		Name:        "search",
		Description: "Find stored notes whose text contains the query (case-insensitive).",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true},
	}, func(ctx context.Context, _ *mcp.CallToolRequest, in SearchArgs) (*mcp.CallToolResult, SearchResult, error) {
		lines, err := log.Lines()
		if err != nil {
			return nil, SearchResult{}, fmt.Errorf("search: %w", err)
		}
		res := SearchResult{Matches: []Note{}}
		q := strings.ToLower(in.Query)
		for _, line := range lines {
			var n Note
			if json.Unmarshal(line, &n) != nil {
				continue // not a note (a hand-edited file): skip it
			}
			if strings.Contains(strings.ToLower(n.Text), q) {
				res.Matches = append(res.Matches, n)
			}
		}
		res.Count = len(res.Matches)
		return nil, res, nil
	})
	return s
}
