package skills

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/internal/store/memstore"
	"github.com/tollgate-dev/tollgate/pkg/compiler"
	"github.com/tollgate-dev/tollgate/pkg/decidable"
	"github.com/tollgate-dev/tollgate/pkg/plan"
)

// anyone lets everyone publish; gates whose title holds "nobody" are
// undecidable.
type anyone struct{}

func (anyone) MayPublishSkill(context.Context, string, string) (string, bool) { return "", true }

func (anyone) UndecidableGates(_ context.Context, _ string, p *plan.Plan) ([]decidable.GateAuthority, error) {
	var out []decidable.GateAuthority
	for _, sp := range p.AllStops() {
		if strings.Contains(sp.Title, "nobody") {
			out = append(out, decidable.GateAuthority{Gate: sp.ID, Title: sp.Title, Problem: &decidable.Undecidable{Reason: "no role holds it"}})
		}
	}
	return out, nil
}

const catalog = `
servers:
  notes:
    - {name: store, annotations: {readOnlyHint: false}}
`

func newRegistry(t *testing.T) *Registry {
	t.Helper()
	cat, err := compiler.ParseCatalog([]byte(catalog))
	if err != nil {
		t.Fatal(err)
	}
	st := memstore.New(memstore.Config{})
	return New(Config{Store: st, Catalog: func() *compiler.Catalog { return cat }, Authority: anyone{},
		Now: func(context.Context) (time.Time, error) { return time.Now(), nil }})
}

func write(t *testing.T, path, text string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

const saveIt = "ask me:\n  save it?\nsave: notes.store {\"text\": \"%s\"}\n"

// A skills directory as a ConfigMap mounts it: each item a link into a
// hidden ..data folder. Every SKILL.md is published at the first load, a
// change publishes a new version, an unchanged file nothing, a file that
// does not compile leaves the previous version in force, and a file that
// leaves deletes its skill (the directory's own, not one pushed since).
func TestDirLoadsChangesAndDeletes(t *testing.T) {
	ctx := context.Background()
	reg := newRegistry(t)
	root := t.TempDir()
	data := filepath.Join(root, "..data")
	write(t, filepath.Join(data, "greet", "SKILL.md"), strings.Replace(saveIt, "%s", "hi", 1))
	write(t, filepath.Join(data, "named", "SKILL.md"), "---\nname: other-name\n---\n"+strings.Replace(saveIt, "%s", "x", 1))
	for _, n := range []string{"greet", "named"} {
		if err := os.Symlink(filepath.Join("..data", n), filepath.Join(root, n)); err != nil {
			t.Fatal(err)
		}
	}
	d := NewDir(reg, os.DirFS(root), root, time.Second, nil)
	res, err := d.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(res.Published, ",") != "greet,other-name" || len(res.Refused) != 0 {
		t.Fatalf("first load: %+v", res)
	}
	v, err := reg.Get(ctx, "greet", 0)
	if err != nil || v.Version != 1 || v.Origin != OriginDir || v.Author != DirAuthor {
		t.Fatalf("greet: %+v %v", v, err)
	}
	// Unchanged: nothing read into a new version, even by a second loader
	// (another replica) that never saw the files.
	if res, _ := NewDir(reg, os.DirFS(root), root, time.Second, nil).Load(ctx); len(res.Published) != 0 || len(res.Unchanged) != 2 {
		t.Fatalf("a second replica's load: %+v", res)
	}
	// A change is a new version; a broken file keeps the old one.
	write(t, filepath.Join(data, "greet", "SKILL.md"), strings.Replace(saveIt, "%s", "hello", 1))
	write(t, filepath.Join(data, "named", "SKILL.md"), "---\nname: other-name\n---\nsave: notes.nope {}\n")
	res, _ = d.Load(ctx)
	if strings.Join(res.Published, ",") != "greet" || !strings.Contains(res.Refused["named/SKILL.md"], "SKILL.md:4:") {
		t.Fatalf("after a change and a break: %+v", res)
	}
	if v, _ := reg.Get(ctx, "other-name", 0); v.Version != 1 {
		t.Fatalf("a broken file replaced its skill: %+v", v)
	}
	// An undecidable gate is refused too (for a gate that asks a role).
	write(t, filepath.Join(root, "plain", "SKILL.md"), "ask finance:\n  nobody can?\nsave: notes.store {\"text\": \"x\"}\n")
	res, _ = d.Load(ctx)
	if !strings.Contains(res.Refused["plain/SKILL.md"], "nobody could decide") {
		t.Fatalf("an undecidable gate was loaded: %+v", res)
	}
	// A skill pushed through the API since is not the directory's to
	// delete; one that is, is deleted when its file goes.
	if _, err := reg.Put(ctx, PutRequest{Who: "alice", Name: "other-name", Source: "---\nname: other-name\n---\n" + strings.Replace(saveIt, "%s", "api", 1), Origin: OriginAPI}); err != nil {
		t.Fatal(err)
	}
	os.Remove(filepath.Join(root, "greet"))
	os.Remove(filepath.Join(root, "named"))
	res, _ = d.Load(ctx)
	if strings.Join(res.Deleted, ",") != "greet" {
		t.Fatalf("deleted %v, want greet only", res.Deleted)
	}
	if _, err := reg.Get(ctx, "greet", 0); err == nil {
		t.Fatal("greet is still served")
	}
	if h, _ := reg.History(ctx, "greet", 0, 10); len(h) != 3 || !h[2].Deleted {
		t.Fatalf("greet's history: %+v", h)
	}
	if v, _ := reg.Get(ctx, "other-name", 0); v.Origin != OriginAPI {
		t.Fatalf("the pushed version was deleted with the file: %+v", v)
	}
}
