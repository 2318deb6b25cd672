package controlplane

import (
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	tollgatev1 "github.com/tollgate-dev/tollgate/gen/tollgate/v1"
	"github.com/tollgate-dev/tollgate/internal/store"
	"github.com/tollgate-dev/tollgate/internal/store/memstore"
)

// restartable runs two control planes, one after the other, over one
// store: what survives is only what the store holds.
func restartScenario(t *testing.T, st store.Store) {
	first := newEnv(t, st, echoTools())
	r := first.start("alice", "pr-review")
	if r.GetState() != tollgatev1.RunState_RUN_STATE_PARKED {
		t.Fatalf("%v", r.GetState())
	}
	for _, s := range []string{"pr", "diff", "claims"} {
		if n := first.exec.calls(r.GetId() + "/" + s); n != 1 {
			t.Fatalf("%s ran %d times before the restart", s, n)
		}
	}
	first.stop() // the process is gone; only the store remains

	second := newEnv(t, st, echoTools())
	inbox, err := second.approvals("alice").ListAsks(bg, &tollgatev1.ListAsksRequest{})
	if err != nil || len(inbox.GetItems()) != 1 {
		t.Fatalf("after the restart the ask is listed: %v %v", inbox, err)
	}
	for _, ask := range []string{"ask_1", "ask_2", "ask_3", "ask_4"} {
		if _, err := second.approvals("alice").Decide(bg, &tollgatev1.DecideRequest{AskId: r.GetId() + "/" + ask,
			Decision: &tollgatev1.DecideRequest_Approve{Approve: &tollgatev1.Approve{}}}); err != nil {
			t.Fatalf("%s: %v", ask, err)
		}
		second.settle()
	}
	r2 := second.get("alice", r.GetId())
	if r2.GetId() != r.GetId() || r2.GetState() != tollgatev1.RunState_RUN_STATE_COMPLETE {
		t.Fatalf("the same run completes after the restart: %v %s", r2.GetState(), r2.GetStateReason())
	}
	for _, s := range []string{"pr", "diff", "claims"} {
		if n := second.exec.calls(r.GetId() + "/" + s); n != 0 {
			t.Fatalf("I7: finished step %s ran again after the restart", s)
		}
	}
	for _, s := range []string{"verdicts", "plan", "patch", "push"} {
		if n := second.exec.calls(r.GetId() + "/" + s); n != 1 {
			t.Fatalf("%s ran %d times", s, n)
		}
	}
}

func TestRestartKeepsAsksAndNeverReruns(t *testing.T) {
	restartScenario(t, memstore.New(memstore.Config{}))
}

// fakeClock is a store clock a test moves.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *fakeClock) add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// An ask whose deadline passes while no control plane runs is refused as
// expired after the restart, the run ends as its on expiry says, and the
// expiry is logged with its idle time and counted.
func TestExpiryWhileDown(t *testing.T) {
	clock := &fakeClock{now: time.Now().UTC()}
	st := memstore.New(memstore.Config{Now: clock.Now})
	first := newEnv(t, st, echoTools())
	r := first.start("alice", "vendor-payment")
	if r.GetState() != tollgatev1.RunState_RUN_STATE_PARKED {
		t.Fatalf("%v", r.GetState())
	}
	first.stop()
	clock.add(9 * time.Hour) // expires: 8h, on expiry: reject

	second := newEnv(t, st, echoTools())
	_, err := second.approvals("carol").Decide(bg, &tollgatev1.DecideRequest{AskId: r.GetId() + "/ask_1",
		Decision: &tollgatev1.DecideRequest_Approve{Approve: &tollgatev1.Approve{}}})
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "expired") {
		t.Fatalf("want expired, got %v", err)
	}
	r2 := second.get("alice", r.GetId())
	if r2.GetState() != tollgatev1.RunState_RUN_STATE_REJECTED {
		t.Fatalf("on expiry: reject → rejected, got %v", r2.GetState())
	}
	if second.srv.Runner.Expiries() != 1 {
		t.Fatalf("expiries counted: %d", second.srv.Runner.Expiries())
	}
	logs := second.logs.String()
	m := regexp.MustCompile(`ask expired.*idle_ms=(\d+)`).FindStringSubmatch(logs)
	if m == nil {
		t.Fatalf("the expiry is logged with its idle time:\n%s", logs)
	}
	if idle, _ := strconv.ParseInt(m[1], 10, 64); idle < (9*time.Hour-time.Second).Milliseconds() || idle > (9*time.Hour+time.Second).Milliseconds() {
		t.Fatalf("idle time %d ms, want about 9h", idle)
	}
	if second.exec.calls(r.GetId()+"/pay") != 0 {
		t.Fatal("pay ran after the deadline")
	}
}
