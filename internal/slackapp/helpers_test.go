package slackapp

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	tollgatev1 "github.com/tollgate-dev/tollgate/gen/tollgate/v1"
	"github.com/tollgate-dev/tollgate/internal/controlplane/api"
	"github.com/tollgate-dev/tollgate/internal/identity"
	"github.com/tollgate-dev/tollgate/internal/notice"
)

const (
	testToken  = "xoxb-test-0000-token"
	testSecret = "8f742231b10e8888abcd99yyyzzz85a5"
	testAsk    = "run_01/ask_1"
)

// slackCall is one request the stand-in Web API received.
type slackCall struct {
	Method string     // "chat.postMessage", …, or "response_url"
	Form   url.Values // form-encoded Web API calls
	JSON   map[string]any
	Blocks []map[string]any
}

// fakeSlack stands in for Slack's Web API and response_url hooks: it
// checks what Slack checks (POST, the encoding, the bot token) and
// answers in Slack's wire format.
type fakeSlack struct {
	t   *testing.T
	srv *httptest.Server

	mu      sync.Mutex
	calls   []slackCall
	script  map[string][]func(w http.ResponseWriter) // per method: canned answers, used first
	users   map[string]map[string]any                // users.info
	nextTS  int
	changed chan struct{}
}

func newFakeSlack(t *testing.T) *fakeSlack {
	f := &fakeSlack{t: t, script: map[string][]func(http.ResponseWriter){}, users: map[string]map[string]any{}, changed: make(chan struct{})}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeSlack) apiURL() string { return f.srv.URL + "/api/" }

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	_ = json.NewEncoder(w).Encode(v)
}

func (f *fakeSlack) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		http.Error(w, "POST only", http.StatusMethodNotAllowed)
		return
	}
	body, _ := io.ReadAll(r.Body)
	ctype, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	var c slackCall
	switch {
	case strings.HasPrefix(r.URL.Path, "/hooks/"):
		// A response_url takes JSON and no token.
		if ctype != "application/json" {
			f.t.Errorf("response_url: content type %q, want application/json", ctype)
		}
		if r.Header.Get("Authorization") != "" {
			f.t.Errorf("response_url: sent an Authorization header")
		}
		c.Method = "response_url"
		if err := json.Unmarshal(body, &c.JSON); err != nil {
			f.t.Errorf("response_url: body is not JSON: %v", err)
		}
		if bl, ok := c.JSON["blocks"].([]any); ok {
			for _, b := range bl {
				m, _ := b.(map[string]any)
				c.Blocks = append(c.Blocks, m)
			}
		}
		f.add(c)
		writeJSON(w, map[string]any{"ok": true})
		return
	case strings.HasPrefix(r.URL.Path, "/api/"):
		c.Method = strings.TrimPrefix(r.URL.Path, "/api/")
	default:
		http.NotFound(w, r)
		return
	}
	if ctype != "application/x-www-form-urlencoded" {
		f.t.Errorf("%s: content type %q, want a form", c.Method, ctype)
	}
	form, err := url.ParseQuery(string(body))
	if err != nil {
		f.t.Errorf("%s: body is not a form: %v", c.Method, err)
	}
	c.Form = form
	tok := form.Get("token")
	if h, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
		tok = h
	}
	if tok != testToken {
		f.add(c)
		writeJSON(w, map[string]any{"ok": false, "error": "invalid_auth"})
		return
	}
	if raw := form.Get("blocks"); raw != "" {
		if err := json.Unmarshal([]byte(raw), &c.Blocks); err != nil {
			f.t.Errorf("%s: blocks are not a JSON array: %v", c.Method, err)
		}
	}
	f.mu.Lock()
	var canned func(http.ResponseWriter)
	if s := f.script[c.Method]; len(s) > 0 {
		canned, f.script[c.Method] = s[0], s[1:]
	}
	f.nextTS++
	ts := fmt.Sprintf("1700000000.%06d", f.nextTS)
	user := f.users[form.Get("user")]
	f.mu.Unlock()
	f.add(c)
	if canned != nil {
		canned(w)
		return
	}
	switch c.Method {
	case "chat.postMessage":
		ch := form.Get("channel")
		if strings.HasPrefix(ch, "U") {
			ch = "D" + ch[1:] // Slack answers a post to a user with their DM channel
		}
		writeJSON(w, map[string]any{"ok": true, "channel": ch, "ts": ts, "message": map[string]any{"ts": ts}})
	case "chat.update":
		writeJSON(w, map[string]any{"ok": true, "channel": form.Get("channel"), "ts": form.Get("ts")})
	case "chat.postEphemeral":
		writeJSON(w, map[string]any{"ok": true, "message_ts": ts})
	case "users.info":
		if user == nil {
			writeJSON(w, map[string]any{"ok": false, "error": "user_not_found"})
			return
		}
		writeJSON(w, map[string]any{"ok": true, "user": user})
	default:
		writeJSON(w, map[string]any{"ok": false, "error": "unknown_method"})
	}
}

func (f *fakeSlack) add(c slackCall) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, c)
	close(f.changed)
	f.changed = make(chan struct{})
}

// answer queues canned answers for method, used before the normal one.
func (f *fakeSlack) answer(method string, fns ...func(w http.ResponseWriter)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.script[method] = append(f.script[method], fns...)
}

func (f *fakeSlack) Calls(method string) []slackCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []slackCall
	for _, c := range f.calls {
		if method == "" || c.Method == method {
			out = append(out, c)
		}
	}
	return out
}

// waitFor waits until method has been called n times.
func (f *fakeSlack) waitFor(method string, n int) []slackCall {
	f.t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		f.mu.Lock()
		ch := f.changed
		f.mu.Unlock()
		if cs := f.Calls(method); len(cs) >= n {
			return cs
		}
		select {
		case <-ch:
		case <-deadline:
			f.t.Fatalf("waited for %d %s calls; got %d", n, method, len(f.Calls(method)))
		}
	}
}

// fakeDecider records each Decide with the caller and surface it came
// with.
type fakeDecider struct {
	mu     sync.Mutex
	calls  []decideCall
	answer func(req *tollgatev1.DecideRequest, who identity.Principal) (*tollgatev1.DecideResponse, error)
}

type decideCall struct {
	Who identity.Principal
	Via api.Via
	Req *tollgatev1.DecideRequest
}

func (d *fakeDecider) Decide(ctx context.Context, req *tollgatev1.DecideRequest) (*tollgatev1.DecideResponse, error) {
	who, _ := identity.FromContext(ctx)
	d.mu.Lock()
	d.calls = append(d.calls, decideCall{Who: who, Via: api.ViaOf(ctx), Req: req})
	answer := d.answer
	d.mu.Unlock()
	return answer(req, who)
}

func (d *fakeDecider) Calls() []decideCall {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]decideCall(nil), d.calls...)
}

// fakeLinker makes recognisable links.
type fakeLinker struct{}

func (fakeLinker) AskURL(askID string) string { return "https://tollgate.example/asks/" + askID }
func (fakeLinker) PersonLink(askID, person string, expires time.Time) (string, error) {
	return fmt.Sprintf("https://tollgate.example/l/%s/%s?until=%d", person, askID, expires.Unix()), nil
}

var (
	testPayloadDigest  = "sha256:" + strings.Repeat("ab", 32)
	testEvidenceDigest = "sha256:" + strings.Repeat("cd", 32)
	testExpires        = time.Date(2030, 5, 2, 18, 0, 0, 0, time.UTC)
)

// pendingAsk is an open payment approval whose text tries Slack markup.
func pendingAsk() *tollgatev1.Ask {
	return &tollgatev1.Ask{
		Id: testAsk, RunId: "run_01", Kind: tollgatev1.AskKind_ASK_KIND_APPROVAL, State: tollgatev1.AskState_ASK_STATE_PENDING,
		Title:       "Pay vendor V-1187 <!channel>",
		Consequence: "pays 485000 INR to vendor V-1187 & co",
		Requester:   "alice",
		Actions: []*tollgatev1.Action{{StepId: "pay", Server: "payments", Tool: "pay",
			ArgsJson: `{"amount":485000,"currency":"INR","memo":"<https://evil.example|click>","vendor":"V-1187"}`}},
		PayloadDigest:     testPayloadDigest,
		EvidenceDigest:    testEvidenceDigest,
		AuthorityRequired: &tollgatev1.AuthorityRequirement{Description: "1 of finance-approver, not the requester, amount ≤ 1000000"},
		Options:           []*tollgatev1.AskOption{{Id: "1", Label: "Yes", Proceeds: true}, {Id: "2", Label: "No"}},
		ExpiresAt:         timestamppb.New(testExpires),
		OnExpiry:          tollgatev1.OnExpiry_ON_EXPIRY_REJECT,
		Quorum:            1,
	}
}

// approvedBy is ask approved by who at t.
func approvedBy(ask *tollgatev1.Ask, who string, t time.Time) *tollgatev1.Ask {
	ask.State = tollgatev1.AskState_ASK_STATE_APPROVED
	ask.Decisions = append(ask.Decisions, &tollgatev1.Decision{Id: "d1", Kind: tollgatev1.DecisionKind_DECISION_KIND_APPROVE, Actor: who,
		Time: timestamppb.New(t), OptionId: "1", PayloadDigest: ask.PayloadDigest, Counts: true, Via: "slack"})
	ask.ClosedAt = timestamppb.New(t)
	return ask
}

// packets serves one ask, changeable by the test.
type packets struct {
	mu  sync.Mutex
	ask *tollgatev1.Ask
	err error
}

func (p *packets) set(a *tollgatev1.Ask) { p.mu.Lock(); p.ask = a; p.mu.Unlock() }

func (p *packets) Packet(_ context.Context, id string) (*tollgatev1.Ask, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.err != nil {
		return nil, p.err
	}
	if p.ask == nil || p.ask.Id != id {
		return nil, fmt.Errorf("%w: %s", notice.ErrNoAsk, id)
	}
	return p.ask, nil
}

type fixture struct {
	t       *testing.T
	slack   *fakeSlack
	decider *fakeDecider
	packets *packets
	app     *App
}

func newFixture(t *testing.T, edit func(*Config)) *fixture {
	t.Helper()
	fx := &fixture{t: t, slack: newFakeSlack(t), packets: &packets{ask: pendingAsk()}}
	fx.decider = &fakeDecider{answer: func(req *tollgatev1.DecideRequest, who identity.Principal) (*tollgatev1.DecideResponse, error) {
		return &tollgatev1.DecideResponse{Ask: approvedBy(pendingAsk(), who.Subject, time.Date(2030, 5, 1, 14, 2, 0, 0, time.UTC))}, nil
	}}
	cfg := Config{
		BotToken: testToken, SigningSecret: []byte(testSecret), APIURL: fx.slack.apiURL(),
		Channel: "C0APPROVE", Users: map[string]string{"U0DAVE": "dave", "U0BOB": "bob"},
		Decider: fx.decider, Packets: fx.packets, Linker: fakeLinker{},
		HTTPClient: fx.slack.srv.Client(), Log: slog.New(slog.DiscardHandler),
		BaseBackoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond, MaxAttempts: 3,
	}
	if edit != nil {
		edit(&cfg)
	}
	app, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	fx.app = app
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- app.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	for !app.running.Load() {
		time.Sleep(time.Millisecond)
	}
	return fx
}

// sign is Slack's request signature, computed here from Slack's
// documentation rather than by the library under test:
// "v0=" + hex(HMAC-SHA256(secret, "v0:" + timestamp + ":" + body)).
func sign(secret, ts string, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte("v0:" + ts + ":"))
	m.Write(body)
	return "v0=" + hex.EncodeToString(m.Sum(nil))
}

// interactionBody is a block_actions payload as Slack posts it: a form
// with one field, payload, holding the JSON.
func (fx *fixture) interactionBody(user, team, actionID, value string) []byte {
	payload := map[string]any{
		"type":         "block_actions",
		"api_app_id":   "A0TOLLGATE",
		"token":        "deprecated-verification-token",
		"trigger_id":   "123.456.abc",
		"user":         map[string]any{"id": user, "username": "someone", "team_id": team},
		"team":         map[string]any{"id": team, "domain": "acme"},
		"container":    map[string]any{"type": "message", "message_ts": "1700000000.000001", "channel_id": "C0APPROVE", "is_ephemeral": false},
		"channel":      map[string]any{"id": "C0APPROVE", "name": "approvals"},
		"response_url": fx.slack.srv.URL + "/hooks/T1/B1/xyz",
		"actions": []any{map[string]any{
			"action_id": actionID, "block_id": blockActions, "type": "button", "value": value,
			"text": map[string]any{"type": "plain_text", "text": "x"}, "action_ts": "1700000001.000000",
		}},
	}
	raw, err := json.Marshal(payload)
	if err != nil {
		fx.t.Fatal(err)
	}
	return []byte(url.Values{"payload": {string(raw)}}.Encode())
}

// post sends body to the interactivity endpoint signed with secret at ts.
func (fx *fixture) post(body []byte, secret string, ts time.Time) int {
	s := strconv.FormatInt(ts.Unix(), 10)
	return fx.postWith(body, s, sign(secret, s, body))
}

func (fx *fixture) postWith(body []byte, ts, sig string) int {
	req := httptest.NewRequest(http.MethodPost, "/slack/interactions", strings.NewReader(string(body)))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if ts != "" {
		req.Header.Set("X-Slack-Request-Timestamp", ts)
	}
	if sig != "" {
		req.Header.Set("X-Slack-Signature", sig)
	}
	rr := httptest.NewRecorder()
	fx.app.Interactions().ServeHTTP(rr, req)
	return rr.Code
}

// buttonValueOf is the value of the button action id in blocks.
func buttonValueOf(t *testing.T, blocks []map[string]any, actionID string) (map[string]any, bool) {
	t.Helper()
	for _, b := range blocks {
		if b["type"] != "actions" {
			continue
		}
		els, _ := b["elements"].([]any)
		for _, e := range els {
			m, _ := e.(map[string]any)
			if m["action_id"] == actionID {
				return m, true
			}
		}
	}
	return nil, false
}

func blocksText(blocks []map[string]any) string {
	raw, _ := json.Marshal(blocks)
	return string(raw)
}
