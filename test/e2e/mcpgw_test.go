package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The MCP gateway (issue 20): an agent — the official SDK's client —
// calls the executors' tools through the control plane.

var mcpAddrRe = regexp.MustCompile(`msg=serving .* mcp=(\S+)`)

// mcpURL is the plane's MCP gateway address.
func (p *plane) mcpURL(t *testing.T) string {
	t.Helper()
	m := mcpAddrRe.FindStringSubmatch(p.stderr.String())
	if m == nil || m[1] == `""` {
		t.Fatalf("the control plane serves no MCP gateway:\n%s", p.stderr)
	}
	return "http://" + strings.Trim(m[1], `"`) + "/mcp"
}

// devToken is a dev user's token in the plane's home.
func (p *plane) devToken(t *testing.T, user string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(p.home, "dev", "tokens", user+".jwt"))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

type bearerRT struct{ tok string }

func (b bearerRT) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.tok)
	return http.DefaultTransport.RoundTrip(r)
}

// agent is an MCP client session as an agent holds it, and the progress
// notifications it has received.
type agent struct {
	sess     *mcp.ClientSession
	mu       sync.Mutex
	progress []*mcp.ProgressNotificationParams
	heard    chan struct{}
}

func (a *agent) onProgress(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
	a.mu.Lock()
	a.progress = append(a.progress, req.Params)
	a.mu.Unlock()
	select {
	case a.heard <- struct{}{}:
	default:
	}
}

// progressFor waits for a progress notification for token whose message
// matches re, and returns its submatches.
func (a *agent) progressFor(t *testing.T, token any, re *regexp.Regexp) []string {
	t.Helper()
	deadline := time.After(60 * time.Second)
	for {
		a.mu.Lock()
		for _, p := range a.progress {
			if fmt.Sprint(p.ProgressToken) == fmt.Sprint(token) {
				if m := re.FindStringSubmatch(p.Message); m != nil {
					a.mu.Unlock()
					return m
				}
			}
		}
		a.mu.Unlock()
		select {
		case <-a.heard:
		case <-deadline:
			t.Fatalf("no progress for %v matching %s; heard %d", token, re, len(a.progress))
		}
	}
}

func newAgent() *agent { return &agent{heard: make(chan struct{}, 1)} }

func (a *agent) client() *mcp.Client {
	return mcp.NewClient(&mcp.Implementation{Name: "e2e-agent", Version: "1"}, &mcp.ClientOptions{ProgressNotificationHandler: a.onProgress})
}

// connectHTTP connects an agent to the gateway over streamable HTTP.
func connectHTTP(t *testing.T, url, token string) *agent {
	t.Helper()
	a := newAgent()
	sess, err := a.client().Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{Transport: bearerRT{token}}}, nil)
	if err != nil {
		t.Fatalf("connect to %s: %v", url, err)
	}
	t.Cleanup(func() { sess.Close() })
	a.sess = sess
	return a
}

// call calls a tool with an idempotency key and a progress token.
func (a *agent) call(ctx context.Context, name, key string, args any) (*mcp.CallToolResult, error) {
	p := &mcp.CallToolParams{Name: name, Arguments: args, Meta: mcp.Meta{"tollgate/idempotency_key": key}}
	p.SetProgressToken("progress-" + key)
	return a.sess.CallTool(ctx, p)
}

// callAsync calls in the background; the result arrives on the channel.
func (a *agent) callAsync(t *testing.T, name, key string, args any) <-chan callOut {
	ch := make(chan callOut, 1)
	go func() {
		res, err := a.call(t.Context(), name, key, args)
		ch <- callOut{res, err}
	}()
	return ch
}

type callOut struct {
	res *mcp.CallToolResult
	err error
}

func textOf(res *mcp.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "\n")
}

func waitCall(t *testing.T, ch <-chan callOut) *mcp.CallToolResult {
	t.Helper()
	select {
	case o := <-ch:
		if o.err != nil {
			t.Fatalf("call: %v", o.err)
		}
		return o.res
	case <-time.After(90 * time.Second):
		t.Fatal("the call did not return")
	}
	return nil
}

// posts are the Slack stand-in's posts in the effects log.
func (c *cluster) posts() []map[string]any {
	c.t.Helper()
	f, err := os.Open(c.effects)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		c.t.Fatal(err)
	}
	defer f.Close()
	var out []map[string]any
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var e struct {
			Tool string          `json:"tool"`
			Args json.RawMessage `json:"args"`
			Key  string          `json:"idempotency_key"`
		}
		if json.Unmarshal(sc.Bytes(), &e) != nil || e.Tool != "slack_post_message" {
			continue
		}
		var args map[string]any
		json.Unmarshal(e.Args, &args)
		args["_key"] = e.Key
		out = append(out, args)
	}
	return out
}

var answerRe = regexp.MustCompile(`approvectl approve (\S+)`)

func newMCPCluster(t *testing.T, extra ...string) *cluster {
	return newClusterSpec(t, clusterSpec{planeArgs: append([]string{"--mcp-listen", "127.0.0.1:0", "--agent-owner", "alice-agent=alice"}, extra...),
		start: []string{"edge-1"}, later: []string{"edge-2"}, slack: true})
}

// waitTool waits until the agent's tool list holds name (the executor's
// hello reaches the gateway's list within its refresh).
func waitTool(t *testing.T, a *agent, name string) []*mcp.Tool {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		res, err := a.sess.ListTools(t.Context(), nil)
		if err != nil {
			t.Fatal(err)
		}
		if slices.ContainsFunc(res.Tools, func(x *mcp.Tool) bool { return x.Name == name }) {
			return res.Tools
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s is not listed; tools: %v", name, names(res.Tools))
		}
		time.Sleep(200 * time.Millisecond) // polling a list another process fills; no event to wait on
	}
}

func names(ts []*mcp.Tool) []string {
	var out []string
	for _, x := range ts {
		out = append(out, x.Name)
	}
	return out
}

// Issue 20's "done when", over streamable HTTP: a read-only call returns
// at once; a Slack post parks, bob approves, the call returns the tool's
// result and exactly one post with exactly the approved text was made; a
// rejected call is a tool error with the reason and posts nothing; a tool
// policy forbids the agent is refused; the agent's owner cannot approve
// where policy separates them; progress arrived while it waited; a repeat
// with the same key gets the one outcome.
func TestMCPGatewayAgentCallsWaitForTheirGates(t *testing.T) {
	t.Parallel()
	c := newMCPCluster(t)
	a := connectHTTP(t, c.plane.mcpURL(t), c.plane.devToken(t, "alice-agent"))
	tools := waitTool(t, a, "slack.slack_post_message")
	for _, want := range []string{"mcp-monitor.get_cpu_info", "payments.pay", "tollgate.run_skill", "tollgate.run_status", "tollgate.pending_asks"} {
		if !slices.Contains(names(tools), want) {
			t.Errorf("%s is not listed: %v", want, names(tools))
		}
	}
	// test.mark: no call.test.* row gives the agent it.
	if slices.Contains(names(tools), "test.mark") {
		t.Errorf("test.mark is listed, but policy does not let the agent call it")
	}
	for _, x := range tools {
		if x.Name == "slack.slack_post_message" && (x.Annotations == nil || x.Annotations.ReadOnlyHint || !strings.Contains(x.Description, "approval")) {
			t.Errorf("the post tool is listed as %+v: %s", x.Annotations, x.Description)
		}
	}

	// A read-only call returns at once with the tool's result.
	res, err := a.call(t.Context(), "mcp-monitor.get_cpu_info", "cpu-1", map[string]any{})
	if err != nil || res.IsError {
		t.Fatalf("read-only call: %v %s", err, textOf(res))
	}
	if sc, _ := json.Marshal(res.StructuredContent); !strings.Contains(string(sc), "cores") {
		t.Fatalf("read-only call returned %s / %s", sc, textOf(res))
	}

	// A tool policy forbids the agent: not listed, and a call is refused.
	if res, err := a.call(t.Context(), "test.mark", "mark-1", map[string]any{"name": "x"}); err == nil && !res.IsError {
		t.Fatalf("a call of test.mark went through: %s", textOf(res))
	}

	// A post parks; alice (the owner) may approve slack posts (policy
	// separates nobody there); bob approves; the call returns the result.
	text := "standup moved to {10:30} — see {notes}" // braces an agent's text may hold
	posted := a.callAsync(t, "slack.slack_post_message", "post-1", map[string]any{"channel": "#daily", "text": text})
	ask := a.progressFor(t, "progress-post-1", answerRe)[1]
	if n := len(c.posts()); n != 0 {
		t.Fatalf("%d posts before approval", n)
	}
	show := c.plane.ctl(t, "", "--as", "bob", "asks", "show", ask)
	if show.code != 0 || !strings.Contains(show.stdout, "alice-agent") || !strings.Contains(show.stdout, text) {
		t.Fatalf("bob's packet for %s (%d):\n%s%s", ask, show.code, show.stdout, show.stderr)
	}
	if r := c.plane.ctl(t, "", "--as", "bob", "approve", ask); r.code != 0 {
		t.Fatalf("bob approves %s: %s", ask, r.stderr)
	}
	res = waitCall(t, posted)
	if res.IsError {
		t.Fatalf("the approved post returned an error: %s", textOf(res))
	}
	if sc, _ := json.Marshal(res.StructuredContent); !strings.Contains(string(sc), `"ok":true`) {
		t.Fatalf("the approved post returned %s", sc)
	}
	if ps := c.posts(); len(ps) != 1 || ps[0]["text"] != text || ps[0]["channel"] != "#daily" {
		t.Fatalf("posts after approval: %v; want exactly one of %q", ps, text)
	}

	// The same call with the same key: the one outcome, no second post.
	res, err = a.call(t.Context(), "slack.slack_post_message", "post-1", map[string]any{"channel": "#daily", "text": text})
	if err != nil || res.IsError || len(c.posts()) != 1 {
		t.Fatalf("repeat with the same key: %v %s; %d posts", err, textOf(res), len(c.posts()))
	}
	// The same key for another call is refused, not run.
	res, err = a.call(t.Context(), "slack.slack_post_message", "post-1", map[string]any{"channel": "#daily", "text": "something else"})
	if err != nil || !res.IsError || len(c.posts()) != 1 {
		t.Fatalf("the key reused for other args: %v %s; %d posts", err, textOf(res), len(c.posts()))
	}

	// A rejection is a tool error with the reason; nothing is posted.
	rejected := a.callAsync(t, "slack.slack_post_message", "post-2", map[string]any{"channel": "#general", "text": "delete all the things"})
	ask2 := a.progressFor(t, "progress-post-2", answerRe)[1]
	if r := c.plane.ctl(t, "", "--as", "bob", "reject", ask2, "--reason", "not in #general"); r.code != 0 {
		t.Fatalf("bob rejects %s: %s", ask2, r.stderr)
	}
	res = waitCall(t, rejected)
	if !res.IsError || !strings.Contains(textOf(res), "not in #general") || !strings.Contains(textOf(res), "bob") {
		t.Fatalf("the rejected call returned (isError %v) %s", res.IsError, textOf(res))
	}
	if n := len(c.posts()); n != 1 {
		t.Fatalf("%d posts after a rejection; want the one approved", n)
	}

	// Separation of duties: a payment alice's agent asks for is never
	// approved by alice (she holds finance-1m), whatever surface she
	// uses. It is over bob's limit, so the gate asks finance-1m: dave.
	paid := a.callAsync(t, "payments.pay", "pay-1", map[string]any{"vendor": "V-1187", "invoice": "INV-1", "amount": 500000, "currency": "INR", "bank_account": "XXXX2048"})
	ask3 := a.progressFor(t, "progress-pay-1", answerRe)[1]
	if m := a.progressFor(t, "progress-pay-1", regexp.MustCompile(`not ([^·]*alice)`)); m == nil {
		t.Fatal("the progress does not say alice is kept out")
	}
	if r := c.plane.ctl(t, "", "--as", "alice", "approve", ask3); r.code == 0 {
		t.Fatalf("alice approved her own agent's payment: %s", r.stdout)
	}
	if r := c.plane.ctl(t, "", "--as", "bob", "approve", ask3); r.code == 0 {
		t.Fatalf("bob approved a payment over his limit: %s", r.stdout)
	}
	if r := c.plane.ctl(t, "", "--as", "dave", "approve", ask3); r.code != 0 {
		t.Fatalf("dave approves %s: %s", ask3, r.stderr)
	}
	if res := waitCall(t, paid); res.IsError {
		t.Fatalf("the approved payment: %s", textOf(res))
	}
	c.audit()
}

// Issue 20: the control plane dies (kill -9) while an agent's call waits
// for bob. The ask is still there to answer on the replica that takes
// over, and the agent's retry of the same call with the same key gets the
// one outcome: one post. The new replica answers calls that wait at once
// (--mcp-pending): the agent reads the outcome later by the run's id.
// Then bob's standing approval ("the agent may post to #daily") lets
// the next such post through with nobody asked.
func TestMCPGatewayCallOutlivesARestartAndPendingMode(t *testing.T) {
	t.Parallel()
	c := newMCPCluster(t)
	a := connectHTTP(t, c.plane.mcpURL(t), c.plane.devToken(t, "alice-agent"))
	waitTool(t, a, "slack.slack_post_message")
	args := map[string]any{"channel": "#daily", "text": "release 1.2 is out"}
	cut := a.callAsync(t, "slack.slack_post_message", "restart-1", args)
	ask := a.progressFor(t, "progress-restart-1", answerRe)[1]

	_ = c.plane.cmd.Process.Kill()
	<-c.plane.done
	select {
	case o := <-cut:
		if o.err == nil && !o.res.IsError {
			t.Fatalf("the call returned a result from a dead control plane: %s", textOf(o.res))
		}
	case <-time.After(60 * time.Second):
		t.Fatal("the call did not end when its control plane died")
	}
	// Another replica on the same Redis, answering waits at once.
	next := startPlane(t, c.home, append(slices.Clip(c.planeArgs), "--mcp-pending")...)
	c.plane = next
	c.startExecutorOn("edge-2", os.Stderr, next)
	if n := len(c.posts()); n != 0 {
		t.Fatalf("%d posts before approval", n)
	}
	a2 := connectHTTP(t, next.mcpURL(t), next.devToken(t, "alice-agent"))
	waitTool(t, a2, "slack.slack_post_message")
	// The retry finds the parked run: pending, naming the same ask.
	res, err := a2.call(t.Context(), "slack.slack_post_message", "restart-1", args)
	if err != nil || res.IsError || !strings.Contains(textOf(res), "PENDING APPROVAL") || !strings.Contains(textOf(res), ask) {
		t.Fatalf("the retry while parked: %v %s", err, textOf(res))
	}
	run, _, _ := strings.Cut(ask, "/")
	if r := next.ctl(t, "", "--as", "bob", "approve", ask); r.code != 0 {
		t.Fatalf("bob approves %s on the new replica: %s", ask, r.stderr)
	}
	// The outcome, read later by the run's id, is the tool's result.
	deadline := time.Now().Add(60 * time.Second)
	for {
		res, err = a2.call(t.Context(), "tollgate.run_status", "status-"+time.Now().String(), map[string]any{"run": run})
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(textOf(res), "NOT DONE") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the run did not end: %s", textOf(res))
		}
		time.Sleep(200 * time.Millisecond) // polling, as a client without long calls does
	}
	if res.IsError {
		t.Fatalf("the approved call's outcome: %s", textOf(res))
	}
	if sc, _ := json.Marshal(res.StructuredContent); !strings.Contains(string(sc), `"ok":true`) {
		t.Fatalf("run_status returned %s", sc)
	}
	// And the same call again: the one outcome.
	res, err = a2.call(t.Context(), "slack.slack_post_message", "restart-1", args)
	if err != nil || res.IsError || strings.Contains(textOf(res), "PENDING") {
		t.Fatalf("the retry after approval: %v %s", err, textOf(res))
	}
	if ps := c.posts(); len(ps) != 1 || ps[0]["text"] != args["text"] {
		t.Fatalf("posts: %v; want exactly one", ps)
	}

	// A standing approval bob grants with the next post covers the one
	// after it: answered by it, nobody asked.
	res, err = a2.call(t.Context(), "slack.slack_post_message", "standing-1", map[string]any{"channel": "#daily", "text": "lunch at 1"})
	if err != nil || !strings.Contains(textOf(res), "PENDING APPROVAL") {
		t.Fatalf("the second post: %v %s", err, textOf(res))
	}
	ask2 := answerRe.FindStringSubmatch(textOf(res))[1]
	if r := next.ctl(t, "", "--as", "bob", "approve", ask2, "--until", "24h", "--scope", "slack.slack_post_message channel=#daily @alice-agent", "--reason", "the agent may post to #daily today"); r.code != 0 {
		t.Fatalf("bob's standing approval: %s", r.stderr)
	}
	res, err = a2.call(t.Context(), "slack.slack_post_message", "standing-2", map[string]any{"channel": "#daily", "text": "lunch moved to 2"})
	if err != nil || res.IsError || strings.Contains(textOf(res), "PENDING") {
		t.Fatalf("a post the standing approval covers: %v %s", err, textOf(res))
	}
	// Outside the scope it waits again: another channel, or the same
	// channel asked for by someone else (alice herself, through MCP).
	res, err = a2.call(t.Context(), "slack.slack_post_message", "standing-3", map[string]any{"channel": "#general", "text": "hello all"})
	if err != nil || !strings.Contains(textOf(res), "PENDING APPROVAL") {
		t.Fatalf("a post outside the scope: %v %s", err, textOf(res))
	}
	alice := connectHTTP(t, next.mcpURL(t), next.devToken(t, "alice"))
	waitTool(t, alice, "slack.slack_post_message")
	res, err = alice.call(t.Context(), "slack.slack_post_message", "standing-4", map[string]any{"channel": "#daily", "text": "from alice"})
	if err != nil || !strings.Contains(textOf(res), "PENDING APPROVAL") {
		t.Fatalf("alice's own post under the agent's standing approval: %v %s", err, textOf(res))
	}
	waitPosts := func(n int) {
		deadline := time.Now().Add(30 * time.Second)
		for len(c.posts()) != n && time.Now().Before(deadline) {
			time.Sleep(100 * time.Millisecond)
		}
		if got := len(c.posts()); got != n {
			t.Fatalf("%d posts, want %d", got, n)
		}
	}
	waitPosts(3)
	c.audit()
}

// The attacker's and the unlucky operator's calls: no token, a forged
// one, another principal on the agent's session, another principal
// reading the agent's run, the agent approving its own call, and a
// script taking the gateway's request ids through the API.
func TestMCPGatewayRefusesWhoItMust(t *testing.T) {
	t.Parallel()
	c := newMCPCluster(t)
	url := c.plane.mcpURL(t)
	post := func(token, session, body string) int {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, url, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		if session != "" {
			req.Header.Set("Mcp-Session-Id", session)
			req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	initialize := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`
	if code := post("", "", initialize); code != http.StatusUnauthorized {
		t.Errorf("no token: %d, want 401", code)
	}
	agentTok := c.plane.devToken(t, "alice-agent")
	forged := agentTok[:strings.LastIndex(agentTok, ".")+1] + "AAAA"
	if code := post(forged, "", initialize); code != http.StatusUnauthorized {
		t.Errorf("a forged signature: %d, want 401", code)
	}

	a := connectHTTP(t, url, agentTok)
	waitTool(t, a, "slack.slack_post_message")
	// mallory on alice-agent's session: refused by the SDK's binding of
	// the session to its principal.
	list := `{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{}}`
	if code := post(agentTok, a.sess.ID(), list); code != http.StatusOK {
		t.Fatalf("the agent's own request on its session: %d (the refusal below would prove nothing)", code)
	}
	if code := post(c.plane.devToken(t, "mallory"), a.sess.ID(), list); code == http.StatusOK {
		t.Errorf("mallory used alice-agent's session (%d)", code)
	}

	pending := a.callAsync(t, "slack.slack_post_message", "self-1", map[string]any{"channel": "#daily", "text": "I approve myself"})
	ask := a.progressFor(t, "progress-self-1", answerRe)[1]
	run, _, _ := strings.Cut(ask, "/")
	// The agent may not approve its own call (it holds no role policy
	// gives slack posts), whatever surface it uses.
	if r := c.plane.ctl(t, "", "--as", "alice-agent", "approve", ask); r.code == 0 {
		t.Fatalf("the agent approved its own call: %s", r.stdout)
	}
	// mallory, through the gateway, does not see the agent's run.
	m := connectHTTP(t, url, c.plane.devToken(t, "mallory"))
	res, err := m.call(t.Context(), "tollgate.run_status", "m-1", map[string]any{"run": run})
	if err != nil || !res.IsError || strings.Contains(textOf(res), "I approve myself") {
		t.Fatalf("mallory read the agent's run: %v %s", err, textOf(res))
	}
	// mallory holds no call.* row: nothing of the executors is listed.
	if tools, err := m.sess.ListTools(t.Context(), nil); err != nil || slices.ContainsFunc(tools.Tools, func(x *mcp.Tool) bool { return !strings.HasPrefix(x.Name, "tollgate.") }) {
		t.Fatalf("mallory's tools: %v %v", err, names(tools.Tools))
	}
	// The agent's pending asks name it, who decides it, and how.
	res, err = a.call(t.Context(), "tollgate.pending_asks", "p-1", map[string]any{})
	if err != nil || res.IsError || !strings.Contains(textOf(res), ask) || !strings.Contains(textOf(res), "member") {
		t.Fatalf("pending asks: %v %s", err, textOf(res))
	}
	// An oversized value is refused before any run starts.
	huge := strings.Repeat("x", 1<<20+1)
	if res, err := a.call(t.Context(), "slack.slack_post_message", "huge-1", map[string]any{"channel": "#daily", "text": huge}); err == nil && (!res.IsError || !strings.Contains(textOf(res), "limit")) {
		t.Fatalf("a 1 MiB text: %.200s", textOf(res))
	}
	// A script may not take the gateway's request ids through the API.
	if r := c.plane.ctl(t, "", "--as", "alice-agent", "run", writeRecipe(t, "m: notes.search {\"query\": \"x\"}\n"), "--request-id", "mcp:self-1"); r.code == 0 || !strings.Contains(r.stderr, "MCP gateway") {
		t.Fatalf("StartRun with an mcp: request id: %d %s", r.code, r.stderr)
	}
	if r := c.plane.ctl(t, "", "--as", "bob", "reject", ask, "--reason", "no"); r.code != 0 {
		t.Fatal(r.stderr)
	}
	if res := waitCall(t, pending); !res.IsError {
		t.Fatalf("the rejected call: %s", textOf(res))
	}
	if n := len(c.posts()); n != 0 {
		t.Fatalf("%d posts", n)
	}
}

const agentChoiceSkill = `---
name: agent-choice
description: a question for the agent's person, then a gate for a member
---
ask me as kind:
  which diagram should I draw?
  options: sequence | class | state
drawing: draw a {kind} diagram
ask member:
  save the drawing?
save: notes.store {"text": "{drawing}"}
`

// Issue 20, item 5: a skill the agent runs asks its requester (the agent)
// a question: the gateway asks it of the agent's client through MCP
// elicitation and answers as the agent. The approval gate after it is
// never put to the client: bob decides it.
func TestMCPGatewayElicitsQuestionsNeverApprovals(t *testing.T) {
	t.Parallel()
	c := newMCPCluster(t)
	dir := filepath.Join(t.TempDir(), "agent-choice")
	os.MkdirAll(dir, 0o755)
	os.WriteFile(filepath.Join(dir, "SKILL.md"), []byte(agentChoiceSkill), 0o644)
	if r := c.plane.ctl(t, "", "--as", "alice", "skills", "push", dir); r.code != 0 {
		t.Fatalf("push: %s", r.stderr)
	}
	a := newAgent()
	var mu sync.Mutex
	var asked []string
	cl := mcp.NewClient(&mcp.Implementation{Name: "e2e-agent", Version: "1"}, &mcp.ClientOptions{ProgressNotificationHandler: a.onProgress,
		ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			mu.Lock()
			asked = append(asked, req.Params.Message)
			mu.Unlock()
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"answer": "class"}}, nil
		}})
	sess, err := cl.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: c.plane.mcpURL(t), HTTPClient: &http.Client{Transport: bearerRT{c.plane.devToken(t, "alice-agent")}}},
		&mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	a.sess = sess
	done := a.callAsync(t, "tollgate.run_skill", "skill-1", map[string]any{"skill": "agent-choice"})
	ask := a.progressFor(t, "progress-skill-1", regexp.MustCompile(`"save the drawing\?" · [^·]* · approvectl approve (\S+)`))[1]
	if r := c.plane.ctl(t, "", "--as", "bob", "approve", ask); r.code != 0 {
		t.Fatalf("bob approves %s: %s", ask, r.stderr)
	}
	res := waitCall(t, done)
	if res.IsError || !strings.Contains(textOf(res), "draw a class diagram") {
		t.Fatalf("the skill's outcome: %s", textOf(res))
	}
	mu.Lock()
	defer mu.Unlock()
	if len(asked) != 1 || !strings.Contains(asked[0], "which diagram") {
		t.Fatalf("the client was asked %q; want the one question, never the gate", asked)
	}
	c.audit()
}

// freePort is a loopback address nothing listens on now.
func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// connectBridge starts `approvectl mcp` as a desktop client would (a
// stdio server it launches) and connects the agent to it.
func connectBridge(t *testing.T, p *plane, as, url string) *agent {
	t.Helper()
	cmd := exec.Command(filepath.Join(bin, "approvectl"), "--server", p.addr, "--as", as, "mcp", "--url", url)
	cmd.Env = append(os.Environ(), "TOLLGATE_HOME="+p.home, "TOLLGATE_TOKEN=")
	cmd.Stderr = os.Stderr
	a := newAgent()
	sess, err := a.client().Connect(t.Context(), &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("connect through approvectl mcp: %v", err)
	}
	t.Cleanup(func() { sess.Close() })
	a.sess = sess
	return a
}

// Issue 20 through the stdio bridge a desktop client launches: the tools,
// a read-only call, and a post bob approves, with the gateway's progress
// forwarded. Then the control plane is killed (-9) while a post waits: the
// bridge reconnects to the replica that takes its address and sends the
// same call with the same key, so the agent's one call returns the one
// outcome once bob approves there. One post each.
func TestMCPBridgeCarriesCallsAcrossARestart(t *testing.T) {
	t.Parallel()
	addr := freePort(t)
	c := newMCPCluster(t)
	// The cluster's plane serves the gateway on a port of its own; this
	// one takes a fixed address a replica can take over.
	c.plane.stop(t)
	c.planeArgs = append(slices.Clip(c.planeArgs), "--mcp-listen", addr)
	c.plane = startPlane(t, c.home, c.planeArgs...)
	c.startExecutorOn("edge-2", os.Stderr, c.plane)
	url := "http://" + addr + "/mcp"
	a := connectBridge(t, c.plane, "alice-agent", url)
	// The executor may connect after the bridge listed: the gateway's
	// list changes, and the bridge follows.
	tools := waitTool(t, a, "slack.slack_post_message")
	for _, want := range []string{"mcp-monitor.get_cpu_info", "tollgate.pending_asks"} {
		if !slices.Contains(names(tools), want) {
			t.Errorf("through the bridge %s is not listed: %v", want, names(tools))
		}
	}
	res, err := a.sess.CallTool(t.Context(), &mcp.CallToolParams{Name: "mcp-monitor.get_cpu_info", Arguments: map[string]any{}})
	if err != nil || res.IsError || !strings.Contains(textOf(res), "cores") {
		t.Fatalf("read-only call through the bridge: %v %v", err, res)
	}
	posted := a.callAsync(t, "slack.slack_post_message", "bridge-1", map[string]any{"channel": "#daily", "text": "through the bridge"})
	ask := a.progressFor(t, "progress-bridge-1", answerRe)[1]
	if r := c.plane.ctl(t, "", "--as", "bob", "approve", ask); r.code != 0 {
		t.Fatalf("bob approves: %s", r.stderr)
	}
	if res := waitCall(t, posted); res.IsError {
		t.Fatalf("the approved post through the bridge: %s", textOf(res))
	}

	// Killed while a call waits; its replica takes the address.
	a.mu.Lock()
	a.progress = nil
	a.mu.Unlock()
	cut := a.callAsync(t, "slack.slack_post_message", "bridge-2", map[string]any{"channel": "#daily", "text": "after the restart"})
	ask2 := a.progressFor(t, "progress-bridge-2", answerRe)[1]
	_ = c.plane.cmd.Process.Kill()
	<-c.plane.done
	c.plane = startPlane(t, c.home, c.planeArgs...)
	c.startExecutorOn("edge-1", os.Stderr, c.plane)
	if r := c.plane.ctl(t, "", "--as", "bob", "approve", ask2); r.code != 0 {
		t.Fatalf("bob approves %s on the new replica: %s", ask2, r.stderr)
	}
	if res := waitCall(t, cut); res.IsError {
		t.Fatalf("the call across the restart: %s", textOf(res))
	}
	ps := c.posts()
	if len(ps) != 2 || ps[0]["text"] != "through the bridge" || ps[1]["text"] != "after the restart" {
		t.Fatalf("posts: %v; want exactly the two approved", ps)
	}
	c.audit()
}
