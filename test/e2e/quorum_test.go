package e2e

import (
	"syscall"
	"testing"
)

// askState is the state of ask id in r ("" when r has none).
func askState(r runOut, id string) string {
	for _, a := range r.Asks {
		if a.AskID == id {
			return a.State
		}
	}
	return ""
}

// The policy's quorum is enforced over real processes: test.mark needs
// two distinct people (p2 quorum 2) and the recipe asks for none. Bob's
// approval alone runs nothing; with carol's it runs; the executor is
// killed mid-call; the in-doubt retry inherits the quorum — bob's retry
// alone does not run it again, carol's does — and the audit agrees.
func TestPolicyQuorumIsEnforcedForInDoubtRetry(t *testing.T) {
	t.Parallel()
	c := newClusterSpec(t, clusterSpec{markFloor: "p2, acme, test.mark, 2, requester, -\n", start: []string{"edge-1", "edge-2"}})
	id := c.start("ask member:\n  mark it?\nm: test.mark {\"name\": \"effect\", \"hold_ms\": 20000}\n")
	c.until(id, "parked", func(r runOut) bool { return r.State == "parked" })
	if res := c.plane.ctl(t, "", "--as", "bob", "approve", id+"/ask_1"); res.code != 0 {
		t.Fatalf("bob approves: %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	r := c.until(id, "read", func(runOut) bool { return true })
	if st, _, _ := stepOf(r, "m"); askState(r, id+"/ask_1") != "pending" || st == "queued" || st == "started" {
		t.Fatalf("policy quorum 2: bob's approval alone released test.mark: ask %s, step %q", askState(r, id+"/ask_1"), st)
	}
	if res := c.plane.ctl(t, "", "--as", "carol", "approve", id+"/ask_1"); res.code != 0 {
		t.Fatalf("carol approves: %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	r = c.until(id, "started", func(r runOut) bool { st, _, _ := stepOf(r, "m"); return st == "started" })
	c.waitMark("effect", 1)
	_, killed, _ := stepOf(r, "m")
	syscall.Kill(-c.execs[killed].Process.Pid, syscall.SIGKILL)
	c.until(id, "parked in doubt", func(r runOut) bool { st, _, _ := stepOf(r, "m"); return r.State == "parked" && st == "in_doubt" })
	doubt := id + "/doubt_m_1"
	if res := c.plane.ctl(t, "", "--as", "bob", "answer", doubt, "retry"); res.code != 0 {
		t.Fatalf("bob retries: %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	r = c.until(id, "read", func(runOut) bool { return true })
	if st, _, attempts := stepOf(r, "m"); askState(r, doubt) != "pending" || st != "in_doubt" || attempts != 1 {
		t.Fatalf("policy quorum 2: bob's retry alone ran the effect again: ask %s, step %q, attempts %d", askState(r, doubt), st, attempts)
	}
	if res := c.plane.ctl(t, "", "--as", "carol", "answer", doubt, "retry"); res.code != 0 {
		t.Fatalf("carol retries: %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	c.until(id, "started again", func(r runOut) bool { st, _, attempts := stepOf(r, "m"); return st == "started" && attempts == 2 })
	c.waitMark("effect", 2)
	if res := c.plane.ctl(t, "", "--as", "alice", "runs", "cancel", id); res.code != 0 {
		t.Fatalf("%s %s", res.stdout, res.stderr)
	}
	c.until(id, "cancelled", func(r runOut) bool { return r.State == "cancelled" })
	auditClean(t, c.plane, "alice", id)
}
