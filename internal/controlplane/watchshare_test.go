package controlplane

import (
	"context"
	"runtime"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	tollgatev1 "github.com/tollgate-dev/tollgate/gen/tollgate/v1"
)

// Item 13: one caller cannot hold the plane's memory with watch streams.
// Beyond its limit a watch is refused with RESOURCE_EXHAUSTED; another
// caller's watch is not; a closed stream gives its slot back.
func TestItem13_WatchesPerCallerAreBounded(t *testing.T) {
	const limit = 3
	e := newEnvOn(t, nil, devPolicy(t), nil, func(c *Config) { c.MaxWatchesPerCaller = limit })
	resp, err := e.runs("alice").StartRun(bg, &tollgatev1.StartRunRequest{Source: &tollgatev1.StartRunRequest_Recipe{Recipe: "r: notes.search {}\n"}})
	if err != nil {
		t.Fatal(err)
	}
	id := resp.GetRun().GetId()
	watch := func(user string) (tollgatev1.RunService_WatchRunClient, context.CancelFunc, error) {
		ctx, cancel := context.WithCancel(bg)
		w, err := e.runs(user).WatchRun(ctx, &tollgatev1.WatchRunRequest{RunId: id})
		if err == nil {
			_, err = w.Recv() // the snapshot, or the refusal
		}
		if err != nil {
			cancel()
		}
		return w, cancel, err
	}
	var cancels []context.CancelFunc
	for i := range limit {
		_, cancel, err := watch("alice")
		if err != nil {
			t.Fatalf("watch %d of %d: %v", i+1, limit, err)
		}
		cancels = append(cancels, cancel)
	}
	if _, _, err := watch("alice"); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("watch %d by one caller (limit %d): %v, want ResourceExhausted", limit+1, limit, err)
	}
	_, cancelBob, err := watch("audrey") // the auditor: she may see the run
	if err != nil {
		t.Fatalf("another caller's watch: %v", err)
	}
	defer cancelBob()
	if got := e.srv.Watches(); got.Active != limit+1 || got.Refused != 1 {
		t.Fatalf("watch stats %+v, want %d active and 1 refused", got, limit+1)
	}
	// Closing one gives its slot back once the handler has returned.
	cancels[0]()
	for e.srv.Watches().Active > limit {
		runtime.Gosched()
	}
	_, cancel, err := watch("alice")
	if err != nil {
		t.Fatalf("watch after closing one: %v", err)
	}
	cancel()
	for _, c := range cancels[1:] {
		c()
	}
}
