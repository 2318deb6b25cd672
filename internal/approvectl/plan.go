package approvectl

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/tollgate-dev/tollgate/examples"
	"github.com/tollgate-dev/tollgate/pkg/authz"
	"github.com/tollgate-dev/tollgate/pkg/compiler"
	"github.com/tollgate-dev/tollgate/pkg/decidable"
	"github.com/tollgate-dev/tollgate/pkg/plan"
)

func newPlanCmd(g *globals) *cobra.Command {
	cfg := g.cfg
	var catalogPath string
	var who whoDecides
	cmd := &cobra.Command{
		Use:   "plan PATH",
		Short: "Compile a recipe or skill offline and show its plan card",
		Long: `Compile a recipe offline and print its plan card, or the plan as JSON.

PATH is a recipe file, a SKILL.md, or a skill's folder (holding SKILL.md).
Tools are checked against a catalog file (--catalog); without one, the catalog
of the example skills (examples/catalog.yaml, built in) is used.

Nothing runs: this only shows what a run would do and where it stops to ask.
The card ends with what its two buttons do from here:

  [Run once]         approvectl run PATH
  [Save + schedule]  approvectl skills push PATH && approvectl schedules add NAME --skill NAME --cron 'EXPR'

NAME is the plan's name; EXPR is when it should run, for you to fill in
(approvectl schedules add --help). -o json prints the plan alone.

With --policy FILE (a policy CSV, as the control plane's --policy) the card
also says who may decide each approval gate under that policy when
--requester (default: the --as user) starts the run, and flags a gate nobody
could decide — which the control plane refuses at start — with the reason and
the rows to add. A gate whose amount depends on earlier steps is judged at the
least it could be, and again by the control plane when it opens.

Exit codes: 0 the recipe compiles; 1 it does not (diagnostics on stderr, or
on stdout as JSON with -o json), or with --policy a gate nobody could decide;
2 bad usage or an unreadable file.`,
		Example: `  approvectl plan examples/skills/graph-ask-demo
  approvectl plan recipe.txt --catalog tools.yaml -o json
  approvectl plan examples/skills/vendor-payment --policy examples/policy.csv --requester alice`,
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
			if who.requester == "" {
				who.requester = g.as
			}
			if who.policy != "" && who.requester == "" {
				return usageErr("--policy needs --requester NAME (or --as NAME): who starts the run decides whom separation of duties keeps out")
			}
			res := compiler.Compile(src, compiler.Options{Catalog: cat, Name: name})
			if err := printPlan(cfg, g.output, file, res); err != nil {
				return err
			}
			if who.policy != "" {
				if err := who.print(cmd.Context(), cfg, g.output, res.Plan); err != nil {
					return err
				}
			}
			if !g.json() {
				writeButtons(escaped{cfg.Stdout}, planButtons(args[0], res.Plan.Name)...)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&catalogPath, "catalog", "", "tool catalog file (default: the built-in examples/catalog.yaml)")
	cmd.Flags().StringVar(&who.policy, "policy", "", "policy file (CSV): show who may decide each gate under it")
	cmd.Flags().StringVar(&who.requester, "requester", "", "with --policy: who starts the run (default: the --as user)")
	cmd.Flags().StringVar(&who.domain, "domain", "acme", "with --policy: the policy domain of the run")
	cmd.Flags().StringVar(&who.escalateTo, "escalate-to", "", "with --policy: the control plane's --escalate-to role (--dev: finance)")
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
	return string(b), file, defaultName(file), nil
}

// planButtons is what the plan card's two buttons mean on the command
// line for the recipe at path, whose plan is named name.
func planButtons(path, name string) [][2]string {
	p, n := shellQuote(path), shellQuote(name)
	return [][2]string{{"Run once", "approvectl run " + p},
		{"Save + schedule", "approvectl skills push " + p + " && approvectl schedules add " + n + " --skill " + n + " --cron '" + cronPlaceholder + "'"}}
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

// whoDecides is plan --policy: who may decide each gate of a plan under a
// policy file, judged as the control plane judges it at start
// (decidable.Checker.PlanAuthority, which its approvals desk asks), offline.
type whoDecides struct {
	policy, requester, domain, escalateTo string
}

func (w whoDecides) print(ctx context.Context, cfg Config, output string, p *plan.Plan) error {
	az, err := authz.New(authz.Config{PolicyPath: w.policy})
	if err != nil {
		return &exitError{code: ExitUsage, err: err}
	}
	check := decidable.New(decidable.Config{Policy: az, Domain: w.domain, EscalateTo: w.escalateTo, PolicyFile: w.policy})
	gates, err := check.PlanAuthority(ctx, w.requester, p)
	if err != nil {
		return err
	}
	out := cfg.Stdout
	if output == "json" {
		out = cfg.Stderr // stdout holds the plan alone
	}
	fmt.Fprintf(out, "\nWho may decide (policy %s, domain %s, started by %s):\n", w.policy, w.domain, w.requester)
	if len(gates) == 0 {
		fmt.Fprintln(out, "  no approval gate governs a side effect")
	}
	bad := 0
	for _, g := range gates {
		if g.Problem != nil {
			bad++
			fmt.Fprintf(out, "  ✗ %s %q — %s: nobody could decide it: %s\n", g.Gate, g.Title, strings.Join(g.Actions, ", "), indent(g.Problem.Text()))
			continue
		}
		via := ""
		if g.Escalates != "" {
			via = fmt.Sprintf(" (once escalated to %s: none of those the recipe asks may)", g.Escalates)
		}
		later := ""
		if g.Deferred {
			later = "; judged again when it opens"
		}
		fmt.Fprintf(out, "  %s %q — %s: %s%s; %d of them must approve%s\n", g.Gate, g.Title, strings.Join(g.Actions, ", "), strings.Join(g.Deciders, ", "), via, g.Quorum, later)
	}
	if bad > 0 {
		return &exitError{code: ExitRefused, err: fmt.Errorf("%d gate(s) nobody could decide under %s: the control plane refuses this plan at start", bad, w.policy)}
	}
	return nil
}

func indent(s string) string { return strings.ReplaceAll(s, "\n", "\n      ") }
