package controlplane

import (
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	tollgatev1 "github.com/tollgate-dev/tollgate/gen/tollgate/v1"
)

// Item 10 (issue 13): while Redis is unreachable, every RPC that needs the
// store answers UNAVAILABLE (a client may retry) and never names the
// store's socket, its directory or its address: those are the operator's,
// not the caller's. The server's log keeps the details.
func TestItem10_RedisOutageIsUnavailableAndHidesTheStoreAddress(t *testing.T) {
	st, srv := redisStore(t)
	e := newEnv(t, noClose{st}, echoTools())
	resp, err := e.runs("alice").StartRun(bg, &tollgatev1.StartRunRequest{Source: &tollgatev1.StartRunRequest_Recipe{Recipe: "ask me:\n  go?\nw: notes.store {}\n"}})
	if err != nil {
		t.Fatal(err)
	}
	run := resp.GetRun()
	srv.Kill9()

	calls := map[string]func() error{
		"GetRun": func() error {
			_, err := e.runs("alice").GetRun(bg, &tollgatev1.GetRunRequest{RunId: run.GetId()})
			return err
		},
		"ListRuns": func() error {
			_, err := e.runs("alice").ListRuns(bg, &tollgatev1.ListRunsRequest{})
			return err
		},
		"StartRun": func() error {
			_, err := e.runs("alice").StartRun(bg, &tollgatev1.StartRunRequest{Source: &tollgatev1.StartRunRequest_Recipe{Recipe: "w: notes.store {}\n"}})
			return err
		},
		"Decide": func() error {
			_, err := e.approvals("alice").Decide(bg, &tollgatev1.DecideRequest{AskId: run.GetId() + "/ask_1",
				Decision: &tollgatev1.DecideRequest_Approve{Approve: &tollgatev1.Approve{}}})
			return err
		},
		"ListJournal": func() error {
			_, err := e.audit("alice").ListJournal(bg, &tollgatev1.ListJournalRequest{RunId: run.GetId()})
			return err
		},
	}
	for name, call := range calls {
		err := call()
		if status.Code(err) != codes.Unavailable {
			t.Errorf("%s with Redis down: want Unavailable, got %v", name, err)
			continue
		}
		msg := status.Convert(err).Message()
		for _, secret := range []string{srv.Addr(), srv.Dir(), srv.URL(), "unix", "dial", ".sock"} {
			if strings.Contains(msg, secret) {
				t.Errorf("%s: the error sent to the client names the store (%q): %q", name, secret, msg)
			}
		}
	}

	// Redis returns (same socket, same append-only file): the same calls
	// work again, and the run is the one started before the outage.
	// The client retries, as Unavailable tells it to.
	srv.Restart()
	deadline := time.Now().Add(15 * time.Second)
	for {
		resp, err := e.runs("alice").GetRun(bg, &tollgatev1.GetRunRequest{RunId: run.GetId()})
		if err == nil {
			if resp.GetRun().GetId() != run.GetId() {
				t.Fatalf("after Redis returned: %v", resp.GetRun())
			}
			break
		}
		if status.Code(err) != codes.Unavailable || time.Now().After(deadline) {
			t.Fatalf("after Redis returned: %v", err)
		}
		<-time.After(50 * time.Millisecond)
	}
}
