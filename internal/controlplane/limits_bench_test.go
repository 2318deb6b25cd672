package controlplane

import (
	"io/fs"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/examples"
	tollgatev1 "github.com/tollgate-dev/tollgate/gen/tollgate/v1"
	"github.com/tollgate-dev/tollgate/internal/controlplane/api"
	"github.com/tollgate-dev/tollgate/internal/wire"
	"github.com/tollgate-dev/tollgate/pkg/compiler"
	"github.com/tollgate-dev/tollgate/pkg/engine"
)

// BenchmarkValueLimits is what the API server's size checks add to one
// GetRun of graph-ask-demo: the request's values checked, the response
// measured (it fits, so nothing is copied).
func BenchmarkValueLimits(b *testing.B) {
	text, _ := fs.ReadFile(ExampleSkills(), "graph-ask-demo/SKILL.md")
	src := string(text)
	cat, _ := compiler.ParseCatalog(examples.Catalog)
	res := compiler.Compile(src, compiler.Options{Catalog: cat, Name: "graph-ask-demo"})
	m, err := engine.New(res.Plan, engine.Config{})
	if err != nil {
		b.Fatal(err)
	}
	run := m.Start("r_bench", "alice", time.Now()).Run
	req := &tollgatev1.GetRunRequest{RunId: run.ID}
	resp := &tollgatev1.GetRunResponse{Run: wire.NewViews(1).Run(run, m)}
	b.ReportAllocs()
	for b.Loop() {
		if err := api.CheckValues(req); err != nil {
			b.Fatal(err)
		}
		if _, err := api.FitResponse(resp); err != nil {
			b.Fatal(err)
		}
	}
}
