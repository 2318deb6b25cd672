package demo

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/goleak"

	"github.com/tollgate-dev/tollgate/examples"
	"github.com/tollgate-dev/tollgate/examples/mcp/internal/jsonl"
	"github.com/tollgate-dev/tollgate/examples/mcp/internal/mcptest"
	"github.com/tollgate-dev/tollgate/examples/mcp/internal/serve"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// skillCall is one SERVER.TOOL {args} call written in an example skill.
type skillCall struct {
	skill, server, tool string
	args                map[string]any
}

var callRE = regexp.MustCompile(`([a-z][a-z0-9-]*)\.([A-Za-z_][A-Za-z0-9_-]*) \{`)

// skillCalls finds every tool call in examples/skills/*/SKILL.md.
func skillCalls(t *testing.T) []skillCall {
	t.Helper()
	var calls []skillCall
	err := fs.WalkDir(examples.Skills, ".", func(path string, de fs.DirEntry, err error) error {
		if err != nil || de.IsDir() || de.Name() != "SKILL.md" {
			return err
		}
		body, err := fs.ReadFile(examples.Skills, path)
		if err != nil {
			return err
		}
		for _, line := range strings.Split(string(body), "\n") {
			for _, m := range callRE.FindAllStringSubmatchIndex(line, -1) {
				var args map[string]any
				if err := json.NewDecoder(strings.NewReader(line[m[1]-1:])).Decode(&args); err != nil {
					return fmt.Errorf("%s: %q: %w", path, line, err)
				}
				calls = append(calls, skillCall{filepath.Dir(path), line[m[2]:m[3]], line[m[4]:m[5]], args})
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(calls) == 0 {
		t.Fatal("no tool calls found in the example skills")
	}
	return calls
}

// Every call every example skill makes to a demo server works against the
// built binary with the canned data; each server's tools and annotations
// are exactly catalog.yaml's, and every catalog tool is exercised. Each
// side-effecting call lands in the effects log once, with its args and
// idempotency key.
func TestSkillsAgainstBinary(t *testing.T) {
	ctx := t.Context()
	bin := mcptest.Build(t, "../../demo")
	catalog := mcptest.Catalog(t)
	calls := skillCalls(t)
	logFile := filepath.Join(t.TempDir(), "effects.jsonl")
	var wantEffects []Effect
	for _, c := range calls {
		// The other servers the skills use are examples/mcp/monitor and notes.
		if !slices.Contains(Servers, c.server) && c.server != "mcp-monitor" && c.server != "notes" {
			t.Errorf("%s calls %s.%s: no example server serves %q", c.skill, c.server, c.tool, c.server)
		}
	}

	for _, server := range Servers {
		t.Run(server, func(t *testing.T) {
			cs := mcptest.ConnectCommand(t, ctx, bin, "--server", server, "--log", logFile)
			if got := cs.InitializeResult().ServerInfo.Name; got != server {
				t.Errorf("server name = %q", got)
			}
			tools := mcptest.CheckCatalog(t, ctx, cs, server)
			called := map[string]bool{}
			for _, c := range calls {
				if c.server != server {
					continue
				}
				var meta map[string]any
				tool := tools[c.tool]
				if tool == nil {
					t.Errorf("%s calls %s.%s, which the server does not have", c.skill, server, c.tool)
					continue
				}
				if !mcptest.FromMCP(tool.Annotations).ReadOnlyHint {
					key := fmt.Sprintf("%s/%s/%d", c.skill, c.tool, len(wantEffects))
					meta = map[string]any{serve.IdempotencyKeyMeta: key}
					wantEffects = append(wantEffects, Effect{Server: server, Tool: c.tool, IdempotencyKey: key, Args: mustJSON(t, c.args)})
				}
				res := mcptest.Call(t, ctx, cs, c.tool, c.args, meta)
				if res.IsError || res.StructuredContent == nil {
					t.Errorf("%s: %s.%s %v: IsError=%v %s", c.skill, server, c.tool, c.args, res.IsError, mcptest.Text(res))
				}
				called[c.tool] = true
				t.Logf("%s: %s.%s ok", c.skill, server, c.tool)
			}
			for _, ct := range catalog[server] {
				if !called[ct.Name] {
					t.Errorf("no example skill calls %s.%s", server, ct.Name)
				}
			}
		})
	}

	got := readEffects(t, logFile)
	if len(got) != len(wantEffects) {
		t.Fatalf("%d effects logged, want %d: %+v", len(got), len(wantEffects), got)
	}
	for i, e := range got {
		w := wantEffects[i]
		if e.Server != w.Server || e.Tool != w.Tool || e.IdempotencyKey != w.IdempotencyKey || !jsonEqual(t, e.Args, w.Args) || e.Time.IsZero() {
			t.Errorf("effect %d = %+v (args %s), want %+v (args %s)", i, e, e.Args, w, w.Args)
		}
	}
}

func mustJSON(t *testing.T, v any) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func jsonEqual(t *testing.T, a, b []byte) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal(a, &x); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &y); err != nil {
		t.Fatal(err)
	}
	return reflect.DeepEqual(x, y)
}

func readEffects(t *testing.T, path string) []Effect {
	t.Helper()
	lines, err := jsonl.ReadLines(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []Effect
	for _, l := range lines {
		var e Effect
		dec := json.NewDecoder(bytes.NewReader(l))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&e); err != nil {
			t.Fatalf("effect line %q: %v", l, err)
		}
		out = append(out, e)
	}
	return out
}

func decodeMap(t *testing.T, res *mcp.CallToolResult) map[string]any {
	t.Helper()
	var m map[string]any
	mcptest.Decode(t, res, &m)
	return m
}

// The canned data says what the example skills need it to say.
func TestCannedData(t *testing.T) {
	ctx := t.Context()
	connect := func(server string) *mcp.ClientSession {
		return mcptest.ConnectPipes(t, ctx, Run, "--server", server, "--log", filepath.Join(t.TempDir(), "e.jsonl"))
	}

	erp := connect("erp")
	vendor := decodeMap(t, mcptest.Call(t, ctx, erp, "get_vendor", map[string]any{"id": "V-1187"}, nil))
	wantVendor := map[string]any{"id": "V-1187", "name": "Kaveri Precision Components Pvt Ltd", "bank_account": "XXXX2048", "status": "active"}
	if !reflect.DeepEqual(vendor, wantVendor) {
		t.Errorf("get_vendor V-1187 = %v, want %v", vendor, wantVendor)
	}
	inv := decodeMap(t, mcptest.Call(t, ctx, erp, "get_invoice", map[string]any{"id": "I-991"}, nil))
	po := decodeMap(t, mcptest.Call(t, ctx, erp, "get_purchase_order", map[string]any{"id": "PO-441"}, nil))
	if inv["total"] != 485000.0 || inv["currency"] != "INR" || inv["vendor_id"] != "V-1187" || inv["po_id"] != "PO-441" {
		t.Errorf("invoice I-991 = %v", inv)
	}
	if po["total"] != 485000.0 || po["vendor_id"] != "V-1187" {
		t.Errorf("PO-441 = %v", po)
	}
	taxType := func(m map[string]any) any { return m["tax"].(map[string]any)["type"] }
	if taxType(inv) == taxType(po) {
		t.Errorf("invoice and PO tax types are both %v: the skill's tax check has nothing to find", taxType(inv))
	}
	if res := mcptest.Call(t, ctx, erp, "get_vendor", map[string]any{"id": "V-0000"}, nil); !res.IsError {
		t.Errorf("unknown vendor: IsError = false")
	}

	gh := connect("github")
	pr := decodeMap(t, mcptest.Call(t, ctx, gh, "get_pull_request", map[string]any{"repo": "acme/shop", "number": 4182}, nil))
	if pr["number"] != 4182.0 || len(pr["review_comments"].([]any)) < 3 {
		t.Errorf("PR 4182 = %v", pr)
	}
	diff := decodeMap(t, mcptest.Call(t, ctx, gh, "get_pull_request_diff", map[string]any{"repo": "acme/shop", "number": 4182}, nil))
	if d, _ := diff["diff"].(string); !strings.HasPrefix(d, "diff --git ") || !strings.Contains(d, "capture.go") {
		t.Errorf("diff = %.200v", diff["diff"])
	}
	file := decodeMap(t, mcptest.Call(t, ctx, gh, "get_file", map[string]any{"repo": "acme/shop", "path": "services/checkout/README.md"}, nil))
	if c, _ := file["content"].(string); !strings.Contains(c, "## Order states") || !strings.Contains(c, "## Request flow") {
		t.Errorf("README = %.200v", file["content"])
	}
	if res := mcptest.Call(t, ctx, gh, "get_pull_request", map[string]any{"repo": "acme/shop", "number": 1}, nil); !res.IsError {
		t.Errorf("unknown PR: IsError = false")
	}

	cal := connect("google-calendar")
	events := decodeMap(t, mcptest.Call(t, ctx, cal, "list-events", map[string]any{"calendarId": "primary"}, nil))
	if n := len(events["items"].([]any)); n < 3 {
		t.Errorf("%d events", n)
	}
	afternoon := decodeMap(t, mcptest.Call(t, ctx, cal, "list-events", map[string]any{"calendarId": "primary",
		"timeMin": "2026-03-09T13:00:00+05:30", "timeMax": "2026-03-09T16:00:00+05:30"}, nil))
	if items := afternoon["items"].([]any); len(items) != 1 || items[0].(map[string]any)["id"] != "evt-payrun-0309" {
		t.Errorf("afternoon events = %v", items)
	}

	gmail := connect("gmail")
	var mails struct{ Messages []Mail }
	mcptest.Decode(t, mcptest.Call(t, ctx, gmail, "messages_list", map[string]any{"labelIds": []string{"UNREAD"}}, nil), &mails)
	if len(mails.Messages) < 2 || len(mails.Messages) == len(embeddedData(t).Gmail.Messages) {
		t.Errorf("UNREAD: %d messages", len(mails.Messages))
	}
	for _, m := range mails.Messages {
		if !slices.Contains(m.LabelIDs, "UNREAD") {
			t.Errorf("UNREAD listed %s (%v)", m.ID, m.LabelIDs)
		}
	}

	slack := connect("slack")
	var found struct{ Messages []SlackMessage }
	mcptest.Decode(t, mcptest.Call(t, ctx, slack, "slack_search_messages", map[string]any{"query": "mentions:me"}, nil), &found)
	if len(found.Messages) < 2 {
		t.Errorf("mentions:me: %d messages", len(found.Messages))
	}
	for _, m := range found.Messages {
		if !m.MentionsMe {
			t.Errorf("mentions:me found %+v", m)
		}
	}
	mcptest.Decode(t, mcptest.Call(t, ctx, slack, "slack_search_messages", map[string]any{"query": "in:#finance kaveri"}, nil), &found)
	if len(found.Messages) != 1 || found.Messages[0].Channel != "#finance" {
		t.Errorf("in:#finance kaveri = %+v", found.Messages)
	}
}

func embeddedData(t *testing.T) *Data {
	t.Helper()
	var d Data
	if err := json.Unmarshal(defaultData, &d); err != nil {
		t.Fatal(err)
	}
	return &d
}

// --vendors is re-read on every get_vendor call: a bank account changed
// while the server runs shows up on the next call.
func TestVendorsFileReread(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	vendors := filepath.Join(dir, "vendors.json")
	writeVendor := func(account string) {
		t.Helper()
		b := fmt.Appendf(nil, `{"V-1187": {"id": "V-1187", "name": "Kaveri Precision Components Pvt Ltd", "bank_account": %q, "status": "active"}}`, account)
		tmp := vendors + ".tmp"
		if err := os.WriteFile(tmp, b, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, vendors); err != nil {
			t.Fatal(err)
		}
	}
	writeVendor("XXXX2048")
	cs := mcptest.ConnectPipes(t, ctx, Run, "--server", "erp", "--vendors", vendors, "--log", filepath.Join(dir, "e.jsonl"))
	get := func() any {
		return decodeMap(t, mcptest.Call(t, ctx, cs, "get_vendor", map[string]any{"id": "V-1187"}, nil))["bank_account"]
	}
	if got := get(); got != "XXXX2048" {
		t.Fatalf("bank_account = %v, want XXXX2048", got)
	}
	writeVendor("XXXX7731")
	if got := get(); got != "XXXX7731" {
		t.Fatalf("after the change, bank_account = %v, want XXXX7731", got)
	}
	if err := os.Remove(vendors); err != nil {
		t.Fatal(err)
	}
	if res := mcptest.Call(t, ctx, cs, "get_vendor", map[string]any{"id": "V-1187"}, nil); !res.IsError {
		t.Errorf("vendors file gone: IsError = false")
	}
}

// Concurrent payments on one session each land once in the log; a retry
// with the same idempotency key reports the same payment ID (and is logged
// again: the log records calls, it does not deduplicate them).
func TestConcurrentPayments(t *testing.T) {
	ctx := t.Context()
	logFile := filepath.Join(t.TempDir(), "effects.jsonl")
	cs := mcptest.ConnectPipes(t, ctx, Run, "--server", "payments", "--log", logFile)
	const n = 20
	ids := make([]string, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			res, err := mcptest.CallErr(ctx, cs, "pay", map[string]any{"vendor": "V-1187", "invoice": "I-991",
				"amount": 1000 + i, "currency": "INR", "bank_account": "XXXX2048"},
				map[string]any{serve.IdempotencyKeyMeta: fmt.Sprint("pay-", i)})
			var out struct {
				PaymentID string `json:"payment_id"`
			}
			if err == nil {
				err = mcptest.DecodeErr(res, &out)
			}
			if err != nil {
				t.Errorf("pay %d: %v", i, err)
			}
			ids[i] = out.PaymentID
		})
	}
	wg.Wait()
	effects := readEffects(t, logFile)
	if len(effects) != n {
		t.Fatalf("%d effects, want %d", len(effects), n)
	}
	keys := map[string]bool{}
	for _, e := range effects {
		keys[e.IdempotencyKey] = true
		if e.Server != "payments" || e.Tool != "pay" {
			t.Errorf("effect %+v", e)
		}
	}
	if len(keys) != n || len(slices.Compact(slices.Sorted(slices.Values(ids)))) != n {
		t.Errorf("keys %v, payment IDs %v: want %d distinct", slices.Sorted(maps.Keys(keys)), ids, n)
	}

	var again struct {
		PaymentID string `json:"payment_id"`
	}
	mcptest.Decode(t, mcptest.Call(t, ctx, cs, "pay", map[string]any{"vendor": "V-1187", "invoice": "I-991",
		"amount": 1003, "currency": "INR", "bank_account": "XXXX2048"}, map[string]any{serve.IdempotencyKeyMeta: "pay-3"}), &again)
	if again.PaymentID != ids[3] {
		t.Errorf("retry with key pay-3: payment_id %s, first call %s", again.PaymentID, ids[3])
	}
	for _, bad := range []map[string]any{
		{"vendor": "V-1187", "invoice": "I-991", "amount": 0, "currency": "INR", "bank_account": "XXXX2048"},
		{"vendor": "V-1187", "invoice": "I-991", "amount": 10, "currency": "rupees", "bank_account": "XXXX2048"},
		{"vendor": "V-1187", "invoice": "I-991", "amount": 10, "currency": "INR"},
	} {
		if res := mcptest.Call(t, ctx, cs, "pay", bad, nil); !res.IsError {
			t.Errorf("pay %v: IsError = false", bad)
		}
	}
	if got := len(readEffects(t, logFile)); got != n+1 {
		t.Errorf("%d effects after the retry and the refused calls, want %d", got, n+1)
	}
}

// --data replaces the embedded data; bad flags fail run.
func TestFlags(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	data := filepath.Join(dir, "data.json")
	if err := os.WriteFile(data, []byte(`{"google-calendar": {"calendars": {"team": [
		{"id": "e1", "summary": "Only event", "start": "2026-01-01T10:00:00Z", "end": "2026-01-01T11:00:00Z"}]}}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	cs := mcptest.ConnectPipes(t, ctx, Run, "--server", "google-calendar", "--data", data, "--log", filepath.Join(dir, "e.jsonl"))
	events := decodeMap(t, mcptest.Call(t, ctx, cs, "list-events", map[string]any{"calendarId": "team"}, nil))
	if items := events["items"].([]any); len(items) != 1 || items[0].(map[string]any)["summary"] != "Only event" {
		t.Errorf("events = %v", items)
	}
	if res := mcptest.Call(t, ctx, cs, "list-events", map[string]any{"calendarId": "primary"}, nil); !res.IsError {
		t.Errorf("primary calendar with replaced data: IsError = false")
	}

	for _, args := range [][]string{{}, {"--server", "jira"}, {"--server", "erp", "--data", filepath.Join(dir, "missing.json")}} {
		var stderr strings.Builder
		if err := Run(ctx, args, strings.NewReader(""), &strings.Builder{}, &stderr); err == nil {
			t.Errorf("run %q: no error", args)
		}
	}
}
