package plansvc

import (
	"context"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"testing"

	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/tollgate-dev/tollgate/examples"
	tollgatev1 "github.com/tollgate-dev/tollgate/gen/tollgate/v1"
	"github.com/tollgate-dev/tollgate/internal/controlplane/api"
	"github.com/tollgate-dev/tollgate/internal/wire"
	"github.com/tollgate-dev/tollgate/pkg/compiler"
	"github.com/tollgate-dev/tollgate/pkg/freshness"
	"github.com/tollgate-dev/tollgate/pkg/plan"
)

// go-redis probes a Redis it could not dial on a goroutine that sleeps a
// second between tries and ends at its next wake-up after Close (the
// outage tests stop Redis).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreAnyFunction("github.com/redis/go-redis/v9/internal/pool.(*ConnPool).tryDial"))
}

// serve starts a real gRPC server on loopback and returns a client.
func serve(t *testing.T) tollgatev1.PlanServiceClient {
	t.Helper()
	cat, err := compiler.ParseCatalog(examples.Catalog)
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(api.ServerOptions(slog.New(slog.NewTextHandler(io.Discard, nil)))...)
	New(Config{Catalog: func() *compiler.Catalog { return cat }}).Register(srv)
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(lis) }()
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		conn.Close()
		srv.Stop()
		<-done
	})
	return tollgatev1.NewPlanServiceClient(conn)
}

// Compile over real gRPC returns the same plan the compiler builds locally,
// and the proto mirror converts back without loss (same digest).
func TestCompileOverGRPC(t *testing.T) {
	client := serve(t)
	paths, _ := filepath.Glob("../../../../examples/skills/*/SKILL.md")
	if len(paths) == 0 {
		t.Fatal("no example skills")
	}
	cat, _ := compiler.ParseCatalog(examples.Catalog)
	for _, path := range paths {
		src, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		local := compiler.Compile(string(src), compiler.Options{Catalog: cat, Name: "recipe"})
		resp, err := client.Compile(context.Background(), &tollgatev1.CompileRequest{Source: string(src)})
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if resp.GetPlanDigest() != local.Digest || resp.GetPlan().GetDigest() != local.Digest {
			t.Fatalf("%s: digest over gRPC %s, local %s", path, resp.GetPlanDigest(), local.Digest)
		}
		back, err := wire.PlanFromProto(resp.GetPlan())
		if err != nil {
			t.Fatal(err)
		}
		if err := plan.Verify(back); err != nil {
			t.Fatalf("%s: converted plan fails Verify: %v", path, err)
		}
		if d, _ := freshness.PlanDigest(back); d != local.Digest {
			a, _ := plan.Indent(local.Plan)
			b, _ := plan.Indent(back)
			t.Fatalf("%s: proto round trip changed the plan:\n%s\n---\n%s", path, a, b)
		}
		if resp.GetPlanCard() != compiler.Card(local.Plan, local.Digest, local.Diagnostics) {
			t.Fatalf("%s: the card over gRPC differs from the local card", path)
		}
	}
}

func TestCompileRefusalIsAnAnswer(t *testing.T) {
	client := serve(t)
	src, err := os.ReadFile("../../../../pkg/compiler/testdata/refused/write-before-ask.recipe")
	if err != nil {
		t.Fatal(err)
	}
	resp, err := client.Compile(context.Background(), &tollgatev1.CompileRequest{Source: string(src)})
	if err != nil {
		t.Fatalf("a recipe that does not compile is not an RPC error: %v", err)
	}
	if resp.GetPlan() != nil || len(resp.GetDiagnostics()) == 0 {
		t.Fatalf("want diagnostics and no plan, got %v", resp)
	}
	d := resp.GetDiagnostics()[0]
	if d.GetCode() != compiler.CodeEffectBeforeAsk || d.GetLine() != 4 || d.GetColumn() != 3 || d.GetSeverity() != tollgatev1.DiagnosticSeverity_DIAGNOSTIC_SEVERITY_ERROR {
		t.Fatalf("diagnostic: %v", d)
	}
}

func TestCompileWithRequestCatalog(t *testing.T) {
	client := serve(t)
	req := &tollgatev1.CompileRequest{
		Source: "x: lab.probe {}\ny: lab.write {}\n",
		Catalog: &tollgatev1.ToolCatalog{Tools: []*tollgatev1.CatalogTool{
			{Tool: &tollgatev1.Tool{Server: "lab", Tool: "probe", Annotations: &tollgatev1.ToolAnnotations{ReadOnlyHint: true}}},
			// The catalog policy declares write side-effecting whatever its hint says.
			{Tool: &tollgatev1.Tool{Server: "lab", Tool: "write", Annotations: &tollgatev1.ToolAnnotations{ReadOnlyHint: true}}, ReadOnly: new(false)},
		}},
	}
	resp, err := client.Compile(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	p := resp.GetPlan()
	if p == nil || len(p.GetInitialSteps()) != 1 || len(p.GetStoppingPoints()) != 1 || !p.GetStoppingPoints()[0].GetAdded() {
		t.Fatalf("write must be a side effect behind an added gate: %v", resp)
	}
}

func TestCompileInvalidRequest(t *testing.T) {
	client := serve(t)
	_, err := client.Compile(context.Background(), &tollgatev1.CompileRequest{})
	if status.Code(err) != codes.InvalidArgument {
		t.Fatalf("empty source: want InvalidArgument, got %v", err)
	}
}
