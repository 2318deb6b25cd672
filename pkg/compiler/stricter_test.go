package compiler

import (
	"testing"
)

// Item 4 (I2): a catalog that calls test.mark read-only while an executor
// says it is side-effecting compiles, once merged with what the executor
// says, to a plan that puts mark behind a gate; a laxer executor never
// relaxes a strict catalog.
func TestItem4_StricterOfCatalogAndExecutorWins(t *testing.T) {
	lax := NewCatalog([]ToolInfo{{Server: "test", Name: "mark", ReadOnly: true, Idempotent: true}, {Server: "test", Name: "sleep", ReadOnly: true}})
	const src = "m: test.mark {\"name\": \"x\"}\n"
	gated := func(c *Catalog) bool {
		t.Helper()
		r := Compile(src, Options{Catalog: c, Name: "t"})
		if r.Plan == nil {
			t.Fatalf("does not compile: %v", r.Diagnostics)
		}
		return len(r.Plan.StoppingPoints) > 0 || r.Plan.InitialSteps[0].SideEffect
	}
	if gated(lax) {
		t.Fatal("the lax catalog alone compiles mark read-only: the premise of this test")
	}
	merged := lax.WithStricter([]ToolInfo{{Server: "test", Name: "mark"}, {Server: "test", Name: "sleep", ReadOnly: true}, {Server: "other", Name: "x"}})
	if !gated(merged) {
		t.Fatal("the executor says mark is side-effecting: the merged view must gate it")
	}
	if m, _ := merged.Lookup("test", "mark"); m.ReadOnly || m.Idempotent || m.Effect() != "side-effecting" {
		t.Fatalf("merged mark: %+v", m)
	}
	if s, _ := merged.Lookup("test", "sleep"); !s.ReadOnly {
		t.Fatal("where both say read-only it stays read-only")
	}
	if _, ok := merged.Lookup("other", "x"); ok {
		t.Fatal("a tool only an executor advertises is not added to the catalog")
	}
	if m, _ := lax.Lookup("test", "mark"); !m.ReadOnly {
		t.Fatal("WithStricter must not change the catalog it is called on")
	}
	strict := NewCatalog([]ToolInfo{{Server: "test", Name: "mark"}})
	if m, _ := strict.WithStricter([]ToolInfo{{Server: "test", Name: "mark", ReadOnly: true}}).Lookup("test", "mark"); m.ReadOnly {
		t.Fatal("an executor that says read-only does not relax a catalog that says side-effecting")
	}
	f, tr := false, true
	for _, c := range []struct {
		a, b *bool
		want bool // reads as true
	}{{nil, nil, true}, {&f, nil, true}, {nil, &f, true}, {&f, &tr, true}, {&f, &f, false}} {
		got := Stricter(ToolInfo{Destructive: c.a, OpenWorld: c.a}, ToolInfo{Destructive: c.b, OpenWorld: c.b})
		if (got.Destructive == nil || *got.Destructive) != c.want || (got.OpenWorld == nil || *got.OpenWorld) != c.want {
			t.Fatalf("Stricter(%v, %v) destructive/open-world: %+v", c.a, c.b, got)
		}
	}
}
