package stubtools

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/tollgate-dev/tollgate/examples"
	"github.com/tollgate-dev/tollgate/internal/executor"
	"github.com/tollgate-dev/tollgate/pkg/compiler"
)

func TestHost(t *testing.T) {
	cat, err := compiler.ParseCatalog(examples.Catalog)
	if err != nil {
		t.Fatal(err)
	}
	var heard []string
	h := New(Config{Catalog: cat, OnCall: func(server, tool, key string) { heard = append(heard, server+"."+tool+" "+key) }})
	offered := map[string]executor.ToolSpec{}
	for _, s := range h.Tools() {
		offered[s.Server+"."+s.Name] = s
	}
	if !offered["notes.search"].ReadOnly || offered["notes.store"].ReadOnly || !offered["test.sleep"].ReadOnly {
		t.Fatalf("annotations: %+v", offered)
	}
	out, err := h.Call(context.Background(), "notes", "store", json.RawMessage(`{"text":"x"}`), "run-1/save")
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Tool, Key string
		Args      map[string]string
	}
	if err := json.Unmarshal(out, &got); err != nil || got.Tool != "notes.store" || got.Key != "run-1/save" || got.Args["text"] != "x" {
		t.Fatalf("answer %s: %+v %v", out, got, err)
	}
	if out, err := h.Call(context.Background(), "test", "sleep", json.RawMessage(`{"ms": 1}`), "k"); err != nil || string(out) != `{"slept_ms":1}` {
		t.Fatalf("sleep: %s %v", out, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var te *executor.TransportError
	if _, err := h.Call(ctx, "test", "sleep", json.RawMessage(`{"ms": 60000}`), "k"); !errors.As(err, &te) {
		t.Fatalf("a cancelled sleep: %v", err)
	}
	if h.Count("notes.store") != 1 || h.Count("test.sleep") != 2 || h.Count("notes.search") != 0 {
		t.Fatalf("counts %v", h.calls)
	}
	if len(heard) != 3 || heard[0] != "notes.store run-1/save" {
		t.Fatalf("OnCall heard %q", heard)
	}
}
