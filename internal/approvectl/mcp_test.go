package approvectl

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/goleak"
)

// noLeaks checks, when the test is over, that every goroutine it started
// has ended. Call it first: its check runs after every other cleanup.
func noLeaks(t *testing.T) {
	t.Helper()
	before := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, before) })
}

// within waits for a value on ch; the bound only keeps a broken test from
// hanging. (Not t.Context(): cleanups wait too, after it ended.)
func within[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	select {
	case v := <-ch:
		return v
	case <-ctx.Done():
		t.Fatalf("no %s", what)
		panic("unreachable")
	}
}

const gatewayInstructions = "Tollgate runs these tools on its executors."

// upstreamCall is one call (one attempt) as the gateway saw it.
type upstreamCall struct {
	Tool    string
	Auth    string // the Authorization header
	Args    json.RawMessage
	Meta    map[string]any
	Key     string // _meta tollgate/idempotency_key
	Attempt int    // of this key, from 1
}

// fakeGateway is an MCP gateway as the bridge meets one: the SDK's
// streamable HTTP handler, with an event store as mcpgw's, behind a bearer
// token check (401 otherwise). It can restart on its address, forgetting
// its sessions as a restarted control plane does, while its tools and the
// attempts it saw (its store) stay.
type fakeGateway struct {
	t      *testing.T
	token  string
	server *mcp.Server
	calls  chan upstreamCall
	// release lets a call that sent progress return: as a call that waits
	// for a person, it answers after its progress was seen.
	release chan struct{}
	// waitEnded gets acme.wait's calls whose wait ended (cancelled).
	waitEnded chan string

	mu       sync.Mutex
	addr     string
	srv      *http.Server
	attempts map[string]int
	waiting  map[string][]context.CancelFunc // acme.wait's calls, by session
	wg       sync.WaitGroup
}

var (
	payTool = &mcp.Tool{Name: "acme.pay", Title: "Pay an invoice", Description: "Pays a supplier's invoice.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"payee":{"type":"string"},"amount":{"type":"number"}},"required":["payee","amount"]}`),
		Annotations: &mcp.ToolAnnotations{DestructiveHint: new(true), OpenWorldHint: new(true)}}
	lookupTool = &mcp.Tool{Name: "acme.lookup", Description: "Finds an invoice.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"invoice":{"type":"string"}}}`),
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true}}
	brokenTool = &mcp.Tool{Name: "acme.broken", InputSchema: json.RawMessage(`{"type":"object"}`)}
	waitTool   = &mcp.Tool{Name: "acme.wait", Description: "Waits for a person who does not come.", InputSchema: json.RawMessage(`{"type":"object"}`)}
	askTool    = &mcp.Tool{Name: "acme.ask", Description: "Asks its caller a question, as the gateway does.", InputSchema: json.RawMessage(`{"type":"object"}`)}
	flakyTool  = &mcp.Tool{Name: "acme.flaky", Description: "Its first call restarts the control plane.", InputSchema: json.RawMessage(`{"type":"object"}`)}
)

func payResult() *mcp.CallToolResult {
	return &mcp.CallToolResult{Meta: mcp.Meta{"tollgate/run": "r_k2v8"},
		Content:           []mcp.Content{&mcp.TextContent{Text: "paid 1187.50 to ACME GmbH"}},
		StructuredContent: map[string]any{"paid": 1187.5, "payee": "ACME GmbH"}}
}

func lookupResult() *mcp.CallToolResult {
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "no invoice I-404"}}}
}

var brokenErr = &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "amount: not a number", Data: json.RawMessage(`{"field":"amount"}`)}

func newFakeGateway(t *testing.T) *fakeGateway {
	gw := &fakeGateway{t: t, token: "tok-alice-agent", calls: make(chan upstreamCall, 16), release: make(chan struct{}), waitEnded: make(chan string, 4), addr: "127.0.0.1:0", attempts: map[string]int{}, waiting: map[string][]context.CancelFunc{}}
	gw.server = mcp.NewServer(&mcp.Implementation{Name: "tollgate", Version: "1"}, &mcp.ServerOptions{Instructions: gatewayInstructions})
	gw.server.AddTool(payTool, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		gw.record(req)
		if tok := req.Params.GetProgressToken(); tok != nil {
			if err := req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Progress: 1, Total: 2, Message: "waiting for bob (finance) until 17:00"}); err != nil {
				t.Errorf("progress: %v", err)
			}
			select {
			case <-gw.release:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		return payResult(), nil
	})
	gw.server.AddTool(lookupTool, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		gw.record(req)
		return lookupResult(), nil
	})
	gw.server.AddTool(brokenTool, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		gw.record(req)
		return nil, brokenErr
	})
	gw.server.AddTool(waitTool, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		c := gw.record(req)
		ctx, stop := context.WithCancel(ctx)
		defer stop()
		gw.mu.Lock()
		gw.waiting[req.Session.ID()] = append(gw.waiting[req.Session.ID()], stop)
		gw.mu.Unlock()
		<-ctx.Done()
		gw.waitEnded <- c.Key
		return nil, ctx.Err()
	})
	gw.server.AddTool(askTool, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		gw.record(req)
		res, err := req.Session.Elicit(ctx, &mcp.ElicitParams{Message: "which diagram should I draw?",
			RequestedSchema: map[string]any{"type": "object", "properties": map[string]any{"answer": map[string]any{"type": "string", "enum": []string{"sequence", "class"}}}}})
		if err != nil {
			return nil, err
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("%s %v", res.Action, res.Content["answer"])}}}, nil
	})
	gw.server.AddTool(flakyTool, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		c := gw.record(req)
		if c.Attempt == 1 {
			// The control plane goes down with the call's stream and comes
			// back on the same address without the session; the answer
			// to this attempt is lost.
			gw.restart()
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("attempt %d", c.Attempt)}}}, nil
	})
	// A tool the SDK cannot serve (its input schema is no object): the
	// bridge must leave it out, not crash.
	gw.server.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			res, err := next(ctx, method, req)
			if r, ok := res.(*mcp.ListToolsResult); ok && err == nil {
				r.Tools = append(r.Tools, &mcp.Tool{Name: "acme.bad", InputSchema: map[string]any{"type": "string"}})
			}
			return res, err
		}
	})
	gw.listen()
	t.Cleanup(gw.close)
	return gw
}

// record notes a call's attempt and sends it on calls.
func (gw *fakeGateway) record(req *mcp.CallToolRequest) upstreamCall {
	c := upstreamCall{Tool: req.Params.Name, Args: req.Params.Arguments, Meta: req.Params.Meta}
	if req.Extra != nil {
		c.Auth = req.Extra.Header.Get("Authorization")
	}
	c.Key, _ = c.Meta[idempotencyMetaKey].(string)
	gw.mu.Lock()
	gw.attempts[c.Key]++
	c.Attempt = gw.attempts[c.Key]
	gw.mu.Unlock()
	gw.calls <- c
	return c
}

func (gw *fakeGateway) url() string {
	gw.mu.Lock()
	defer gw.mu.Unlock()
	return "http://" + gw.addr + "/mcp"
}

// listen serves on gw.addr (a fresh port the first time) with a handler
// of its own: new sessions, a new event store.
func (gw *fakeGateway) listen() {
	gw.mu.Lock()
	defer gw.mu.Unlock()
	ln, err := net.Listen("tcp", gw.addr)
	if err != nil {
		gw.t.Errorf("listen on %s: %v", gw.addr, err)
		return
	}
	gw.addr = ln.Addr().String()
	gw.srv = &http.Server{Handler: gw.handler()}
	srv := gw.srv
	gw.wg.Add(1)
	go func() {
		defer gw.wg.Done()
		_ = srv.Serve(ln)
	}()
}

// handler is the gateway's endpoint: new sessions, a new event store.
func (gw *fakeGateway) handler() http.Handler {
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return gw.server }, &mcp.StreamableHTTPOptions{EventStore: mcp.NewMemoryEventStore(nil)})
	verify := func(_ context.Context, tok string, _ *http.Request) (*auth.TokenInfo, error) {
		if tok != gw.token {
			return nil, fmt.Errorf("%w: not a token this control plane issued", auth.ErrInvalidToken)
		}
		return &auth.TokenInfo{UserID: "alice-agent"}, nil
	}
	// As mcpgw does: a session its client deletes ends the calls it
	// still waits on (the SDK closes it only once they have returned).
	ending := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if id := r.Header.Get("Mcp-Session-Id"); r.Method == http.MethodDelete && id != "" {
			gw.mu.Lock()
			for _, stop := range gw.waiting[id] {
				stop()
			}
			gw.mu.Unlock()
		}
		h.ServeHTTP(w, r)
	})
	return auth.RequireBearerToken(verify, &auth.RequireBearerTokenOptions{AllowMissingExpiration: true})(ending)
}

// restart drops every connection and session, and serves again.
func (gw *fakeGateway) restart() {
	gw.mu.Lock()
	srv := gw.srv
	gw.mu.Unlock()
	_ = srv.Close()
	gw.listen()
}

func (gw *fakeGateway) close() {
	gw.mu.Lock()
	srv := gw.srv
	gw.mu.Unlock()
	_ = srv.Close()
	gw.wg.Wait()
	// Sessions a restart forgot are still open in the server.
	for ss := range gw.server.Sessions() {
		_ = ss.Close()
	}
}

// tools is what the gateway lists, as a client of its own sees it.
func (gw *fakeGateway) tools(t *testing.T) map[string]*mcp.Tool {
	t.Helper()
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	c := mcp.NewClient(&mcp.Implementation{Name: "direct", Version: "1"}, nil)
	cs, err := c.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: gw.url(), DisableStandaloneSSE: true,
		HTTPClient: &http.Client{Transport: &bearerTransport{base: tr, token: gw.token}}}, &mcp.ClientSessionOptions{ProtocolVersion: mcpProtocolVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res, err := cs.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*mcp.Tool{}
	for _, tool := range res.Tools {
		out[tool.Name] = tool
	}
	return out
}

// mcpEnv is the environment approvectl mcp runs in: no home of the
// user's, and what vars gives.
func mcpEnv(t *testing.T, vars map[string]string) Config {
	home := t.TempDir()
	return Config{ConfigDir: home, Getenv: func(k string) string {
		if k == "TOLLGATE_HOME" {
			return home
		}
		return vars[k]
	}}
}

// bridgeRun is approvectl mcp running on pipes, with a desktop client (cs)
// on their other ends.
type bridgeRun struct {
	cs     *mcp.ClientSession
	stderr *watchWriter
	stop   context.CancelFunc // ends Run's context
	ended  chan struct{}      // closed when Run returned err
	err    error
}

// wait waits for Run to return, and returns its error.
func (b *bridgeRun) wait(t *testing.T) error {
	t.Helper()
	within(t, b.ended, "end of approvectl mcp")
	return b.err
}

// startBridge runs approvectl mcp against gw with token, and connects a
// client to it as a desktop client does, speaking MCP version proto (""
// the SDK's newest). When the test is over the client closes stdin, and
// approvectl mcp must end without an error.
func startBridge(t *testing.T, gw *fakeGateway, token, proto string, opts *mcp.ClientOptions, args ...string) *bridgeRun {
	t.Helper()
	stdinR, stdinW := io.Pipe()
	stdoutR, stdoutW := io.Pipe()
	ctx, stop := context.WithCancel(context.Background())
	b := &bridgeRun{stderr: newWatchWriter(), stop: stop, ended: make(chan struct{})}
	cfg := mcpEnv(t, map[string]string{"TOLLGATE_TOKEN": token, "TOLLGATE_MCP_URL": gw.url()})
	cfg.Stdin, cfg.Stdout, cfg.Stderr = stdinR, stdoutW, b.stderr
	go func() {
		defer close(b.ended)
		b.err = Run(ctx, append([]string{"mcp"}, args...), cfg)
		stdoutW.Close() // as the process's exit would
	}()
	c := mcp.NewClient(&mcp.Implementation{Name: "desktop", Version: "1"}, opts)
	cs, err := c.Connect(t.Context(), &mcp.IOTransport{Reader: stdoutR, Writer: stdinW}, &mcp.ClientSessionOptions{ProtocolVersion: proto})
	if err != nil {
		stdinW.Close()
		stop()
		t.Fatalf("connect to approvectl mcp: %v (exit: %v)\n%s", err, b.wait(t), b.stderr)
	}
	b.cs = cs
	t.Cleanup(func() {
		_ = cs.Close() // closes the bridge's stdin
		if err := b.wait(t); err != nil {
			t.Errorf("approvectl mcp: %v (exit %d)\n%s", err, ExitCode(err), b.stderr)
		}
		stop()
	})
	return b
}

// runBridge runs approvectl mcp to a start that fails.
func runBridge(t *testing.T, vars map[string]string, args ...string) (err error, stderr string) {
	t.Helper()
	stdinR, stdinW := io.Pipe()
	defer stdinW.Close()
	var out, errs bytes.Buffer
	cfg := mcpEnv(t, vars)
	cfg.Stdin, cfg.Stdout, cfg.Stderr = stdinR, &out, &errs
	err = Run(t.Context(), append([]string{"mcp"}, args...), cfg)
	if out.Len() > 0 {
		t.Errorf("stdout carries MCP only, got %q", out.String())
	}
	return err, errs.String()
}

func toolsOf(t *testing.T, cs *mcp.ClientSession) map[string]*mcp.Tool {
	t.Helper()
	out := map[string]*mcp.Tool{}
	for tool, err := range cs.Tools(t.Context(), nil) {
		if err != nil {
			t.Fatal(err)
		}
		out[tool.Name] = tool
	}
	return out
}

func jsonOf(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestMCPBridgeServesTheGatewaysTools(t *testing.T) {
	noLeaks(t)
	gw := newFakeGateway(t)
	b := startBridge(t, gw, gw.token, "", nil)

	up, down := gw.tools(t), toolsOf(t, b.cs)
	if up["acme.bad"] == nil {
		t.Fatal("the gateway does not list acme.bad: the test proves nothing")
	}
	delete(up, "acme.bad")
	if len(up) != 6 || len(down) != len(up) {
		t.Errorf("served %d tools, the gateway lists %d servable: %v", len(down), len(up), slices.Sorted(func(yield func(string) bool) {
			for n := range down {
				yield(n)
			}
		}))
	}
	for name, want := range up {
		if got := down[name]; got == nil || jsonOf(t, got) != jsonOf(t, want) {
			t.Errorf("%s served as\n %s\nthe gateway lists\n %s", name, jsonOf(t, got), jsonOf(t, want))
		}
	}
	if !strings.Contains(b.stderr.String(), `tool "acme.bad" is not served`) {
		t.Errorf("stderr does not say why acme.bad is not served:\n%s", b.stderr)
	}
	if got := b.cs.InitializeResult().Instructions; got != gatewayInstructions {
		t.Errorf("instructions %q, the gateway gives %q", got, gatewayInstructions)
	}
}

func TestMCPBridgeForwardsCallsAsTheyAre(t *testing.T) {
	noLeaks(t)
	gw := newFakeGateway(t)
	// The version desktop clients speak: on 2026-07-28 the SDK's server
	// adds fields of its own to a result (resultType, _meta serverInfo).
	b := startBridge(t, gw, gw.token, mcpProtocolVersion, nil)

	// Key order, a trailing zero, an exponent and an integer beyond float64
	// change if anything on the way decodes and encodes the arguments again.
	args := json.RawMessage(`{"payee":"ACME GmbH","amount":1187.50,"ref":12345678901234567890,"lines":[{"sku":"a-1","qty":1e3}]}`)
	res, err := b.cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "acme.pay", Arguments: args})
	if err != nil {
		t.Fatal(err)
	}
	c := within(t, gw.calls, "call at the gateway")
	if !bytes.Equal(c.Args, args) {
		t.Errorf("arguments at the gateway\n %s\nsent\n %s", c.Args, args)
	}
	if c.Auth != "Bearer "+gw.token {
		t.Errorf("Authorization at the gateway %q", c.Auth)
	}
	if c.Meta["progressToken"] != nil {
		t.Errorf("a progress token upstream for a call that asked for none: %v", c.Meta)
	}
	if got, want := jsonOf(t, res), jsonOf(t, payResult()); got != want {
		t.Errorf("result\n %s\nthe gateway gave\n %s", got, want)
	}

	// A tool's failure is a result, and comes back as one.
	res, err = b.cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "acme.lookup", Arguments: map[string]any{"invoice": "I-404"}})
	if err != nil {
		t.Fatal(err)
	}
	within(t, gw.calls, "call at the gateway")
	if got, want := jsonOf(t, res), jsonOf(t, lookupResult()); !res.IsError || got != want {
		t.Errorf("result\n %s\nthe gateway gave\n %s", got, want)
	}

	// A JSON-RPC error is the gateway's answer too: passed on as it is,
	// never asked again.
	_, err = b.cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "acme.broken", Arguments: map[string]any{"amount": "x"}})
	var we *jsonrpc.Error
	if !errors.As(err, &we) || we.Code != brokenErr.Code || we.Message != brokenErr.Message || string(we.Data) != string(brokenErr.Data) {
		t.Errorf("error %v (%#v), the gateway gave %#v", err, we, brokenErr)
	}
	within(t, gw.calls, "call at the gateway")
	if _, err := b.cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "acme.lookup"}); err != nil {
		t.Fatal(err)
	}
	if c := within(t, gw.calls, "call at the gateway"); c.Tool != "acme.lookup" {
		t.Errorf("the gateway was asked %s again", c.Tool)
	}
}

func TestMCPBridgeIdempotencyKeys(t *testing.T) {
	noLeaks(t)
	gw := newFakeGateway(t)
	// The newest version: its calls carry _meta about the client's own
	// connection, which must stay behind.
	b := startBridge(t, gw, gw.token, "", nil)

	p := &mcp.CallToolParams{Name: "acme.pay", Arguments: map[string]any{"payee": "ACME GmbH", "amount": 1},
		Meta: mcp.Meta{idempotencyMetaKey: "inv-1187-pay", "acme/trace": "t-9"}}
	if _, err := b.cs.CallTool(t.Context(), p); err != nil {
		t.Fatal(err)
	}
	c := within(t, gw.calls, "call at the gateway")
	if c.Meta[idempotencyMetaKey] != "inv-1187-pay" || c.Meta["acme/trace"] != "t-9" {
		t.Errorf("_meta at the gateway %v, sent %v", c.Meta, p.Meta)
	}
	for k := range c.Meta {
		if strings.HasPrefix(k, "io.modelcontextprotocol/") {
			t.Errorf("_meta at the gateway has %q, about the client's own connection (%s)", k, b.cs.InitializeResult().ProtocolVersion)
		}
	}

	var keys []string
	for range 2 {
		if _, err := b.cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "acme.pay", Arguments: map[string]any{"payee": "ACME GmbH", "amount": 1}}); err != nil {
			t.Fatal(err)
		}
		keys = append(keys, within(t, gw.calls, "call at the gateway").Key)
	}
	if keys[0] == "" || keys[1] == "" || keys[0] == keys[1] || slices.Contains(keys, "inv-1187-pay") {
		t.Errorf("keys the bridge set: %q; want one fresh key per call", keys)
	}
}

func TestMCPBridgePassesProgressOn(t *testing.T) {
	noLeaks(t)
	gw := newFakeGateway(t)
	progress := make(chan *mcp.ProgressNotificationParams, 4)
	b := startBridge(t, gw, gw.token, mcpProtocolVersion, &mcp.ClientOptions{ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
		progress <- req.Params
	}})

	p := &mcp.CallToolParams{Name: "acme.pay", Arguments: map[string]any{"payee": "ACME GmbH", "amount": 1}}
	p.SetProgressToken("desk-7")
	called := make(chan error, 1)
	go func() {
		_, err := b.cs.CallTool(t.Context(), p)
		called <- err
	}()
	if c := within(t, gw.calls, "call at the gateway"); c.Meta["progressToken"] == nil || c.Meta["progressToken"] == "desk-7" {
		t.Errorf("progress token at the gateway %v: want the bridge's own", c.Meta["progressToken"])
	}
	got := within(t, progress, "progress at the client")
	if got.ProgressToken != "desk-7" || got.Progress != 1 || got.Total != 2 || got.Message != "waiting for bob (finance) until 17:00" {
		t.Errorf("progress at the client %+v", got)
	}
	close(gw.release)
	if err := within(t, called, "result"); err != nil {
		t.Fatal(err)
	}
}

func TestMCPBridgeAsksAgainWithTheSameKeyWhenTheAnswerIsLost(t *testing.T) {
	noLeaks(t)
	gw := newFakeGateway(t)
	b := startBridge(t, gw, gw.token, "", nil)

	res, err := b.cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "acme.flaky", Arguments: map[string]any{"n": 1}})
	if err != nil {
		t.Fatalf("%v\n%s", err, b.stderr)
	}
	first, second := within(t, gw.calls, "first attempt"), within(t, gw.calls, "second attempt")
	if first.Attempt != 1 || second.Attempt != 2 || first.Key == "" || second.Key != first.Key || !bytes.Equal(second.Args, first.Args) {
		t.Errorf("attempts at the gateway:\n %+v\n %+v\nwant the same call twice, with the same key", first, second)
	}
	if len(res.Content) != 1 || res.Content[0].(*mcp.TextContent).Text != "attempt 2" {
		t.Errorf("result %s, want the second attempt's", jsonOf(t, res))
	}
	// The bridge goes on with the control plane that came back.
	if _, err := b.cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "acme.lookup"}); err != nil {
		t.Fatal(err)
	}
	if c := within(t, gw.calls, "call at the gateway"); c.Tool != "acme.lookup" {
		t.Errorf("the gateway was asked %s (attempt %d) again", c.Tool, c.Attempt)
	}
	if !strings.Contains(b.stderr.String(), "ask again with the same tollgate/idempotency_key") {
		t.Errorf("stderr does not say the call was asked again:\n%s", b.stderr)
	}
}

func TestMCPBridgeFollowsToolListChanges(t *testing.T) {
	noLeaks(t)
	gw := newFakeGateway(t)
	changed := make(chan struct{}, 1)
	b := startBridge(t, gw, gw.token, "", &mcp.ClientOptions{ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
		select {
		case changed <- struct{}{}:
		default:
		}
	}})
	until := func(what string, ok func(map[string]*mcp.Tool) bool) {
		t.Helper()
		for !ok(toolsOf(t, b.cs)) {
			within(t, changed, what)
		}
	}

	gw.server.AddTool(&mcp.Tool{Name: "acme.refund", InputSchema: json.RawMessage(`{"type":"object"}`)}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{}, nil
	})
	until("acme.refund served", func(m map[string]*mcp.Tool) bool { return m["acme.refund"] != nil })
	gw.server.RemoveTools("acme.lookup")
	until("acme.lookup gone", func(m map[string]*mcp.Tool) bool { return m["acme.lookup"] == nil })
	changedPay := *payTool
	changedPay.Description = "Pays a supplier's invoice, once approved."
	gw.server.AddTool(&changedPay, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{}, nil
	})
	until("acme.pay's new description", func(m map[string]*mcp.Tool) bool {
		return m["acme.pay"] != nil && m["acme.pay"].Description == changedPay.Description
	})
	if got := toolsOf(t, b.cs); len(got) != 6 {
		t.Errorf("served %d tools, want acme.pay, acme.refund, acme.broken, acme.wait, acme.ask, acme.flaky", len(got))
	}
}

// A call's wait at the gateway ends when the client gives up on it, and
// every wait ends when approvectl mcp's context does: it then ends, and
// ends its session with the gateway.
func TestMCPBridgeEndsWaitsWithTheirCaller(t *testing.T) {
	noLeaks(t)
	gw := newFakeGateway(t)
	b := startBridge(t, gw, gw.token, "", nil)

	callCtx, giveUp := context.WithCancel(t.Context())
	called := make(chan error, 1)
	go func() {
		_, err := b.cs.CallTool(callCtx, &mcp.CallToolParams{Name: "acme.wait"})
		called <- err
	}()
	key := within(t, gw.calls, "call at the gateway").Key
	giveUp()
	if got := within(t, gw.waitEnded, "end of the wait at the gateway"); got != key {
		t.Errorf("the wait of %q ended, want %q's", got, key)
	}
	if err := within(t, called, "the call's end"); !errors.Is(err, context.Canceled) {
		t.Errorf("the call given up on ended with %v", err)
	}

	go func() {
		_, err := b.cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "acme.wait"})
		called <- err
	}()
	key = within(t, gw.calls, "call at the gateway").Key
	b.stop()
	if got := within(t, gw.waitEnded, "end of the wait at the gateway"); got != key {
		t.Errorf("the wait of %q ended, want %q's", got, key)
	}
	if err := b.wait(t); err != nil {
		t.Errorf("approvectl mcp ended with %v\n%s", err, b.stderr)
	}
	if err := within(t, called, "the call's end"); err == nil {
		t.Error("a call ended by the bridge's end got a result")
	}
	for ss := range gw.server.Sessions() {
		t.Errorf("session %s still open at the gateway", ss.ID())
	}
}

// An https gateway's certificate is checked against --ca's roots.
func TestMCPBridgeTrustsTheCAItIsGiven(t *testing.T) {
	noLeaks(t)
	gw := newFakeGateway(t)
	ts := httptest.NewUnstartedServer(gw.handler())
	ts.StartTLS()
	t.Cleanup(ts.Close)
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ts.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	endpoint := ts.URL + "/mcp"

	err, stderr := runBridge(t, map[string]string{"TOLLGATE_TOKEN": gw.token}, "--url", endpoint)
	if ExitCode(err) != ExitInternal || !strings.Contains(stderr, "certificate signed by unknown authority") {
		t.Errorf("without --ca: exit %d\n%s", ExitCode(err), stderr)
	}
	b := startBridge(t, gw, gw.token, "", nil, "--url", endpoint, "--ca", ca)
	if got := toolsOf(t, b.cs); got["acme.pay"] == nil {
		t.Errorf("over https with --ca: tools %v", got)
	}
	if _, err := b.cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "acme.lookup"}); err != nil {
		t.Fatal(err)
	}
	if c := within(t, gw.calls, "call at the gateway"); c.Auth != "Bearer "+gw.token {
		t.Errorf("Authorization at the gateway %q", c.Auth)
	}
}

func TestMCPBridgeWrongTokenIsRefused(t *testing.T) {
	noLeaks(t)
	gw := newFakeGateway(t)
	err, stderr := runBridge(t, map[string]string{"TOLLGATE_TOKEN": "not-a-token", "TOLLGATE_MCP_URL": gw.url()})
	if ExitCode(err) != ExitRefused || !strings.Contains(stderr, "the control plane refused the token") || !strings.Contains(stderr, "401") ||
		!strings.Contains(stderr, "not a token this control plane issued") {
		t.Errorf("exit %d, stderr:\n%s", ExitCode(err), stderr)
	}
}

func TestMCPBridgeStartFailures(t *testing.T) {
	noLeaks(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + ln.Addr().String() + "/mcp"
	ln.Close()
	for _, c := range []struct {
		args []string
		code int
		says string
	}{
		{[]string{"--url", "http://tollgate.acme.example:7446/mcp"}, ExitUsage, "use https://"},
		{[]string{"--url", "http://10.0.0.7/mcp"}, ExitUsage, "use https://"},
		{[]string{"--url", "ftp://127.0.0.1/mcp"}, ExitUsage, "is not an http(s) URL"},
		{[]string{"--url", closed}, ExitInternal, "cannot reach the MCP gateway at " + closed},
	} {
		err, stderr := runBridge(t, map[string]string{"TOLLGATE_TOKEN": "tok"}, c.args...)
		if ExitCode(err) != c.code || !strings.Contains(stderr, c.says) {
			t.Errorf("mcp %s: exit %d, want %d saying %q:\n%s", strings.Join(c.args, " "), ExitCode(err), c.code, c.says, stderr)
		}
	}
}

// The gateway's question to the agent's person (elicitation) reaches a
// client that takes elicitation, and its answer goes back; a client that
// does not is answered for with a decline, never a made-up answer.
func TestMCPBridgePassesElicitationOn(t *testing.T) {
	noLeaks(t)
	gw := newFakeGateway(t)
	asked := make(chan string, 1)
	b := startBridge(t, gw, gw.token, mcpProtocolVersion, &mcp.ClientOptions{ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		asked <- req.Params.Message
		return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"answer": "class"}}, nil
	}})
	res, err := b.cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "acme.ask"})
	if err != nil {
		t.Fatal(err)
	}
	if q := within(t, asked, "the question at the client"); q != "which diagram should I draw?" {
		t.Errorf("the client was asked %q", q)
	}
	if got := res.Content[0].(*mcp.TextContent).Text; got != "accept class" {
		t.Errorf("the gateway got %q", got)
	}

	plain := startBridge(t, gw, gw.token, mcpProtocolVersion, nil)
	res, err = plain.cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "acme.ask"})
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Content[0].(*mcp.TextContent).Text; got != "decline <nil>" {
		t.Errorf("without elicitation at the client the gateway got %q, want a decline", got)
	}
}
