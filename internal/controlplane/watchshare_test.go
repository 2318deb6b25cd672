package controlplane

import (
	"context"
	"runtime"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	tollgatev1 "github.com/tollgate-dev/tollgate/gen/tollgate/v1"
	"github.com/tollgate-dev/tollgate/internal/identity"
	"github.com/tollgate-dev/tollgate/internal/store/memstore"
	"github.com/tollgate-dev/tollgate/pkg/engine"
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
	_, cancelBob, err := watch("bob")
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

// fakeWatch is a WatchRun stream that encodes each event as gRPC would
// (proto.Marshal) and keeps nothing.
type fakeWatch struct {
	grpc.ServerStream
	ctx  context.Context
	sent int
}

func (f *fakeWatch) Context() context.Context { return f.ctx }
func (f *fakeWatch) Send(r *tollgatev1.WatchRunResponse) error {
	b, err := proto.Marshal(r)
	f.sent += len(b)
	return err
}

// BenchmarkWatchRunPerWatcher is one watcher's snapshot of a run holding a
// 1 MiB answer: B/op is what each watcher allocates (its share of the
// event, and its encoding), the figure 500 watchers multiply.
func BenchmarkWatchRunPerWatcher(b *testing.B) {
	r := NewRunner(RunnerConfig{Store: memstore.New(memstore.Config{})})
	svc := NewServices(ServiceConfig{Runner: r})
	ctx := context.Background()
	run, _, err := r.Start(ctx, StartRequest{Plan: widePlan(1, "big"), Requester: "alice"})
	if err != nil {
		b.Fatal(err)
	}
	big := []byte(`"` + strings.Repeat("x", 1<<20) + `"`)
	if _, err := r.Events(ctx, run.ID,
		func(now time.Time) engine.Event {
			return engine.StepLeased{Step: "s00000", Attempt: 1, Executor: "x", LeaseID: "l", At: now}
		},
		func(now time.Time) engine.Event { return engine.StepStarted{Step: "s00000", Attempt: 1, At: now} },
		func(now time.Time) engine.Event {
			return engine.StepSucceeded{Step: "s00000", Attempt: 1, Output: big, At: now}
		}); err != nil {
		b.Fatal(err)
	}
	wctx := identity.WithPrincipal(ctx, identity.Principal{Subject: "alice", Kind: identity.KindPerson})
	b.ReportAllocs()
	for b.Loop() {
		f := &fakeWatch{ctx: wctx}
		if err := svc.WatchRun(&tollgatev1.WatchRunRequest{RunId: run.ID}, f); err != nil {
			b.Fatal(err)
		}
		if f.sent < 1<<20 {
			b.Fatalf("sent %d bytes", f.sent)
		}
	}
}
