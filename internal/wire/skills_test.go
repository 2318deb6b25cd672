package wire

import (
	"testing"

	"github.com/tollgate-dev/tollgate/examples"
	"github.com/tollgate-dev/tollgate/pkg/compiler"
	"github.com/tollgate-dev/tollgate/pkg/engine"
)

// exampleMachine is the engine of an example skill compiled against the
// example catalog: the one fixture the view tests start runs from.
func exampleMachine(t *testing.T, skill string) *engine.Machine {
	t.Helper()
	src, err := examples.Skills.ReadFile("skills/" + skill + "/SKILL.md")
	if err != nil {
		t.Fatal(err)
	}
	cat, err := compiler.ParseCatalog(examples.Catalog)
	if err != nil {
		t.Fatal(err)
	}
	res := compiler.Compile(string(src), compiler.Options{Catalog: cat})
	if res.Plan == nil {
		t.Fatalf("%s does not compile: %v", skill, res.Diagnostics)
	}
	m, err := engine.New(res.Plan, engine.Config{})
	if err != nil {
		t.Fatal(err)
	}
	return m
}
