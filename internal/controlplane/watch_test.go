package controlplane

import (
	"context"
	"testing"

	tollgatev1 "github.com/tollgate-dev/tollgate/gen/tollgate/v1"
)

// WatchRun resumes after the cursor it was given: a watcher that saw a
// version is sent nothing until the run moves past it, so a client that
// re-watches after each event (client/gates Wait) blocks instead of spinning
// on snapshots of a run that did not change.
func TestWatchRunResumesAfterItsCursor(t *testing.T) {
	e := newEnv(t, nil, echoTools())
	r := e.start("alice", "graph-ask-demo")
	if r.GetState() != tollgatev1.RunState_RUN_STATE_PARKED {
		t.Fatalf("%v", r.GetState())
	}
	ctx, cancel := context.WithCancel(bg)
	defer cancel()
	first, err := e.runs("alice").WatchRun(ctx, &tollgatev1.WatchRunRequest{RunId: r.GetId()})
	if err != nil {
		t.Fatal(err)
	}
	snap, err := first.Recv()
	if err != nil || snap.GetEvent().GetCursor() == "" || snap.GetEvent().GetKind() != tollgatev1.RunEventKind_RUN_EVENT_KIND_SNAPSHOT {
		t.Fatalf("the snapshot carries a cursor: %v %v", snap, err)
	}
	resumed, err := e.runs("alice").WatchRun(ctx, &tollgatev1.WatchRunRequest{RunId: r.GetId(), Cursor: snap.GetEvent().GetCursor()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.runs("alice").CancelRun(bg, &tollgatev1.CancelRunRequest{RunId: r.GetId(), Reason: "done watching"}); err != nil {
		t.Fatal(err)
	}
	next, err := resumed.Recv()
	if err != nil || next.GetEvent().GetRunState() != tollgatev1.RunState_RUN_STATE_CANCELLED || next.GetEvent().GetRunVersion() <= snap.GetEvent().GetRunVersion() {
		t.Fatalf("the first event after the cursor is the change, not the version already seen: %v %v", next, err)
	}
}
