package e2e

import (
	"os"
	"strings"
	"syscall"
	"testing"
)

// Issue 15, item 2: leases belong to live replicas. Replica B starts on
// the same Redis while edge-1 runs a side effect that replica A leased:
// B's start-up recovery leaves A's live lease alone, so the step is not
// reported lost, no in-doubt ask opens, the result A receives is recorded,
// and the side effect ran once. (Before, B reported the live lease lost:
// the step went in doubt and the real result was refused.)
func TestReplicaStartedDuringASideEffectLeavesItsLeaseAlone(t *testing.T) {
	t.Parallel()
	c := newCluster(t, "edge-1")
	id := c.start("m: test.mark {\"name\": \"effect\", \"hold_ms\": 4000} without asking\n")
	c.until(id, "started", func(r runOut) bool { st, _, _ := stepOf(r, "m"); return st == "started" })
	c.waitMark("effect", 1)

	b := c.startReplica() // its Recover runs before it serves

	r := c.until(id, "complete", func(r runOut) bool { return r.State == "complete" || r.State == "parked" })
	if st, _, attempts := stepOf(r, "m"); r.State != "complete" || st != "succeeded" || attempts != 1 {
		t.Fatalf("run %s, step m %s after %d attempts: want complete, succeeded, 1 (B took A's live lease for lost?)", r.State, st, attempts)
	}
	for _, a := range r.Asks {
		if strings.Contains(a.AskID, "doubt") {
			t.Fatalf("an in-doubt ask opened: %+v", r.Asks)
		}
	}
	if n := c.mark("effect"); n != 1 {
		t.Fatalf("the side effect ran %d times", n)
	}
	auditClean(t, c.plane, "alice", id)
	auditClean(t, b, "audrey", id) // the record reads the same through B
}

// Issue 15, item 2: a replica that dies loses its leases to a live one,
// once its heartbeat lapses. Replica B starts while A's executor runs a
// side effect (B leaves the lease alone); then A is killed (kill -9: no
// drain, no goodbye) and its executor with it. B's takeover pass finds
// A's heartbeat lapsed and reports the lease lost: the started side
// effect goes in doubt, a question for a person, not a blind retry (I7).
func TestReplicaTakesOverTheLeasesOfADeadOne(t *testing.T) {
	t.Parallel()
	c := newCluster(t, "edge-1")
	id := c.start("m: test.mark {\"name\": \"effect\", \"hold_ms\": 20000} without asking\n")
	c.until(id, "started", func(r runOut) bool { st, _, _ := stepOf(r, "m"); return st == "started" })
	c.waitMark("effect", 1)
	b := c.startReplica()
	if err := c.plane.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-c.plane.done
	syscall.Kill(-c.execs["edge-1"].Process.Pid, syscall.SIGKILL)
	c.plane = b // read through the survivor from now on
	r := c.until(id, "parked in doubt", func(r runOut) bool { return r.State == "parked" })
	if st, _, attempts := stepOf(r, "m"); st != "in_doubt" || attempts != 1 {
		t.Fatalf("step m %s after %d attempts: want in doubt after 1", st, attempts)
	}
	if n := c.mark("effect"); n != 1 {
		t.Fatalf("the side effect ran %d times", n)
	}
	auditClean(t, b, "alice", id)
}

// Issue 15, item 3 (in part): an executor given several replicas' addresses
// turns to another when its replica dies. edge-1 is configured with A then
// B; A is killed; a run started through B is leased to edge-1, now
// connected to B, and completes.
func TestExecutorTurnsToAnotherReplica(t *testing.T) {
	t.Parallel()
	c := newClusterSpec(t, clusterSpec{later: []string{"edge-1"}})
	b := c.startReplica()
	c.startExecutorOn("edge-1", os.Stderr, c.plane, b)
	first := c.start("r: test.sleep {\"ms\": 1}\n")
	c.until(first, "complete", func(r runOut) bool { return r.State == "complete" })
	if err := c.plane.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-c.plane.done
	c.plane = b
	id := c.start("r: test.sleep {\"ms\": 1}\n")
	r := c.until(id, "complete", func(r runOut) bool { return r.State == "complete" })
	if _, ex, _ := stepOf(r, "r"); ex != "edge-1" {
		t.Fatalf("step r ran on %q, want edge-1 through replica B", ex)
	}
	auditClean(t, b, "alice", id)
}
