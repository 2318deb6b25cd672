package layout

import (
	"bufio"
	"errors"
	"fmt"
	"go/parser"
	"go/token"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// binaries maps each binary's main package to the package that is the
// binary; no other binary may link it.
var binaries = map[string]string{
	"cmd/controlplane": "internal/controlplane",
	"cmd/executor":     "internal/executor",
	"cmd/approvectl":   "internal/approvectl",
}

// byDesign are import edges (importer → imported, module-relative) the
// binary rule lets through because DESIGN.md says so: cmd/controlplane's
// dev mode runs an in-process executor, and internal/devstack is the one
// package that links the two (issue 14). Nothing else may import it.
var byDesign = map[[2]string]bool{
	{"cmd/controlplane", "internal/devstack"}: true,
}

// exceptions are import edges the rules skip for now, each with a TODO
// saying when it goes; an exception whose edge no longer exists fails the
// test, so the list does not outlive its reason. Empty since
// internal/devstack landed (it held cmd/controlplane → internal/executor).
var exceptions = map[[2]string]bool{}

// pure lists what a pkg/ package may never reach: import paths, or
// prefixes ending in "/". Module-relative paths start with "./".
var pure = []string{"./internal/", "./gen/", "google.golang.org/grpc", "google.golang.org/grpc/", "github.com/redis/go-redis/"}

// pkgImports is one directory's package: the imports of its non-test
// files, and those of its test files.
type pkgImports struct {
	imports, testImports []string
}

func TestLayout(t *testing.T) {
	root, mod := moduleRoot(t)
	pkgs, err := scan(root, mod)
	if err != nil {
		t.Fatal(err)
	}
	for _, must := range []string{"pkg/engine", "pkg/freshness", "cmd/controlplane", "gen/tollgate/v1", "internal/controlplane"} {
		if _, ok := pkgs[must]; !ok {
			t.Fatalf("the scan of %s found no package %s: it is looking in the wrong place", root, must)
		}
	}
	skip := map[[2]string]bool{}
	for _, edges := range []map[[2]string]bool{byDesign, exceptions} {
		for e := range edges {
			if p, ok := pkgs[e[0]]; !ok || !slices.Contains(p.imports, "./"+e[1]) {
				t.Errorf("%s no longer imports %s: remove the edge from the list", e[0], e[1])
			}
			skip[e] = true
		}
	}
	for _, v := range check(pkgs, skip) {
		t.Error(v)
	}
}

// The checker itself, on a made-up tree: each rule fires, through a chain
// of our own packages too, and an exception lets exactly its edge through.
func TestCheckFindsEachBreach(t *testing.T) {
	pkgs := map[string]*pkgImports{
		"pkg/a":                 {imports: []string{"./pkg/b", "fmt"}},
		"pkg/b":                 {imports: []string{"./client/c"}},
		"client/c":              {imports: []string{"google.golang.org/grpc"}},
		"pkg/d":                 {imports: []string{"github.com/redis/go-redis/v9"}},
		"pkg/e":                 {testImports: []string{"./internal/store"}},
		"pkg/ok":                {imports: []string{"google.golang.org/grpcx", "./pkg/plan"}},
		"pkg/plan":              {},
		"internal/store":        {},
		"cmd/executor":          {imports: []string{"./internal/executor", "./internal/bridge"}},
		"internal/bridge":       {imports: []string{"./internal/approvectl"}},
		"internal/executor":     {},
		"internal/approvectl":   {},
		"internal/controlplane": {imports: []string{"./internal/executor"}, testImports: []string{"./internal/approvectl"}},
		"cmd/controlplane":      {imports: []string{"./internal/controlplane", "./internal/executor"}},
		"gen/v1":                {imports: []string{"./pkg/plan", "google.golang.org/grpc"}},
	}
	got := check(pkgs, map[[2]string]bool{{"cmd/controlplane", "internal/executor"}: true})
	for _, want := range []string{
		"pkg/a reaches google.golang.org/grpc (pkg/a → pkg/b → client/c → google.golang.org/grpc)",
		"pkg/b reaches google.golang.org/grpc",
		"pkg/d reaches github.com/redis/go-redis/v9",
		"pkg/e (tests) reaches internal/store",
		"cmd/executor links internal/approvectl (cmd/executor → internal/bridge → internal/approvectl)",
		"internal/controlplane links internal/executor",
		"cmd/controlplane links internal/executor (cmd/controlplane → internal/controlplane → internal/executor)",
		"gen/v1 imports pkg/plan",
	} {
		if !slices.ContainsFunc(got, func(v string) bool { return strings.HasPrefix(v, want) }) {
			t.Errorf("not reported: %s", want)
		}
	}
	for _, v := range got {
		if strings.HasPrefix(v, "pkg/ok") || strings.HasPrefix(v, "pkg/plan") || strings.Contains(v, "(tests) links") {
			t.Errorf("reported in error: %s", v)
		}
	}
	if len(got) != 8 {
		t.Errorf("%d breaches reported, want 8:\n%s", len(got), strings.Join(got, "\n"))
	}
}

// check returns every breach of the rules in pkgs (keyed and importing by
// module-relative path, "./" prefixed for our own), skipping the
// exception edges.
func check(pkgs map[string]*pkgImports, except map[[2]string]bool) []string {
	var out []string
	for _, p := range slices.Sorted(maps.Keys(pkgs)) {
		switch {
		case strings.HasPrefix(p, "pkg/"):
			for _, tests := range []bool{false, true} {
				if chain := reach(pkgs, except, p, tests, func(imp string) bool { return forbiddenInPkg(imp) }); chain != nil {
					what := p
					if tests {
						what += " (tests)"
					}
					out = append(out, fmt.Sprintf("%s reaches %s (%s): pkg/ stays pure (DESIGN.md §11)", what, last(chain), strings.Join(chain, " → ")))
				}
			}
		case strings.HasPrefix(p, "gen/"):
			for _, imp := range pkgs[p].imports {
				if rel, ours := strings.CutPrefix(imp, "./"); ours && !strings.HasPrefix(rel, "gen/") {
					out = append(out, fmt.Sprintf("%s imports %s: gen/ imports nothing of ours (DESIGN.md §11)", p, rel))
				}
			}
		}
		if own, ok := binaryOf(p); ok {
			if chain := reach(pkgs, except, p, false, func(imp string) bool {
				other, isBinary := binaryOf(strings.TrimPrefix(imp, "./"))
				return strings.HasPrefix(imp, "./") && isBinary && other != own
			}); chain != nil {
				out = append(out, fmt.Sprintf("%s links %s (%s): the binaries' packages never import each other (DESIGN.md §11)", p, last(chain), strings.Join(chain, " → ")))
			}
		}
	}
	return out
}

// binaryOf says which binary p belongs to: its cmd/ package, the package
// that is the binary, or one under it.
func binaryOf(p string) (string, bool) {
	for cmd, pkg := range binaries {
		if p == cmd || p == pkg || strings.HasPrefix(p, pkg+"/") {
			return cmd, true
		}
	}
	return "", false
}

func forbiddenInPkg(imp string) bool {
	for _, f := range pure {
		if imp == f || (strings.HasSuffix(f, "/") && strings.HasPrefix(imp, f)) {
			return true
		}
	}
	return false
}

// reach walks from p (its test imports too when tests) through our own
// packages' non-test imports, and returns the first chain, p first, that
// ends in an import bad reports; nil if none does.
func reach(pkgs map[string]*pkgImports, except map[[2]string]bool, p string, tests bool, bad func(string) bool) []string {
	seen := map[string]bool{p: true}
	var walk func(from string, imps []string, chain []string) []string
	walk = func(from string, imps []string, chain []string) []string {
		for _, imp := range imps {
			rel := strings.TrimPrefix(imp, "./")
			if except[[2]string{from, rel}] {
				continue
			}
			if bad(imp) {
				return append(slices.Clone(chain), rel)
			}
			if next, ours := pkgs[rel]; ours && strings.HasPrefix(imp, "./") && !seen[rel] {
				seen[rel] = true
				if c := walk(rel, next.imports, append(chain, rel)); c != nil {
					return c
				}
			}
		}
		return nil
	}
	imps := pkgs[p].imports
	if tests {
		imps = pkgs[p].testImports
	}
	return walk(p, imps, []string{p})
}

// scan parses the imports of every Go file of the module at root (not of
// modules nested in it, nor testdata), keyed by directory relative to
// root; our own imports come back as "./" and the module-relative path.
func scan(root, mod string) (map[string]*pkgImports, error) {
	pkgs := map[string]*pkgImports{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			name := d.Name()
			if path != root && (strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || name == "testdata" || name == "vendor") {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(path, "go.mod")); path != root && err == nil {
				return filepath.SkipDir // a module of its own
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			return fmt.Errorf("parse %s: %w", path, err)
		}
		dir, err := filepath.Rel(root, filepath.Dir(path))
		if err != nil {
			return err
		}
		dir = filepath.ToSlash(dir)
		p := pkgs[dir]
		if p == nil {
			p = &pkgImports{}
			pkgs[dir] = p
		}
		for _, spec := range f.Imports {
			imp, err := strconv.Unquote(spec.Path.Value)
			if err != nil {
				return fmt.Errorf("%s: import %s: %w", path, spec.Path.Value, err)
			}
			if rel, ours := strings.CutPrefix(imp, mod+"/"); ours {
				imp = "./" + rel
			}
			if strings.HasSuffix(path, "_test.go") {
				p.testImports = append(p.testImports, imp)
			} else {
				p.imports = append(p.imports, imp)
			}
		}
		return nil
	})
	return pkgs, err
}

// moduleRoot finds the go.mod above the test's directory and the module
// path it declares.
func moduleRoot(t *testing.T) (string, string) {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		f, err := os.Open(filepath.Join(dir, "go.mod"))
		if err == nil {
			defer f.Close()
			sc := bufio.NewScanner(f)
			for sc.Scan() {
				if m, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "module "); ok {
					return dir, strings.Trim(strings.TrimSpace(m), `"`)
				}
			}
			t.Fatalf("%s/go.mod declares no module", dir)
		}
		if !errors.Is(err, fs.ErrNotExist) {
			t.Fatal(err)
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test's directory")
		}
		dir = parent
	}
}

func last(s []string) string { return s[len(s)-1] }
