package controlplane

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	tollgatev1 "github.com/tollgate-dev/tollgate/gen/tollgate/v1"
	"github.com/tollgate-dev/tollgate/internal/redistest"
	"github.com/tollgate-dev/tollgate/internal/store"
	"github.com/tollgate-dev/tollgate/internal/store/redisstore"
)

// redisStore starts a real redis-server (AOF, appendfsync always) and a
// store over it.
func redisStore(t *testing.T) (*redisstore.Store, *redistest.Server) {
	t.Helper()
	srv := redistest.Start(t)
	st, err := redisstore.New(context.Background(), redisstore.Config{URL: srv.URL()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st, srv
}

// noClose lets two control planes share one store in a test.
type noClose struct{ store.Store }

func (noClose) Close() error { return nil }

func TestRedisRestartKeepsAsksAndNeverReruns(t *testing.T) {
	st, _ := redisStore(t)
	restartScenario(t, noClose{st})
}

func TestRedisConcurrentApprovalsConsumeOnce(t *testing.T) {
	st, _ := redisStore(t)
	e := newEnv(t, noClose{st}, echoTools())
	concurrentApprovals(t, e)
}

func TestRedisWorkloadAuditsClean(t *testing.T) {
	st, _ := redisStore(t)
	e := newEnv(t, noClose{st}, echoTools())
	workload(t, e, 30)
}

// The deadline is judged by Redis's own clock, on read and in the commit.
func TestRedisExpiryUsesTheStoreClock(t *testing.T) {
	st, _ := redisStore(t)
	e := newEnv(t, noClose{st}, echoTools())
	resp, err := e.runs("alice").StartRun(bg, &tollgatev1.StartRunRequest{Source: &tollgatev1.StartRunRequest_Recipe{
		Recipe: "ask me:\n  go?\n  expires: 1s\n  on expiry: cancel\nw: notes.store {}\n"}})
	if err != nil {
		t.Fatal(err)
	}
	run := resp.GetRun()
	deadline := run.GetAsks()[0].GetExpiresAt().AsTime()
	for { // wait on the store's clock, not ours
		now, err := st.Now(bg)
		if err != nil {
			t.Fatal(err)
		}
		if !now.Before(deadline) {
			break
		}
		select {
		case <-time.After(20 * time.Millisecond):
		case <-t.Context().Done():
			t.Fatal("store clock never passed the deadline")
		}
	}
	_, err = e.approvals("alice").Decide(bg, &tollgatev1.DecideRequest{AskId: run.GetId() + "/ask_1",
		Decision: &tollgatev1.DecideRequest_Approve{Approve: &tollgatev1.Approve{}}})
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "expired") {
		t.Fatalf("want expired: %v", err)
	}
	if got := e.get("alice", run.GetId()); got.GetState() != tollgatev1.RunState_RUN_STATE_CANCELLED {
		t.Fatalf("on expiry: cancel → cancelled, got %v", got.GetState())
	}
	if e.exec.calls(run.GetId()+"/w") != 0 {
		t.Fatal("w ran after the deadline")
	}
}
