package e2e

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"net"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/tollgate-dev/tollgate/examples"
	tollgatev1 "github.com/tollgate-dev/tollgate/gen/tollgate/v1"
	"github.com/tollgate-dev/tollgate/internal/controlplane"
	"github.com/tollgate-dev/tollgate/internal/executor"
	"github.com/tollgate-dev/tollgate/internal/identity"
	"github.com/tollgate-dev/tollgate/internal/store"
	"github.com/tollgate-dev/tollgate/internal/store/memstore"
	"github.com/tollgate-dev/tollgate/internal/stubtools"
	"github.com/tollgate-dev/tollgate/pkg/compiler"
	"github.com/tollgate-dev/tollgate/pkg/grant"
)

type world struct {
	addr string
	// execAddr is the executor listener (mTLS); pki holds its CA and
	// the executors' certificates.
	execAddr string
	pki      identity.DevPKI
	pkiDir   string
	srv      *controlplane.Server
	priv     ed25519.PrivateKey
	gpub     ed25519.PublicKey
	tools    *stubtools.Host
	cancel   context.CancelFunc
	wg       sync.WaitGroup
	// stopServer ends the server's Run (drained) and waits for it; it
	// returns what Run did (controlplane.ErrDrainCut: stopped hard).
	stopServer func() error
	ranErr     error
}

func newWorld(t testing.TB, catalogExtra string) *world {
	return newWorldOn(t, catalogExtra, memstore.New(memstore.Config{}))
}

func newWorldOn(t testing.TB, catalogExtra string, st store.Store) *world {
	t.Helper()
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	gpub, gpriv, _ := ed25519.GenerateKey(rand.Reader)
	v, err := identity.NewVerifier(identity.Config{Issuer: "i", Audience: "a", Keys: map[string]ed25519.PublicKey{"k": pub}})
	if err != nil {
		t.Fatal(err)
	}
	cat, _ := compiler.ParseCatalog(append(append([]byte{}, examples.Catalog...), catalogExtra...))
	w := &world{priv: priv, gpub: gpub, tools: stubtools.New(stubtools.Config{Catalog: cat}), pkiDir: t.TempDir()}
	w.pki, err = identity.MintDevPKI(w.pkiDir, identity.DefaultTrustDomain, nil, time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	serverTLS, err := identity.ServerTLS(w.pki.Server.Cert, w.pki.Server.Key, w.pki.CA, nil)
	if err != nil {
		t.Fatal(err)
	}
	w.srv = controlplane.NewServer(controlplane.Config{Store: st, Verifier: v, Catalog: cat,
		SkillsDir: controlplane.ExampleSkills(), SigningKey: gpriv, KeyID: "cp", LeaseTTL: 2 * time.Second, ExecutorTLS: serverTLS, DrainTimeout: 10 * time.Second,
		MaxWatchesPerCaller: 1024}) // BenchmarkSustained's 64 clients all watch as alice
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	w.addr = lis.Addr().String()
	execLis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	w.execAddr = execLis.Addr().String()
	srvCtx, stopSrv := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- w.srv.Run(srvCtx, controlplane.Listeners{API: lis, Executors: execLis}) }()
	var once sync.Once
	w.stopServer = func() error {
		once.Do(func() { stopSrv(); w.ranErr = <-ran })
		return w.ranErr
	}
	ctx, cancel := context.WithCancel(context.Background())
	w.cancel = cancel
	t.Cleanup(func() {
		cancel()
		w.wg.Wait()
		_ = w.stopServer()
	})
	_ = ctx
	return w
}

func (w *world) conn(t testing.TB, user string) *grpc.ClientConn {
	tok, err := identity.Mint(w.priv, "k", "i", "a", user, time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	c, err := grpc.NewClient(w.addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithPerRPCCredentials(identity.PerRPCCredentials{Token: tok, Insecure: true}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// execConn is executor id's connection to the executor listener, with
// a client certificate naming it.
func (w *world) execConn(t testing.TB, id string) *grpc.ClientConn {
	t.Helper()
	certs, err := identity.IssueExecutorCert(w.pki.CA, w.pki.CAKey, w.pkiDir, identity.DefaultTrustDomain, id, time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := identity.ClientTLS(certs.Cert, certs.Key, w.pki.CA, "")
	if err != nil {
		t.Fatal(err)
	}
	c, err := grpc.NewClient(w.execAddr, grpc.WithTransportCredentials(credentials.NewTLS(cfg)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// executor starts an executor process-equivalent (same code path as the
// binary) that connects over loopback gRPC with its certificate.
func (w *world) executor(t testing.TB, ctx context.Context, id string) {
	client := tollgatev1.NewExecutorServiceClient(w.execConn(t, id))
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		_ = executor.Run(ctx, executor.Config{ID: id, Capacity: 16, Host: w.tools, Prose: executor.Template{},
			Grants: grant.NewVerifier(map[string]ed25519.PublicKey{"cp": w.gpub}),
			Connect: func(ctx context.Context) (tollgatev1.ExecutorService_ConnectClient, error) {
				return client.Connect(ctx)
			}})
	}()
}

// waitRun watches a run until pred holds.
func waitRun(t *testing.T, runs tollgatev1.RunServiceClient, id string, pred func(*tollgatev1.Run) bool) *tollgatev1.Run {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	stream, err := runs.WatchRun(ctx, &tollgatev1.WatchRunRequest{RunId: id})
	if err != nil {
		t.Fatal(err)
	}
	for {
		ev, err := stream.Recv()
		if err != nil {
			t.Fatalf("watch ended before the run got there: %v", err)
		}
		if r := ev.GetEvent().GetRun(); pred(r) {
			return r
		}
	}
}

func state(s tollgatev1.RunState) func(*tollgatev1.Run) bool {
	return func(r *tollgatev1.Run) bool { return r.GetState() == s }
}

func TestExecutorRunsGraphAskDemo(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	runs := tollgatev1.NewRunServiceClient(w.conn(t, "alice"))
	// Blocked with no executor; it continues when one connects.
	resp, err := runs.StartRun(ctx, &tollgatev1.StartRunRequest{Source: &tollgatev1.StartRunRequest_Skill{Skill: "graph-ask-demo"}})
	if err != nil {
		t.Fatal(err)
	}
	id := resp.GetRun().GetId()
	waitRun(t, runs, id, state(tollgatev1.RunState_RUN_STATE_BLOCKED))
	w.executor(t, ctx, "edge-1")
	r := waitRun(t, runs, id, state(tollgatev1.RunState_RUN_STATE_PARKED))
	if w.tools.Count("notes.store") != 0 {
		t.Fatal("I1: save ran before the approval")
	}
	for _, s := range r.GetSteps() {
		if (s.GetStepId() == "cpu" || s.GetStepId() == "mem") && s.GetAttempts()[0].GetExecutor() != "edge-1" {
			t.Fatalf("the probes ran on the executor: %v", s)
		}
	}
	approvals := tollgatev1.NewApprovalServiceClient(w.conn(t, "alice"))
	if err := approveAsShown(t, ctx, approvals, id+"/ask_1"); err != nil {
		t.Fatal(err)
	}
	waitRun(t, runs, id, state(tollgatev1.RunState_RUN_STATE_COMPLETE))
	if n := w.tools.Count("notes.store"); n != 1 {
		t.Fatalf("save ran %d times, want exactly 1", n)
	}
}

// Fans are fans: three branches sleeping 400, 270 and 80 ms on one
// executor take about the slowest, not the sum.
func TestFanRunsConcurrently(t *testing.T) {
	// Not in parallel: it measures how long a fan takes, which other
	// tests sharing the two cores would stretch.
	w := newWorld(t, "  test:\n    - {name: sleep, annotations: {readOnlyHint: true}}\n")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w.executor(t, ctx, "edge-1")
	runs := tollgatev1.NewRunServiceClient(w.conn(t, "alice"))
	recipe := "together naps:\n  a: test.sleep {\"ms\": 400}\n  b: test.sleep {\"ms\": 270}\n  c: test.sleep {\"ms\": 80}\n"
	resp, err := runs.StartRun(ctx, &tollgatev1.StartRunRequest{Source: &tollgatev1.StartRunRequest_Recipe{Recipe: recipe}})
	if err != nil {
		t.Fatal(err)
	}
	r := waitRun(t, runs, resp.GetRun().GetId(), state(tollgatev1.RunState_RUN_STATE_COMPLETE))
	var first, last time.Time
	n := 0
	for _, s := range r.GetSteps() {
		for _, a := range s.GetAttempts() {
			if a.GetLeasedAt() == nil || a.GetFinishedAt() == nil {
				continue
			}
			n++
			if st := a.GetLeasedAt().AsTime(); first.IsZero() || st.Before(first) {
				first = st
			}
			if fin := a.GetFinishedAt().AsTime(); fin.After(last) {
				last = fin
			}
		}
	}
	if n != 3 {
		t.Fatalf("want timings for 3 branches, got %d", n)
	}
	wall := last.Sub(first)
	if wall > time.Duration(1.05*400)*time.Millisecond+20*time.Millisecond {
		t.Fatalf("the fan took %v: its branches did not run at once", wall)
	}
	t.Logf("fan wall clock %v for branches of 400, 270, 80 ms", wall)
}
