package slackapp

import (
	"context"
	"encoding/json"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	tollgatev1 "github.com/tollgate-dev/tollgate/gen/tollgate/v1"
	"github.com/tollgate-dev/tollgate/pkg/webhook"
)

func event(t *testing.T, kind string) []byte {
	t.Helper()
	raw, err := json.Marshal(webhook.Event{ID: "run_01/ask_1/" + kind + "/3", Kind: kind, AskID: testAsk, RunID: "run_01",
		Title: "Pay vendor", Audience: "finance-approver", People: []string{"dave"}, ExpiresAt: testExpires,
		Payload: map[string]any{"state": "pending", "requester": "alice", "payload_digest": testPayloadDigest}})
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

func TestOpenedPostsBlockKitMessage(t *testing.T) {
	fx := newFixture(t, nil)
	var rec webhook.MemoryRecorder
	d := fx.app.Deliver(t.Context(), "slack:C0APPROVE", event(t, webhook.KindOpened), &rec)
	if d.Outcome != webhook.Delivered || !d.Final || d.Attempt != 1 || d.AskID != testAsk || d.Endpoint != "slack:C0APPROVE" {
		t.Fatalf("delivery = %+v", d)
	}
	if got := rec.Deliveries(); len(got) != 1 || got[0].Outcome != webhook.Delivered || !got[0].Final {
		t.Fatalf("recorded %+v, want one final delivered", got)
	}
	posts := fx.slack.Calls("chat.postMessage")
	if len(posts) != 1 {
		t.Fatalf("%d chat.postMessage calls, want 1", len(posts))
	}
	p := posts[0]
	if p.Form.Get("channel") != "C0APPROVE" {
		t.Errorf("channel = %q", p.Form.Get("channel"))
	}
	all := blocksText(p.Blocks)
	for _, want := range []string{
		`payments·pay`,         // the action
		`*Amount:* 485000 INR`, // amount and currency
		`vendor=`,              // a key arg
		`*Requested by:* alice`,
		`asked of finance-approver`, // why it came
		`1 of finance-approver, not the requester`,
		`<!date^1903975200^`, // the deadline as Slack's date token
		`18:00 UTC on 2 May 2030`,
		`the run ends rejected`, // what expiry does
		`sha256:abababababab…`,  // the payload digest, short
	} {
		if !strings.Contains(all, jsonFrag(want)) {
			t.Errorf("message lacks %q:\n%s", want, all)
		}
	}
	// Nothing from the run is Slack markup.
	for _, bad := range []string{"<!channel>", "<https://evil.example|click>", "& co"} {
		if strings.Contains(all, jsonFrag(bad)) {
			t.Errorf("message holds unescaped %q", bad)
		}
	}
	if !strings.Contains(all, jsonFrag("&lt;!channel&gt;")) || !strings.Contains(all, jsonFrag("&amp; co")) {
		t.Errorf("escaped text missing:\n%s", all)
	}
	// The only markup is the message's own: the deadline's date token.
	if rest := regexp.MustCompile(`\\u003c!date\^[0-9]+\^[^|]*\|[^\\]*\\u003e`).ReplaceAllString(all, ""); strings.Contains(rest, `\u003c`) {
		t.Errorf("message holds a raw '<' outside the date token:\n%s", rest)
	}
	approve, ok := buttonValueOf(t, p.Blocks, actionApprove)
	if !ok || approve["style"] != "primary" || approve["confirm"] == nil {
		t.Errorf("approve button = %v, want primary with a confirm dialog", approve)
	}
	var v buttonValue
	if err := json.Unmarshal([]byte(approve["value"].(string)), &v); err != nil || v != (buttonValue{Ask: testAsk, Payload: testPayloadDigest, Evidence: testEvidenceDigest, Option: "1"}) {
		t.Errorf("approve value = %+v (%v), want the ask, both digests and option 1", v, err)
	}
	reject, ok := buttonValueOf(t, p.Blocks, actionReject)
	if !ok || reject["style"] != "danger" || reject["confirm"] == nil {
		t.Errorf("reject button = %v, want danger with a confirm dialog", reject)
	}
	open, ok := buttonValueOf(t, p.Blocks, actionOpen)
	if !ok || open["url"] != "https://tollgate.example/asks/"+testAsk {
		t.Errorf("open button = %v, want the ask's page", open)
	}
	if txt := p.Form.Get("text"); !strings.Contains(txt, "&lt;!channel&gt;") {
		t.Errorf("fallback text %q not escaped", txt)
	}

	// The same event handed over again (another replica took the
	// delivery) posts nothing more.
	if d := fx.app.Deliver(t.Context(), "slack:C0APPROVE", event(t, webhook.KindOpened), &rec); d.Outcome != webhook.Delivered {
		t.Fatalf("second delivery = %+v", d)
	}
	if n := len(fx.slack.Calls("chat.postMessage")); n != 1 {
		t.Errorf("%d posts after a duplicate delivery, want 1", n)
	}
}

// jsonFrag is s as it appears inside a JSON string.
func jsonFrag(s string) string {
	raw, _ := json.Marshal(s)
	out := string(raw[1 : len(raw)-1])
	return out
}

func TestDirectMessageUsesPersonLink(t *testing.T) {
	fx := newFixture(t, func(c *Config) { c.DirectMessages = true })
	eps := fx.app.Endpoints(webhook.Event{Kind: webhook.KindOpened, AskID: testAsk, Audience: "finance-approver", People: []string{"dave", "carol"}})
	if want := []string{"slack:C0APPROVE", "slack:U0DAVE"}; !slices.Equal(eps, want) {
		t.Fatalf("Endpoints = %v, want %v (carol has no Slack user)", eps, want)
	}
	if eps := fx.app.Endpoints(webhook.Event{Kind: "ask.nonsense", AskID: testAsk}); eps != nil {
		t.Errorf("Endpoints of an unknown kind = %v", eps)
	}
	d := fx.app.Deliver(t.Context(), "slack:U0DAVE", event(t, webhook.KindOpened), nil)
	if d.Outcome != webhook.Delivered {
		t.Fatalf("delivery = %+v", d)
	}
	p := fx.slack.Calls("chat.postMessage")[0]
	if p.Form.Get("channel") != "U0DAVE" {
		t.Errorf("DM went to %q", p.Form.Get("channel"))
	}
	open, _ := buttonValueOf(t, p.Blocks, actionOpen)
	if want := "https://tollgate.example/l/dave/" + testAsk + "?until=1903975200"; open["url"] != want {
		t.Errorf("DM open link = %v, want %s", open["url"], want)
	}
	// A user not mapped, or DMs off: not an endpoint now.
	if d := fx.app.Deliver(t.Context(), "slack:U0NOBODY", event(t, webhook.KindOpened), nil); d.Outcome != webhook.Dropped || !d.Final {
		t.Errorf("unmapped DM endpoint: %+v, want dropped", d)
	}
}

func TestDecidedRedrawsThePostedMessage(t *testing.T) {
	fx := newFixture(t, nil)
	if d := fx.app.Deliver(t.Context(), "slack:C0APPROVE", event(t, webhook.KindOpened), nil); d.Outcome != webhook.Delivered {
		t.Fatalf("opened: %+v", d)
	}
	posted := fx.slack.Calls("chat.postMessage")[0]
	decidedAt := time.Date(2030, 5, 1, 14, 2, 0, 0, time.UTC)
	fx.packets.set(approvedBy(pendingAsk(), "dave", decidedAt))
	var rec webhook.MemoryRecorder
	if d := fx.app.Deliver(t.Context(), "slack:C0APPROVE", event(t, webhook.KindDecided), &rec); d.Outcome != webhook.Delivered {
		t.Fatalf("decided: %+v", d)
	}
	ups := fx.slack.Calls("chat.update")
	if len(ups) != 1 {
		t.Fatalf("%d chat.update calls, want 1", len(ups))
	}
	if ups[0].Form.Get("channel") != posted.Form.Get("channel") || ups[0].Form.Get("ts") != "1700000000.000001" {
		t.Errorf("updated %s/%s, want the posted message", ups[0].Form.Get("channel"), ups[0].Form.Get("ts"))
	}
	all := blocksText(ups[0].Blocks)
	if !strings.Contains(all, "Approved by dave at 14:02 UTC on 1 May 2030") {
		t.Errorf("redrawn message does not say who decided and when:\n%s", all)
	}
	if _, ok := buttonValueOf(t, ups[0].Blocks, actionApprove); ok {
		t.Error("a decided ask still has an Approve button")
	}
	if _, ok := buttonValueOf(t, ups[0].Blocks, actionReject); ok {
		t.Error("a decided ask still has a Reject button")
	}
	if len(fx.slack.Calls("chat.postMessage")) != 1 {
		t.Error("decided posted a new message instead of updating")
	}

	// Nothing remembered (a restart): the outcome is posted instead.
	fx2 := newFixture(t, nil)
	fx2.packets.set(approvedBy(pendingAsk(), "dave", decidedAt))
	if d := fx2.app.Deliver(t.Context(), "slack:C0APPROVE", event(t, webhook.KindDecided), nil); d.Outcome != webhook.Delivered {
		t.Fatalf("decided after restart: %+v", d)
	}
	ps := fx2.slack.Calls("chat.postMessage")
	if len(ps) != 1 || !strings.Contains(blocksText(ps[0].Blocks), "Approved by dave at 14:02 UTC") {
		t.Fatalf("after a restart the outcome was not posted: %v", ps)
	}
	if _, ok := buttonValueOf(t, ps[0].Blocks, actionApprove); ok {
		t.Error("the outcome message has an Approve button")
	}
}

func TestExpiredRedraw(t *testing.T) {
	fx := newFixture(t, nil)
	fx.app.Deliver(t.Context(), "slack:C0APPROVE", event(t, webhook.KindOpened), nil)
	a := pendingAsk()
	a.State = tollgatev1.AskState_ASK_STATE_EXPIRED
	a.StateReason = "idle 48h"
	fx.packets.set(a)
	if d := fx.app.Deliver(t.Context(), "slack:C0APPROVE", event(t, webhook.KindExpired), nil); d.Outcome != webhook.Delivered {
		t.Fatalf("expired: %+v", d)
	}
	up := fx.slack.Calls("chat.update")
	if len(up) != 1 || !strings.Contains(blocksText(up[0].Blocks), "Expired undecided") {
		t.Fatalf("expired redraw = %v", up)
	}
	if _, ok := buttonValueOf(t, up[0].Blocks, actionApprove); ok {
		t.Error("an expired ask has an Approve button")
	}
}

func TestDeliverOutcomes(t *testing.T) {
	fx := newFixture(t, nil)
	raw := event(t, webhook.KindOpened)

	// 500, then Slack's ratelimited error, then ok: retried, each attempt recorded.
	fx.slack.answer("chat.postMessage",
		func(w http.ResponseWriter) { http.Error(w, "<html>oops</html>", http.StatusInternalServerError) },
		func(w http.ResponseWriter) { writeJSON(w, map[string]any{"ok": false, "error": "ratelimited"}) })
	var rec webhook.MemoryRecorder
	d := fx.app.Deliver(t.Context(), "slack:C0APPROVE", raw, &rec)
	if d.Outcome != webhook.Delivered || d.Attempt != 3 || !d.Final {
		t.Fatalf("delivery = %+v, want delivered on attempt 3", d)
	}
	got := rec.Deliveries()
	if len(got) != 3 || got[0].Outcome != webhook.Retrying || got[0].Status != 500 || got[0].Final ||
		got[1].Outcome != webhook.Retrying || got[1].Err != "slack: ratelimited" || got[2].Outcome != webhook.Delivered {
		t.Fatalf("recorded %+v", got)
	}

	// A refusal that retrying cannot mend: final at once.
	fx.slack.answer("chat.postMessage", func(w http.ResponseWriter) { writeJSON(w, map[string]any{"ok": false, "error": "channel_not_found"}) })
	rec = webhook.MemoryRecorder{}
	if d := fx.app.Deliver(t.Context(), "slack:C0APPROVE", event(t, webhook.KindReminder), &rec); d.Outcome != webhook.Rejected || d.Attempt != 1 || d.Err != "slack: channel_not_found" {
		t.Fatalf("channel_not_found: %+v", d)
	}

	// A 429 every time: Failed after MaxAttempts (3).
	for range 3 {
		fx.slack.answer("chat.postMessage", func(w http.ResponseWriter) {
			w.Header().Set("Retry-After", "0")
			w.WriteHeader(http.StatusTooManyRequests)
		})
	}
	rec = webhook.MemoryRecorder{}
	d = fx.app.Deliver(t.Context(), "slack:C0APPROVE", event(t, webhook.KindEscalated), &rec)
	if d.Outcome != webhook.Failed || d.Attempt != 3 || !d.Final || len(rec.Deliveries()) != 3 {
		t.Fatalf("rate limited: %+v, recorded %d", d, len(rec.Deliveries()))
	}

	// A wrong token is Slack's invalid_auth: rejected.
	fx3 := newFixture(t, func(c *Config) { c.BotToken = "xoxb-wrong" })
	if d := fx3.app.Deliver(t.Context(), "slack:C0APPROVE", raw, nil); d.Outcome != webhook.Rejected || d.Err != "slack: invalid_auth" {
		t.Fatalf("wrong token: %+v", d)
	}

	// Not configured now, not an event, no such ask.
	if d := fx.app.Deliver(t.Context(), "slack:C0OTHER", raw, nil); d.Outcome != webhook.Dropped {
		t.Errorf("other channel: %+v", d)
	}
	if d := fx.app.Deliver(t.Context(), "slack:C0APPROVE", []byte(`{"kind":"nope"}`), nil); d.Outcome != webhook.Rejected || !d.Final {
		t.Errorf("not an event: %+v", d)
	}
	fx.packets.set(nil)
	if d := fx.app.Deliver(t.Context(), "slack:C0APPROVE", event(t, webhook.KindDecided), nil); d.Outcome != webhook.Rejected || d.Err != "ask not found" {
		t.Errorf("no ask: %+v", d)
	}

	// Stopped mid-retry: Abandoned, not final, not recorded.
	fx.packets.set(pendingAsk())
	fx4 := newFixture(t, func(c *Config) { c.BaseBackoff, c.MaxBackoff = time.Hour, time.Hour })
	fx4.slack.answer("chat.postMessage", func(w http.ResponseWriter) { w.WriteHeader(http.StatusBadGateway) })
	ctx, cancel := context.WithCancel(t.Context())
	rec = webhook.MemoryRecorder{}
	go func() {
		_ = rec.Wait(ctx, func(ds []webhook.Delivery) bool { return len(ds) == 1 })
		cancel()
	}()
	d = fx4.app.Deliver(ctx, "slack:C0APPROVE", raw, &rec)
	if d.Outcome != webhook.Abandoned || d.Final || len(rec.Deliveries()) != 1 {
		t.Fatalf("stopped: %+v, recorded %v", d, rec.Deliveries())
	}
}

// Others' words cannot reorder themselves beside an Approve button: a bidi
// override or a control character is written as an escape, as on every
// surface (humantext.Escape), before Slack's own escaping.
func TestEscapeBidiAndControls(t *testing.T) {
	for _, s := range []string{"pay \u202e0005 INR", "a\x1b[2Jb"} {
		if got := esc(s); strings.ContainsAny(got, "\u202e\x1b") {
			t.Errorf("esc(%q) = %q keeps the control", s, got)
		}
		if got := escClip(s, 40); strings.ContainsAny(got, "\u202e\x1b") {
			t.Errorf("escClip(%q) = %q keeps the control", s, got)
		}
	}
}
