package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	tollgatev1 "github.com/tollgate-dev/tollgate/gen/tollgate/v1"
	"github.com/tollgate-dev/tollgate/internal/identity"
)

// api is user's connection to the cluster's control plane, built with
// gRPC's default options, as any other service's client would be: the
// one message limit is gRPC's default, so such a client agrees with it.
func (c *cluster) api(user string) *grpc.ClientConn {
	c.t.Helper()
	tok, err := os.ReadFile(filepath.Join(c.home, "dev", "tokens", user+".jwt"))
	if err != nil {
		c.t.Fatal(err)
	}
	conn, err := grpc.NewClient(c.plane.addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithPerRPCCredentials(identity.PerRPCCredentials{Token: strings.TrimSpace(string(tok)), Insecure: true}))
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(func() { conn.Close() })
	return conn
}

// connections counts the plane's "executor connected" log lines: how
// many streams executors opened.
func (c *cluster) connections() int {
	return strings.Count(c.plane.stderr.String(), "msg=\"executor connected\"")
}

// waitParkedOn waits until run id has its ask pending.
func (c *cluster) waitParkedOn(id, ask string) {
	c.t.Helper()
	c.until(id, "parked on "+ask, func(r runOut) bool {
		for _, a := range r.Asks {
			if strings.HasSuffix(a.AskID, "/"+ask) && a.State == "pending" {
				return true
			}
		}
		return false
	})
}

func stepState(r runOut, id string) string { s, _, _ := stepOf(r, id); return s }

// TestItem9_OversizedValueFailsOneStepNotTheSharedExecutor: two runs share
// one executor. One gets a 3.9 MB answer (refused with InvalidArgument
// naming the field and the limit) and an allowed answer that its step
// references four times (the step fails at resolution, naming the limit);
// the executor's stream is never torn down (one connection all along),
// and the other run's step completes.
func TestItem9_OversizedValueFailsOneStepNotTheSharedExecutor(t *testing.T) {
	t.Parallel()
	c := newCluster(t, "edge-1")
	approvals := tollgatev1.NewApprovalServiceClient(c.api("alice"))
	ctx := context.Background()
	for deadline := time.Now().Add(30 * time.Second); c.connections() == 0; <-time.After(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the executor never connected\n%s", c.plane.stderr)
		}
	}

	// A 3.9 MB answer: refused where it enters.
	huge := c.start("ask me (text) as note:\n  what should fail say?\nf: test.fail {\"message\": \"{note}\"}\n")
	c.waitParkedOn(huge, "note")
	_, err := approvals.Answer(ctx, &tollgatev1.AnswerRequest{AskId: huge + "/note", Text: strings.Repeat("x", 3_900_000)})
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(status.Convert(err).Message(), "text: 3900000 bytes") ||
		!strings.Contains(status.Convert(err).Message(), "1048576") {
		t.Fatalf("a 3.9 MB answer: want InvalidArgument naming text and the limit, got %v", err)
	}
	// The ask still reads (asks show) and still waits for an answer.
	if r := c.plane.ctl(t, "", "--as", "alice", "asks", "show", huge+"/note", "-o", "json"); r.code != 0 {
		t.Fatalf("asks show after a refused huge answer: exit %d: %s", r.code, r.stderr)
	}

	// An allowed answer, four times in one step's args: 4 MiB after
	// resolution, more than a value may be. The step fails before it is
	// leased, and says why.
	quad := c.start("ask me (text) as note:\n  what should fail say?\nf: test.fail {\"message\": \"{note}{note}{note}{note}\"}\n")
	c.waitParkedOn(quad, "note")
	if _, err := approvals.Answer(ctx, &tollgatev1.AnswerRequest{AskId: quad + "/note", Text: strings.Repeat("y", 1_000_000)}); err != nil {
		t.Fatalf("a 1 MB answer is allowed: %v", err)
	}
	// Another run's unrelated step, on the same executor.
	other := c.start("s: test.sleep {\"ms\": 1}\n")
	done := c.until(quad, "failed", func(r runOut) bool { return r.State == "failed" })
	if st := stepState(done, "f"); st != "failed" {
		t.Fatalf("f is %s, want failed", st)
	}
	got, err := tollgatev1.NewRunServiceClient(c.api("alice")).GetRun(ctx, &tollgatev1.GetRunRequest{RunId: quad})
	if err != nil {
		t.Fatal(err)
	}
	if why := got.GetRun().GetStateReason(); !strings.Contains(why, "f's args with their references resolved: 4000014 bytes") || !strings.Contains(why, "1048576") {
		t.Fatalf("the run's reason should give the resolved size and the limit: %q", why)
	}
	c.until(other, "complete", func(r runOut) bool { return r.State == "complete" })
	if n := c.connections(); n != 1 {
		t.Fatalf("the executor connected %d times; its stream must never be torn down by one run's values\n%s", n, c.plane.stderr)
	}
	if strings.Contains(c.plane.stderr.String(), "ResourceExhausted") {
		t.Fatalf("the plane logged ResourceExhausted:\n%s", c.plane.stderr)
	}
	if r := c.plane.ctl(t, "", "--as", "alice", "audit"); r.code != 0 {
		t.Fatalf("audit: exit %d: %s%s", r.code, r.stdout, r.stderr)
	}
}

// TestItem9_RunsShowAndAsksShowWithBigAllowedValues: five steps each
// report a 1 MB error (a value as large as allowed); the run, whose
// values add up to more than a message, still reads through approvectl
// runs show (the longest values cut, with a marker) and through a client
// with gRPC's default limits; the answer reads whole in asks show.
func TestItem9_RunsShowAndAsksShowWithBigAllowedValues(t *testing.T) {
	t.Parallel()
	// Megabyte leases take a while under -race on a busy machine: a
	// longer lease than the cluster's 1 s keeps this test about sizes.
	c := newClusterWith(t, []string{"--lease-ttl", "10s"}, "edge-1")
	id := c.start(`ask me (text) as note:
  what should fail say?
together fails:
  f1: test.fail {"message": "{note}"}
  f2: test.fail {"message": "{note}"}
  f3: test.fail {"message": "{note}"}
  f4: test.fail {"message": "{note}"}
  f5: test.fail {"message": "{note}"}
`)
	c.waitParkedOn(id, "note")
	// A 1 MB reply, typed into approvectl answer (longer than one
	// argument may be).
	answer := strings.Repeat("z", 1_000_000)
	if r := c.plane.ctl(t, answer+"\n", "--as", "alice", "answer", id+"/note"); r.code != 0 || !strings.Contains(r.stdout, "Answer received") {
		t.Fatalf("approvectl answer: exit %d: %s%s", r.code, r.stdout, r.stderr)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		r := c.plane.ctl(t, "", "--as", "alice", "runs", "show", id, "-o", "json")
		if r.code != 0 {
			t.Fatalf("runs show: exit %d: %s\nplane: %s", r.code, r.stderr, tail(c.plane.stderr.String(), 6000))
		}
		var out runOut
		r.json(t, &out)
		if out.State == "failed" || out.State == "partial" {
			for _, s := range []string{"f1", "f2", "f3", "f4", "f5"} {
				if st := stepState(out, s); st != "failed" {
					t.Fatalf("%s is %s, want failed", s, st)
				}
			}
			if !strings.Contains(r.stdout, "bytes)") {
				t.Fatalf("runs show: the cut values should carry the marker")
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the run never finished: %+v", out)
		}
		<-time.After(50 * time.Millisecond)
	}
	resp, err := tollgatev1.NewRunServiceClient(c.api("alice")).GetRun(context.Background(), &tollgatev1.GetRunRequest{RunId: id})
	if err != nil {
		t.Fatalf("GetRun with gRPC's default client limits: %v", err)
	}
	if n := len(resp.GetRun().GetSteps()); n < 5 {
		t.Fatalf("GetRun carries %d steps", n)
	}
	r := c.plane.ctl(t, "", "--as", "alice", "asks", "show", id+"/note", "-o", "json")
	if r.code != 0 {
		t.Fatalf("asks show: exit %d: %s", r.code, r.stderr)
	}
	if !strings.Contains(r.stdout, answer) {
		t.Fatalf("asks show should carry the whole 1 MB answer")
	}
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}
