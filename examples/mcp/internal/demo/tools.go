package demo

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tollgate-dev/tollgate/examples/mcp/internal/jsonl"
	"github.com/tollgate-dev/tollgate/examples/mcp/internal/serve"
)

// demo holds one stand-in's state. Handlers run concurrently: data is
// read-only after start, the effects log serialises its own appends, and
// the vendors file is read afresh per call.
type demo struct {
	server      string
	data        *Data
	effects     *jsonl.Log
	vendorsFile string
}

// Effect is one line of the side-effects log.
type Effect struct {
	Time           time.Time       `json:"time"`
	Server         string          `json:"server"`
	Tool           string          `json:"tool"`
	Args           json.RawMessage `json:"args"`
	IdempotencyKey string          `json:"idempotency_key,omitempty"`
}

// record appends the call to the effects log, durably, before the tool
// answers; it returns an ID for the effect, derived from the idempotency key
// when there is one (so a retry reports the same ID) and unique otherwise.
func (d *demo) record(req *mcp.CallToolRequest, now time.Time) (string, error) {
	e := Effect{Time: now.UTC(), Server: d.server, Tool: req.Params.Name,
		Args: req.Params.Arguments, IdempotencyKey: serve.IdempotencyKey(req)}
	if len(e.Args) == 0 {
		e.Args = json.RawMessage("{}")
	}
	if err := d.effects.Append(e); err != nil {
		return "", fmt.Errorf("%s: recording the effect: %w", req.Params.Name, err)
	}
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s\x00", d.server, req.Params.Name)
	if e.IdempotencyKey != "" {
		h.Write([]byte(e.IdempotencyKey))
	} else {
		fmt.Fprintf(h, "%d\x00%s", now.UnixNano(), e.Args)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

func notFound(kind, id string) error { return fmt.Errorf("%s %q: %w", kind, id, errNotFound) }

// google-calendar

// ListEventsArgs are list-events' arguments.
type ListEventsArgs struct {
	CalendarID string `json:"calendarId" jsonschema:"calendar ID, e.g. primary"`
	TimeMin    string `json:"timeMin,omitempty" jsonschema:"RFC 3339: only events ending after this"`
	TimeMax    string `json:"timeMax,omitempty" jsonschema:"RFC 3339: only events starting before this"`
}

func (d *demo) listEvents(ctx context.Context, _ *mcp.CallToolRequest, in ListEventsArgs) (*mcp.CallToolResult, any, error) {
	events, ok := d.data.Calendar.Calendars[in.CalendarID]
	if !ok {
		return nil, nil, notFound("calendar", in.CalendarID)
	}
	parse := func(name, s string) (time.Time, error) {
		if s == "" {
			return time.Time{}, nil
		}
		t, err := time.Parse(time.RFC3339, s)
		if err != nil {
			return t, fmt.Errorf("%s: %w", name, err)
		}
		return t, nil
	}
	lo, err := parse("timeMin", in.TimeMin)
	if err != nil {
		return nil, nil, err
	}
	hi, err := parse("timeMax", in.TimeMax)
	if err != nil {
		return nil, nil, err
	}
	out := []Event{}
	for _, e := range events {
		start, err1 := time.Parse(time.RFC3339, e.Start)
		end, err2 := time.Parse(time.RFC3339, e.End)
		if err := errors.Join(err1, err2); err != nil {
			return nil, nil, fmt.Errorf("event %s: %w", e.ID, err)
		}
		if (!lo.IsZero() && !end.After(lo)) || (!hi.IsZero() && !start.Before(hi)) {
			continue
		}
		out = append(out, e)
	}
	return nil, map[string]any{"calendarId": in.CalendarID, "items": out}, nil
}

// gmail

// MessagesListArgs are messages_list's arguments.
type MessagesListArgs struct {
	LabelIDs   []string `json:"labelIds,omitempty" jsonschema:"only messages carrying all these labels, e.g. UNREAD"`
	Q          string   `json:"q,omitempty" jsonschema:"case-insensitive text to find in sender, subject or snippet"`
	MaxResults int      `json:"maxResults,omitempty" jsonschema:"at most this many messages (0: all)"`
}

func (d *demo) messagesList(ctx context.Context, _ *mcp.CallToolRequest, in MessagesListArgs) (*mcp.CallToolResult, any, error) {
	q := strings.ToLower(in.Q)
	out := []Mail{}
	for _, m := range d.data.Gmail.Messages {
		if !containsAll(m.LabelIDs, in.LabelIDs) {
			continue
		}
		if q != "" && !strings.Contains(strings.ToLower(m.From+"\n"+m.Subject+"\n"+m.Snippet), q) {
			continue
		}
		if in.MaxResults > 0 && len(out) == in.MaxResults {
			break
		}
		out = append(out, m)
	}
	return nil, map[string]any{"messages": out, "resultSizeEstimate": len(out)}, nil
}

func containsAll(have, want []string) bool {
	for _, w := range want {
		if !slices.Contains(have, w) {
			return false
		}
	}
	return true
}

// slack

// SlackSearchArgs are slack_search_messages' arguments.
type SlackSearchArgs struct {
	Query string `json:"query" jsonschema:"search words; mentions:me and in:#channel are understood"`
	Count int    `json:"count,omitempty" jsonschema:"at most this many messages (0: all)"`
}

func (d *demo) slackSearch(ctx context.Context, _ *mcp.CallToolRequest, in SlackSearchArgs) (*mcp.CallToolResult, any, error) {
	var mentions bool
	var channel string
	var words []string
	for _, f := range strings.Fields(in.Query) {
		switch {
		case strings.EqualFold(f, "mentions:me"):
			mentions = true
		case strings.HasPrefix(strings.ToLower(f), "in:"):
			channel = "#" + strings.TrimPrefix(f[len("in:"):], "#")
		default:
			words = append(words, strings.ToLower(f))
		}
	}
	out := []SlackMessage{}
	for _, m := range d.data.Slack.Messages {
		if (mentions && !m.MentionsMe) || (channel != "" && !strings.EqualFold(m.Channel, channel)) {
			continue
		}
		text := strings.ToLower(m.Text)
		if !allIn(words, text) {
			continue
		}
		if in.Count > 0 && len(out) == in.Count {
			break
		}
		out = append(out, m)
	}
	return nil, map[string]any{"query": in.Query, "messages": out, "total": len(out)}, nil
}

func allIn(words []string, text string) bool {
	for _, w := range words {
		if !strings.Contains(text, w) {
			return false
		}
	}
	return true
}

// SlackPostArgs are slack_post_message's arguments.
type SlackPostArgs struct {
	Channel  string `json:"channel" jsonschema:"channel, e.g. #daily"`
	Text     string `json:"text" jsonschema:"message text"`
	ThreadTS string `json:"thread_ts,omitempty" jsonschema:"reply in this thread"`
}

func (d *demo) slackPost(ctx context.Context, req *mcp.CallToolRequest, in SlackPostArgs) (*mcp.CallToolResult, any, error) {
	if strings.TrimSpace(in.Channel) == "" || strings.TrimSpace(in.Text) == "" {
		return nil, nil, errors.New("channel and text must not be empty")
	}
	now := time.Now()
	if _, err := d.record(req, now); err != nil {
		return nil, nil, err
	}
	ts := fmt.Sprintf("%d.%06d", now.Unix(), now.Nanosecond()/1000)
	return nil, map[string]any{"ok": true, "channel": in.Channel, "ts": ts}, nil
}

// github

// PullRequestArgs name a pull request.
type PullRequestArgs struct {
	Repo   string `json:"repo" jsonschema:"owner/name"`
	Number int    `json:"number" jsonschema:"pull request number"`
}

func (d *demo) repo(name string) (Repo, error) {
	r, ok := d.data.GitHub.Repos[name]
	if !ok {
		return r, notFound("repository", name)
	}
	return r, nil
}

func (d *demo) getPullRequest(ctx context.Context, _ *mcp.CallToolRequest, in PullRequestArgs) (*mcp.CallToolResult, any, error) {
	r, err := d.repo(in.Repo)
	if err != nil {
		return nil, nil, err
	}
	pr, ok := r.PullRequests[strconv.Itoa(in.Number)]
	if !ok {
		return nil, nil, notFound("pull request", fmt.Sprintf("%s#%d", in.Repo, in.Number))
	}
	return nil, pr, nil
}

func (d *demo) getPullRequestDiff(ctx context.Context, _ *mcp.CallToolRequest, in PullRequestArgs) (*mcp.CallToolResult, any, error) {
	r, err := d.repo(in.Repo)
	if err != nil {
		return nil, nil, err
	}
	diff, ok := r.Diffs[strconv.Itoa(in.Number)]
	if !ok {
		return nil, nil, notFound("pull request diff", fmt.Sprintf("%s#%d", in.Repo, in.Number))
	}
	return nil, map[string]any{"repo": in.Repo, "number": in.Number, "diff": diff}, nil
}

// GetFileArgs are get_file's arguments.
type GetFileArgs struct {
	Repo string `json:"repo" jsonschema:"owner/name"`
	Path string `json:"path" jsonschema:"file path in the repository"`
	Ref  string `json:"ref,omitempty" jsonschema:"branch, tag or commit (default: main)"`
}

func (d *demo) getFile(ctx context.Context, _ *mcp.CallToolRequest, in GetFileArgs) (*mcp.CallToolResult, any, error) {
	r, err := d.repo(in.Repo)
	if err != nil {
		return nil, nil, err
	}
	content, ok := r.Files[in.Path]
	if !ok {
		return nil, nil, notFound("file", in.Repo+":"+in.Path)
	}
	ref := in.Ref
	if ref == "" {
		ref = "main"
	}
	return nil, map[string]any{"repo": in.Repo, "path": in.Path, "ref": ref, "content": content}, nil
}

// CreateCommitArgs are create_commit's arguments: a file's new content
// (path, content), or a change described in prose (message, plan).
type CreateCommitArgs struct {
	Repo    string `json:"repo" jsonschema:"owner/name"`
	Branch  string `json:"branch" jsonschema:"branch to commit to (created if missing)"`
	Message string `json:"message,omitempty" jsonschema:"commit message"`
	Plan    string `json:"plan,omitempty" jsonschema:"the change to make, described"`
	Path    string `json:"path,omitempty" jsonschema:"file to write"`
	Content string `json:"content,omitempty" jsonschema:"the file's new content"`
}

var branchName = regexp.MustCompile(`^[A-Za-z0-9._/-]+$`)

func (d *demo) createCommit(ctx context.Context, req *mcp.CallToolRequest, in CreateCommitArgs) (*mcp.CallToolResult, any, error) {
	if in.Repo == "" || !branchName.MatchString(in.Branch) {
		return nil, nil, errors.New("repo and a valid branch are required")
	}
	if in.Message == "" && in.Path == "" {
		return nil, nil, errors.New("give a message or a path")
	}
	msg := in.Message
	if msg == "" {
		msg = "update " + in.Path
	}
	id, err := d.record(req, time.Now())
	if err != nil {
		return nil, nil, err
	}
	return nil, map[string]any{"repo": in.Repo, "branch": in.Branch, "sha": id[:40], "message": msg}, nil
}

// PushBranchArgs are push_branch's arguments.
type PushBranchArgs struct {
	Repo   string `json:"repo" jsonschema:"owner/name"`
	Branch string `json:"branch" jsonschema:"branch to push"`
	Force  bool   `json:"force,omitempty" jsonschema:"force-push, overwriting the remote branch"`
}

func (d *demo) pushBranch(ctx context.Context, req *mcp.CallToolRequest, in PushBranchArgs) (*mcp.CallToolResult, any, error) {
	if in.Repo == "" || !branchName.MatchString(in.Branch) {
		return nil, nil, errors.New("repo and a valid branch are required")
	}
	if _, err := d.record(req, time.Now()); err != nil {
		return nil, nil, err
	}
	return nil, map[string]any{"repo": in.Repo, "branch": in.Branch, "remote": "origin", "pushed": true, "forced": in.Force}, nil
}

// erp

// IDArgs name an ERP record.
type IDArgs struct {
	ID string `json:"id" jsonschema:"record ID, e.g. V-1187"`
}

func (d *demo) getVendor(ctx context.Context, _ *mcp.CallToolRequest, in IDArgs) (*mcp.CallToolResult, any, error) {
	vendors := d.data.ERP.Vendors
	if d.vendorsFile != "" {
		raw, err := os.ReadFile(d.vendorsFile)
		if err != nil {
			return nil, nil, fmt.Errorf("vendors: %w", err)
		}
		vendors = nil
		if err := json.Unmarshal(raw, &vendors); err != nil {
			return nil, nil, fmt.Errorf("vendors file %s: %w", d.vendorsFile, err)
		}
	}
	v, ok := vendors[in.ID]
	if !ok {
		return nil, nil, notFound("vendor", in.ID)
	}
	return nil, v, nil
}

func (d *demo) getInvoice(ctx context.Context, _ *mcp.CallToolRequest, in IDArgs) (*mcp.CallToolResult, any, error) {
	v, ok := d.data.ERP.Invoices[in.ID]
	if !ok {
		return nil, nil, notFound("invoice", in.ID)
	}
	return nil, v, nil
}

func (d *demo) getPurchaseOrder(ctx context.Context, _ *mcp.CallToolRequest, in IDArgs) (*mcp.CallToolResult, any, error) {
	v, ok := d.data.ERP.PurchaseOrders[in.ID]
	if !ok {
		return nil, nil, notFound("purchase order", in.ID)
	}
	return nil, v, nil
}

// payments

// PayArgs are pay's arguments.
type PayArgs struct {
	Vendor      string  `json:"vendor" jsonschema:"vendor ID"`
	Invoice     string  `json:"invoice" jsonschema:"invoice ID"`
	Amount      float64 `json:"amount" jsonschema:"amount in currency units, more than 0"`
	Currency    string  `json:"currency" jsonschema:"ISO 4217 code, e.g. INR"`
	BankAccount string  `json:"bank_account" jsonschema:"the account to pay into"`
}

var currencyCode = regexp.MustCompile(`^[A-Z]{3}$`)

// paySchema is PayArgs' schema (every field required, no others) with the
// bounds pay checks: an amount above 0 and an ISO 4217 currency code. It
// is what tools/list advertises, so Tollgate refuses a call that would
// fail here before anyone is asked to approve it.
func paySchema() *jsonschema.Schema {
	s, err := jsonschema.For[PayArgs](nil)
	if err != nil {
		panic(err) // PayArgs is a fixed struct: a failure is a bug here
	}
	s.Properties["amount"].ExclusiveMinimum = jsonschema.Ptr(0.0)
	s.Properties["currency"].Pattern = currencyCode.String()
	return s
}

func (d *demo) pay(ctx context.Context, req *mcp.CallToolRequest, in PayArgs) (*mcp.CallToolResult, any, error) {
	switch {
	case in.Vendor == "" || in.Invoice == "" || in.BankAccount == "":
		return nil, nil, errors.New("vendor, invoice and bank_account are required")
	case !(in.Amount > 0):
		return nil, nil, fmt.Errorf("amount must be more than 0, got %v", in.Amount)
	case !currencyCode.MatchString(in.Currency):
		return nil, nil, fmt.Errorf("currency %q is not an ISO 4217 code", in.Currency)
	}
	id, err := d.record(req, time.Now())
	if err != nil {
		return nil, nil, err
	}
	return nil, map[string]any{"payment_id": "PAY-" + strings.ToUpper(id[:12]), "status": "submitted",
		"vendor": in.Vendor, "invoice": in.Invoice, "amount": in.Amount, "currency": in.Currency,
		"bank_account": in.BankAccount}, nil
}
