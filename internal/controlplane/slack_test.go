package controlplane

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	tollgatev1 "github.com/tollgate-dev/tollgate/gen/tollgate/v1"
	"github.com/tollgate-dev/tollgate/internal/slackapp"
	"github.com/tollgate-dev/tollgate/internal/web"
	"github.com/tollgate-dev/tollgate/pkg/webhook"
)

// slackAPI stands in for Slack's Web API (chat.postMessage, chat.update,
// chat.postEphemeral) and a response_url, speaking Slack's wire format:
// forms in, JSON with "ok" out, the bot token checked.
type slackAPI struct {
	t     *testing.T
	srv   *httptest.Server
	mu    sync.Mutex
	calls []slackCall
	more  chan struct{}
}

type slackCall struct {
	method string
	form   url.Values
	json   map[string]any
}

func newSlackAPI(t *testing.T) *slackAPI {
	s := &slackAPI{t: t, more: make(chan struct{}, 64)}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		c := slackCall{method: strings.TrimPrefix(r.URL.Path, "/api/")}
		w.Header().Set("Content-Type", "application/json")
		if strings.HasPrefix(r.URL.Path, "/hooks/") {
			c.method = "response_url"
			_ = json.Unmarshal(body, &c.json)
		} else {
			c.form, _ = url.ParseQuery(string(body))
			tok := c.form.Get("token")
			if h, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
				tok = h
			}
			if tok != "xoxb-test" {
				io.WriteString(w, `{"ok":false,"error":"invalid_auth"}`)
				return
			}
		}
		s.mu.Lock()
		s.calls = append(s.calls, c)
		s.mu.Unlock()
		select {
		case s.more <- struct{}{}:
		default:
		}
		io.WriteString(w, `{"ok":true,"channel":"C1","ts":"1700000000.000100","message_ts":"1700000000.000101"}`)
	}))
	t.Cleanup(s.srv.Close)
	return s
}

// wait returns the first call of method whose text holds want.
func (s *slackAPI) wait(method, want string) slackCall {
	s.t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		s.mu.Lock()
		for _, c := range s.calls {
			raw, _ := json.Marshal(c)
			text := c.form.Encode() + string(raw)
			if j, err := json.Marshal(c.json); err == nil {
				text += string(j)
			}
			if c.method == method && strings.Contains(text, want) {
				s.mu.Unlock()
				return c
			}
		}
		s.mu.Unlock()
		select {
		case <-s.more:
		case <-deadline:
			s.t.Fatalf("no %s saying %q; calls: %+v", method, want, s.calls)
		}
	}
}

const slackSecret = "8f742231b10e8888abcd99yyyzzz85a5"

// click is a block_actions interaction as Slack posts it, signed at ts.
func (s *slackAPI) click(t *testing.T, app *slackapp.App, user, actionID, value string, secret string, ts time.Time) (int, []byte, string) {
	t.Helper()
	payload, _ := json.Marshal(map[string]any{
		"type": "block_actions", "api_app_id": "A1", "trigger_id": "1.2.3",
		"user": map[string]any{"id": user, "team_id": "T1"}, "team": map[string]any{"id": "T1"},
		"container":    map[string]any{"type": "message", "message_ts": "1700000000.000100", "channel_id": "C1"},
		"channel":      map[string]any{"id": "C1"},
		"response_url": s.srv.URL + "/hooks/T1/B1/x",
		"actions":      []any{map[string]any{"action_id": actionID, "block_id": "tollgate.actions", "type": "button", "value": value, "action_ts": "1700000001.000000"}},
	})
	body := []byte(url.Values{"payload": {string(payload)}}.Encode())
	stamp := strconv.FormatInt(ts.Unix(), 10)
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte("v0:" + stamp + ":"))
	m.Write(body)
	sig := "v0=" + hex.EncodeToString(m.Sum(nil))
	return s.send(t, app, body, stamp, sig), body, sig
}

func (s *slackAPI) send(t *testing.T, app *slackapp.App, body []byte, stamp, sig string) int {
	t.Helper()
	req := httptest.NewRequest(http.MethodPost, "/slack/interactions", strings.NewReader(string(body)))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("X-Slack-Request-Timestamp", stamp)
	req.Header.Set("X-Slack-Signature", sig)
	rr := httptest.NewRecorder()
	app.Interactions().ServeHTTP(rr, req)
	return rr.Code
}

// buttonValue is the value of the posted message's button actionID.
func buttonValue(t *testing.T, c slackCall, actionID string) string {
	t.Helper()
	var blocks []map[string]any
	if err := json.Unmarshal([]byte(c.form.Get("blocks")), &blocks); err != nil {
		t.Fatalf("blocks: %v", err)
	}
	for _, b := range blocks {
		els, _ := b["elements"].([]any)
		for _, e := range els {
			if m, _ := e.(map[string]any); m["action_id"] == actionID {
				v, _ := m["value"].(string)
				return v
			}
		}
	}
	t.Fatalf("no %s button in %s", actionID, c.form.Get("blocks"))
	return ""
}

// Slack end to end on a real control plane: the ask is posted as Block
// Kit with its action, amount and deadline; a click by an unmapped user,
// by the requester (separation of duties), or one badly signed decides
// nothing; dave's signed click approves through the API's one path as
// dave (journaled with surface slack); its replay is refused; the message
// then says who decided; the payment runs once.
func TestSlackDecidesThroughTheOnePath(t *testing.T) {
	api := newSlackAPI(t)
	var srv *Server
	site, err := web.NewSite([]byte(strings.Repeat("k", 40)), "http://127.0.0.1:9", 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	app, err := slackapp.New(slackapp.Config{BotToken: "xoxb-test", SigningSecret: []byte(slackSecret), APIURL: api.srv.URL + "/api/", Channel: "C1",
		Users: map[string]string{"U1": "dave", "U2": "alice"}, Linker: site,
		Decider: decideFunc(func(ctx context.Context, req *tollgatev1.DecideRequest) (*tollgatev1.DecideResponse, error) {
			return srv.Local().Decide(ctx, req)
		}),
		Packets: packetsOf(func() *Server { return srv })})
	if err != nil {
		t.Fatal(err)
	}
	hooks, err := webhook.New(webhook.Config{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	e := newEnvOn(t, nil, devPolicy(t), echoTools(), func(c *Config) {
		c.Notifier = notices{hooks: hooks, slack: app, site: site, personLinks: true}
	})
	srv = e.srv
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- app.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-ran })

	ask := parkedVendorPayment(t, e)
	post := api.wait("chat.postMessage", "485000")
	text := post.form.Get("blocks")
	for _, want := range []string{"payments", "485000 INR", "alice", "tollgate.approve", "tollgate.reject", site.AskURL(ask)} {
		if !strings.Contains(text, want) {
			t.Errorf("the posted message lacks %q:\n%s", want, text)
		}
	}
	approve := buttonValue(t, post, "tollgate.approve")
	now := time.Now()
	pending := func(why string) {
		t.Helper()
		a, err := e.approvals("audrey").GetAsk(context.Background(), &tollgatev1.GetAskRequest{AskId: ask})
		if err != nil {
			t.Fatal(err)
		}
		if a.GetAsk().GetState() != tollgatev1.AskState_ASK_STATE_PENDING || len(a.GetAsk().GetDecisions()) != 0 {
			t.Fatalf("after %s the ask is %s with %v", why, a.GetAsk().GetState(), a.GetAsk().GetDecisions())
		}
	}
	if code, _, _ := api.click(t, app, "U1", "tollgate.approve", approve, "not-the-secret-at-all-0000000000", now); code != http.StatusUnauthorized {
		t.Errorf("a mis-signed click: %d", code)
	}
	if code, _, _ := api.click(t, app, "U1", "tollgate.approve", approve, slackSecret, now.Add(-10*time.Minute)); code != http.StatusUnauthorized {
		t.Errorf("a click signed 10 minutes ago: %d", code)
	}
	pending("badly signed clicks")
	if code, _, _ := api.click(t, app, "U9", "tollgate.approve", approve, slackSecret, now); code != http.StatusOK {
		t.Fatalf("an unmapped user's click: %d", code)
	}
	api.wait("response_url", "not linked")
	pending("an unmapped user's click")
	if code, _, _ := api.click(t, app, "U2", "tollgate.approve", approve, slackSecret, now); code != http.StatusOK {
		t.Fatalf("alice's click: %d", code)
	}
	api.wait("response_url", "separation of duties")
	pending("the requester's click")
	code, body, sig := api.click(t, app, "U1", "tollgate.approve", approve, slackSecret, now)
	if code != http.StatusOK {
		t.Fatalf("dave's click: %d", code)
	}
	api.wait("response_url", "Approved by dave")
	e.settle()
	if replay := api.send(t, app, body, strconv.FormatInt(now.Unix(), 10), sig); replay != http.StatusUnauthorized {
		t.Errorf("the replayed click: %d", replay)
	}
	a, err := e.approvals("audrey").GetAsk(context.Background(), &tollgatev1.GetAskRequest{AskId: ask})
	if err != nil {
		t.Fatal(err)
	}
	d := a.GetAsk().GetDecisions()
	if len(d) != 1 || d[0].GetActor() != "dave" || d[0].GetVia() != "slack" || d[0].GetAuthority() == "" {
		t.Fatalf("decisions: %v", d)
	}
	run := strings.Split(ask, "/")[0]
	e.settle()
	if n := e.exec.calls(run + "/pay"); n != 1 {
		t.Fatalf("pay ran %d times", n)
	}
	recs, _ := e.store.Journal(context.Background(), run, 0, 500)
	found := false
	for _, r := range recs {
		found = found || r.Actor == "dave" && strings.Contains(string(r.Payload), `"via":"slack"`)
	}
	if !found {
		t.Error("no journal record of dave's decision names the slack surface")
	}
	assertAuditClean(t, e, run)
}
