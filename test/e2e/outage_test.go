package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	tollgatev1 "github.com/tollgate-dev/tollgate/gen/tollgate/v1"
	"github.com/tollgate-dev/tollgate/internal/store"
	"github.com/tollgate-dev/tollgate/internal/store/memstore"
	"github.com/tollgate-dev/tollgate/pkg/engine"
)

// waitLog waits until a line of the control plane's log contains every
// one of parts.
func (c *cluster) waitLog(what string, parts ...string) {
	c.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		for line := range strings.Lines(c.plane.stderr.String()) {
			all := true
			for _, p := range parts {
				all = all && strings.Contains(line, p)
			}
			if all {
				return
			}
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("the control plane never logged %s (%q):\n%s", what, parts, c.plane.stderr)
		}
		<-time.After(50 * time.Millisecond)
	}
}

// audit runs approvectl audit and fails the test unless it is clean.
func (c *cluster) audit() {
	c.t.Helper()
	if r := c.plane.ctl(c.t, "", "--as", "alice", "audit"); r.code != 0 {
		c.t.Fatalf("audit: %d %s %s", r.code, r.stdout, r.stderr)
	}
}

// Item 8 (issue 13): Redis dies while a side effect runs, so the
// executor's result cannot be recorded when it arrives. The executor keeps
// it and sends it again, the lease is kept alive meanwhile, and once Redis
// is back the result is recorded: the run completes with the effect done
// exactly once, with no control-plane restart.
func TestItem8_ResultDuringRedisOutageIsRecordedOnceRedisReturns(t *testing.T) {
	t.Parallel()
	c := newCluster(t, "edge-1")
	id := c.start("m: test.mark {\"name\": \"outage\", \"hold_ms\": 3000} without asking\n")
	// The marker is counted after the start was recorded (I7) and before
	// the tool holds.
	c.waitMark("outage", 1)
	c.redis.Kill9()
	// The tool finishes while Redis is down: the result reaches the control
	// plane, which cannot record it.
	c.waitLog("that it could not record the result", "lease="+id+"/m/1", "connection refused")
	c.redis.Restart()
	r := c.until(id, "complete once Redis is back", func(r runOut) bool { return r.State == "complete" })
	if st, _, attempts := stepOf(r, "m"); st != "succeeded" || attempts != 1 {
		t.Fatalf("m: %s after %d attempts, want succeeded after 1", st, attempts)
	}
	if n := c.mark("outage"); n != 1 {
		t.Fatalf("the effect ran %d times, want 1", n)
	}
	c.audit()
}

// Item 8 (issue 13): an executor stops renewing a started side effect's
// lease (SIGSTOP) while Redis is down, so the lease's loss cannot be
// recorded when it expires. The live control plane keeps the loss and
// records it once Redis is back: the step goes in doubt and asks, with no
// control-plane restart.
func TestItem8_StartedLeaseNotRenewedDuringOutageGoesInDoubtLive(t *testing.T) {
	t.Parallel()
	c := newCluster(t, "edge-1")
	id := c.start("m: test.mark {\"name\": \"silent\", \"hold_ms\": 60000} without asking\n")
	c.waitMark("silent", 1) // after the start was recorded
	c.redis.Kill9()
	pgid := -c.execs["edge-1"].Process.Pid
	syscall.Kill(pgid, syscall.SIGSTOP)
	defer syscall.Kill(pgid, syscall.SIGCONT)
	c.waitLog("that it could not record the loss", "lease lost", "not recorded", "lease="+id+"/m/1")
	c.redis.Restart()
	r := c.until(id, "parked in doubt", func(r runOut) bool { return r.State == "parked" })
	st, _, attempts := stepOf(r, "m")
	if st != "in_doubt" || attempts != 1 {
		t.Fatalf("m: %s after %d attempts, want in_doubt after 1", st, attempts)
	}
	doubt := ""
	for _, a := range r.Asks {
		if strings.Contains(a.AskID, "doubt_m_1") {
			doubt = a.AskID
		}
	}
	if doubt == "" {
		t.Fatalf("an in-doubt ask opens: %+v", r.Asks)
	}
	if res := c.plane.ctl(t, "", "--as", "alice", "answer", doubt, "it ran"); res.code != 0 {
		t.Fatalf("%s %s", res.stdout, res.stderr)
	}
	c.until(id, "complete", func(r runOut) bool { return r.State == "complete" })
	if n := c.mark("silent"); n != 1 {
		t.Fatalf("the effect ran %d times, want 1", n)
	}
	c.audit()
}

// lossyStore fails the first commit that appends a journal record of
// kind with store.ErrUnavailable, as Redis going away mid-call does:
// either before anything was written, or after the write landed with its
// answer lost.
type lossyStore struct {
	store.Store
	kind    string
	written bool // the write lands; only its answer is lost
	fired   atomic.Bool
}

func (l *lossyStore) Commit(ctx context.Context, c store.Commit) error {
	hit := slices.ContainsFunc(c.Journal, func(r store.JournalRecord) bool { return r.Kind == l.kind })
	if !hit || !l.fired.CompareAndSwap(false, true) {
		return l.Store.Commit(ctx, c)
	}
	if l.written {
		if err := l.Store.Commit(ctx, c); err != nil {
			return err
		}
	}
	return fmt.Errorf("redisstore: dial unix /var/run/secret/r.sock: %w", store.ErrUnavailable)
}

// Item 8 (issue 13): the Start or the result of an approved side effect
// meets a store that is unavailable for one commit. Not written: the
// executor is told it was not recorded, keeps the frame (and its lease)
// and sends it again, and it is recorded; the tool is not invoked before
// its Start is. Written but its answer lost: the copy is not applied a
// second time (the attempt's fence), the executor is told it is recorded,
// and the step the lost-answer commit made runnable is offered on the
// live plane. Each way the effect ran once, the journal holds one start
// and one success of it, the run completes, and the audit is clean.
func TestItem8_FrameTheStoreCouldNotRecordIsResentAndAppliedOnce(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		kind    string
		written bool
	}{{string(engine.JournalStepStarted), false}, {string(engine.JournalStepStarted), true}, {string(engine.JournalStepSucceeded), false}, {string(engine.JournalStepSucceeded), true}} {
		t.Run(fmt.Sprintf("%s/written=%v", tc.kind, tc.written), func(t *testing.T) {
			st := &lossyStore{Store: memstore.New(memstore.Config{}), kind: tc.kind, written: tc.written}
			w := newWorldOn(t, "", st)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			w.executor(t, ctx, "edge-1")
			runs, id := approvedSideEffect(t, w, ctx)
			waitRun(t, runs, id, state(tollgatev1.RunState_RUN_STATE_COMPLETE))
			if !st.fired.Load() {
				t.Fatal("the store never lost the result's commit: the test tested nothing")
			}
			if n := w.tools.Count("notes.store"); n != 1 {
				t.Fatalf("the effect ran %d times, want 1", n)
			}
			audit := tollgatev1.NewAuditServiceClient(w.conn(t, "alice"))
			j, err := audit.ListJournal(ctx, &tollgatev1.ListJournalRequest{RunId: id})
			if err != nil {
				t.Fatal(err)
			}
			for _, kind := range []string{string(engine.JournalStepStarted), string(engine.JournalStepSucceeded)} {
				n := 0
				for _, r := range j.GetRecords() {
					if r.GetKind() == kind && strings.Contains(r.GetPayloadJson(), `"w"`) {
						n++
					}
				}
				if n != 1 {
					t.Fatalf("the journal has %d %s of w, want 1", n, kind)
				}
			}
			inv, err := audit.CheckInvariants(ctx, &tollgatev1.CheckInvariantsRequest{RunId: id})
			if err != nil || len(inv.GetViolations()) != 0 {
				t.Fatalf("audit: %v %v", inv.GetViolations(), err)
			}
			if v, err := audit.VerifyJournal(ctx, &tollgatev1.VerifyJournalRequest{RunId: id}); err != nil || !v.GetOk() {
				t.Fatalf("verify journal: %v %v", v, err)
			}
		})
	}
}
