package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	tollgatev1 "github.com/tollgate-dev/tollgate/gen/tollgate/v1"
	"github.com/tollgate-dev/tollgate/pkg/engine"
	"github.com/tollgate-dev/tollgate/pkg/webhook"
)

// hookReceiver is a webhook receiver on loopback, as a person's system
// would run one: it verifies each request with the shipped Verifier and
// acts once per event, deduplicating on the event id. The first request
// it gets it holds, never answering.
type hookReceiver struct {
	srv *httptest.Server

	mu        sync.Mutex
	requests  []webhook.Envelope
	processed map[string]int    // event id → times acted on
	answered  map[string]string // delivery id → event id, of requests answered 200
	held      chan struct{}     // closed when the first request is held
}

func newHookReceiver(t *testing.T, secret []byte) *hookReceiver {
	t.Helper()
	v := webhook.NewVerifier(secret)
	rc := &hookReceiver{processed: map[string]int{}, answered: map[string]string{}, held: make(chan struct{})}
	rc.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, env, err := v.Verify(r)
		if err != nil {
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		rc.mu.Lock()
		rc.requests = append(rc.requests, env)
		first := len(rc.requests) == 1
		rc.mu.Unlock()
		if first {
			close(rc.held)
			<-r.Context().Done() // the sender gave up, or died
			return
		}
		rc.mu.Lock()
		defer rc.mu.Unlock()
		rc.processed[env.Event.ID]++ // a receiver acts only on the first
		rc.answered[env.DeliveryID] = env.Event.ID
	}))
	t.Cleanup(rc.srv.Close)
	return rc
}

// Issue 15, item 5: a webhook delivery pending when a replica is killed
// is delivered by another. Replica A opens an ask; its deliverer sends
// the opened notice, which the receiver holds unanswered. Replica B
// starts; A is killed (kill -9: no drain, no release). Once A's heartbeat
// lapses, B's takeover pass releases A's claim on the delivery, which
// waited in the store, and B delivers it: the receiver gets the same
// event id again (under a new delivery id), acts on it once, and the
// run's journal records B's delivery. (Before, the delivery lived in A's
// memory and died with it: nobody was told of the ask.)
func TestPendingWebhookOfAKilledReplicaIsDeliveredByAnother(t *testing.T) {
	t.Parallel()
	secret := []byte("a-webhook-secret-of-32-bytes-or-so")
	rc := newHookReceiver(t, secret)
	dir := t.TempDir()
	secretFile := filepath.Join(dir, "pager.secret")
	if err := os.WriteFile(secretFile, secret, 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "controlplane.yaml")
	if err := os.WriteFile(cfg, fmt.Appendf(nil, "webhooks:\n  - {name: pager, url: %q, secret_file: %q, roles: [\"*\"]}\n", rc.srv.URL+"/hook", secretFile), 0o600); err != nil {
		t.Fatal(err)
	}
	c := newClusterSpec(t, clusterSpec{planeArgs: []string{"--config", cfg}})

	id := c.start(askFirst)
	select {
	case <-rc.held:
	case <-time.After(30 * time.Second):
		t.Fatal("replica A never sent the opened notice")
	}
	b := c.startReplica()
	if err := c.plane.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-c.plane.done
	c.plane = b // read through the survivor from now on

	deadline := time.Now().Add(30 * time.Second)
	var held webhook.Envelope
	for {
		rc.mu.Lock()
		held = rc.requests[0]
		n := rc.processed[held.Event.ID]
		rc.mu.Unlock()
		if n > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the held notice %s was never delivered by replica B\nB's log:\n%s", held.Event.ID, b.stderr)
		}
		<-time.After(50 * time.Millisecond)
	}
	if held.Event.Kind != webhook.KindOpened || held.Event.RunID != id {
		t.Fatalf("the held request: %+v, want run %s's opened notice", held, id)
	}

	// What the receiver saw, and the run's journal, once B's delivery is
	// recorded.
	audit := tollgatev1.NewAuditServiceClient(c.api("alice"))
	var recorded []map[string]any
	for {
		resp, err := audit.ListJournal(context.Background(), &tollgatev1.ListJournalRequest{RunId: id})
		if err != nil {
			t.Fatal(err)
		}
		recorded = recorded[:0]
		for _, r := range resp.GetRecords() {
			if r.GetKind() != string(engine.JournalNoticeDelivery) {
				continue
			}
			var p map[string]any
			if err := json.Unmarshal([]byte(r.GetPayloadJson()), &p); err != nil {
				t.Fatal(err)
			}
			recorded = append(recorded, p)
		}
		if len(recorded) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no delivery in run %s's journal", id)
		}
		<-time.After(50 * time.Millisecond)
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	for ev, n := range rc.processed {
		if n != 1 {
			t.Errorf("event %s acted on %d times", ev, n)
		}
	}
	if len(rc.processed) != 1 {
		t.Errorf("events acted on: %v, want the opened notice alone", rc.processed)
	}
	delivered := recorded[len(recorded)-1]
	dlv, _ := delivered["delivery"].(string)
	if delivered["outcome"] != "delivered" || delivered["final"] != true || delivered["endpoint"] != "pager" ||
		delivered["event"] != webhook.KindOpened || rc.answered[dlv] != held.Event.ID || dlv == held.DeliveryID {
		t.Fatalf("journaled %+v; the receiver answered %v; the held request was %s", recorded, rc.answered, held.DeliveryID)
	}
	for _, r := range recorded[:len(recorded)-1] {
		if r["final"] == true {
			t.Errorf("a delivery before B's is final: %+v", recorded)
		}
	}
	if !strings.HasPrefix(held.Event.ID, id+"/") {
		t.Errorf("event id %q does not name its run", held.Event.ID)
	}
}
