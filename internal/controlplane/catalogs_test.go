package controlplane

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	tollgatev1 "github.com/tollgate-dev/tollgate/gen/tollgate/v1"
	"github.com/tollgate-dev/tollgate/pkg/compiler"
)

// TestCatalogReloaderAppliesChanges: a changed catalog file is applied
// once; the same content is not applied again; one that does not parse
// keeps the catalog in force and is logged once however often it is
// read; a file gone for a moment is silent; the next good one is applied.
func TestCatalogReloaderAppliesChanges(t *testing.T) {
	file := filepath.Join(t.TempDir(), "catalog.yaml")
	write := func(s string) {
		t.Helper()
		if err := os.WriteFile(file, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("servers:\n  s:\n    - {name: x, annotations: {readOnlyHint: true}}\n")
	_, sum, err := readCatalogs([]string{file})
	if err != nil {
		t.Fatal(err)
	}
	var applied []*compiler.Catalog
	var logs bytes.Buffer
	r := newCatalogReloader([]string{file}, sum, func(c *compiler.Catalog) bool { applied = append(applied, c); return true }, slog.New(slog.NewTextHandler(&logs, nil)))
	r.check(bg)
	if len(applied) != 0 {
		t.Fatal("the catalog it started with was applied again")
	}
	write("servers:\n  s:\n    - {name: x, annotations: {readOnlyHint: true}}\n    - {name: y}\n")
	r.check(bg)
	r.check(bg)
	if len(applied) != 1 {
		t.Fatalf("a change applied %d times, want once", len(applied))
	}
	if y, ok := applied[0].Lookup("s", "y"); !ok || y.ReadOnly {
		t.Fatalf("the reloaded catalog lacks s.y as side-effecting: %+v %v", y, ok)
	}
	write("servers: [not, a, catalog")
	r.check(bg)
	r.check(bg)
	if len(applied) != 1 || strings.Count(logs.String(), "not reloaded") != 1 {
		t.Fatalf("a broken catalog: applied %d, logged:\n%s", len(applied), logs.String())
	}
	os.Remove(file)
	r.check(bg)
	if strings.Count(logs.String(), "level=ERROR") != 1 {
		t.Fatalf("a missing file was logged as a broken catalog:\n%s", logs.String())
	}
	write("servers:\n  s:\n    - {name: z, annotations: {readOnlyHint: true}}\n")
	r.check(bg)
	if len(applied) != 2 {
		t.Fatal("the good catalog after a broken one was not applied")
	}
	if _, ok := applied[1].Lookup("s", "z"); !ok {
		t.Fatal("the applied catalog is not the file's")
	}
}

// TestSetCatalogChangesWhatCompiles: after a reload, recipes compile
// against the new catalog: a tool it adds is known, and a tool it makes
// side-effecting needs an approval where before it did not.
func TestSetCatalogChangesWhatCompiles(t *testing.T) {
	e := newEnv(t, nil, echoTools())
	compile := func() *tollgatev1.CompileResponse {
		t.Helper()
		resp, err := tollgatev1.NewPlanServiceClient(e.conn("alice")).Compile(bg, &tollgatev1.CompileRequest{Source: "s: fresh.tool {}\n"})
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	if compile().GetPlanDigest() != "" {
		t.Fatal("a tool no catalog has compiled")
	}
	readOnly := compiler.NewCatalog([]compiler.ToolInfo{{Server: "fresh", Name: "tool", ReadOnly: true}})
	if !e.srv.SetCatalog(readOnly) {
		t.Fatal("a new catalog did not change what compiles")
	}
	r := compile()
	if r.GetPlanDigest() == "" {
		t.Fatalf("the reloaded catalog's tool does not compile: %v", r.GetDiagnostics())
	}
	if strings.Contains(r.GetPlanCard(), "gate_s") {
		t.Fatalf("a read-only tool is gated:\n%s", r.GetPlanCard())
	}
	e.srv.SetCatalog(compiler.NewCatalog([]compiler.ToolInfo{{Server: "fresh", Name: "tool"}}))
	if r := compile(); !strings.Contains(r.GetPlanCard(), "gate_s") {
		t.Fatalf("a tool the reloaded catalog calls side-effecting compiled without an approval before it:\n%s", r.GetPlanCard())
	}
}
