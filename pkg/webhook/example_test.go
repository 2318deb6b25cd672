package webhook_test

import (
	"context"
	"fmt"
	"log"
	"net/http"
	"os"
	"time"

	"github.com/tollgate-dev/tollgate/pkg/webhook"
)

// A receiver: the middleware rejects forged, stale and replayed requests
// before the handler runs. Dedupe on Event.ID to act once per event.
func ExampleVerifier_Middleware() {
	v := webhook.NewVerifier([]byte(os.Getenv("TOLLGATE_WEBHOOK_SECRET")))
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		env, _ := webhook.EnvelopeFrom(r.Context())
		fmt.Printf("%s for ask %s (event %s)\n", env.Event.Kind, env.Event.AskID, env.Event.ID)
		w.WriteHeader(http.StatusNoContent)
	})
	http.Handle("POST /tollgate", v.Middleware(handler))
}

// The control plane's side: Run on a goroutine it owns, Notify from
// anywhere.
func ExampleNotifier() {
	n, err := webhook.New(webhook.Config{
		Recorder: webhook.RecorderFunc(func(ctx context.Context, d webhook.Delivery) error {
			log.Printf("%s %s attempt %d: %s", d.Endpoint, d.Kind, d.Attempt, d.Outcome)
			return nil
		}),
	}, []webhook.Endpoint{{
		Name:   "finance-chat",
		URL:    "https://hooks.example.com/tollgate",
		Secret: []byte(os.Getenv("FINANCE_HOOK_SECRET")),
		Roles:  []string{"finance"},
	}})
	if err != nil {
		log.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go n.Run(ctx)
	_ = n.Notify(ctx, webhook.Event{
		Kind: webhook.KindOpened, AskID: "ask-7", RunID: "run-3", Title: "Pay invoice 42",
		Audience: "finance", ExpiresAt: time.Now().Add(4 * time.Hour),
	})
}
