package approvectl

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"

	"github.com/tollgate-dev/tollgate/internal/identity"
	"github.com/tollgate-dev/tollgate/pkg/limits"
)

// DefaultMCPURL is where a --dev control plane serves its MCP gateway.
const DefaultMCPURL = "http://127.0.0.1:7446/mcp"

// mcpProtocolVersion is the MCP version the bridge asks the gateway for.
// 2025-11-25 is the newest version with sessions: the gateway's
// tools/list_changed and a waiting call's progress reach the bridge on the
// session's streams. From 2026-07-28 on, the SDK speaks the stateless
// protocol instead (server/discover, subscriptions/listen, per-request
// _meta), which this bridge needs nothing of. Change it here only.
const mcpProtocolVersion = "2025-11-25"

// idempotencyMetaKey names a call for the gateway: a repeat with the same
// key gets the one outcome of the one run, never a second execution
// (mcpgw.IdempotencyMetaKey, executor.IdempotencyMetaKey).
const idempotencyMetaKey = "tollgate/idempotency_key"

const (
	// reconnectFirst and reconnectMax bound the backoff between attempts
	// to reach the gateway again after the connection was lost.
	reconnectFirst = 100 * time.Millisecond
	reconnectMax   = 5 * time.Second
	// connectTimeout bounds one attempt to start a session (initialize):
	// the HTTP client has no timeout, since a call waits for people.
	connectTimeout = 30 * time.Second
)

func newMCPCmd(g *globals) *cobra.Command {
	var rawURL string
	cmd := &cobra.Command{
		Use:   "mcp",
		Short: "Serve the control plane's MCP gateway to a desktop MCP client over stdio",
		Long: `Put Tollgate between your agent and its tools. approvectl mcp is a local MCP
server that a desktop MCP client (Claude Desktop, an IDE) starts and talks
to over stdin and stdout. It forwards every tools/list and tools/call to
the control plane's MCP gateway (streamable HTTP at --url) as you, with the
token every verb sends (--token, --as NAME, $TOLLGATE_TOKEN, or the one
approvectl login cached for --server). The agent sees the tools policy lets
you call, and runs nothing the control plane did not let through.

Read-only tools answer at once. A side-effecting call waits for a person's
approval of its exact arguments, for minutes or hours: the gateway sends
progress while it waits (who is asked, until when), which the bridge
passes on when your client asked for progress. A rejection or an expiry
comes back as the tool's error result, with the reason.

Every call carries the _meta key tollgate/idempotency_key: the gateway runs
a key once and answers a repeat with that one outcome. When your client
sets none, the bridge sets a fresh one for each call. So when the
connection to the control plane is lost mid-call (it restarted), the bridge
reconnects (at once, then after 100ms, twice as long each time up to 5s,
for as long as your client waits) and sends the same call with the same
key again: your client sees one call and its one outcome. Only a lost
connection is retried, never an answer.

In your client's MCP configuration (Claude Desktop: claude_desktop_config.json;
give approvectl's full path if the client's PATH lacks it), with a --dev
control plane:

  {"mcpServers": {"tollgate": {"command": "approvectl", "args": ["mcp", "--as", "alice-agent"]}}}

or with a token of your own:

  {"mcpServers": {"tollgate": {"command": "approvectl",
    "args": ["mcp", "--url", "https://tollgate.acme.example/mcp"],
    "env": {"TOLLGATE_TOKEN": "eyJ…"}}}}

--url is the gateway: default $TOLLGATE_MCP_URL, else ` + DefaultMCPURL + `,
where controlplane --dev serves it. Plain http only to a loopback address:
anywhere else use https, as the token must not travel in the clear. --ca
(or $TOLLGATE_CA) names the roots an https gateway's certificate is checked
against, --tls-server-name (or $TOLLGATE_TLS_SERVER_NAME) the name.

stdout carries MCP only; what the bridge has to say goes to stderr (your
client's log). It serves until your client closes stdin. At start: exit 1
when the gateway refuses the token (401, 403), 2 on bad usage, 3 when it
cannot be reached.`,
		Example: `  approvectl mcp --as alice-agent
  TOLLGATE_TOKEN=eyJ… approvectl mcp --url https://tollgate.acme.example/mcp --ca acme-ca.pem`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if rawURL == "" {
				rawURL = g.cfg.Getenv("TOLLGATE_MCP_URL")
			}
			if rawURL == "" {
				rawURL = DefaultMCPURL
			}
			endpoint, err := mcpEndpoint(rawURL)
			if err != nil {
				return err
			}
			if g.cfg.Stdin == nil {
				return usageErr("mcp speaks MCP on stdin and stdout, and has no stdin: let an MCP client start it (approvectl mcp --help)")
			}
			server := g.serverAddr()
			tok, err := g.bearer(cmd.Context(), server)
			if err != nil {
				return err
			}
			tr, err := g.mcpTransport(endpoint)
			if err != nil {
				return err
			}
			return newBridge(g, endpoint.String(), server, tr, tok).run(cmd.Context())
		},
	}
	cmd.Flags().StringVar(&rawURL, "url", "", "the MCP gateway (default $TOLLGATE_MCP_URL or "+DefaultMCPURL+")")
	return cmd
}

// mcpEndpoint checks the gateway's URL: http or https, and plain http only
// to loopback, since every request carries the caller's bearer token.
func mcpEndpoint(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" {
		return nil, usageErr("--url %q is not an http(s) URL such as %s", limits.Short(raw), DefaultMCPURL)
	}
	if u.Scheme == "http" {
		hostport := u.Host
		if u.Port() == "" {
			hostport = net.JoinHostPort(u.Hostname(), "80")
		}
		if !identity.Loopback(hostport) {
			return nil, usageErr("--url %s: plain http would send your token in the clear to %s; use https:// (plain http is for a gateway on loopback only)", u.Redacted(), u.Hostname())
		}
	}
	return u, nil
}

// mcpTransport is the HTTP transport to the gateway: the default one's
// (proxies from the environment, HTTP/2), with --ca's roots and
// --tls-server-name's name for an https gateway. The bridge owns it, and
// closes its idle connections when it stops.
func (g *globals) mcpTransport(endpoint *url.URL) (*http.Transport, error) {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if endpoint.Scheme != "https" {
		return tr, nil
	}
	ca, name := g.ca, g.serverName
	if ca == "" {
		ca = g.cfg.Getenv("TOLLGATE_CA")
	}
	if name == "" {
		name = g.cfg.Getenv("TOLLGATE_TLS_SERVER_NAME")
	}
	cfg := &tls.Config{ServerName: name, MinVersion: tls.VersionTLS12}
	if ca != "" {
		pem, err := os.ReadFile(ca)
		if err != nil {
			return nil, usageErr("--ca: %v", err)
		}
		cfg.RootCAs = x509.NewCertPool()
		if !cfg.RootCAs.AppendCertsFromPEM(pem) {
			return nil, usageErr("--ca %s holds no PEM certificate", ca)
		}
	}
	tr.TLSClientConfig = cfg
	return tr, nil
}

// bearerTransport sends every request to the gateway with the caller's
// token, and turns a refusal (401, 403) into a refusedError: the SDK would
// report it as a bare status, or not at all for its event streams.
type bearerTransport struct {
	base http.RoundTripper

	mu    sync.Mutex
	token string // replaced when the bridge reconnects (a cached login token may have been refreshed)
}

func (t *bearerTransport) set(token string) {
	t.mu.Lock()
	t.token = token
	t.mu.Unlock()
}

func (t *bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	t.mu.Lock()
	tok := t.token
	t.mu.Unlock()
	// A RoundTripper must not change the request it was given.
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+tok)
	resp, err := t.base.RoundTrip(r)
	if err != nil || (resp.StatusCode != http.StatusUnauthorized && resp.StatusCode != http.StatusForbidden) {
		return resp, err
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<10))
	resp.Body.Close()
	return nil, &refusedError{status: resp.Status, why: strings.TrimSpace(string(body))}
}

// refusedError is the gateway refusing the caller (401, 403): an answer,
// never retried.
type refusedError struct{ status, why string }

func (e *refusedError) Error() string {
	if e.why == "" {
		return e.status
	}
	return e.status + ": " + limits.Short(e.why)
}

// gatewayError is the JSON-RPC error the gateway answered err with, if it
// did. The SDK reports its own transport failures as JSON-RPC errors too,
// with codes of its own (internal/jsonrpc2: ErrClientClosing -32003,
// ErrServerClosing -32004, ErrRejected -32005): those are not answers.
func gatewayError(err error) (*jsonrpc.Error, bool) {
	var we *jsonrpc.Error
	if !errors.As(err, &we) {
		return nil, false
	}
	switch we.Code {
	case -32003, -32004, -32005:
		return nil, false
	}
	return we, true
}

// transportLost reports whether err, a call's error, says the answer was
// lost on the way rather than given: anything but a refusal or a JSON-RPC
// error from the gateway (a tool's own failure is a result, not an error).
// The SDK reports a lost answer in many shapes (io.EOF, ErrConnectionClosed,
// ErrSessionMissing after a restart, an HTTP client error, an event stream
// cut before the answer as a plain "request terminated without response", a
// session broken by a failure it formats with %v), so the test is what an
// answer is, not what a loss looks like.
func transportLost(err error) bool {
	var re *refusedError
	if errors.As(err, &re) {
		return false
	}
	_, answered := gatewayError(err)
	return !answered
}

// upstream is one MCP session with the gateway.
type upstream struct {
	cs   *mcp.ClientSession
	done chan struct{} // closed when the session has ended (closed, or broken)
}

func (u *upstream) ended() bool {
	select {
	case <-u.done:
		return true
	default:
		return false
	}
}

// progressRoute is where progress for one upstream token goes: the
// downstream call it belongs to, under that call's own token.
type progressRoute struct {
	// ctx is the downstream call's: it carries what the SDK needs to tie
	// the notification to the call, and ends with it.
	ctx     context.Context
	session *mcp.ServerSession
	token   any
}

// bridge serves the gateway's tools on stdio (down) and forwards their
// calls to the gateway (up). Every goroutine it starts ends before run
// returns.
type bridge struct {
	g        *globals
	endpoint string
	server   string // the control plane --server names: the token is the caller's for it
	tr       *http.Transport
	auth     *bearerTransport
	http     *http.Client
	client   *mcp.Client
	down     *mcp.Server
	errw     *syncWriter // stderr, shared with the SDK's logger

	// life ends when the bridge stops: every call waiting upstream ends
	// with it (the SDK does not end a handler's context when its server's
	// Run ends). Set by run before the first call can come.
	life context.Context

	dial chan struct{} // held while (re)connecting: one at a time, and a waiter's ctx can end its wait

	mu  sync.Mutex
	cur *upstream // the session calls go to

	toolsMu sync.Mutex        // one sync of the tool list at a time
	listed  map[string]string // tool name → JSON of the upstream tool served under it

	// progMu is held for reading while progress is sent downstream, so
	// that once a call has removed its route (write lock), no progress
	// for it follows its result.
	progMu   sync.RWMutex
	progress map[string]progressRoute // upstream progress token → route

	seq     atomic.Uint64 // upstream progress tokens
	changed chan struct{} // (cap 1) the tools may have changed upstream: list them again
	swapped chan struct{} // (cap 1) cur was replaced: watch the new one
	wg      sync.WaitGroup
}

func newBridge(g *globals, endpoint, server string, tr *http.Transport, token string) *bridge {
	b := &bridge{g: g, endpoint: endpoint, server: server, tr: tr,
		auth: &bearerTransport{base: tr, token: token}, errw: &syncWriter{w: g.cfg.Stderr},
		dial: make(chan struct{}, 1), listed: map[string]string{}, progress: map[string]progressRoute{},
		changed: make(chan struct{}, 1), swapped: make(chan struct{}, 1)}
	// No timeout: a call waits for a person for as long as it takes.
	b.http = &http.Client{Transport: b.auth, Timeout: 0}
	b.client = mcp.NewClient(&mcp.Implementation{Name: "approvectl-mcp-bridge", Version: "1"}, &mcp.ClientOptions{
		Logger: slog.New(slog.NewTextHandler(b.errw, &slog.HandlerOptions{Level: slog.LevelWarn})),
		// The bridge offers the gateway nothing of its own (no roots, no
		// sampling), and passes on elicitation: the gateway puts a
		// question addressed to you (a choice or free text, never an
		// approval) to your client, and answers it as you.
		Capabilities:                &mcp.ClientCapabilities{},
		ElicitationHandler:          b.onElicit,
		ToolListChangedHandler:      func(context.Context, *mcp.ToolListChangedRequest) { signal(b.changed) },
		ProgressNotificationHandler: b.onProgress,
	})
	return b
}

// run connects to the gateway, lists its tools and serves them on stdio
// until stdin closes or ctx ends. A start that fails is the only error.
func (b *bridge) run(ctx context.Context) error {
	life, stop := context.WithCancel(ctx)
	defer stop()
	b.life = life
	first, err := b.connect(life)
	if err != nil {
		b.tr.CloseIdleConnections()
		return b.startErr(err)
	}
	b.setCurrent(first)
	down := mcp.NewServer(&mcp.Implementation{Name: "tollgate", Title: "Tollgate", Version: "bridge"}, &mcp.ServerOptions{
		Instructions: first.cs.InitializeResult().Instructions,
		// Tools, with list_changed, even while the gateway lists none yet.
		Capabilities: &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{ListChanged: true}},
	})
	b.mu.Lock() // onElicit reads it on the upstream session's goroutine
	b.down = down
	b.mu.Unlock()
	listCtx, cancel := context.WithTimeout(life, connectTimeout)
	n, err := b.syncTools(listCtx)
	cancel()
	if err != nil {
		stop()
		b.shutdown()
		return b.startErr(err)
	}
	b.logf("serving the %d tools of %s on stdin/stdout", n, b.endpoint)

	maintained := make(chan struct{})
	go func() {
		defer close(maintained)
		b.maintain(life)
	}()
	stdin, ok := b.g.cfg.Stdin.(io.ReadCloser)
	if !ok {
		stdin = io.NopCloser(b.g.cfg.Stdin)
	}
	// The SDK closes the reader when the session ends, which ends its
	// reading goroutine; stdout is not the bridge's to close.
	err = b.down.Run(life, &mcp.IOTransport{Reader: stdin, Writer: nopWriteCloser{b.g.cfg.Stdout}})
	stop()
	<-maintained // no session is replaced after this
	b.shutdown()
	if err != nil && ctx.Err() == nil && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrClosedPipe) {
		return &exitError{code: ExitInternal, err: fmt.Errorf("serving MCP on stdin/stdout: %w", err)}
	}
	return nil
}

// shutdown closes the gateway session and waits for every goroutine the
// bridge started; no call is in flight.
func (b *bridge) shutdown() {
	_ = b.current().cs.Close()
	b.wg.Wait()
	b.tr.CloseIdleConnections()
}

// startErr says why the bridge could not start, with the exit code
// root.go documents: refused (1), or did not get through (3).
func (b *bridge) startErr(err error) error {
	var re *refusedError
	if errors.As(err, &re) {
		return &exitError{code: ExitRefused, err: fmt.Errorf("the control plane refused the token at %s (%v)\n  sign in again (approvectl login), or check --token / --as / $TOLLGATE_TOKEN", b.endpoint, re)}
	}
	if we, ok := gatewayError(err); ok {
		return &exitError{code: ExitInternal, err: fmt.Errorf("the MCP gateway at %s did not serve the bridge: %v", b.endpoint, we)}
	}
	return &exitError{code: ExitInternal, err: fmt.Errorf("cannot reach the MCP gateway at %s: is the control plane running with MCP on (controlplane --dev serves it at %s)? check --url / $TOLLGATE_MCP_URL\n  cause: %v", b.endpoint, DefaultMCPURL, err)}
}

// connect starts a session with the gateway, and watches for its end.
func (b *bridge) connect(ctx context.Context) (*upstream, error) {
	ctx, cancel := context.WithTimeout(ctx, connectTimeout)
	defer cancel()
	// The session outlives ctx: the SDK keeps only its values.
	cs, err := b.client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: b.endpoint, HTTPClient: b.http},
		&mcp.ClientSessionOptions{ProtocolVersion: mcpProtocolVersion})
	if err != nil {
		return nil, err
	}
	u := &upstream{cs: cs, done: make(chan struct{})}
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		_ = cs.Wait()
		close(u.done)
	}()
	return u, nil
}

func (b *bridge) current() *upstream {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.cur
}

func (b *bridge) setCurrent(u *upstream) {
	b.mu.Lock()
	b.cur = u
	b.mu.Unlock()
}

// replace makes a new session current in place of bad, unless another
// call did so already. The old session is closed in the background: its
// Close waits for the calls still on it.
func (b *bridge) replace(ctx context.Context, bad *upstream) (*upstream, error) {
	select {
	case b.dial <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() { <-b.dial }()
	if cur := b.current(); cur != bad && !cur.ended() {
		return cur, nil
	}
	// The token again: approvectl login's cached one is refreshed when
	// about to expire, and a call may have waited for hours.
	tok, err := b.g.bearer(ctx, b.server)
	if err != nil {
		return nil, err
	}
	b.auth.set(tok)
	u, err := b.connect(ctx)
	if err != nil {
		return nil, err
	}
	b.mu.Lock()
	old := b.cur
	b.cur = u
	b.mu.Unlock()
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		_ = old.cs.Close()
	}()
	signal(b.swapped)
	signal(b.changed) // a restarted control plane may list other tools, and told the old session
	return u, nil
}

// reconnect replaces bad, trying again with backoff until ctx ends or the
// gateway answers with a refusal.
func (b *bridge) reconnect(ctx context.Context, bad *upstream) (*upstream, error) {
	delay := reconnectFirst
	for {
		u, err := b.replace(ctx, bad)
		if err == nil {
			return u, nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		var ee *exitError
		if !transportLost(err) || errors.As(err, &ee) {
			return nil, err
		}
		b.logf("cannot reach %s again yet: %v (trying again in %s)", b.endpoint, err, delay)
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-t.C:
		}
		delay = min(2*delay, reconnectMax)
	}
}

// maintain keeps the served tools current (tools/list_changed, a new
// session) and a session that ended replaced, until life ends.
func (b *bridge) maintain(life context.Context) {
	var gaveUp *upstream // a session whose replacement was refused: a call will try again
	for {
		u := b.current()
		ended := u.done
		if u == gaveUp {
			ended = nil
		}
		select {
		case <-life.Done():
			return
		case <-b.swapped:
		case <-b.changed:
			ctx, cancel := context.WithTimeout(life, connectTimeout)
			if _, err := b.syncTools(ctx); err != nil && life.Err() == nil {
				b.logf("listing the tools of %s: %v", b.endpoint, err)
			}
			cancel()
		case <-ended:
			b.logf("the connection to %s ended; reconnecting", b.endpoint)
			if _, err := b.reconnect(life, u); err != nil {
				if life.Err() != nil {
					return
				}
				b.logf("reconnecting to %s: %v", b.endpoint, mcpCallErr(err))
				gaveUp = u
			}
		}
	}
}

// syncTools serves what the gateway lists now: each tool as the gateway
// describes it, forwarded by forward. It returns how many are served.
func (b *bridge) syncTools(ctx context.Context) (int, error) {
	b.toolsMu.Lock()
	defer b.toolsMu.Unlock()
	want, sig := map[string]*mcp.Tool{}, map[string]string{}
	for t, err := range b.current().cs.Tools(ctx, nil) {
		if err != nil {
			return 0, err
		}
		if t == nil {
			continue
		}
		if want[t.Name] != nil {
			b.logf("the gateway lists two tools named %q; the second is not served", t.Name)
			continue
		}
		if err := objectSchema(t.InputSchema); err != nil {
			b.logf("tool %q is not served: %v", t.Name, err)
			continue
		}
		js, err := json.Marshal(t)
		if err != nil {
			b.logf("tool %q is not served: %v", t.Name, err)
			continue
		}
		want[t.Name], sig[t.Name] = t, string(js)
	}
	var gone []string
	for name := range b.listed {
		if want[name] == nil {
			gone = append(gone, name)
			delete(b.listed, name)
		}
	}
	if len(gone) > 0 {
		b.down.RemoveTools(gone...) // the SDK tells the client the list changed
	}
	names := make([]string, 0, len(want))
	for name := range want {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		if b.listed[name] == sig[name] {
			continue
		}
		if err := b.addTool(want[name]); err != nil {
			b.logf("tool %q is not served: %v", name, err)
			if _, was := b.listed[name]; was {
				b.down.RemoveTools(name)
				delete(b.listed, name)
			}
			continue
		}
		b.listed[name] = sig[name]
	}
	return len(b.listed), nil
}

// addTool serves t. The SDK reports a tool it will not serve by
// panicking; a gateway's odd tool must not end the bridge.
func (b *bridge) addTool(t *mcp.Tool) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%v", r)
		}
	}()
	b.down.AddTool(t, b.forward)
	return nil
}

// objectSchema checks what MCP requires of an input schema, and the SDK
// panics without: "type": "object".
func objectSchema(schema any) error {
	js, err := json.Marshal(schema)
	if err != nil {
		return fmt.Errorf("its input schema does not encode: %v", err)
	}
	var top struct {
		Type any `json:"type"`
	}
	if err := json.Unmarshal(js, &top); err != nil || top.Type != "object" {
		return errors.New(`its input schema is not {"type": "object", …}, which MCP requires`)
	}
	return nil
}

// forward is every served tool's handler: the call goes to the gateway as
// it came (name, arguments byte for byte, _meta), and its result comes
// back as the gateway gave it, an isError result included.
//
// The call carries an idempotency key: the client's, else a fresh one.
// Sending the same call again with the same key is therefore safe: the
// gateway makes the key's first call its run's request id and answers a
// repeat with that run's one outcome, never a second execution. So when
// the answer is lost on the way (the control plane restarted, a proxy cut
// the stream), the bridge reconnects and asks again until it gets the
// answer or the client gives up; an answer, refusal or JSON-RPC error
// included, is never asked again.
func (b *bridge) forward(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(b.life, cancel)()
	params := &mcp.CallToolParams{Name: req.Params.Name, Meta: forwardMeta(req.Params.Meta)}
	if len(req.Params.Arguments) > 0 {
		params.Arguments = req.Params.Arguments
	}
	if v, ok := params.Meta[idempotencyMetaKey]; !ok || v == nil {
		params.Meta[idempotencyMetaKey] = "approvectl-" + rand.Text()
	}
	if tok := req.Params.GetProgressToken(); tok != nil {
		// A token of the bridge's own upstream: the client's may be any
		// JSON value, and two clients' calls could share one.
		up := fmt.Sprintf("approvectl-%d", b.seq.Add(1))
		params.SetProgressToken(up)
		b.progMu.Lock()
		b.progress[up] = progressRoute{ctx: ctx, session: req.Session, token: tok}
		b.progMu.Unlock()
		defer func() {
			b.progMu.Lock()
			delete(b.progress, up)
			b.progMu.Unlock()
		}()
	}
	u := b.current()
	reconnected, unlisted := false, 0
	for {
		res, err := u.cs.CallTool(ctx, params)
		switch {
		case err == nil:
			return res, nil
		case ctx.Err() != nil:
			return nil, ctx.Err()
		case reconnected && unknownTool(err) && unlisted < maxUnlisted:
			// A control plane that just restarted lists an executor's
			// tools once the executor has reconnected to it, seconds
			// later: the call waits for that, then is asked again.
			if unlisted == 0 {
				b.logf("%s: the control plane does not list it yet (its executors are reconnecting); asking again every %v", params.Name, unlistedEvery)
			}
			unlisted++
			t := time.NewTimer(unlistedEvery)
			select {
			case <-ctx.Done():
				t.Stop()
				return nil, ctx.Err()
			case <-t.C:
			}
			continue
		case !transportLost(err):
			return nil, mcpCallErr(err)
		}
		reconnected = true
		b.logf("%s: the answer was lost on the way (%v); reconnecting to ask again with the same %s", params.Name, err, idempotencyMetaKey)
		if u, err = b.reconnect(ctx, u); err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, mcpCallErr(err)
		}
	}
}

// After a reconnect, a call the gateway does not list yet is asked again
// every unlistedEvery, at most maxUnlisted times (a minute).
const (
	unlistedEvery = 500 * time.Millisecond
	maxUnlisted   = 120
)

// unknownTool reports whether the gateway answered err because it lists
// no such tool (the SDK's invalid-params refusal of an unknown name).
func unknownTool(err error) bool {
	we, ok := gatewayError(err)
	return ok && we.Code == -32602 && strings.Contains(we.Message, "unknown tool")
}

// onElicit passes the gateway's question on to the client, when the
// client takes elicitation; else it declines, and the question stays open
// for you to answer elsewhere (approvectl answer, the web inbox).
func (b *bridge) onElicit(ctx context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
	b.mu.Lock()
	down := b.down
	b.mu.Unlock()
	if down != nil {
		for ss := range down.Sessions() {
			if ip := ss.InitializeParams(); ip != nil && ip.Capabilities != nil && ip.Capabilities.Elicitation != nil {
				return ss.Elicit(ctx, req.Params)
			}
		}
	}
	return &mcp.ElicitResult{Action: "decline"}, nil
}

// mcpCallErr is the error a client gets for a call that got no result: the
// gateway's JSON-RPC error as it gave it (code, message, data), or what
// went wrong here.
func mcpCallErr(err error) error {
	if we, ok := gatewayError(err); ok {
		return we
	}
	var re *refusedError
	if errors.As(err, &re) {
		return fmt.Errorf("the control plane refused the token (%v): sign in again (approvectl login), then restart this MCP server", re)
	}
	return err
}

// forwardMeta is a fresh copy of a call's _meta for the gateway: the SDK
// writes into the map it sends, and calls run at once. The client's
// progress token is replaced by the bridge's own. The keys that describe
// the client's own connection under MCP 2026-07-28 (SEP-2575), not the
// call, stay behind: the gateway would read the call as one of that
// protocol on a 2025-11-25 session, and refuse it.
func forwardMeta(in mcp.Meta) mcp.Meta {
	out := make(mcp.Meta, len(in)+2)
	for k, v := range in {
		out[k] = v
	}
	for _, k := range [...]string{"progressToken", mcp.MetaKeyProtocolVersion, mcp.MetaKeyClientInfo,
		mcp.MetaKeyClientCapabilities, mcp.MetaKeyLogLevel, mcp.MetaKeySubscriptionID} {
		delete(out, k)
	}
	return out
}

// onProgress passes the gateway's progress on a call to the client that
// made it, under the client's own token.
func (b *bridge) onProgress(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
	p := req.Params
	if p == nil {
		return
	}
	tok, ok := p.ProgressToken.(string)
	if !ok {
		return
	}
	b.progMu.RLock()
	defer b.progMu.RUnlock()
	r, ok := b.progress[tok]
	if !ok {
		return
	}
	err := r.session.NotifyProgress(r.ctx, &mcp.ProgressNotificationParams{ProgressToken: r.token, Progress: p.Progress, Total: p.Total, Message: p.Message})
	if err != nil && r.ctx.Err() == nil {
		b.logf("passing progress on: %v", err)
	}
}

// logf writes one line to stderr.
func (b *bridge) logf(format string, a ...any) {
	fmt.Fprintf(b.errw, "approvectl mcp: "+format+"\n", a...)
}

// signal wakes whoever waits on c, once however often it is called.
func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// syncWriter serializes writes: the bridge and the SDK log from many
// goroutines.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }
