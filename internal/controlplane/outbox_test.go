package controlplane

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	tollgatev1 "github.com/tollgate-dev/tollgate/gen/tollgate/v1"
	"github.com/tollgate-dev/tollgate/internal/controlplane/approvals"
	"github.com/tollgate-dev/tollgate/internal/store/memstore"
	"github.com/tollgate-dev/tollgate/pkg/engine"
	"github.com/tollgate-dev/tollgate/pkg/webhook"
)

// An ask nobody may decide escalates as it opens: its opened notice,
// enqueued held back in the opening commit, is dropped unsent by the
// Opened hook, and the escalation's notice goes out instead — as before
// notices went through the outbox. When the escalated notice has been
// delivered (and journaled), the outbox is empty.
func TestNoticeOpenedHeldBackWhenTheAskEscalates(t *testing.T) {
	secret := []byte("a-webhook-secret-of-32-bytes-or-so")
	verifier := webhook.NewVerifier(secret)
	var mu sync.Mutex
	var kinds []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, env, err := verifier.Verify(r)
		if err != nil {
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		mu.Lock()
		kinds = append(kinds, env.Event.Kind)
		mu.Unlock()
	}))
	defer srv.Close()
	st := memstore.New(memstore.Config{})
	e := newEnvOn(t, st, devPolicy(t), echoTools(), func(c *Config) {
		n, err := webhook.New(webhook.Config{BaseBackoff: time.Millisecond}, []webhook.Endpoint{{Name: "pager", URL: srv.URL, Secret: secret, Roles: []string{"*"}}})
		if err != nil {
			t.Fatal(err)
		}
		c.Notifier = n
		c.EscalateTo = "finance"
	})
	// alice asks herself to pay: separation of duties leaves nobody.
	resp, err := e.runs("alice").StartRun(bg, &tollgatev1.StartRunRequest{Source: &tollgatev1.StartRunRequest_Recipe{Recipe: `v: erp.get_vendor {"id": "V-1"}
ask me:
  pay V-1?
b: payments.pay {"vendor": "V-1", "invoice": "I-1", "amount": 5000, "currency": "INR", "bank_account": "X"}
`}})
	if err != nil {
		t.Fatal(err)
	}
	e.settle()
	id := resp.GetRun().GetId()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var got []string
		for _, r := range journal(t, e, id) {
			if r.GetKind() == string(engine.JournalNoticeDelivery) {
				got = append(got, r.GetPayloadJson())
			}
		}
		waiting, _ := st.WaitingWork(bg, approvals.Queue, 10)
		claimed, _ := st.ClaimedWork(bg)
		if len(got) > 0 && len(waiting) == 0 && len(claimed) == 0 {
			if len(got) != 1 || !strings.Contains(got[0], `"event":"ask.escalated"`) || !strings.Contains(got[0], `"outcome":"delivered"`) {
				t.Fatalf("journaled deliveries %v, want the escalation's alone", got)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("journaled %v, waiting %+v, claimed %+v", got, waiting, claimed)
		}
		<-time.After(10 * time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	if strings.Join(kinds, ",") != webhook.KindEscalated {
		t.Fatalf("the receiver got %v, want the escalation alone", kinds)
	}
}
