package approvectl

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/tollgate-dev/tollgate/examples"
	"github.com/tollgate-dev/tollgate/pkg/compiler"
	"github.com/tollgate-dev/tollgate/pkg/plan"
)

func newPlanCmd(g *globals) *cobra.Command {
	cfg := g.cfg
	var catalogPath string
	cmd := &cobra.Command{
		Use:   "plan PATH",
		Short: "Compile a recipe or skill offline and show its plan card",
		Long: `Compile a recipe offline and print its plan card, or the plan as JSON.

PATH is a recipe file, a SKILL.md, or a skill's folder (holding SKILL.md).
Tools are checked against a catalog file (--catalog); without one, the catalog
of the example skills (examples/catalog.yaml, built in) is used.

Nothing runs: this only shows what a run would do and where it stops to ask.

Exit codes: 0 the recipe compiles; 1 it does not (diagnostics on stderr, or
on stdout as JSON with -o json); 2 bad usage or an unreadable file.`,
		Example: `  approvectl plan examples/skills/graph-ask-demo
  approvectl plan recipe.txt --catalog tools.yaml -o json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			src, file, name, err := readRecipe(args[0])
			if err != nil {
				return &exitError{code: ExitUsage, err: err}
			}
			cat, err := loadCatalog(catalogPath)
			if err != nil {
				return &exitError{code: ExitUsage, err: err}
			}
			res := compiler.Compile(src, compiler.Options{Catalog: cat, Name: name})
			return printPlan(cfg, g.output, file, res)
		},
	}
	cmd.Flags().StringVar(&catalogPath, "catalog", "", "tool catalog file (default: the built-in examples/catalog.yaml)")
	return cmd
}

// readRecipe reads PATH as a recipe file, a SKILL.md or a skill folder and
// returns its text, the file read, and a default plan name.
func readRecipe(path string) (src, file, name string, err error) {
	fi, err := os.Stat(path)
	if err != nil {
		return "", "", "", fmt.Errorf("read recipe: %w", err)
	}
	file = path
	if fi.IsDir() {
		file = filepath.Join(path, "SKILL.md")
	}
	b, err := os.ReadFile(file)
	if err != nil {
		if fi.IsDir() {
			return "", "", "", fmt.Errorf("read skill: %s holds no SKILL.md", path)
		}
		return "", "", "", fmt.Errorf("read recipe: %w", err)
	}
	abs, _ := filepath.Abs(file)
	if strings.EqualFold(filepath.Base(file), "SKILL.md") {
		name = filepath.Base(filepath.Dir(abs))
	} else {
		name = strings.TrimSuffix(filepath.Base(file), filepath.Ext(file))
	}
	return string(b), file, name, nil
}

func loadCatalog(path string) (*compiler.Catalog, error) {
	data := examples.Catalog
	if path != "" {
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("read catalog: %w", err)
		}
		data = b
	}
	cat, err := compiler.ParseCatalog(data)
	if err != nil {
		return nil, fmt.Errorf("catalog %s: %w", path, err)
	}
	return cat, nil
}

func printPlan(cfg Config, output, file string, res compiler.Result) error {
	failed := res.Plan == nil
	if output == "json" {
		if failed {
			out := struct {
				File        string               `json:"file"`
				Diagnostics compiler.Diagnostics `json:"diagnostics"`
			}{file, res.Diagnostics}
			enc := json.NewEncoder(cfg.Stdout)
			enc.SetIndent("", "  ")
			enc.SetEscapeHTML(false)
			if err := enc.Encode(out); err != nil {
				return fmt.Errorf("write diagnostics: %w", err)
			}
			return &exitError{code: ExitRefused, err: fmt.Errorf("%s does not compile", file), printed: true}
		}
		b, err := plan.Indent(res.Plan)
		if err != nil {
			return err
		}
		if _, err := cfg.Stdout.Write(b); err != nil {
			return fmt.Errorf("write plan: %w", err)
		}
		fmt.Fprint(cfg.Stderr, compiler.FormatDiagnostics(file, res.Diagnostics))
		return nil
	}
	if failed {
		fmt.Fprint(cfg.Stderr, compiler.FormatDiagnostics(file, res.Diagnostics))
		n := 0
		for _, d := range res.Diagnostics {
			if d.Severity == compiler.Error {
				n++
			}
		}
		return &exitError{code: ExitRefused, err: fmt.Errorf("%s does not compile: %d error(s)", file, n)}
	}
	_, err := fmt.Fprint(cfg.Stdout, compiler.Card(res.Plan, res.Digest, res.Diagnostics))
	return err
}
