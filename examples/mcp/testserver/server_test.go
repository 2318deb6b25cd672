package main

import (
	"context"
	"errors"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/goleak"

	"github.com/tollgate-dev/tollgate/examples/mcp/internal/mcptest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// testserver is not in catalog.yaml; these are the annotations it promises.
var wantAnnotations = map[string]mcptest.Annotations{
	"sleep": {ReadOnlyHint: true},
	"mark":  {DestructiveHint: ptr(false), OpenWorldHint: ptr(false)},
	"fail":  {ReadOnlyHint: true},
}

func ptr[T any](v T) *T { return &v }

func checkTools(t *testing.T, ctx context.Context, cs *mcp.ClientSession) {
	t.Helper()
	res, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range res.Tools {
		names = append(names, tool.Name)
		want, ok := wantAnnotations[tool.Name]
		if got := mcptest.FromMCP(tool.Annotations); ok && !got.Equal(want) {
			t.Errorf("%s annotations = %v, want %v", tool.Name, got, want)
		}
	}
	slices.Sort(names)
	if want := []string{"fail", "mark", "sleep"}; !slices.Equal(names, want) {
		t.Errorf("tools = %v, want %v", names, want)
	}
}

func mark(t *testing.T, ctx context.Context, cs *mcp.ClientSession, name string) int64 {
	t.Helper()
	var res MarkResult
	mcptest.Decode(t, mcptest.Call(t, ctx, cs, "mark", map[string]any{"name": name}, nil), &res)
	if res.Name != name {
		t.Errorf("mark %q answered for %q", name, res.Name)
	}
	return res.Count
}

// The built binary over stdio, one session: three sleeps run at once, mark
// counts and keeps counting across a restart, fail is a tool error.
func TestBinaryStdio(t *testing.T) {
	ctx := t.Context()
	bin := mcptest.Build(t, ".")
	file := filepath.Join(t.TempDir(), "marks.json")
	cs := mcptest.ConnectCommand(t, ctx, bin, "--file", file)
	if got := cs.InitializeResult().ServerInfo.Name; got != ServerName {
		t.Errorf("server name = %q, want %q", got, ServerName)
	}
	checkTools(t, ctx, cs)

	// Concurrency: one session, three calls in flight together.
	mcptest.Call(t, ctx, cs, "sleep", map[string]any{"ms": 0}, nil) // warm up
	start := time.Now()
	var wg sync.WaitGroup
	for _, ms := range []int{400, 270, 80} {
		wg.Go(func() {
			res, err := mcptest.CallErr(ctx, cs, "sleep", map[string]any{"ms": ms}, nil)
			if err != nil {
				t.Errorf("sleep %d: %v", ms, err)
				return
			}
			var out SleepResult
			if err := mcptest.DecodeErr(res, &out); err != nil {
				t.Errorf("sleep %d: %v", ms, err)
			} else if out.SleptMs != ms {
				t.Errorf("sleep %d: slept_ms = %d", ms, out.SleptMs)
			}
		})
	}
	wg.Wait()
	wall := time.Since(start)
	t.Logf("sleeps of 400, 270 and 80 ms on one session: %v", wall)
	if wall >= 700*time.Millisecond {
		t.Errorf("three concurrent sleeps took %v (sum 750 ms): calls on one session did not run concurrently", wall)
	}

	for i, name := range []string{"a", "a", "b", "a"} {
		want := []int64{1, 2, 1, 3}[i]
		if got := mark(t, ctx, cs, name); got != want {
			t.Errorf("mark %q #%d = %d, want %d", name, i, got, want)
		}
	}

	res := mcptest.Call(t, ctx, cs, "fail", map[string]any{"message": "boom 42"}, nil)
	if !res.IsError || !strings.Contains(mcptest.Text(res), "boom 42") {
		t.Errorf("fail: IsError=%v text=%q", res.IsError, mcptest.Text(res))
	}
	// An unknown tool is a protocol error, unlike fail.
	if _, err := mcptest.CallErr(ctx, cs, "nope", nil, nil); err == nil {
		t.Errorf("unknown tool: no error")
	}
	if err := cs.Close(); err != nil {
		t.Fatal(err)
	}

	// A new process on the same file carries on counting.
	cs2 := mcptest.ConnectCommand(t, ctx, bin, "--file", file)
	if got := mark(t, ctx, cs2, "a"); got != 4 {
		t.Errorf("mark a after restart = %d, want 4", got)
	}
	if got := mark(t, ctx, cs2, "b"); got != 2 {
		t.Errorf("mark b after restart = %d, want 2", got)
	}
}

// In-process (so -race sees the handlers): concurrent marks on one name
// each get a distinct count, and the file ends at their number.
func TestConcurrentMarks(t *testing.T) {
	ctx := t.Context()
	file := filepath.Join(t.TempDir(), "marks.json")
	cs := mcptest.ConnectPipes(t, ctx, run, "--file", file)
	checkTools(t, ctx, cs)

	const n = 25
	counts := make([]int64, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			res, err := mcptest.CallErr(ctx, cs, "mark", map[string]any{"name": "x"}, nil)
			var out MarkResult
			if err == nil {
				err = mcptest.DecodeErr(res, &out)
			}
			if err != nil {
				t.Errorf("mark: %v", err)
			}
			counts[i] = out.Count
		})
	}
	wg.Wait()
	slices.Sort(counts)
	for i, c := range counts {
		if c != int64(i+1) {
			t.Fatalf("counts = %v, want 1..%d once each", counts, n)
		}
	}
	if got := mark(t, ctx, cs, "x"); got != n+1 {
		t.Errorf("next mark = %d, want %d", got, n+1)
	}
}

// A cancelled sleep stops the handler: the call returns at the caller's
// deadline and the server shuts down promptly instead of sleeping on.
func TestSleepHonoursCancel(t *testing.T) {
	ctx := t.Context()
	cs, stop := mcptest.StartPipes(t, ctx, run, "--file", filepath.Join(t.TempDir(), "m.json"))
	callCtx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := mcptest.CallErr(callCtx, cs, "sleep", map[string]any{"ms": 20_000}, nil)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("sleep 20s with a 100ms deadline: err = %v", err)
	}
	// The session still serves after the cancellation.
	var out SleepResult
	mcptest.Decode(t, mcptest.Call(t, ctx, cs, "sleep", map[string]any{"ms": 1}, nil), &out)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if wall := time.Since(start); wall > 10*time.Second {
		t.Errorf("server took %v to stop after a cancelled 20 s sleep", wall)
	}
}

// Bad input and a missing --file.
func TestErrors(t *testing.T) {
	ctx := t.Context()
	cs := mcptest.ConnectPipes(t, ctx, run, "--file", filepath.Join(t.TempDir(), "m.json"))
	for _, c := range []struct {
		tool string
		args any
	}{
		{"sleep", map[string]any{"ms": -1}},
		{"sleep", map[string]any{"ms": "ten"}},
		{"mark", map[string]any{"name": ""}},
		{"mark", map[string]any{}},
		{"fail", map[string]any{}},
	} {
		if res := mcptest.Call(t, ctx, cs, c.tool, c.args, nil); !res.IsError {
			t.Errorf("%s %v: IsError = false, text %s", c.tool, c.args, mcptest.Text(res))
		}
	}
	if err := run(ctx, nil, strings.NewReader(""), &strings.Builder{}, &strings.Builder{}); err == nil {
		t.Errorf("run without --file: no error")
	}
}

// Over streamable HTTP (--http), calls on one session also run at once.
func TestHTTPConcurrentSleeps(t *testing.T) {
	ctx := t.Context()
	url, stop := mcptest.StartHTTP(t, ctx, run, "--file", filepath.Join(t.TempDir(), "m.json"))
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	cs, err := mcptest.Client().Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{Transport: tr}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	checkTools(t, ctx, cs)
	start := time.Now()
	var wg sync.WaitGroup
	for _, ms := range []int{400, 270, 80} {
		wg.Go(func() {
			res, err := mcptest.CallErr(ctx, cs, "sleep", map[string]any{"ms": ms}, nil)
			if err == nil && res.IsError {
				err = errors.New(mcptest.Text(res))
			}
			if err != nil {
				t.Errorf("sleep %d: %v", ms, err)
			}
		})
	}
	wg.Wait()
	if wall := time.Since(start); wall >= 700*time.Millisecond {
		t.Errorf("three concurrent sleeps over HTTP took %v (sum 750 ms)", wall)
	}
	if got := mark(t, ctx, cs, "h"); got != 1 {
		t.Errorf("mark over HTTP = %d", got)
	}
	if err := cs.Close(); err != nil {
		t.Error(err)
	}
	if err := stop(); err != nil {
		t.Error(err)
	}
}
