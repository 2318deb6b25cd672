package approvectl

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/pkg/plan"
)

func run(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errb bytes.Buffer
	err := Run(context.Background(), args, Config{Stdout: &out, Stderr: &errb})
	return out.String(), errb.String(), ExitCode(err)
}

func TestPlanCard(t *testing.T) {
	out, errs, code := run(t, "plan", "../../examples/skills/graph-ask-demo")
	if code != ExitOK {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, want := range []string{"plan graph-ask-demo  sha256:", "mcp-monitor·get_cpu_info", "needs 1 of 2 (cpu, mem)",
		"⚠ save", "notes·store", "the run stops and asks \"save this reading?\"", "Nothing runs until the plan is started."} {
		if !strings.Contains(out, want) {
			t.Errorf("card lacks %q:\n%s", want, out)
		}
	}
}

// The card of a plan shown before anything runs ends with what its two
// buttons do on the command line; -o json is the plan alone.
func TestPlanButtons(t *testing.T) {
	out, errs, code := run(t, "plan", "../../examples/skills/graph-ask-demo")
	if code != ExitOK {
		t.Fatalf("exit %d: %s", code, errs)
	}
	want := "Nothing runs until the plan is started.\n\n" +
		"[Run once]         approvectl run ../../examples/skills/graph-ask-demo\n" +
		"[Save + schedule]  approvectl skills push ../../examples/skills/graph-ask-demo && approvectl schedules add graph-ask-demo --skill graph-ask-demo --cron 'EXPR'\n"
	if !strings.HasSuffix(out, want) {
		t.Fatalf("the card does not end with its buttons:\n%s", out)
	}
	dir := t.TempDir()
	recipe := filepath.Join(dir, "it's mine.recipe")
	if err := os.WriteFile(recipe, []byte("cpu: mcp-monitor.get_cpu_info {}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, errs, code = run(t, "plan", recipe)
	if code != ExitOK {
		t.Fatalf("exit %d: %s", code, errs)
	}
	q := `'` + strings.ReplaceAll(recipe, `'`, `'\''`) + `'`
	if !strings.Contains(out, "[Run once]         approvectl run "+q+"\n") ||
		!strings.Contains(out, "approvectl skills push "+q+" && approvectl schedules add 'it'\\''s mine' --skill 'it'\\''s mine' --cron") {
		t.Fatalf("the buttons must quote what the shell would split:\n%s", out)
	}
	out, _, _ = run(t, "plan", "../../examples/skills/graph-ask-demo", "-o", "json")
	if strings.Contains(out, "[Run once]") {
		t.Fatal("-o json prints the plan alone")
	}
}

func TestPlanJSON(t *testing.T) {
	out, errs, code := run(t, "plan", "../../examples/skills/graph-ask-demo/SKILL.md", "-o", "json")
	if code != ExitOK {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var p plan.Plan
	if err := json.Unmarshal([]byte(out), &p); err != nil {
		t.Fatalf("not a plan: %v\n%s", err, out)
	}
	if err := plan.Verify(&p); err != nil {
		t.Fatal(err)
	}
	yes := p.StoppingPoints[0].Options[0]
	if yes.Label != "Yes" || len(yes.Steps) != 1 || yes.Steps[0].ID != "save" || !yes.Steps[0].SideEffect {
		t.Fatalf("save must be inside Yes with side_effect true: %+v", yes)
	}
	if !strings.Contains(out, `"side_effect": true`) {
		t.Fatal(`the JSON must say "side_effect": true`)
	}
}

func TestPlanRefused(t *testing.T) {
	_, errs, code := run(t, "plan", "../../pkg/compiler/testdata/refused/write-before-ask.recipe")
	if code != ExitRefused {
		t.Fatalf("exit %d, want %d", code, ExitRefused)
	}
	for _, want := range []string{"write-before-ask.recipe:4:3: error:", "`keep`", "save this reading?", "effect-before-ask"} {
		if !strings.Contains(errs, want) {
			t.Errorf("stderr lacks %q:\n%s", want, errs)
		}
	}
}

func TestPlanRefusedJSON(t *testing.T) {
	out, _, code := run(t, "plan", "../../pkg/compiler/testdata/refused/bad-need.recipe", "-o", "json")
	if code != ExitRefused {
		t.Fatalf("exit %d", code)
	}
	var got struct {
		Diagnostics []struct {
			Pos      struct{ Line, Col int }
			Severity string
			Code     string
		}
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if len(got.Diagnostics) == 0 || got.Diagnostics[0].Code != "impossible-need" || got.Diagnostics[0].Pos.Line != 5 {
		t.Fatalf("%+v", got)
	}
}

func TestPlanUsage(t *testing.T) {
	cases := [][]string{
		{"plan"},
		{"plan", "does/not/exist"},
		{"plan", "../../examples/skills/graph-ask-demo", "-o", "yaml"},
		{"plan", "../../examples/skills/graph-ask-demo", "--catalog", "missing.yaml"},
		{"plan", "--nope"},
		{"frobnicate"},
	}
	for _, args := range cases {
		if _, errs, code := run(t, args...); code != ExitUsage || errs == "" {
			t.Errorf("%v: exit %d stderr %q, want %d and a message", args, code, errs, ExitUsage)
		}
	}
}

func TestPlanCustomCatalog(t *testing.T) {
	dir := t.TempDir()
	cat := filepath.Join(dir, "cat.yaml")
	recipe := filepath.Join(dir, "r.recipe")
	os.WriteFile(cat, []byte("servers:\n  lab:\n    - {name: probe, annotations: {readOnlyHint: true}}\n"), 0o644)
	os.WriteFile(recipe, []byte("x: lab.probe {}\n"), 0o644)
	out, errs, code := run(t, "plan", recipe, "--catalog", cat)
	if code != ExitOK || !strings.Contains(out, "plan r ") {
		t.Fatalf("exit %d\n%s\n%s", code, out, errs)
	}
	// The built-in catalog does not know lab.probe.
	if _, _, code := run(t, "plan", recipe); code != ExitRefused {
		t.Fatalf("exit %d, want refused with the default catalog", code)
	}
}

func TestHelp(t *testing.T) {
	out, _, code := run(t, "plan", "--help")
	if code != ExitOK || !strings.Contains(out, "Exit codes") || !strings.Contains(out, "--catalog") {
		t.Fatalf("exit %d\n%s", code, out)
	}
}

// Issue 16: plan --policy shows on the card who may decide each gate
// under that policy, and flags (exit 1) a gate nobody could decide, with
// the reason and the fix, as the control plane would refuse it at start.
func TestPlanPolicyShowsDeciders(t *testing.T) {
	out, errs, code := run(t, "plan", "../../examples/skills/vendor-payment", "--policy", "../../examples/policy.csv", "--requester", "alice")
	if code != ExitOK {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, want := range []string{"Who may decide (policy ../../examples/policy.csv, domain acme, started by alice)", "payments.pay (485000 INR): ", "dave (finance-1m)", "1 of them must approve"} {
		if !strings.Contains(out, want) {
			t.Errorf("card lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "alice (finance") {
		t.Errorf("alice, the requester, may not decide her own payment:\n%s", out)
	}
	recipe := filepath.Join(t.TempDir(), "pay.recipe")
	src := "ask finance:\n  pay the vendor?\npay: payments.pay {\"vendor\":\"V-1\",\"invoice\":\"I-1\",\"amount\":90000,\"bank_account\":\"X\"}\n"
	if err := os.WriteFile(recipe, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	// A catalog that gives pay no input schema (the built-in one requires
	// a currency, which the compiler would refuse before policy is asked).
	noSchema := filepath.Join(t.TempDir(), "catalog.yaml")
	if err := os.WriteFile(noSchema, []byte("servers:\n  payments:\n    - {name: pay, annotations: {readOnlyHint: false}}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, errs, code = run(t, "plan", recipe, "--catalog", noSchema, "--policy", "../../examples/policy.csv", "--as", "alice")
	if code != ExitRefused || !strings.Contains(out, "✗ ask_1") || !strings.Contains(out, "missing currency for amount 90000") ||
		!strings.Contains(out, `add "currency": "INR"`) || !strings.Contains(errs, "nobody could decide") {
		t.Fatalf("exit %d, want %d flagging the gate:\n%s\n%s", code, ExitRefused, out, errs)
	}
	if _, errs, code := run(t, "plan", recipe, "--policy", "../../examples/policy.csv"); code != ExitUsage || !strings.Contains(errs, "--requester") {
		t.Fatalf("--policy without a requester: exit %d %s", code, errs)
	}
}
