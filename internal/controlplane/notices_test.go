package controlplane

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	tollgatev1 "github.com/tollgate-dev/tollgate/gen/tollgate/v1"
	"github.com/tollgate-dev/tollgate/internal/store/memstore"
	"github.com/tollgate-dev/tollgate/pkg/engine"
	"github.com/tollgate-dev/tollgate/pkg/webhook"
)

// receiver is a webhook endpoint that verifies every request with the
// shipped verifier and keeps the raw requests, to replay one.
type receiver struct {
	mu     sync.Mutex
	kinds  []string
	raw    []*http.Request
	bodies [][]byte
}

func (r *receiver) seen(kind string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, k := range r.kinds {
		if k == kind {
			return true
		}
	}
	return false
}

// With nobody eligible an ask escalates to the configured role; the
// ladder's reminder and escalation are journaled; a webhook receiver gets
// signed deliveries, each recorded in the journal; a replayed delivery
// fails verification.
func TestEscalationRemindersAndWebhooks(t *testing.T) {
	secret := []byte("a-webhook-secret-of-32-bytes-or-so")
	verifier := webhook.NewVerifier(secret)
	rec := &receiver{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		clone := r.Clone(context.Background())
		r.Body = io.NopCloser(bytes.NewReader(body))
		_, env, err := verifier.Verify(r)
		if err != nil {
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		rec.mu.Lock()
		rec.kinds = append(rec.kinds, env.Event.Kind)
		rec.raw, rec.bodies = append(rec.raw, clone), append(rec.bodies, body)
		rec.mu.Unlock()
	}))
	defer srv.Close()

	clock := &fakeClock{now: time.Now().UTC()}
	st := memstore.New(memstore.Config{Now: clock.Now})
	var notifier *webhook.Notifier
	e := newEnvOn(t, st, devPolicy(t), echoTools(), func(c *Config) {
		var err error
		// No Recorder: each notice carries its run's journal.
		notifier, err = webhook.New(webhook.Config{BaseBackoff: time.Millisecond}, []webhook.Endpoint{{Name: "finance-pager", URL: srv.URL, Secret: secret, Roles: []string{"finance", "cfo"}}})
		if err != nil {
			t.Fatal(err)
		}
		c.Notifier = notifier
		c.EscalateTo = "finance"
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = notifier.Run(ctx) }()
	defer func() { cancel(); <-done }()

	// alice asks herself to pay: separation of duties leaves nobody.
	resp, err := e.runs("alice").StartRun(bg, &tollgatev1.StartRunRequest{Source: &tollgatev1.StartRunRequest_Recipe{Recipe: `v: erp.get_vendor {"id": "V-1"}
ask me:
  pay V-1?
  remind after: 1h
b: payments.pay {"vendor": "V-1", "invoice": "I-1", "amount": 5000, "currency": "INR", "bank_account": "X"}
`}})
	if err != nil {
		t.Fatal(err)
	}
	e.settle()
	id := resp.GetRun().GetId()
	var askID string
	for _, a := range e.get("alice", id).GetAsks() {
		askID = a.GetId()
	}
	ask, err := e.approvals("dave").GetAsk(bg, &tollgatev1.GetAskRequest{AskId: askID})
	if err != nil || ask.GetAsk().GetState() != tollgatev1.AskState_ASK_STATE_PENDING || !ask.GetMayDecide() {
		t.Fatalf("escalated to finance, so dave may decide, and nothing was approved by default: %v %v", ask, err)
	}
	if !strings.Contains(ask.GetAsk().GetDecisions()[0].GetReason(), "nobody eligible") {
		t.Fatalf("the escalation says why: %v", ask.GetAsk().GetDecisions())
	}
	clock.add(time.Hour + time.Second)
	e.get("alice", id) // a reader applies the reminder
	kinds := map[string]int{}
	for _, r := range journal(t, e, id) {
		kinds[r.GetKind()]++
	}
	if kinds[string(engine.JournalAskEscalated)] != 1 || kinds[string(engine.JournalAskReminded)] != 1 {
		t.Fatalf("the escalation and a reminder in the journal: %v", kinds)
	}
	deadline := time.Now().Add(10 * time.Second)
	for !(rec.seen(webhook.KindReminder) && rec.seen(webhook.KindEscalated)) {
		if time.Now().After(deadline) {
			t.Fatalf("the receiver got %v", rec.kinds)
		}
		<-time.After(10 * time.Millisecond)
	}
	for {
		n := 0
		for _, r := range journal(t, e, id) {
			if r.GetKind() == string(engine.JournalNoticeDelivery) && strings.Contains(r.GetPayloadJson(), `"outcome":"delivered"`) {
				n++
			}
		}
		if n >= 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("deliveries recorded in the journal: %d", n)
		}
		<-time.After(10 * time.Millisecond)
	}
	// Replaying a delivery byte for byte fails verification.
	rec.mu.Lock()
	first, body := rec.raw[0], rec.bodies[0]
	rec.mu.Unlock()
	first.Body = io.NopCloser(bytes.NewReader(body))
	if _, _, err := verifier.Verify(first); err == nil {
		t.Fatal("a replayed delivery verified")
	}
}

// WatchAsks: the inbox first, then SYNCED, then an ask added when it opens
// for the caller and removed when it is decided.
func TestWatchAsks(t *testing.T) {
	e := newEnv(t, nil, echoTools())
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	stream, err := e.approvals("dave").WatchAsks(ctx, &tollgatev1.WatchAsksRequest{})
	if err != nil {
		t.Fatal(err)
	}
	next := func() *tollgatev1.WatchAsksResponse {
		t.Helper()
		m, err := stream.Recv()
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	if m := next(); m.GetKind() != tollgatev1.InboxChangeKind_INBOX_CHANGE_KIND_SYNCED {
		t.Fatalf("an empty inbox syncs at once: %v", m)
	}
	r := e.start("alice", "vendor-payment")
	askID := r.GetId() + "/ask_1"
	m := next()
	if m.GetKind() != tollgatev1.InboxChangeKind_INBOX_CHANGE_KIND_ADDED || m.GetItem().GetAsk().GetId() != askID || !strings.Contains(m.GetItem().GetWhy(), "finance-1m") {
		t.Fatalf("the ask arrives with why: %v", m)
	}
	if _, err := e.approvals("dave").Decide(bg, approve(askID)); err != nil {
		t.Fatal(err)
	}
	for {
		m = next()
		if m.GetKind() == tollgatev1.InboxChangeKind_INBOX_CHANGE_KIND_REMOVED {
			break
		}
		if m.GetKind() != tollgatev1.InboxChangeKind_INBOX_CHANGE_KIND_UPDATED {
			t.Fatalf("only updates before the removal: %v", m)
		}
	}
	if m.GetItem().GetAsk().GetId() != askID {
		t.Fatalf("removed: %v", m)
	}
}
