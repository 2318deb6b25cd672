package e2e

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Issue 15, item 1: runnable steps live in the store. Three replicas on
// one Redis; edge-1 is connected to A and edge-2 to B; C has no executor.
// Runs are started round-robin through A, B and C, their gates approved
// through another replica than the one that started them, and followed
// through a third: every run completes, every side effect ran exactly
// once, no in-doubt ask opened, and the audit is clean. (Before, a run
// started through a replica with no executor stayed blocked, and so did a
// governed step approved through one.) TOLLGATE_E2E_SHARED_RUNS sets the
// number of runs (default 18; the closing note reports 200).
func TestRunsSharedByThreeReplicas(t *testing.T) {
	t.Parallel()
	n := 18
	if v, err := strconv.Atoi(os.Getenv("TOLLGATE_E2E_SHARED_RUNS")); err == nil && v > 0 {
		n = v
	}
	c := newClusterSpec(t, clusterSpec{start: []string{"edge-1"}, later: []string{"edge-2"}})
	a := c.plane
	b, cc := c.startReplica(), c.startReplica()
	c.startExecutorOn("edge-2", os.Stderr, b)
	planes := []*plane{a, b, cc}
	ids := make([]string, n)
	for i := range n {
		recipe := fmt.Sprintf("together f:\n  x: test.sleep {\"ms\": 5}\n  y: test.sleep {\"ms\": 5}\nm: test.mark {\"name\": \"eff-%d\"} without asking\n", i)
		if i%2 == 1 {
			recipe = fmt.Sprintf("together f:\n  x: test.sleep {\"ms\": 5}\n  y: test.sleep {\"ms\": 5}\nask member:\n  mark it?\nm: test.mark {\"name\": \"eff-%d\"}\n", i)
		}
		c.plane = planes[i%3]
		ids[i] = c.start(recipe)
	}
	for i, id := range ids {
		c.plane = planes[(i+2)%3] // followed through a third replica
		if i%2 == 1 {
			c.until(id, "parked", func(r runOut) bool { return r.State == "parked" })
			if res := planes[(i+1)%3].ctl(t, "", "--as", "bob", "approve", id+"/ask_1"); res.code != 0 {
				t.Fatalf("bob approves %s through another replica: %d\n%s%s", id, res.code, res.stdout, res.stderr)
			}
		}
	}
	ran := map[string]int{}
	for i, id := range ids {
		c.plane = planes[(i+2)%3]
		r := c.until(id, "complete", func(r runOut) bool { return r.State == "complete" || r.State == "failed" || r.State == "cancelled" })
		if r.State != "complete" {
			t.Fatalf("run %d (%s) ended %s: %+v", i, id, r.State, r)
		}
		for _, a := range r.Asks {
			if strings.Contains(a.AskID, "doubt") {
				t.Fatalf("run %s opened an in-doubt ask: %+v", id, r.Asks)
			}
		}
		for _, s := range r.Steps {
			ran[s.Executor]++
		}
		if m := c.mark(fmt.Sprintf("eff-%d", i)); m != 1 {
			t.Fatalf("run %d's side effect ran %d times", i, m)
		}
	}
	if ran["edge-1"] == 0 || ran["edge-2"] == 0 {
		t.Fatalf("steps ran on %v: want both executors used", ran)
	}
	t.Logf("%d runs through 3 replicas; steps by executor: %v", n, ran)
	auditClean(t, cc, "audrey", ids...)
}

// Issue 15, items 1 and 4: `run --wait` through replica C, whose steps
// run on A's executor, ends when the run ends; and a run cancelled through
// B stops its step on A's executor.
func TestWaitAndCancelThroughOtherReplicas(t *testing.T) {
	t.Parallel()
	c := newClusterSpec(t, clusterSpec{later: []string{"edge-1"}})
	a := c.plane
	log := &logBuffer{}
	c.startExecutorOn("edge-1", log, a)
	b, cc := c.startReplica(), c.startReplica()

	var r runOut
	res := cc.ctl(t, "", "--as", "alice", "run", writeRecipe(t, "s: test.sleep {\"ms\": 200}\n"), "--wait", "-o", "json")
	if res.code != 0 {
		t.Fatalf("run --wait through C: %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	res.json(t, &r)
	if st, ex, _ := stepOf(r, "s"); r.State != "complete" || st != "succeeded" || ex != "edge-1" {
		t.Fatalf("run --wait through C returned %s, step s %s on %q: want complete, succeeded on edge-1", r.State, st, ex)
	}

	c.plane = a
	id := c.start("s: test.sleep {\"ms\": 60000}\n")
	c.until(id, "leased", func(r runOut) bool { st, _, _ := stepOf(r, "s"); return st == "leased" || st == "started" })
	if res := b.ctl(t, "", "--as", "alice", "runs", "cancel", id); res.code != 0 {
		t.Fatalf("cancel through B: %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(log.String(), "lease cancelled by the control plane") {
		if time.Now().After(deadline) {
			t.Fatalf("edge-1 was never told to stop the step of the run cancelled through B; its log:\n%s", log.String())
		}
		<-time.After(50 * time.Millisecond)
	}
	c.until(id, "cancelled", func(r runOut) bool { return r.State == "cancelled" })
	auditClean(t, cc, "audrey", r.RunID, id)
}

// Issue 15, item 3: an executor survives its replica. edge-1 is
// configured with replicas A then B and runs a side effect A leased, plus
// more read-only steps than its capacity (some wait at A for a credit). A
// is killed (kill -9). edge-1 reconnects to B and re-attaches its running
// leases with their fences; their results are recorded through B; the
// steps A had claimed but not leased are claimed by B once A's heartbeat
// lapses. Every run completes on its first attempt, the side effect ran
// once, no in-doubt ask opened, and the audit is clean. (Before, the
// broken stream cancelled the executor's work and B reported the started
// side effect lost: in doubt.)
func TestExecutorReattachesItsLeasesToASurvivor(t *testing.T) {
	t.Parallel()
	c := newClusterSpec(t, clusterSpec{later: []string{"edge-1"}})
	a := c.plane
	b := c.startReplica()
	log := &logBuffer{}
	c.startExecutorOn("edge-1", log, a, b)
	id := c.start("m: test.mark {\"name\": \"effect\", \"hold_ms\": 25000} without asking\n")
	c.until(id, "started", func(r runOut) bool { st, _, _ := stepOf(r, "m"); return st == "started" })
	c.waitMark("effect", 1)
	var naps []string
	for range 10 { // capacity 8: one is the mark, so three wait at A
		naps = append(naps, c.start("s: test.sleep {\"ms\": 8000}\n"))
	}
	c.until(naps[6], "leased", func(r runOut) bool { st, _, _ := stepOf(r, "s"); return st == "leased" || st == "started" })
	if r := c.until(id, "still started", func(runOut) bool { return true }); r.State != "running" {
		t.Fatalf("the side effect ended before A was killed (%s): the test did not exercise a re-attach", r.State)
	}
	if err := a.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-a.done
	c.plane = b
	r := c.until(id, "complete", func(r runOut) bool { return r.State != "running" })
	if st, ex, attempts := stepOf(r, "m"); r.State != "complete" || st != "succeeded" || attempts != 1 || ex != "edge-1" {
		t.Fatalf("run %s, step m %s on %q after %d attempts: want complete, succeeded on edge-1 after 1 (re-attached through B)\nedge-1:\n%s", r.State, st, ex, attempts, log.String())
	}
	for _, a := range r.Asks {
		if strings.Contains(a.AskID, "doubt") {
			t.Fatalf("an in-doubt ask opened: %+v", r.Asks)
		}
	}
	for _, nid := range naps {
		r := c.until(nid, "complete", func(r runOut) bool { return r.State != "running" })
		if st, _, attempts := stepOf(r, "s"); r.State != "complete" || st != "succeeded" || attempts != 1 {
			t.Fatalf("nap %s: run %s, step %s after %d attempts: want complete after 1", nid, r.State, st, attempts)
		}
	}
	if n := c.mark("effect"); n != 1 {
		t.Fatalf("the side effect ran %d times", n)
	}
	if !strings.Contains(log.String(), "held_leases=") {
		t.Fatalf("edge-1 never re-attached: %s", log.String())
	}
	auditClean(t, b, "audrey", append(naps, id)...)
}
