package notes

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"go.uber.org/goleak"

	"github.com/tollgate-dev/tollgate/examples/mcp/internal/jsonl"
	"github.com/tollgate-dev/tollgate/examples/mcp/internal/mcptest"
	"github.com/tollgate-dev/tollgate/examples/mcp/internal/serve"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func readNotes(t *testing.T, path string) []Note {
	t.Helper()
	lines, err := jsonl.ReadLines(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []Note
	for _, l := range lines {
		var n Note
		dec := json.NewDecoder(bytes.NewReader(l))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&n); err != nil {
			t.Fatalf("line %q: %v", l, err)
		}
		out = append(out, n)
	}
	return out
}

// Concurrent stores on one session (handlers run concurrently) all land,
// one JSONL line each, each with its own _meta idempotency key; search finds
// them case-insensitively.
func TestConcurrentStores(t *testing.T) {
	ctx := t.Context()
	file := filepath.Join(t.TempDir(), "sub", "notes.jsonl")
	cs := mcptest.ConnectPipes(t, ctx, Run, "--file", file)
	mcptest.CheckCatalog(t, ctx, cs, ServerName)

	const n = 32
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			res, err := mcptest.CallErr(ctx, cs, "store", map[string]any{"text": fmt.Sprintf("Note %02d", i)},
				map[string]any{serve.IdempotencyKeyMeta: fmt.Sprintf("key-%02d", i)})
			switch {
			case err != nil:
				errs <- err
			case res.IsError:
				errs <- fmt.Errorf("store %d: %s", i, mcptest.Text(res))
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}

	notes := readNotes(t, file)
	if len(notes) != n {
		t.Fatalf("%d lines in %s, want %d", len(notes), file, n)
	}
	var texts, keys []string
	for _, note := range notes {
		if note.Time.IsZero() {
			t.Errorf("note %q has no time", note.Text)
		}
		if want := "key-" + note.Text[len("Note "):]; note.IdempotencyKey != want {
			t.Errorf("note %q: idempotency_key %q, want %q", note.Text, note.IdempotencyKey, want)
		}
		texts = append(texts, note.Text)
		keys = append(keys, note.IdempotencyKey)
	}
	slices.Sort(texts)
	for i, text := range texts {
		if want := fmt.Sprintf("Note %02d", i); text != want {
			t.Fatalf("texts = %q", texts)
		}
	}

	var found SearchResult
	mcptest.Decode(t, mcptest.Call(t, ctx, cs, "search", map[string]any{"query": "note 1"}, nil), &found)
	if found.Count != 10 || len(found.Matches) != 10 {
		t.Errorf("search %q: %d matches (count %d), want 10", "note 1", len(found.Matches), found.Count)
	}
	mcptest.Decode(t, mcptest.Call(t, ctx, cs, "search", map[string]any{"query": "nothing like it"}, nil), &found)
	if found.Count != 0 || found.Matches == nil {
		t.Errorf("search with no match = %+v, want count 0 and an empty list", found)
	}
}

// The built binary over stdio: a store without _meta records no key, a
// second run appends to the same file, and bad input is a tool error.
func TestBinaryStdio(t *testing.T) {
	ctx := t.Context()
	bin := mcptest.Build(t, "../../notes")
	file := filepath.Join(t.TempDir(), "notes.jsonl")

	cs := mcptest.ConnectCommand(t, ctx, bin, "--file", file)
	mcptest.CheckCatalog(t, ctx, cs, ServerName)
	var stored Note
	mcptest.Decode(t, mcptest.Call(t, ctx, cs, "store", map[string]any{"text": "the machine is idle"}, nil), &stored)
	if stored.Text != "the machine is idle" || stored.IdempotencyKey != "" {
		t.Errorf("store = %+v", stored)
	}
	if res := mcptest.Call(t, ctx, cs, "store", map[string]any{"text": "  "}, nil); !res.IsError {
		t.Errorf("store of blank text: IsError = false")
	}
	if res := mcptest.Call(t, ctx, cs, "store", map[string]any{"note": "wrong field"}, nil); !res.IsError {
		t.Errorf("store without text: IsError = false")
	}
	cs.Close()

	cs2 := mcptest.ConnectCommand(t, ctx, bin, "--file", file)
	mcptest.Call(t, ctx, cs2, "store", map[string]any{"text": "second run"}, map[string]any{serve.IdempotencyKeyMeta: "k2"})
	var found SearchResult
	mcptest.Decode(t, mcptest.Call(t, ctx, cs2, "search", map[string]any{"query": ""}, nil), &found)
	if found.Count != 2 || found.Matches[0].Text != "the machine is idle" || found.Matches[1].IdempotencyKey != "k2" {
		t.Errorf("search all = %+v", found)
	}
	if got := readNotes(t, file); len(got) != 2 {
		t.Errorf("%d lines, want 2", len(got))
	}
}

// Without --file the notes go to $TOLLGATE_HOME/notes.jsonl.
func TestDefaultFile(t *testing.T) {
	home := t.TempDir()
	t.Setenv("TOLLGATE_HOME", home)
	ctx := t.Context()
	cs := mcptest.ConnectPipes(t, ctx, Run)
	mcptest.Call(t, ctx, cs, "store", map[string]any{"text": "hello"}, nil)
	if got := readNotes(t, filepath.Join(home, "notes.jsonl")); len(got) != 1 || got[0].Text != "hello" {
		t.Errorf("notes = %+v", got)
	}
	if _, err := os.Stat("notes.jsonl"); err == nil {
		t.Errorf("wrote ./notes.jsonl despite TOLLGATE_HOME")
	}
}
