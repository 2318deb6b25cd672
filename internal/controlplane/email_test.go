package controlplane

import (
	"context"
	"strings"
	"testing"
	"time"

	tollgatev1 "github.com/tollgate-dev/tollgate/gen/tollgate/v1"
	"github.com/tollgate-dev/tollgate/internal/emailnotify"
	"github.com/tollgate-dev/tollgate/internal/mailpittest"
	"github.com/tollgate-dev/tollgate/internal/web"
	"github.com/tollgate-dev/tollgate/pkg/webhook"
)

// Email through the outbox on a real control plane and a real SMTP server
// (Mailpit): the ask's notice is mailed to the person policy finds able to
// decide it — not to the requester, nor to someone over their limit —
// with the packet and that person's own single-use link, which opens the
// ask and decides nothing.
func TestEmailNoticeThroughTheOutbox(t *testing.T) {
	mp := mailpittest.Start(t)
	ts := newUnstartedWeb(t)
	ws, err := web.NewSite([]byte(strings.Repeat("k", 40)), ts.base, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	var srv *Server
	mail, err := emailnotify.New(emailnotify.Config{SMTPAddr: mp.SMTPAddr, From: "tollgate@acme.example", TLS: emailnotify.NoTLS, Linker: ws,
		Addresses: map[string]string{"dave": "dave@acme.example", "alice": "alice@acme.example", "bob": "bob@acme.example"},
		Packets:   packetsOf(func() *Server { return srv })})
	if err != nil {
		t.Fatal(err)
	}
	hooks, err := webhook.New(webhook.Config{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	e := newEnvOn(t, nil, devPolicy(t), echoTools(), func(c *Config) {
		c.Notifier = notices{hooks: hooks, email: mail, site: ws, personLinks: true}
	})
	srv = e.srv
	s := ts.serve(t, e, ws)
	ask := parkedVendorPayment(t, e)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	got := mp.WaitMessages(t, ctx, 1)
	if len(got) != 1 || len(got[0].To) != 1 || got[0].To[0].Address != "dave@acme.example" || !strings.Contains(got[0].Subject, "485000") {
		t.Fatalf("mail sent: %+v", got)
	}
	m, err := mp.Message(ctx, got[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"485000", "INR", emailnotify.NeverApproves, ts.base + "/l/"} {
		if !strings.Contains(m.Text, want) {
			t.Errorf("the mail's text lacks %q:\n%s", want, m.Text)
		}
	}
	i := strings.Index(m.Text, ts.base+"/l/")
	link := strings.Fields(m.Text[i:])[0]
	dave := s.browser()
	dave.signIn("dave")
	if code, page := dave.get(link); code != 200 || !strings.Contains(text(page, "link-note"), "dave") {
		t.Fatalf("dave's link from the mail: %d", code)
	}
	a, _ := e.approvals("audrey").GetAsk(context.Background(), &tollgatev1.GetAskRequest{AskId: ask})
	if a.GetAsk().GetState() != tollgatev1.AskState_ASK_STATE_PENDING || len(a.GetAsk().GetDecisions()) != 0 {
		t.Fatalf("opening the mail's link decided: %v", a.GetAsk().GetDecisions())
	}
	// The delivery is journaled like a webhook's.
	recs, _ := e.store.Journal(context.Background(), strings.Split(ask, "/")[0], 0, 500)
	journaled := false
	for _, r := range recs {
		journaled = journaled || strings.Contains(string(r.Payload), `"endpoint":"email:dave"`) && strings.Contains(string(r.Payload), `"outcome":"delivered"`)
	}
	if !journaled {
		t.Error("the mail's delivery is not in the run's journal")
	}
}
