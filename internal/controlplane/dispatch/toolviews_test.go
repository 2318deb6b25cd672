package dispatch

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	tollgatev1 "github.com/tollgate-dev/tollgate/gen/tollgate/v1"
	"github.com/tollgate-dev/tollgate/pkg/compiler"
)

func hello(tools ...*tollgatev1.Tool) []*tollgatev1.Tool { return tools }

func tool(server, name string, readOnly bool) *tollgatev1.Tool {
	return &tollgatev1.Tool{Server: server, Tool: name, Annotations: &tollgatev1.ToolAnnotations{ReadOnlyHint: readOnly}}
}

// Item 4: what executors advertise makes the catalog stricter, never
// laxer, and a disagreement with the catalog is a warning naming both
// views; the catalog recipes compile against changes (a new pointer, so
// cached plans are not reused) only when a tool's effect does.
func TestItem4_ToolViewsStricterWinsAndNeverRelax(t *testing.T) {
	var logs bytes.Buffer
	base := compiler.NewCatalog([]compiler.ToolInfo{{Server: "test", Name: "mark", ReadOnly: true}, {Server: "test", Name: "sleep", ReadOnly: true}, {Server: "notes", Name: "store"}})
	v := newToolViews(base, slog.New(slog.NewTextHandler(&logs, nil)))
	effect := func(name string) string {
		t.Helper()
		s, n, _ := strings.Cut(name, ".")
		info, ok := v.catalog().Lookup(s, n)
		if !ok {
			t.Fatalf("%s left the catalog", name)
		}
		return info.Effect()
	}

	v.advertised("edge-1", hello(tool("test", "mark", false), tool("test", "sleep", true), tool("other", "x", true)))
	if effect("test.mark") != "side-effecting" || effect("test.sleep") != "read-only" {
		t.Fatalf("edge-1 says mark is side-effecting: mark %s, sleep %s", effect("test.mark"), effect("test.sleep"))
	}
	for _, w := range []string{"level=WARN", "tool=test.mark", "catalog_says=read-only", "executor=edge-1", "executor_says=side-effecting", "using=side-effecting"} {
		if !strings.Contains(logs.String(), w) {
			t.Fatalf("the warning names both views (%q):\n%s", w, logs.String())
		}
	}
	if strings.Contains(logs.String(), "test.sleep") {
		t.Fatalf("no warning where they agree:\n%s", logs.String())
	}
	if who, ok := v.sideEffecting("test", "mark"); !ok || who != "edge-1" {
		t.Fatalf("sideEffecting(test.mark) = %q, %v", who, ok)
	}
	merged := v.catalog()

	logs.Reset()
	v.advertised("edge-2", hello(tool("test", "mark", true), tool("notes", "store", true)))
	v.advertised("edge-1", hello(tool("test", "mark", false)))
	if v.catalog() != merged || effect("test.mark") != "side-effecting" || effect("notes.store") != "side-effecting" {
		t.Fatalf("a laxer executor relaxed the catalog: mark %s, store %s", effect("test.mark"), effect("notes.store"))
	}
	if !strings.Contains(logs.String(), "tool=notes.store catalog_says=side-effecting executor=edge-2 executor_says=read-only using=side-effecting") {
		t.Fatalf("a laxer executor is a warning too:\n%s", logs.String())
	}
	if who, _ := v.sideEffecting("test", "mark"); who != "edge-1" {
		t.Fatalf("the executor that said side-effecting is named: %q", who)
	}
	if _, ok := v.catalog().Lookup("other", "x"); ok {
		t.Fatal("a tool only an executor advertises is not added")
	}
}

// The input schema an executor advertises reaches the catalog recipes
// compile and runs check against, in place of the catalog's; a new schema
// is a new catalog, the same one is not; one that does not parse is a
// warning and checks nothing.
func TestToolViewsCarryAdvertisedInputSchemas(t *testing.T) {
	var logs bytes.Buffer
	base := compiler.NewCatalog([]compiler.ToolInfo{{Server: "payments", Name: "pay"}, {Server: "notes", Name: "store"}})
	v := newToolViews(base, slog.New(slog.NewTextHandler(&logs, nil)))
	withSchema := func(server, name, schema string) *tollgatev1.Tool {
		tl := tool(server, name, false)
		tl.InputSchemaJson = schema
		return tl
	}
	const pay = `{"type":"object","required":["invoice"],"properties":{"invoice":{"type":"string"}}}`
	v.advertised("edge-1", hello(withSchema("payments", "pay", pay), withSchema("notes", "store", `{"type": 7}`)))
	info, _ := v.catalog().Lookup("payments", "pay")
	if ps := info.CheckArgs([]byte(`{"amount": 1}`)); len(ps) == 0 || ps[0].Field != "invoice" {
		t.Fatalf("pay's advertised schema is checked: %v (schema %q)", ps, info.InputSchema.JSON())
	}
	if store, _ := v.catalog().Lookup("notes", "store"); store.InputSchema != nil || !strings.Contains(logs.String(), "tool=notes.store") {
		t.Fatalf("a schema that does not parse checks nothing and is a warning: %q\n%s", store.InputSchema.JSON(), logs.String())
	}
	merged := v.catalog()
	v.advertised("edge-2", hello(withSchema("payments", "pay", pay)))
	if v.catalog() != merged {
		t.Fatal("the same schema again made a new catalog")
	}
	v.advertised("edge-2", hello(withSchema("payments", "pay", `{"type":"object","required":["vendor"]}`)))
	if v.catalog() == merged {
		t.Fatal("a new schema kept the old catalog")
	}
	if info, _ := v.catalog().Lookup("payments", "pay"); len(info.CheckArgs([]byte(`{"invoice":"I"}`))) == 0 {
		t.Fatalf("the newer schema is checked: %q", info.InputSchema.JSON())
	}
}

// A reloaded catalog takes the configured one's place, stricter or laxer,
// while what executors advertised still applies on top of it; the
// catalog's own view is what refuseUngoverned consults for a plan
// compiled before the reload.
func TestToolViewsRebase(t *testing.T) {
	base := compiler.NewCatalog([]compiler.ToolInfo{{Server: "test", Name: "mark", ReadOnly: true}, {Server: "test", Name: "sleep", ReadOnly: true}})
	v := newToolViews(base, slog.New(slog.NewTextHandler(&bytes.Buffer{}, nil)))
	v.advertised("edge-1", hello(tool("test", "sleep", false)))
	effect := func(name string) string {
		t.Helper()
		info, ok := v.catalog().Lookup("test", name)
		if !ok {
			t.Fatalf("test.%s left the catalog", name)
		}
		return info.Effect()
	}
	if v.catalogSideEffecting("test", "mark") {
		t.Fatal("the configured catalog calls mark read-only")
	}
	if !v.rebase(compiler.NewCatalog([]compiler.ToolInfo{{Server: "test", Name: "mark"}, {Server: "test", Name: "sleep", ReadOnly: true}})) {
		t.Fatal("a stricter catalog did not change the views")
	}
	if effect("mark") != "side-effecting" || !v.catalogSideEffecting("test", "mark") {
		t.Fatalf("after the reload mark is %s", effect("mark"))
	}
	if effect("sleep") != "side-effecting" {
		t.Fatal("a reload dropped what an executor advertised")
	}
	if v.rebase(compiler.NewCatalog([]compiler.ToolInfo{{Server: "test", Name: "mark"}, {Server: "test", Name: "sleep", ReadOnly: true}})) {
		t.Fatal("the same catalog again changed the views")
	}
	v.rebase(base)
	if effect("mark") != "read-only" || effect("sleep") != "side-effecting" {
		t.Fatalf("back to the first catalog: mark %s, sleep %s", effect("mark"), effect("sleep"))
	}
}
