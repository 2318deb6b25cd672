package e2e

import (
	"context"
	"testing"

	tollgatev1 "github.com/tollgate-dev/tollgate/gen/tollgate/v1"
	"github.com/tollgate-dev/tollgate/pkg/engine"
)

// A read-only step's lease is recorded (I8) before its result, in the same
// commit when the result follows at once, and on its own when the step
// runs longer: a watcher sees it leased while the tool still runs.
func TestReadOnlyLeaseIsRecorded(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "  test:\n    - {name: sleep, annotations: {readOnlyHint: true}}\n")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w.executor(t, ctx, "edge-1")
	runs := tollgatev1.NewRunServiceClient(w.conn(t, "alice"))
	audit := tollgatev1.NewAuditServiceClient(w.conn(t, "alice"))
	kinds := func(id string) []string {
		resp, err := audit.ListJournal(ctx, &tollgatev1.ListJournalRequest{RunId: id})
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, r := range resp.GetRecords() {
			out = append(out, r.GetKind())
		}
		return out
	}
	before := func(ks []string, a, b string) bool {
		ia, ib := -1, -1
		for i, k := range ks {
			if k == a && ia < 0 {
				ia = i
			}
			if k == b && ib < 0 {
				ib = i
			}
		}
		return ia >= 0 && ib > ia
	}

	// Quick: the lease and the result.
	resp, err := runs.StartRun(ctx, &tollgatev1.StartRunRequest{Source: &tollgatev1.StartRunRequest_Recipe{Recipe: "a: notes.search {\"q\": \"x\"}\n"}})
	if err != nil {
		t.Fatal(err)
	}
	id := resp.GetRun().GetId()
	r := waitRun(t, runs, id, state(tollgatev1.RunState_RUN_STATE_COMPLETE))
	if a := r.GetSteps()[0].GetAttempts()[0]; a.GetLeasedAt() == nil || a.GetExecutor() != "edge-1" || a.GetLeasedAt().AsTime().After(a.GetFinishedAt().AsTime()) {
		t.Fatalf("attempt: %v", a)
	}
	if ks := kinds(id); !before(ks, string(engine.JournalStepLeased), string(engine.JournalStepSucceeded)) {
		t.Fatalf("journal %v: want step.leased before step.succeeded", ks)
	}

	// Slow: leased while it runs, then cancelled.
	resp, err = runs.StartRun(ctx, &tollgatev1.StartRunRequest{Source: &tollgatev1.StartRunRequest_Recipe{Recipe: "a: test.sleep {\"ms\": 600000}\n"}})
	if err != nil {
		t.Fatal(err)
	}
	id = resp.GetRun().GetId()
	waitRun(t, runs, id, func(r *tollgatev1.Run) bool {
		return len(r.GetSteps()) == 1 && r.GetSteps()[0].GetState() == tollgatev1.StepStatus_STEP_STATUS_LEASED
	})
	if ks := kinds(id); !before(ks, string(engine.JournalRunStarted), string(engine.JournalStepLeased)) {
		t.Fatalf("journal %v: want step.leased", ks)
	}
	if _, err := runs.CancelRun(ctx, &tollgatev1.CancelRunRequest{RunId: id, Reason: "done looking"}); err != nil {
		t.Fatal(err)
	}
	waitRun(t, runs, id, state(tollgatev1.RunState_RUN_STATE_CANCELLED))
}
