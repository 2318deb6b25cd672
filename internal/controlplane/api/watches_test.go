package api_test

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/encoding/gzip"
	"google.golang.org/protobuf/proto"

	tollgatev1 "github.com/tollgate-dev/tollgate/gen/tollgate/v1"
	"github.com/tollgate-dev/tollgate/internal/controlplane/api"
	"github.com/tollgate-dev/tollgate/internal/controlplane/api/runsvc"
	"github.com/tollgate-dev/tollgate/internal/controlplane/approvals"
	"github.com/tollgate-dev/tollgate/internal/controlplane/runner"
	"github.com/tollgate-dev/tollgate/internal/identity"
	"github.com/tollgate-dev/tollgate/internal/store/memstore"
	"github.com/tollgate-dev/tollgate/internal/wire"
	"github.com/tollgate-dev/tollgate/pkg/engine"
	"github.com/tollgate-dev/tollgate/pkg/limits"
	"github.com/tollgate-dev/tollgate/pkg/plan"
)

// runService is a RunService over r with no policy: alice, the
// requester, sees her runs.
func runService(r *runner.Runner) (*runsvc.Service, *api.Watches) {
	views := wire.NewViews(0)
	watches := api.NewWatches(0, views)
	desk := approvals.New(approvals.Config{})
	return runsvc.New(runsvc.Config{Runner: r, Readers: api.Readers{Runner: r, Desk: desk}, Views: views, Watches: watches, Approvals: desk}), watches
}

// widePlan is a plan of n independent read-only steps.
func widePlan(n int, name string) *plan.Plan {
	p := &plan.Plan{Name: name}
	for i := range n {
		p.InitialSteps = append(p.InitialSteps, plan.Step{ID: fmt.Sprintf("s%05d", i), Kind: plan.KindTool,
			Server: "nowhere", Tool: "read", Args: plan.Object(`{}`), OnFail: plan.OnFailStop})
	}
	return p
}

// fakeWatch is a WatchRun stream that encodes each event as gRPC would
// (proto.Marshal) and keeps nothing.
type fakeWatch struct {
	grpc.ServerStream
	ctx  context.Context
	sent int
}

func (f *fakeWatch) Context() context.Context                  { return f.ctx }
func (f *fakeWatch) Send(r *tollgatev1.WatchRunResponse) error { return f.SendMsg(r) }
func (f *fakeWatch) SendMsg(m any) error {
	b, err := proto.Marshal(m.(proto.Message))
	f.sent += len(b)
	return err
}

// bigRun is a finished run whose one step answered 1 MiB.
func bigRun(tb testing.TB, r *runner.Runner) *engine.Run {
	ctx := context.Background()
	run, _, err := r.Start(ctx, runner.StartRequest{Plan: widePlan(1, "big"), Requester: "alice"})
	if err != nil {
		tb.Fatal(err)
	}
	big := []byte(`"` + strings.Repeat("x", bigOutput) + `"`)
	tr, err := r.Events(ctx, run.ID,
		func(now time.Time) engine.Event {
			return engine.StepLeased{Step: "s00000", Attempt: 1, Executor: "x", LeaseID: "l", At: now}
		},
		func(now time.Time) engine.Event { return engine.StepStarted{Step: "s00000", Attempt: 1, At: now} },
		func(now time.Time) engine.Event {
			return engine.StepSucceeded{Step: "s00000", Attempt: 1, Output: big, At: now}
		})
	if err != nil {
		tb.Fatal(err)
	}
	return tr.Run
}

// BenchmarkWatchRunPerWatcher is one watcher's snapshot of a run holding a
// 1 MiB answer, through the handler alone on a stream that encodes what
// it is sent (as a compressed gRPC stream does): B/op is what the
// handler allocates per watcher.
func BenchmarkWatchRunPerWatcher(b *testing.B) {
	r := runner.New(runner.Config{Store: memstore.New(memstore.Config{})})
	svc, _ := runService(r)
	run := bigRun(b, r)
	wctx := identity.WithPrincipal(context.Background(), identity.Principal{Subject: "alice", Kind: identity.KindPerson})
	b.ReportAllocs()
	for b.Loop() {
		f := &fakeWatch{ctx: wctx}
		if err := svc.WatchRun(&tollgatev1.WatchRunRequest{RunId: run.ID}, f); err != nil {
			b.Fatal(err)
		}
		if f.sent < bigOutput {
			b.Fatalf("sent %d bytes", f.sent)
		}
	}
}

// authedAs makes every stream alice's (the test's stand-in for the
// identity interceptor).
type authedAs struct {
	grpc.ServerStream
	ctx context.Context
}

func (a authedAs) Context() context.Context { return a.ctx }

// watchServer serves svc's RunService on loopback, every caller alice.
func watchServer(tb testing.TB, svc *runsvc.Service) tollgatev1.RunServiceClient {
	gs := grpc.NewServer(grpc.MaxSendMsgSize(limits.MaxMessageBytes), grpc.StreamInterceptor(
		func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
			return h(srv, authedAs{ss, identity.WithPrincipal(ss.Context(), identity.Principal{Subject: "alice", Kind: identity.KindPerson})})
		}))
	svc.Register(gs)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	go func() { _ = gs.Serve(lis) }()
	tb.Cleanup(gs.Stop)
	cc, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(limits.MaxMessageBytes)))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { cc.Close() })
	return tollgatev1.NewRunServiceClient(cc)
}

func snapshot(tb testing.TB, c tollgatev1.RunServiceClient, id string, opts ...grpc.CallOption) *tollgatev1.Run {
	w, err := c.WatchRun(context.Background(), &tollgatev1.WatchRunRequest{RunId: id}, opts...)
	if err != nil {
		tb.Fatal(err)
	}
	ev, err := w.Recv()
	if err != nil {
		tb.Fatal(err)
	}
	return ev.GetEvent().GetRun()
}

// Item 13: watchers share one encoding of an event, and every client
// decodes it, whether it asked for compression or not.
func TestItem13_WatchersShareOneEncoding(t *testing.T) {
	r := runner.New(runner.Config{Store: memstore.New(memstore.Config{})})
	svc, watches := runService(r)
	run := bigRun(t, r)
	c := watchServer(t, svc)
	want := snapshot(t, c, run.ID)
	if got := len(want.GetSteps()[0].GetAttempts()[0].GetOutputJson()); got < bigOutput {
		t.Fatalf("snapshot output %d bytes", got)
	}
	if !watches.SharedEncoding(run.ID, run.Version) {
		t.Fatal("the snapshot was not kept as one shared encoding")
	}
	for _, opts := range [][]grpc.CallOption{nil, nil, {grpc.UseCompressor(gzip.Name)}} {
		if got := snapshot(t, c, run.ID, opts...); !proto.Equal(got, want) {
			t.Fatalf("watcher (options %v) decoded another snapshot", opts)
		}
	}
}

// BenchmarkWatchRunOverGRPC is one watcher's snapshot of a run holding a
// 1 MiB answer over loopback gRPC, server and client in this process:
// B/op is both sides' allocations (the client's decoding ≈ 2 MiB of it).
func BenchmarkWatchRunOverGRPC(b *testing.B) {
	r := runner.New(runner.Config{Store: memstore.New(memstore.Config{})})
	svc, _ := runService(r)
	run := bigRun(b, r)
	c := watchServer(b, svc)
	b.ReportAllocs()
	for b.Loop() {
		snapshot(b, c, run.ID)
	}
}

// bigOutput is the size of bigRun's answer: as large as a step's output
// may be (limits.MaxValueBytes, less its quotes and some room).
const bigOutput = limits.MaxValueBytes - 1024
