// Package mcptest helps the example servers' tests: it reads catalog.yaml,
// checks a server's advertised tools against it, builds a server binary and
// connects the SDK client to a binary or to an in-process run function.
package mcptest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.yaml.in/yaml/v3"

	"github.com/tollgate-dev/tollgate/examples"
)

// Annotations is a tool's MCP hints as catalog.yaml (and Tollgate's
// compiler) sees them: plain bools where MCP defaults them to false,
// pointers where the default is true and unset is distinct.
type Annotations struct {
	ReadOnlyHint    bool  `yaml:"readOnlyHint"`
	IdempotentHint  bool  `yaml:"idempotentHint"`
	DestructiveHint *bool `yaml:"destructiveHint"`
	OpenWorldHint   *bool `yaml:"openWorldHint"`
}

func (a Annotations) String() string {
	p := func(b *bool) string {
		if b == nil {
			return "unset"
		}
		return fmt.Sprint(*b)
	}
	return fmt.Sprintf("{readOnly:%v idempotent:%v destructive:%s openWorld:%s}",
		a.ReadOnlyHint, a.IdempotentHint, p(a.DestructiveHint), p(a.OpenWorldHint))
}

// Equal compares hint by hint, pointers by presence and value.
func (a Annotations) Equal(b Annotations) bool {
	eq := func(x, y *bool) bool { return (x == nil) == (y == nil) && (x == nil || *x == *y) }
	return a.ReadOnlyHint == b.ReadOnlyHint && a.IdempotentHint == b.IdempotentHint &&
		eq(a.DestructiveHint, b.DestructiveHint) && eq(a.OpenWorldHint, b.OpenWorldHint)
}

// FromMCP converts what a client received in tools/list.
func FromMCP(a *mcp.ToolAnnotations) Annotations {
	if a == nil {
		return Annotations{}
	}
	return Annotations{ReadOnlyHint: a.ReadOnlyHint, IdempotentHint: a.IdempotentHint,
		DestructiveHint: a.DestructiveHint, OpenWorldHint: a.OpenWorldHint}
}

// CatalogTool is one tool row of catalog.yaml.
type CatalogTool struct {
	Name        string         `yaml:"name"`
	Annotations Annotations    `yaml:"annotations"`
	InputSchema map[string]any `yaml:"inputSchema"`
}

// Catalog parses examples/catalog.yaml (the file embedded by package
// examples) strictly: an unknown key fails the test.
func Catalog(t testing.TB) map[string][]CatalogTool {
	t.Helper()
	var f struct {
		Servers map[string][]CatalogTool `yaml:"servers"`
	}
	dec := yaml.NewDecoder(bytes.NewReader(examples.Catalog))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil {
		t.Fatalf("parse catalog.yaml: %v", err)
	}
	return f.Servers
}

// CheckCatalog lists the session's tools and fails the test unless their
// names and annotations are exactly those catalog.yaml gives server. It
// returns the listed tools by name.
func CheckCatalog(t testing.TB, ctx context.Context, cs *mcp.ClientSession, server string) map[string]*mcp.Tool {
	t.Helper()
	want, ok := Catalog(t)[server]
	if !ok {
		t.Fatalf("catalog.yaml has no server %q", server)
	}
	res, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatalf("ListTools: %v", err)
	}
	got := map[string]*mcp.Tool{}
	var gotNames, wantNames []string
	for _, tool := range res.Tools {
		got[tool.Name] = tool
		gotNames = append(gotNames, tool.Name)
	}
	for _, ct := range want {
		wantNames = append(wantNames, ct.Name)
	}
	slices.Sort(gotNames)
	slices.Sort(wantNames)
	if !slices.Equal(gotNames, wantNames) {
		t.Errorf("%s tools = %v, catalog.yaml lists %v", server, gotNames, wantNames)
	}
	for _, ct := range want {
		tool, ok := got[ct.Name]
		if !ok {
			continue
		}
		if a := FromMCP(tool.Annotations); !a.Equal(ct.Annotations) {
			t.Errorf("%s.%s annotations = %v, catalog.yaml says %v", server, ct.Name, a, ct.Annotations)
		}
		if ct.InputSchema != nil {
			if g, w := schemaShape(t, tool.InputSchema), schemaShape(t, ct.InputSchema); !reflect.DeepEqual(g, w) {
				t.Errorf("%s.%s advertises input schema %s, catalog.yaml says %s", server, ct.Name, mustMarshal(t, g), mustMarshal(t, w))
			}
		}
	}
	return got
}

// schemaShape is a schema as plain JSON values with every "description"
// dropped (catalog.yaml leaves them out), for comparison.
func schemaShape(t testing.TB, schema any) any {
	t.Helper()
	var v any
	if err := json.Unmarshal(mustMarshal(t, schema), &v); err != nil {
		t.Fatal(err)
	}
	var strip func(any)
	strip = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			delete(x, "description")
			for _, e := range x {
				strip(e)
			}
		case []any:
			for _, e := range x {
				strip(e)
			}
		}
	}
	strip(v)
	return v
}

func mustMarshal(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Build compiles the main package in dir (relative to the test's package
// directory, usually ".") into a temporary directory and returns the
// binary's path.
func Build(t testing.TB, dir string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "server")
	cmd := exec.Command("go", "build", "-o", bin, ".")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", dir, err, out)
	}
	return bin
}

// Client is the SDK client the tests connect with.
func Client() *mcp.Client {
	return mcp.NewClient(&mcp.Implementation{Name: "tollgate-example-test", Version: "0.0.0"}, nil)
}

// ConnectCommand starts bin with args over stdio (mcp.CommandTransport) and
// returns the session; the test's cleanup closes it, which ends the process.
func ConnectCommand(t testing.TB, ctx context.Context, bin string, args ...string) *mcp.ClientSession {
	t.Helper()
	cmd := exec.Command(bin, args...)
	var stderr lockedBuffer
	cmd.Stderr = &stderr
	cs, err := Client().Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("connect to %s %q: %v\nstderr:\n%s", bin, args, err, stderr.String())
	}
	t.Cleanup(func() {
		if err := cs.Close(); err != nil {
			t.Errorf("close %s: %v\nstderr:\n%s", filepath.Base(bin), err, stderr.String())
		}
	})
	return cs
}

// RunFunc is a server's testable entry point.
type RunFunc func(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error

// ConnectPipes runs run in-process with args, its stdin and stdout being
// pipes to the returned client session. Cleanup closes the session and
// waits for run to return, failing the test if it returned an error.
func ConnectPipes(t testing.TB, ctx context.Context, run RunFunc, args ...string) *mcp.ClientSession {
	t.Helper()
	cs, stop := StartPipes(t, ctx, run, args...)
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Errorf("run %q returned %v", args, err)
		}
	})
	return cs
}

// StartPipes is ConnectPipes returning a stop function that closes the
// session, waits for run to return and returns run's error (stderr
// appended). stop may be called more than once.
func StartPipes(t testing.TB, ctx context.Context, run RunFunc, args ...string) (cs *mcp.ClientSession, stop func() error) {
	t.Helper()
	inR, inW := io.Pipe()   // client -> server stdin
	outR, outW := io.Pipe() // server stdout -> client
	var stderr lockedBuffer
	done := make(chan error, 1)
	go func() {
		err := run(context.WithoutCancel(ctx), args, inR, outW, &stderr)
		inR.Close()
		outW.Close()
		done <- err
	}()
	cs, err := Client().Connect(ctx, &mcp.IOTransport{Reader: outR, Writer: inW}, nil)
	if err != nil {
		inW.Close()
		outR.Close()
		t.Fatalf("connect in-process %q: %v (run: %v)\nstderr:\n%s", args, err, <-done, stderr.String())
	}
	stop = sync.OnceValue(func() error {
		cs.Close()
		if err := <-done; err != nil {
			return fmt.Errorf("%w\nstderr:\n%s", err, stderr.String())
		}
		return nil
	})
	t.Cleanup(func() { stop() })
	return cs, stop
}

// StartHTTP runs run in-process with args plus "--http 127.0.0.1:0" and
// returns the endpoint URL it announced on stderr and a stop function that
// cancels it and returns run's result.
func StartHTTP(t testing.TB, ctx context.Context, run RunFunc, args ...string) (url string, stop func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	errR, errW := io.Pipe()
	done := make(chan error, 1)
	go func() {
		err := run(ctx, append(slices.Clip(args), "--http", "127.0.0.1:0"), strings.NewReader(""), io.Discard, errW)
		errW.CloseWithError(fmt.Errorf("run returned %v", err))
		done <- err
	}()
	sc := bufio.NewScanner(errR)
	for sc.Scan() {
		if u, ok := strings.CutPrefix(sc.Text(), "mcp: serving "); ok {
			url = u
			break
		}
	}
	if url == "" {
		cancel()
		t.Fatalf("no URL announced: %v (run: %v)", sc.Err(), <-done)
	}
	drained := make(chan struct{})
	go func() { io.Copy(io.Discard, errR); close(drained) }()
	stop = sync.OnceValue(func() error {
		cancel()
		err := <-done
		<-drained
		return err
	})
	t.Cleanup(func() { stop() })
	return url, stop
}

// Call calls a tool with a fresh params value and _meta map (the SDK writes
// into the map, so one must never be shared between calls) and fails the
// test on a protocol error. meta may be nil.
func Call(t testing.TB, ctx context.Context, cs *mcp.ClientSession, name string, args any, meta map[string]any) *mcp.CallToolResult {
	t.Helper()
	res, err := CallErr(ctx, cs, name, args, meta)
	if err != nil {
		t.Fatalf("CallTool %s: %v", name, err)
	}
	return res
}

// CallErr is Call returning the error; safe to use from any goroutine.
func CallErr(ctx context.Context, cs *mcp.ClientSession, name string, args any, meta map[string]any) (*mcp.CallToolResult, error) {
	p := &mcp.CallToolParams{Name: name, Arguments: args}
	if meta != nil {
		p.Meta = mcp.Meta{}
		for k, v := range meta {
			p.Meta[k] = v
		}
	}
	return cs.CallTool(ctx, p)
}

// Text concatenates a result's text content.
func Text(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// Decode unmarshals a successful result's structured content into v,
// failing the test on a tool error or a missing structured result. Call it
// from the test's goroutine; elsewhere use DecodeErr.
func Decode(t testing.TB, res *mcp.CallToolResult, v any) {
	t.Helper()
	if err := DecodeErr(res, v); err != nil {
		t.Fatal(err)
	}
}

// DecodeErr is Decode returning the error.
func DecodeErr(res *mcp.CallToolResult, v any) error {
	if res.IsError {
		return fmt.Errorf("tool error: %s", Text(res))
	}
	if res.StructuredContent == nil {
		return fmt.Errorf("no structured content; text: %s", Text(res))
	}
	b, err := json.Marshal(res.StructuredContent)
	if err != nil {
		return fmt.Errorf("re-marshal structured content: %v", err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("decode structured content %s: %v", b, err)
	}
	return nil
}
