package controlplane

import (
	"bytes"
	"cmp"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"

	"github.com/tollgate-dev/tollgate/examples"
	tollgatev1 "github.com/tollgate-dev/tollgate/gen/tollgate/v1"
	"github.com/tollgate-dev/tollgate/internal/controlplane/approvals"
	"github.com/tollgate-dev/tollgate/internal/controlplane/runner"
	"github.com/tollgate-dev/tollgate/internal/identity"
	"github.com/tollgate-dev/tollgate/internal/store"
	"github.com/tollgate-dev/tollgate/internal/store/memstore"
	"github.com/tollgate-dev/tollgate/pkg/authz"
	"github.com/tollgate-dev/tollgate/pkg/compiler"
	"github.com/tollgate-dev/tollgate/pkg/engine"
)

// testExec is an in-process executor behind the dispatch seam: it runs
// each offered step in a goroutine it owns and reports through the Runner,
// as a real executor's stream handler will.
type testExec struct {
	tools    map[string]func(args json.RawMessage) (any, error) // "server.tool"
	mu       sync.Mutex
	cond     *sync.Cond
	inflight int
	ran      map[string]int // run/step → times its tool was called
}

func (x *testExec) add(n int) {
	x.mu.Lock()
	x.inflight += n
	if x.inflight == 0 {
		x.cond.Broadcast()
	}
	x.mu.Unlock()
}

func (x *testExec) calls(key string) int {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.ran[key]
}

func (x *testExec) Offer(ctx context.Context, rec runner.Recorder, runID string, d engine.Dispatch) bool {
	key := d.Server + "." + d.Tool
	fn, ok := x.tools[key]
	if d.Kind == "prose" {
		fn, ok = func(json.RawMessage) (any, error) { return "prose: " + d.Prompt, nil }, true
	}
	if !ok {
		return false
	}
	x.add(1)
	go func() {
		defer x.add(-1)
		ctx := context.Background()
		ev := func(build func(now time.Time) engine.Event) error {
			_, err := rec.Event(ctx, runID, build)
			return err
		}
		if ev(func(now time.Time) engine.Event {
			return engine.StepLeased{Step: d.Step, Attempt: d.Attempt, Executor: "test-exec", LeaseID: fmt.Sprintf("%s/%s/%d", runID, d.Step, d.Attempt), At: now}
		}) != nil {
			return
		}
		if ev(func(now time.Time) engine.Event { return engine.StepStarted{Step: d.Step, Attempt: d.Attempt, At: now} }) != nil {
			return
		}
		x.mu.Lock()
		x.ran[runID+"/"+d.Step]++
		x.mu.Unlock()
		out, err := fn(json.RawMessage(d.Args))
		if err != nil {
			_ = ev(func(now time.Time) engine.Event {
				return engine.StepFailed{Step: d.Step, Attempt: d.Attempt, Error: err.Error(), At: now}
			})
			return
		}
		b, _ := json.Marshal(out)
		_ = ev(func(now time.Time) engine.Event {
			return engine.StepSucceeded{Step: d.Step, Attempt: d.Attempt, Output: b, At: now}
		})
	}()
	return true
}

func (x *testExec) Cancel(context.Context, string, engine.CancelStep) {}

func (x *testExec) Holding(string) bool { return false }

func (x *testExec) Free(t engine.Target) int {
	if x.Serves(t) {
		return 1 << 20
	}
	return 0
}

func (x *testExec) Serves(t engine.Target) bool {
	if t.Kind == "prose" {
		return true
	}
	_, ok := x.tools[t.Server+"."+t.Tool]
	return ok
}

// idle waits until every step the executor took has reported. Steps they
// unblock are offered before the report returns, so zero means settled.
func (x *testExec) idle() {
	x.mu.Lock()
	for x.inflight > 0 {
		x.cond.Wait()
	}
	x.mu.Unlock()
}

type env struct {
	t       *testing.T
	srv     *Server
	addr    string
	store   store.Store
	exec    *testExec
	priv    ed25519.PrivateKey
	mu      sync.Mutex
	clients map[string]*grpc.ClientConn
	logs    *lockedBuffer
	// stop ends the server's Run (drained) and waits for it: the process
	// is gone; only the store remains.
	stop func()
}

// lockedBuffer collects log lines from many goroutines.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

const testIssuer, testAudience = "tollgate-test", "tollgate"

func echoTools() map[string]func(json.RawMessage) (any, error) {
	echo := func(args json.RawMessage) (any, error) { return map[string]any{"ok": true, "args": args}, nil }
	out := map[string]func(json.RawMessage) (any, error){}
	for _, k := range []string{"mcp-monitor.get_cpu_info", "mcp-monitor.get_memory_info", "notes.store", "notes.search",
		"github.get_pull_request", "github.get_pull_request_diff", "github.get_file", "github.create_commit", "github.push_branch",
		"erp.get_vendor", "erp.get_invoice", "erp.get_purchase_order", "payments.pay",
		"google-calendar.list-events", "gmail.messages_list", "slack.slack_search_messages", "slack.slack_post_message"} {
		out[k] = echo
	}
	// What vendor-payment's pay reads: its input schema wants a string
	// bank_account, so a run is not refused before its ask.
	out["erp.get_vendor"] = func(args json.RawMessage) (any, error) {
		return map[string]any{"ok": true, "args": args, "bank_account": "XXXX2048", "status": "active"}, nil
	}
	return out
}

// newEnv starts a real control plane on loopback with the memory store
// (or st), real JWT authentication and the test executor (nil tools: no
// executors at all).
func newEnv(t *testing.T, st store.Store, tools map[string]func(json.RawMessage) (any, error)) *env {
	t.Helper()
	return newEnvOn(t, st, devPolicy(t), tools)
}

// newEnvWith is newEnv with the memory store and the given policy.
func newEnvWith(t *testing.T, az approvals.Policy, tools map[string]func(json.RawMessage) (any, error)) *env {
	t.Helper()
	return newEnvOn(t, nil, az, tools)
}

func newEnvOn(t *testing.T, st store.Store, az approvals.Policy, tools map[string]func(json.RawMessage) (any, error), opts ...func(*Config)) *env {
	t.Helper()
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	v, err := identity.NewVerifier(identity.Config{Issuer: testIssuer, Audience: testAudience, Keys: map[string]ed25519.PublicKey{"k": pub}})
	if err != nil {
		t.Fatal(err)
	}
	if st == nil {
		st = memstore.New(memstore.Config{})
	}
	cat, _ := compiler.ParseCatalog(examples.Catalog)
	e := &env{t: t, store: st, priv: priv, clients: map[string]*grpc.ClientConn{}}
	var disp runner.Dispatcher = runner.NoExecutors{}
	if tools != nil {
		e.exec = &testExec{tools: tools, ran: map[string]int{}}
		e.exec.cond = sync.NewCond(&e.exec.mu)
		disp = e.exec
	}
	e.logs = &lockedBuffer{}
	cfg := Config{Store: st, Verifier: v, Catalog: cat, SkillsDir: ExampleSkills(), SkillsDirName: "examples/skills", Policy: az, Domain: "acme", DrainTimeout: 5 * time.Second,
		Dispatcher: disp, Log: slog.New(slog.NewTextHandler(e.logs, nil))}
	for _, o := range opts {
		o(&cfg)
	}
	e.srv = NewServer(cfg)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	e.addr = lis.Addr().String()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = e.srv.Run(ctx, Listeners{API: lis}) }()
	var once sync.Once
	e.stop = func() { once.Do(func() { cancel(); <-done }) }
	t.Cleanup(func() {
		for _, c := range e.clients {
			c.Close()
		}
		if e.exec != nil {
			e.exec.idle()
		}
		e.stop()
	})
	return e
}

func (e *env) token(user string) string {
	tok, err := identity.Mint(e.priv, "k", testIssuer, testAudience, user, time.Hour, time.Now())
	if err != nil {
		e.t.Fatal(err)
	}
	return tok
}

// conn is a client connection authenticated as user ("" for none).
func (e *env) conn(user string) *grpc.ClientConn {
	e.mu.Lock()
	defer e.mu.Unlock()
	if c, ok := e.clients[user]; ok {
		return c
	}
	opts := []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
	if user != "" {
		opts = append(opts, grpc.WithPerRPCCredentials(identity.PerRPCCredentials{Token: e.token(user), Insecure: true}))
	}
	c, err := grpc.NewClient(e.addr, opts...)
	if err != nil {
		e.t.Fatal(err)
	}
	e.clients[user] = c
	return c
}

func (e *env) runs(user string) tollgatev1.RunServiceClient {
	return tollgatev1.NewRunServiceClient(e.conn(user))
}
func (e *env) approvals(user string) tollgatev1.ApprovalServiceClient {
	return surface{tollgatev1.NewApprovalServiceClient(e.conn(user))}
}

// rawApprovals sends requests exactly as written.
func (e *env) rawApprovals(user string) tollgatev1.ApprovalServiceClient {
	return tollgatev1.NewApprovalServiceClient(e.conn(user))
}

// surface is an approver's client as approvectl is one: a decision or an
// answer that names no payload or evidence digest binds the ask's as read
// just before (tests of the check itself use rawApprovals).
type surface struct {
	tollgatev1.ApprovalServiceClient
}

func (c surface) shown(ctx context.Context, id string) (payload, evidence string) {
	a, err := c.GetAsk(ctx, &tollgatev1.GetAskRequest{AskId: id})
	if err != nil {
		return "", ""
	}
	return a.GetAsk().GetPayloadDigest(), a.GetAsk().GetEvidenceDigest()
}

func (c surface) Decide(ctx context.Context, req *tollgatev1.DecideRequest, opts ...grpc.CallOption) (*tollgatev1.DecideResponse, error) {
	if req.GetExpectedPayloadDigest() == "" || req.GetExpectedEvidenceDigest() == "" {
		req = proto.CloneOf(req)
		p, ev := c.shown(ctx, req.GetAskId())
		req.ExpectedPayloadDigest = cmp.Or(req.ExpectedPayloadDigest, p)
		req.ExpectedEvidenceDigest = cmp.Or(req.ExpectedEvidenceDigest, ev)
	}
	return c.ApprovalServiceClient.Decide(ctx, req, opts...)
}

func (c surface) Answer(ctx context.Context, req *tollgatev1.AnswerRequest, opts ...grpc.CallOption) (*tollgatev1.AnswerResponse, error) {
	if req.GetExpectedPayloadDigest() == "" || req.GetExpectedEvidenceDigest() == "" {
		req = proto.CloneOf(req)
		p, ev := c.shown(ctx, req.GetAskId())
		req.ExpectedPayloadDigest = cmp.Or(req.ExpectedPayloadDigest, p)
		req.ExpectedEvidenceDigest = cmp.Or(req.ExpectedEvidenceDigest, ev)
	}
	return c.ApprovalServiceClient.Answer(ctx, req, opts...)
}
func (e *env) audit(user string) tollgatev1.AuditServiceClient {
	return tollgatev1.NewAuditServiceClient(e.conn(user))
}

// settle waits until the test executor has finished everything it took.
func (e *env) settle() {
	if e.exec != nil {
		e.exec.idle()
	}
}

func (e *env) start(user, skill string) *tollgatev1.Run {
	e.t.Helper()
	resp, err := e.runs(user).StartRun(context.Background(), &tollgatev1.StartRunRequest{Source: &tollgatev1.StartRunRequest_Skill{Skill: skill}})
	if err != nil {
		e.t.Fatal(err)
	}
	e.settle()
	return e.get(user, resp.GetRun().GetId())
}

func (e *env) get(user, id string) *tollgatev1.Run {
	e.t.Helper()
	resp, err := e.runs(user).GetRun(context.Background(), &tollgatev1.GetRunRequest{RunId: id})
	if err != nil {
		e.t.Fatal(err)
	}
	return resp.GetRun()
}

// devPolicy is the dev policy of examples/policy.csv: alice requests and
// holds finance (so separation of duties refuses her), bob may approve up
// to 100000, dave up to 1000000, carol acts for dave within a window.
func devPolicy(t testing.TB) *authz.Authorizer {
	t.Helper()
	a, err := authz.New(authz.Config{PolicyPath: "../../examples/policy.csv"})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// journal reads a run's whole journal through the audit API.
func journal(t *testing.T, e *env, runID string) []*tollgatev1.JournalRecord {
	t.Helper()
	var out []*tollgatev1.JournalRecord
	tok := ""
	for {
		resp, err := e.audit("alice").ListJournal(bg, &tollgatev1.ListJournalRequest{RunId: runID, PageToken: tok})
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, resp.GetRecords()...)
		if tok = resp.GetNextPageToken(); tok == "" {
			return out
		}
	}
}
