// Package demo is the demo stand-ins the example skills call (../../demo is
// its command; servers builds it into Tollgate's binaries).
package demo

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tollgate-dev/tollgate/examples/mcp/internal/jsonl"
	"github.com/tollgate-dev/tollgate/examples/mcp/internal/serve"
)

//go:embed data.json
var defaultData []byte

// Servers are the names --server accepts, as catalog.yaml spells them.
var Servers = []string{"google-calendar", "gmail", "slack", "github", "erp", "payments"}

// Run parses flags and serves until ctx ends or the client hangs up.
func Run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	name := fs.String("server", "", "which stand-in to serve: `NAME` is one of "+strings.Join(Servers, ", "))
	httpAddr := fs.String("http", "", "serve streamable HTTP on `ADDR` instead of stdio")
	dataFile := fs.String("data", "", "JSON `FILE` of canned data replacing the embedded data.json")
	logFile := fs.String("log", serve.HomeFile("demo-effects.jsonl"), "JSONL `FILE` side-effecting calls are appended to")
	vendors := fs.String("vendors", "", "JSON `FILE` of ERP vendors by ID, re-read on every get_vendor call (default: the data's erp.vendors)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	raw := defaultData
	if *dataFile != "" {
		var err error
		if raw, err = os.ReadFile(*dataFile); err != nil {
			return err
		}
	}
	var data Data
	if err := json.Unmarshal(raw, &data); err != nil {
		return fmt.Errorf("data: %w", err)
	}
	srv, err := newServer(*name, &data, jsonl.New(*logFile), *vendors)
	if err != nil {
		return err
	}
	return serve.Run(ctx, srv, *httpAddr, stdin, stdout, stderr)
}

// newServer builds the named stand-in with exactly the tools catalog.yaml
// lists for it.
func newServer(name string, data *Data, effects *jsonl.Log, vendorsFile string) (*mcp.Server, error) {
	if !slices.Contains(Servers, name) {
		return nil, fmt.Errorf("--server %q: want one of %s", name, strings.Join(Servers, ", "))
	}
	s := mcp.NewServer(&mcp.Implementation{Name: name, Version: "0.1.0"}, nil)
	d := &demo{server: name, data: data, effects: effects, vendorsFile: vendorsFile}
	switch name {
	case "google-calendar":
		mcp.AddTool(s, &mcp.Tool{Name: "list-events", Annotations: readOnly(),
			Description: "List the events of a calendar, optionally between timeMin and timeMax (RFC 3339)."}, d.listEvents)
	case "gmail":
		mcp.AddTool(s, &mcp.Tool{Name: "messages_list", Annotations: readOnly(),
			Description: "List messages carrying all of labelIds (e.g. UNREAD), optionally matching q."}, d.messagesList)
	case "slack":
		mcp.AddTool(s, &mcp.Tool{Name: "slack_search_messages", Annotations: readOnly(),
			Description: `Search messages. "mentions:me" matches messages mentioning you, "in:#channel" one channel; other words match the text.`}, d.slackSearch)
		mcp.AddTool(s, &mcp.Tool{Name: "slack_post_message",
			Annotations: &mcp.ToolAnnotations{ReadOnlyHint: false, OpenWorldHint: serve.Ptr(true)},
			Description: "Post a message to a channel."}, d.slackPost)
	case "github":
		mcp.AddTool(s, &mcp.Tool{Name: "get_pull_request", Annotations: readOnly(),
			Description: "A pull request with its description, reviews and review comments."}, d.getPullRequest)
		mcp.AddTool(s, &mcp.Tool{Name: "get_pull_request_diff", Annotations: readOnly(),
			Description: "A pull request's unified diff."}, d.getPullRequestDiff)
		mcp.AddTool(s, &mcp.Tool{Name: "get_file", Annotations: readOnly(),
			Description: "A file's content at the default branch."}, d.getFile)
		mcp.AddTool(s, &mcp.Tool{Name: "create_commit",
			Annotations: &mcp.ToolAnnotations{ReadOnlyHint: false},
			Description: "Create a commit on a branch (a file's new content, or changes described by a plan)."}, d.createCommit)
		mcp.AddTool(s, &mcp.Tool{Name: "push_branch",
			Annotations: &mcp.ToolAnnotations{ReadOnlyHint: false, DestructiveHint: serve.Ptr(true)},
			Description: "Push a branch to the remote."}, d.pushBranch)
	case "erp":
		mcp.AddTool(s, &mcp.Tool{Name: "get_vendor", Annotations: readOnly(),
			Description: "A vendor's master record: name, bank account (masked) and status."}, d.getVendor)
		mcp.AddTool(s, &mcp.Tool{Name: "get_invoice", Annotations: readOnly(),
			Description: "A vendor invoice with its lines, tax and total."}, d.getInvoice)
		mcp.AddTool(s, &mcp.Tool{Name: "get_purchase_order", Annotations: readOnly(),
			Description: "A purchase order with its lines, tax, total and goods receipt."}, d.getPurchaseOrder)
	case "payments":
		mcp.AddTool(s, &mcp.Tool{Name: "pay",
			Annotations: &mcp.ToolAnnotations{ReadOnlyHint: false, DestructiveHint: serve.Ptr(true), IdempotentHint: false},
			Description: "Pay a vendor invoice to a bank account. Every call is a new payment.", InputSchema: paySchema()}, d.pay)
	}
	return s, nil
}

func readOnly() *mcp.ToolAnnotations { return &mcp.ToolAnnotations{ReadOnlyHint: true} }

// errNotFound marks a lookup of an ID the canned data does not have.
var errNotFound = errors.New("not found")
