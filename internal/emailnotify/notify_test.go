package emailnotify

import (
	"bytes"
	"context"
	"errors"
	"mime"
	"net/mail"
	"strings"
	"testing"
	"time"

	tollgatev1 "github.com/tollgate-dev/tollgate/gen/tollgate/v1"
	"github.com/tollgate-dev/tollgate/internal/mailpittest"
	"github.com/tollgate-dev/tollgate/pkg/webhook"
)

// only returns the one message Mailpit holds, parsed, and its raw form.
func only(t *testing.T, mp *mailpittest.Mailpit) (mailpittest.Message, *mail.Message) {
	t.Helper()
	msgs := mp.WaitMessages(t, t.Context(), 1)
	if len(msgs) != 1 {
		t.Fatalf("mailpit holds %d messages, want 1", len(msgs))
	}
	m, err := mp.Message(t.Context(), msgs[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := mp.Raw(t.Context(), msgs[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	pm, err := mail.ReadMessage(bytes.NewReader(raw))
	if err != nil {
		t.Fatalf("the message as received does not parse: %v\n%s", err, raw)
	}
	return m, pm
}

func TestOpenedNoticeReachesMailpit(t *testing.T) {
	mp := mailpittest.Start(t)
	fx := newNotifier(t, mp.SMTPAddr, nil)
	var rec webhook.MemoryRecorder
	d := fx.n.Deliver(t.Context(), "email:dave", event(t, webhook.KindOpened, nil), &rec)
	if d.Outcome != webhook.Delivered || !d.Final || d.Attempt != 1 || d.Status != 250 || d.Endpoint != "email:dave" || d.AskID != testAsk || d.EventID != testEventID || !strings.HasPrefix(d.ID, "eml_") {
		t.Fatalf("delivery = %+v", d)
	}
	if got := rec.Deliveries(); len(got) != 1 || got[0] != d {
		t.Fatalf("recorded %+v, want just %+v", got, d)
	}
	calls := fx.linker.Calls()
	if len(calls) != 1 || calls[0].ask != testAsk || calls[0].person != "dave" || !calls[0].expires.Equal(testExpires) {
		t.Fatalf("PersonLink calls = %+v, want one for (ask, dave, the ask's deadline)", calls)
	}
	link := calls[0].link

	m, pm := only(t, mp)
	if len(m.To) != 1 || m.To[0].Address != "dave@example.com" || len(m.Cc) != 0 || len(m.Bcc) != 0 {
		t.Errorf("recipients To=%v Cc=%v Bcc=%v, want dave@example.com alone", m.To, m.Cc, m.Bcc)
	}
	if m.From == nil || m.From.Address != "tollgate@example.com" || m.From.Name != "Tollgate" {
		t.Errorf("From = %+v", m.From)
	}
	if m.Subject != "Approval needed: Pay vendor V-1187" {
		t.Errorf("Subject = %q", m.Subject)
	}
	if got := pm.Header.Get("X-Tollgate-Event"); got != testEventID {
		t.Errorf("X-Tollgate-Event = %q, want %q", got, testEventID)
	}
	if got := pm.Header.Get("Message-ID"); got != "<"+d.ID+"@example.com>" {
		t.Errorf("Message-ID = %q, want the delivery's id at From's domain", got)
	}
	if date, err := pm.Header.Date(); err != nil || !date.Equal(testNow) {
		t.Errorf("Date = %v (%v), want %v", date, err, testNow)
	}
	if mt, _, _ := mime.ParseMediaType(pm.Header.Get("Content-Type")); mt != "multipart/alternative" {
		t.Errorf("Content-Type = %q", pm.Header.Get("Content-Type"))
	}
	if pm.Header.Get("Auto-Submitted") != "auto-generated" {
		t.Errorf("Auto-Submitted = %q", pm.Header.Get("Auto-Submitted"))
	}
	for part, body := range map[string]string{"text": m.Text, "html": m.HTML} {
		for _, want := range []string{
			"Pay vendor V-1187",                                               // title
			"payments·pay",                                                    // the action
			"485000 INR",                                                      // amount and currency
			"V-1187",                                                          // a key arg
			"alice",                                                           // who asked
			"asked of finance-approver", "you are named on it as an approver", // why dave
			"2030-05-02 18:00 (in 1d4h) UTC",  // the deadline, as every surface prints it
			"on expiry the run ends rejected", // what expiry does
			testPayloadDigest,                 // the payload digest, whole
			link,                              // dave's own link
			NeverApproves,
			`Quarterly invoice \u202etxt.exe`, // a bidi override shown, not obeyed
		} {
			if !strings.Contains(body, want) {
				t.Errorf("%s part lacks %q:\n%s", part, want, body)
			}
		}
		if strings.Contains(body, "\u202e") {
			t.Errorf("%s part holds a raw bidi override", part)
		}
	}
	if !strings.Contains(m.HTML, `<a href="`+link+`">`) {
		t.Errorf("html part does not link %s:\n%s", link, m.HTML)
	}
	// Others' words are never markup: no image, remote or not, at all.
	if strings.Contains(strings.ToLower(m.HTML), "<img") || !strings.Contains(m.HTML, "&lt;img src=https://evil.example/t.png&gt;") {
		t.Errorf("html part: the memo arg is not escaped:\n%s", m.HTML)
	}
	if len(m.Inline) != 0 || len(m.Attachments) != 0 {
		t.Errorf("inline %d attachments %d, want none", len(m.Inline), len(m.Attachments))
	}
}

func TestTitleCannotInjectHeaders(t *testing.T) {
	mp := mailpittest.Start(t)
	fx := newNotifier(t, mp.SMTPAddr, nil)
	fx.packets.ask.Title = "Pay vendor\r\nBcc: mallory@evil.example\r\nX-Evil: 1\nSubject: approved already\r\n\r\n<b>body</b> für Müller"
	d := fx.n.Deliver(t.Context(), "email:dave", event(t, webhook.KindOpened, nil), nil)
	if d.Outcome != webhook.Delivered {
		t.Fatalf("delivery = %+v", d)
	}
	m, pm := only(t, mp)
	if len(m.Bcc) != 0 || len(m.Cc) != 0 || len(m.To) != 1 || m.To[0].Address != "dave@example.com" {
		t.Errorf("recipients To=%v Cc=%v Bcc=%v: the title added one", m.To, m.Cc, m.Bcc)
	}
	for _, h := range []string{"Bcc", "X-Evil"} {
		if v, ok := pm.Header[h]; ok {
			t.Errorf("header %s: %q came from the title", h, v)
		}
	}
	if n := len(pm.Header["Subject"]); n != 1 {
		t.Errorf("%d Subject headers, want 1", n)
	}
	want := "Approval needed: Pay vendor Bcc: mallory@evil.example X-Evil: 1 Subject: approved already <b>body</b> für Müller"
	if m.Subject != want {
		t.Errorf("Subject = %q, want %q", m.Subject, want)
	}
	raw := pm.Header.Get("Subject") // unfolded
	if !strings.HasPrefix(raw, "=?utf-8?q?") || strings.ContainsAny(raw, "\r\nü") {
		t.Errorf("raw Subject %q: want Q-encoded ASCII", raw)
	}
	// The body still starts where the message's own headers end.
	// In the body the title is one line of text, and HTML-escaped in HTML.
	if !strings.Contains(strings.ReplaceAll(m.Text, "\r\n", "\n"), "\nPay vendor  Bcc: mallory@evil.example  X-Evil: 1 Subject: approved already    <b>body</b> für Müller\n") {
		t.Errorf("text part lacks the title as one line:\n%s", m.Text)
	}
	if !strings.Contains(m.HTML, "X-Evil: 1 Subject: approved already    &lt;b&gt;body&lt;/b&gt; für Müller</h1>") {
		t.Errorf("html part lacks the title, escaped:\n%s", m.HTML)
	}
}

func TestNoAddressNoEndpoint(t *testing.T) {
	fx := newNotifier(t, "127.0.0.1:25", func(c *Config) {
		c.Addresses["ops-lead"] = "Ops Lead <ops@example.com>"
		c.EmailIsPerson = true
	})
	ev := webhook.Event{ID: "e1", Kind: webhook.KindOpened, AskID: testAsk,
		People: []string{"dave", "carol", "erin@example.com", "dave", "Erin <erin@example.com>", ""}, Audience: "finance-approver"}
	got := fx.n.Endpoints(ev)
	if want := []string{"email:dave", "email:erin@example.com"}; strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("Endpoints = %v, want %v (carol has no address; a role is nobody's; a display name is not a bare address)", got, want)
	}
	ev.Audience = "ops-lead" // a person with an address: escalated to them
	if got := fx.n.Endpoints(ev); strings.Join(got, ",") != "email:dave,email:erin@example.com,email:ops-lead" {
		t.Errorf("Endpoints with a person as audience = %v", got)
	}
	for _, k := range []string{webhook.KindReminder, webhook.KindEscalated, webhook.KindDecided, webhook.KindExpired} {
		ev.Kind = k
		if len(fx.n.Endpoints(ev)) != 3 {
			t.Errorf("%s: Endpoints = %v", k, fx.n.Endpoints(ev))
		}
	}
	ev.Kind = "ask.unknown"
	if got := fx.n.Endpoints(ev); got != nil {
		t.Errorf("unknown kind: Endpoints = %v", got)
	}

	// An endpoint for someone with no address (now) is dropped, never
	// attempted; the event's bytes are not even needed to be right.
	var rec webhook.MemoryRecorder
	d := fx.n.Deliver(t.Context(), "email:carol", event(t, webhook.KindOpened, nil), &rec)
	if d.Outcome != webhook.Dropped || !d.Final || d.Attempt != 0 || len(rec.Deliveries()) != 1 {
		t.Errorf("carol: delivery %+v, recorded %v", d, outcomes(rec.Deliveries()))
	}
	if d := fx.n.Deliver(t.Context(), "slack:U1", event(t, webhook.KindOpened, nil), nil); d.Outcome != webhook.Dropped {
		t.Errorf("not an email endpoint: %+v", d)
	}
	if d := fx.n.Deliver(t.Context(), "email:dave", []byte(`{"kind":"nope"}`), nil); d.Outcome != webhook.Rejected || !d.Final {
		t.Errorf("not an event: %+v", d)
	}
	if len(fx.linker.Calls()) != 0 {
		t.Errorf("links minted for undeliverable notices: %v", fx.linker.Calls())
	}
}

func TestRefusingServerRetriesThenFails(t *testing.T) {
	mp := mailpittest.Start(t)
	addr := mp.SMTPAddr
	mp.Stop() // its port now refuses connections
	for _, addr := range []string{addr, closedPort(t)} {
		fx := newNotifier(t, addr, nil)
		var rec webhook.MemoryRecorder
		d := fx.n.Deliver(t.Context(), "email:dave", event(t, webhook.KindOpened, nil), &rec)
		got := rec.Deliveries()
		if d.Outcome != webhook.Failed || !d.Final || d.Attempt != 3 || !strings.Contains(d.Err, "attempt 3 of 3") || !strings.Contains(d.Err, "refused") {
			t.Fatalf("%s: delivery = %+v", addr, d)
		}
		if len(got) != 3 || got[0].Outcome != webhook.Retrying || got[1].Outcome != webhook.Retrying || got[0].Final || got[1].Final || got[2] != d {
			t.Fatalf("%s: recorded %s, want retrying, retrying, failed", addr, outcomes(got))
		}
		for _, r := range got[:2] {
			if r.RetryIn <= 0 || r.RetryIn > 20*time.Millisecond || r.Status != 0 {
				t.Errorf("retry %+v: want a wait within MaxBackoff and no SMTP status", r)
			}
		}
	}
}

func TestSMTPRepliesDecideRetryOrReject(t *testing.T) {
	mp := mailpittest.Start(t, mailpittest.Chaos())
	for _, tc := range []struct {
		code    int
		want    []webhook.Outcome
		wantErr string
	}{
		{451, []webhook.Outcome{webhook.Retrying, webhook.Retrying, webhook.Failed}, "RCPT TO: 451"},
		{550, []webhook.Outcome{webhook.Rejected}, "RCPT TO: 550"},
	} {
		if err := mp.SetChaos(t.Context(), mailpittest.ChaosTriggers{Recipient: mailpittest.ChaosTrigger{ErrorCode: tc.code, Probability: 100}}); err != nil {
			t.Fatal(err)
		}
		fx := newNotifier(t, mp.SMTPAddr, nil)
		var rec webhook.MemoryRecorder
		d := fx.n.Deliver(t.Context(), "email:dave", event(t, webhook.KindOpened, nil), &rec)
		got := rec.Deliveries()
		if len(got) != len(tc.want) {
			t.Fatalf("%d: recorded %s, want %v", tc.code, outcomes(got), tc.want)
		}
		for i, w := range tc.want {
			if got[i].Outcome != w || got[i].Status != tc.code || got[i].Attempt != i+1 {
				t.Errorf("%d: attempt %d = %+v, want %s with status %d", tc.code, i+1, got[i], w, tc.code)
			}
		}
		if !d.Final || !strings.Contains(d.Err, tc.wantErr) {
			t.Errorf("%d: final delivery %+v, want an error with %q", tc.code, d, tc.wantErr)
		}
	}
	if err := mp.SetChaos(t.Context(), mailpittest.ChaosTriggers{}); err != nil {
		t.Fatal(err)
	}
	if msgs, err := mp.Messages(t.Context()); err != nil || len(msgs) != 0 {
		t.Fatalf("messages %v (%v), want none accepted", msgs, err)
	}
	fx := newNotifier(t, mp.SMTPAddr, nil)
	if d := fx.n.Deliver(t.Context(), "email:dave", event(t, webhook.KindOpened, nil), nil); d.Outcome != webhook.Delivered {
		t.Fatalf("chaos off: %+v", d)
	}
}

func TestStartTLSWithAuth(t *testing.T) {
	cert, key, pool := selfSigned(t)
	mp := mailpittest.Start(t, mailpittest.STARTTLS(cert, key), mailpittest.AuthAcceptAny())
	fx := newNotifier(t, mp.SMTPAddr, func(c *Config) {
		c.TLS, c.RootCAs, c.Username, c.Password = StartTLS, pool, "tollgate", "s3cret"
	})
	if d := fx.n.Deliver(t.Context(), "email:dave", event(t, webhook.KindOpened, nil), nil); d.Outcome != webhook.Delivered {
		t.Fatalf("delivery = %+v\nmailpit:\n%s", d, mp.Log())
	}
	m, _ := only(t, mp)
	if m.Username != "tollgate" {
		t.Errorf("mailpit saw user %q, want tollgate (AUTH PLAIN after STARTTLS)", m.Username)
	}

	// A certificate nobody vouches for is never talked to: retried, failed.
	untrusted := newNotifier(t, mp.SMTPAddr, func(c *Config) { c.TLS, c.Username, c.Password = StartTLS, "tollgate", "s3cret" })
	var rec webhook.MemoryRecorder
	if d := untrusted.n.Deliver(t.Context(), "email:dave", event(t, webhook.KindOpened, nil), &rec); d.Outcome != webhook.Failed || !strings.Contains(d.Err, "certificate") {
		t.Errorf("untrusted certificate: %+v (%s)", d, outcomes(rec.Deliveries()))
	}
}

func TestImplicitTLS(t *testing.T) {
	cert, key, pool := selfSigned(t)
	mp := mailpittest.Start(t, mailpittest.ImplicitTLS(cert, key))
	fx := newNotifier(t, mp.SMTPAddr, func(c *Config) { c.TLS, c.RootCAs = ImplicitTLS, pool })
	if d := fx.n.Deliver(t.Context(), "email:dave", event(t, webhook.KindOpened, nil), nil); d.Outcome != webhook.Delivered {
		t.Fatalf("delivery = %+v\nmailpit:\n%s", d, mp.Log())
	}
	only(t, mp)
}

func TestNoStartTLSNothingInClear(t *testing.T) {
	mp := mailpittest.Start(t) // offers no STARTTLS
	fx := newNotifier(t, mp.SMTPAddr, func(c *Config) { c.TLS = StartTLS })
	var rec webhook.MemoryRecorder
	d := fx.n.Deliver(t.Context(), "email:dave", event(t, webhook.KindOpened, nil), &rec)
	if d.Outcome != webhook.Rejected || !d.Final || len(rec.Deliveries()) != 1 || !strings.Contains(d.Err, "STARTTLS") {
		t.Fatalf("delivery = %+v, recorded %s", d, outcomes(rec.Deliveries()))
	}
	if msgs, _ := mp.Messages(t.Context()); len(msgs) != 0 {
		t.Fatalf("a message was sent in clear: %v", msgs)
	}
}

func TestDecidedSaysHowItEndedWithoutLink(t *testing.T) {
	mp := mailpittest.Start(t)
	fx := newNotifier(t, mp.SMTPAddr, nil)
	a := pendingAsk()
	a.State = tollgatev1.AskState_ASK_STATE_REJECTED
	a.Decisions = []*tollgatev1.Decision{{Kind: tollgatev1.DecisionKind_DECISION_KIND_REJECT, Actor: "bob", Reason: "wrong vendor", Time: timestamp(testNow)}}
	fx.packets.ask = a
	if d := fx.n.Deliver(t.Context(), "email:dave", event(t, webhook.KindDecided, nil), nil); d.Outcome != webhook.Delivered {
		t.Fatalf("delivery = %+v", d)
	}
	m, _ := only(t, mp)
	if m.Subject != "Rejected: Pay vendor V-1187" {
		t.Errorf("Subject = %q", m.Subject)
	}
	for part, body := range map[string]string{"text": m.Text, "html": m.HTML} {
		if !strings.Contains(body, "Rejected by bob at 2030-05-01 14:00 UTC: wrong vendor") || !strings.Contains(body, "Nothing more is asked of you.") {
			t.Errorf("%s part does not say how it ended:\n%s", part, body)
		}
		if strings.Contains(body, "inbox.example") || strings.Contains(body, NeverApproves) {
			t.Errorf("%s part carries a link:\n%s", part, body)
		}
	}
	if len(fx.linker.Calls()) != 0 {
		t.Errorf("a link was minted for a closed ask: %v", fx.linker.Calls())
	}
}

func TestSameEventMailedOnce(t *testing.T) {
	mp := mailpittest.Start(t)
	fx := newNotifier(t, mp.SMTPAddr, nil)
	for range 2 {
		if d := fx.n.Deliver(t.Context(), "email:dave", event(t, webhook.KindOpened, nil), nil); d.Outcome != webhook.Delivered {
			t.Fatalf("delivery = %+v", d)
		}
	}
	if d := fx.n.Deliver(t.Context(), "email:dave", event(t, webhook.KindReminder, nil), nil); d.Outcome != webhook.Delivered {
		t.Fatalf("reminder = %+v", d)
	}
	msgs := mp.WaitMessages(t, t.Context(), 2)
	time.Sleep(100 * time.Millisecond)
	if msgs, _ = mp.Messages(t.Context()); len(msgs) != 2 {
		t.Fatalf("%d messages, want the opened notice once and the reminder", len(msgs))
	}
	if msgs[0].Subject != "Reminder: approval needed: Pay vendor V-1187" {
		t.Errorf("reminder Subject = %q", msgs[0].Subject)
	}
	if c := fx.linker.Calls(); len(c) != 2 || c[0].link == c[1].link {
		t.Errorf("links %v: want a new one per message", c)
	}
}

func TestAbandonedWhenStopped(t *testing.T) {
	fx := newNotifier(t, closedPort(t), func(c *Config) { c.BaseBackoff, c.MaxBackoff, c.MaxAttempts = time.Minute, time.Minute, 5 })
	ctx, cancel := context.WithCancel(t.Context())
	var rec webhook.MemoryRecorder
	done := make(chan webhook.Delivery)
	go func() { done <- fx.n.Deliver(ctx, "email:dave", event(t, webhook.KindOpened, nil), &rec) }()
	wctx, wcancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer wcancel()
	if err := rec.Wait(wctx, func(ds []webhook.Delivery) bool { return len(ds) == 1 }); err != nil {
		t.Fatal(err)
	}
	cancel()
	d := <-done
	if d.Outcome != webhook.Abandoned || d.Final || len(rec.Deliveries()) != 1 {
		t.Fatalf("delivery = %+v, recorded %s: want abandoned, not final, not recorded", d, outcomes(rec.Deliveries()))
	}
}

func TestPacketErrors(t *testing.T) {
	fx := newNotifier(t, closedPort(t), nil)
	fx.packets.ask = nil
	if d := fx.n.Deliver(t.Context(), "email:dave", event(t, webhook.KindOpened, nil), nil); d.Outcome != webhook.Rejected || d.Attempt != 1 || d.Err != "ask not found" {
		t.Errorf("missing ask: %+v", d)
	}
	fx.packets.err = errors.New("store down")
	if d := fx.n.Deliver(t.Context(), "email:dave", event(t, webhook.KindOpened, nil), nil); d.Outcome != webhook.Failed || !strings.Contains(d.Err, "store down") {
		t.Errorf("store down: %+v", d)
	}
}
