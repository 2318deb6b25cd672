package compiler

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/pkg/plan"
)

// Every recipe in testdata/refused (copied from the shared examples) fails
// with the diagnostic EXPECTED.md describes, at a line:col.
func TestRefused(t *testing.T) {
	cases := []struct {
		file  string
		code  string
		pos   Pos
		words []string
	}{
		{"write-before-ask.recipe", CodeEffectBeforeAsk, Pos{4, 3}, []string{"`keep`", "save this reading?", "move `keep` under the ask"}},
		{"bad-need.recipe", CodeImpossibleNeed, Pos{5, 3}, []string{"need: 3 of 2", "impossible"}},
		{"unknown-tool.recipe", CodeUnknownTool, Pos{1, 6}, []string{"mcp-monitor.get_cpu_temperature"}},
		{"unknown-ref.recipe", CodeUnknownRef, Pos{3, 29}, []string{"{gpu}"}},
		{"unasked-reads-step.recipe", CodeUnaskedUnknown, Pos{2, 34}, []string{"`note`", "`{cpu}`", "not known at the start", "remove `without asking`"}},
		{"pay-without-invoice.recipe", CodeArgsSchema, Pos{5, 19}, []string{"`pay` (payments·pay) lacks `invoice` and `currency`", "input schema requires"}},
	}
	for _, c := range cases {
		t.Run(c.file, func(t *testing.T) {
			src, err := os.ReadFile("testdata/refused/" + c.file)
			if err != nil {
				t.Fatal(err)
			}
			r := Compile(string(src), Options{Catalog: exampleCatalog(t)})
			if r.Plan != nil {
				t.Fatal("compiled, but must be refused")
			}
			for _, d := range r.Diagnostics {
				if d.Code == c.code && d.Severity == Error && d.Pos == c.pos {
					for _, w := range c.words {
						if !strings.Contains(d.Message, w) {
							t.Errorf("message %q should contain %q", d.Message, w)
						}
					}
					return
				}
			}
			t.Fatalf("want %s at %s, got:\n%s", c.code, c.pos, FormatDiagnostics(c.file, r.Diagnostics))
		})
	}
}

// One row per lint: the recipe, the code expected, where, and words the
// message must say. Warnings compile; errors do not.
func TestLints(t *testing.T) {
	cat := exampleCatalog(t)
	cases := []struct {
		name  string
		src   string
		code  string
		sev   Severity
		pos   Pos
		words []string
	}{
		{"unknown server", "a: nope.get_x {}\n", CodeUnknownTool, Error, Pos{1, 4}, []string{"no executor or catalog offers a server named `nope`"}},
		{"unknown tool with suggestion list", "a: notes.stor {}\n", CodeUnknownTool, Error, Pos{1, 4}, []string{"offers search, store"}},
		{"unknown ref", "a: notes.search {}\nb: use {c}\n", CodeUnknownRef, Error, Pos{2, 8}, []string{"{c}"}},
		{"ref into a gate from above", "b: use {x}\nask me:\n  go?\nx: notes.search {}\n", CodeHiddenRef, Error, Pos{1, 8}, []string{"`x` runs only after \"go?\" is answered Yes"}},
		{"self reference", "a: say {a}\n", CodeCircularRef, Error, Pos{1, 8}, []string{"reads itself"}},
		{"circular reference", "a: say {b}\nb: say {a}\n", CodeCircularRef, Error, Pos{2, 1}, []string{"a → b → a"}},
		{"duplicate id", "a: notes.search {}\na: notes.search {}\n", CodeDuplicateID, Error, Pos{2, 1}, []string{"already defined at line 1"}},
		{"duplicate ask name", "a: notes.search {}\nask me as a:\n  go?\n  options: x | y\n", CodeDuplicateID, Error, Pos{2, 11}, []string{"`a`"}},
		{"reserved id", "then: notes.search {}\n", CodeReservedID, Error, Pos{1, 1}, []string{"word of the recipe language"}},
		{"need above N", "together f:\n  a: notes.search {}\nthen:\n  need: 2 of 1\n  b: say {a}\n", CodeImpossibleNeed, Error, Pos{4, 3}, []string{"impossible"}},
		{"need zero", "together f:\n  a: notes.search {}\nthen:\n  need: 0 of 1\n  b: say {a}\n", CodeImpossibleNeed, Error, Pos{4, 3}, []string{"waits for nothing"}},
		{"need N differs from fan", "together f:\n  a: notes.search {}\n  b: notes.search {}\nthen:\n  need: 1 of 3\n  c: say {a}\n", CodeImpossibleNeed, Error, Pos{5, 3}, []string{"fan `f` has 2 steps (a, b)"}},
		{"need without fan", "a: notes.search {}\nthen:\n  need: 1 of 1\n  b: say {a}\n", CodeImpossibleNeed, Error, Pos{3, 3}, []string{"no"}},
		{"bad json args", "a: notes.store {\"text\": }\n", CodeBadArgs, Error, Pos{1, 25}, []string{"not a JSON object", "invalid character"}},
		{"unclosed json args", "a: notes.store {\"text\": \"x\"\n", CodeBadArgs, Error, Pos{1, 28}, []string{"never closed"}},
		{"json args not an object", "a: notes.store [1]\n", CodeBadArgs, Error, Pos{1, 16}, []string{"JSON object"}},
		{"bad expires", "ask me:\n  go?\n  expires: soon\nx: notes.store {}\n", CodeBadDuration, Error, Pos{3, 12}, []string{"\"soon\" is not a duration"}},
		{"bad timeout", "a: notes.search {}; timeout: 0s\n", CodeBadDuration, Error, Pos{1, 21}, []string{"not a positive duration"}},
		{"approve on expiry", "ask me:\n  go?\n  on expiry: approve\nx: notes.store {}\n", CodeBadSetting, Error, Pos{3, 14}, []string{"never approved by default"}},
		{"misspelt setting", "ask me:\n  go?\n  expire: 8h\nx: notes.store {}\n", CodeBadSetting, Error, Pos{3, 3}, []string{"did you mean `expires:`"}},
		{"check with a side effect", "ask me:\n  go?\n  check: n = notes.store {} fields id\nx: notes.store {}\n", CodeBadSetting, Error, Pos{3, 10}, []string{"must be read-only"}},
		{"amend a field nothing has", "ask me:\n  go?\n  amend: amount between 0 and 5\nx: notes.store {\"text\":\"a\"}\n", CodeBadSetting, Error, Pos{3, 10}, []string{"names no arg", "x"}},
		{"amend bound below the asked value", "ask me:\n  go?\n  amend: amount between 0 and 5\nx: payments.pay {\"vendor\": \"V-1\", \"invoice\": \"I-1\", \"amount\": 9, \"currency\": \"INR\", \"bank_account\": \"X\"}\n", CodeBadSetting, Error, Pos{3, 10}, []string{"already asks for 9"}},
		{"amend on a question", "ask me as q:\n  which?\n  options: a | b\n  amend: amount between 0 and 5\n", CodeBadSetting, Error, Pos{1, 1}, []string{"questions govern no side effect"}},
		{"options on text", "ask me (text) as q:\n  where?\n  options: a | b\n", CodeBadSetting, Error, Pos{3, 12}, []string{"takes no `options:`"}},
		{"one option", "ask me as q:\n  which?\n  options: a\n", CodeBadSetting, Error, Pos{3, 12}, []string{"at least two"}},
		{"numeric option", "ask me as q:\n  which?\n  options: 1 | b\n", CodeBadSetting, Error, Pos{3, 12}, []string{"bare number"}},
		{"ask without question", "ask me:\nx: notes.store {}\n", CodeSyntax, Error, Pos{1, 1}, []string{"no question"}},
		{"step indented in a question", "ask me:\n  go?\n  x: notes.store {}\n", CodeSyntax, Error, Pos{3, 3}, []string{"write it unindented"}},
		{"unreadable line", "a: notes.search {}\n!!\n", CodeSyntax, Error, Pos{2, 1}, []string{"cannot read this line"}},
		{"fan reads sibling", "together f:\n  a: notes.search {}\n  b: say {a}\n", CodeFanSelfRef, Error, Pos{3, 10}, []string{"same fan `f`", "then:"}},
		{"effect before ask through after:", "w: notes.store {}\nr: notes.search {}\n  after: w\nask me:\n  go?\n  show: {r}\n", CodeEffectBeforeAsk, Error, Pos{1, 1}, []string{"`w`", "through r,"}},
		{"effect shown by an ask", "w: notes.store {}\nask me:\n  go?\n  show: {w}\n", CodeEffectBeforeAsk, Error, Pos{1, 1}, []string{"`w`", "\"go?\""}},
		{"answer read before asked", "a: say {q}\nask me as q:\n  which?\n  options: x | y\n", CodeHiddenRef, Error, Pos{1, 8}, []string{"known only below the ask"}},
		{"reference hidden behind a JSON escape", "x: notes.store {\"text\": \"\\u007bghost}\"}\n", CodeUnknownRef, Error, Pos{1, 16}, []string{"{ghost}"}},
		{"empty", "# nothing\n\n", CodeEmptyRecipe, Error, Pos{1, 1}, []string{"no steps"}},
		{"front matter unclosed", "---\nname: x\n", CodeFrontMatter, Error, Pos{1, 1}, []string{"never closed"}},
		{"without asking reads a step", "a: notes.search {}\nw: notes.store {\"text\": \"{a}\"} without asking\n", CodeUnaskedUnknown, Error, Pos{2, 26}, []string{"`w` (notes·store) runs without asking", "the output of step `a`", "not known at the start", "remove `without asking`", "values and inputs only"}},
		{"without asking reads an answer", "ask me as q:\n  which?\n  options: x | y\nw: notes.store {\"text\": \"{q}\"} without asking\n", CodeUnaskedUnknown, Error, Pos{4, 26}, []string{"the answer to ask `q`"}},
		{"without asking under a gate still reads a step", "a: notes.search {}\nask me:\n  go?\nw: notes.store {\"text\": \"{a.x}\"} without asking\n", CodeUnaskedUnknown, Error, Pos{4, 26}, []string{"`{a.x}`"}},
		{"args lack a required field", "ask me:\n  pay?\np: payments.pay {\"vendor\": \"V\", \"amount\": 5, \"currency\": \"INR\", \"bank_account\": \"X\"}\n", CodeArgsSchema, Error, Pos{3, 17}, []string{"lacks `invoice`", "add it to the args"}},
		{"no args at all", "ask me:\n  pay?\np: payments.pay\n", CodeArgsSchema, Error, Pos{3, 4}, []string{"lacks `vendor`, `invoice`, `amount`, `currency` and `bank_account`"}},
		{"literal of the wrong type", "ask me:\n  pay?\np: payments.pay {\"vendor\": \"V\", \"invoice\": \"I\", \"amount\": \"ten\", \"currency\": \"INR\", \"bank_account\": \"X\"}\n", CodeArgsSchema, Error, Pos{3, 49}, []string{"`amount` does not fit", "want \"number\""}},
		{"literal out of bounds", "ask me:\n  pay?\np: payments.pay {\"vendor\": \"V\", \"invoice\": \"I\", \"amount\": 0, \"currency\": \"INR\", \"bank_account\": \"X\"}\n", CodeArgsSchema, Error, Pos{3, 49}, []string{"`amount`", "exclusiveMinimum"}},
		{"literal not matching a pattern", "ask me:\n  pay?\np: payments.pay {\"vendor\": \"V\", \"invoice\": \"I\", \"amount\": 5, \"currency\": \"rupees\", \"bank_account\": \"X\"}\n", CodeArgsSchema, Error, Pos{3, 62}, []string{"`currency`", "pattern"}},
		{"an arg the tool does not take", "ask me:\n  pay?\np: payments.pay {\"vendor\": \"V\", \"invoice\": \"I\", \"amount\": 5, \"currency\": \"INR\", \"bank_account\": \"X\", \"memo\": \"m\"}\n", CodeArgsSchema, Error, Pos{3, 102}, []string{"passes `memo`", "it takes amount, bank_account, currency, invoice, vendor", "remove it"}},
		{"a read-only tool's args are checked too", "a: erp.get_vendor {\"vendor\": \"V-1\"}\n", CodeArgsSchema, Error, Pos{1, 19}, []string{"lacks `id`"}},
		{"write-shaped read-only tool", "a: mail.send_mail {}\n", CodeWriteReadOnly, Warning, Pos{1, 4}, []string{"declared read-only", "\"send\""}},
	}
	// A catalog with a tool whose annotation lies about being read-only.
	lying := NewCatalog(append(toolsOf(cat), ToolInfo{Server: "mail", Name: "send_mail", ReadOnly: true}))
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := Compile(c.src, Options{Catalog: lying})
			if (c.sev == Error) != (r.Plan == nil) {
				t.Fatalf("severity %s, but plan returned = %v:\n%s", c.sev, r.Plan != nil, FormatDiagnostics("", r.Diagnostics))
			}
			for _, d := range r.Diagnostics {
				if d.Code != c.code || d.Severity != c.sev || d.Pos != c.pos {
					continue
				}
				for _, w := range c.words {
					if !strings.Contains(d.Message, w) {
						t.Errorf("message %q should contain %q", d.Message, w)
					}
				}
				return
			}
			t.Fatalf("want %s %s at %s, got:\n%s", c.sev, c.code, c.pos, FormatDiagnostics("", r.Diagnostics))
		})
	}
}

func toolsOf(c *Catalog) []ToolInfo {
	var out []ToolInfo
	for _, s := range c.Servers() {
		for _, n := range c.Tools(s) {
			t, _ := c.Lookup(s, n)
			out = append(out, t)
		}
	}
	return out
}

// Constructs that must compile, with what they must compile to.
func TestCompiles(t *testing.T) {
	cat := exampleCatalog(t)
	t.Run("without asking is visible and needs no gate", func(t *testing.T) {
		p := mustCompile(t, "x: notes.store {\"text\":\"hi\"} without asking\n", cat)
		s := p.InitialSteps[0]
		if !s.WithoutAsking || !s.SideEffect || len(p.StoppingPoints) != 0 {
			t.Fatalf("%+v", p)
		}
		if !hasNote(p, plan.NoteWithoutAsking, "x", "⚠") {
			t.Fatalf("without asking must be noted with ⚠: %+v", p.Notes)
		}
		if !strings.Contains(Card(p, "", nil), "without asking: starting the run approves it") {
			t.Fatal("card does not say so")
		}
	})
	t.Run("without asking may read the run's inputs, known at the start", func(t *testing.T) {
		r := Compile("x: notes.store {\"text\":\"for {who}\"} without asking\n", Options{Catalog: cat, Inputs: []string{"who"}})
		if r.Plan == nil {
			t.Fatalf("does not compile:\n%s", FormatDiagnostics("", r.Diagnostics))
		}
	})
	t.Run("a gated side effect may read the run's inputs", func(t *testing.T) {
		r := Compile("ask me:\n  store it?\nx: notes.store {\"text\":\"for {who}\"}\n", Options{Catalog: cat, Inputs: []string{"who"}})
		if r.Plan == nil {
			t.Fatalf("does not compile:\n%s", FormatDiagnostics("", r.Diagnostics))
		}
		if len(r.Plan.StoppingPoints) != 1 || r.Plan.StoppingPoints[0].Added || len(r.Plan.StoppingPoints[0].Options[0].StoppingPoints) != 0 {
			t.Fatalf("x sits under the ask written, with no gate of its own: %+v", r.Plan.StoppingPoints)
		}
	})
	t.Run("an arg that reads a step counts as given; its value is checked when known", func(t *testing.T) {
		p := mustCompile(t, "v: erp.get_vendor {\"id\":\"V-1\"}\nask me:\n  pay?\n  show: {v}\np: payments.pay {\"vendor\":\"V-1\",\"invoice\":\"I-1\",\"amount\":\"{v.limit}\",\"currency\":\"INR\",\"bank_account\":\"{v.bank_account}\"}\n", cat)
		if len(p.StoppingPoints) != 1 {
			t.Fatalf("%+v", p)
		}
	})
	t.Run("a tool the catalog gives no schema takes any args", func(t *testing.T) {
		mustCompile(t, "a: notes.search {\"q\": \"x\", \"n\": 1}\n", cat)
	})
	t.Run("modifiers inline and on lines", func(t *testing.T) {
		p := mustCompile(t, "a: notes.search {}; retry: 2; timeout: 90s; on: edge-1; on fail: skip\nb: summarise {a}\n  retry: 1\n  timeout: 2m\n", cat)
		a, b := p.InitialSteps[0], p.InitialSteps[1]
		if a.Retry != 2 || a.Timeout != "1m30s" || a.On != "edge-1" || a.OnFail != plan.OnFailSkip {
			t.Fatalf("a: %+v", a)
		}
		if b.Retry != 1 || b.Timeout != "2m" {
			t.Fatalf("b: %+v", b)
		}
	})
	t.Run("after: adds an edge that reads no data", func(t *testing.T) {
		p := mustCompile(t, "a: notes.search {}\nb: notes.search {}\n  after: a\n", cat)
		if got := p.InitialSteps[1].DependsOn; len(got) != 1 || got[0] != "a" {
			t.Fatalf("depends_on = %v", got)
		}
	})
	t.Run("a gate that cannot show its step's args gets one of its own inside", func(t *testing.T) {
		p := mustCompile(t, "ask me:\n  start?\ndraft: write a note\nsend: notes.store {\"text\":\"{draft}\"}\n", cat)
		ix := index(p)
		g, _ := ix["send"].gatedBy()
		if g == nil || !g.Added || ix[g.ID].path[0].stop.ID != "ask_1" {
			t.Fatalf("send must be behind an added gate inside ask_1: %+v", ix["send"].path)
		}
		if len(g.After) != 1 || g.After[0] != "draft" {
			t.Fatalf("the added gate opens after draft: %v", g.After)
		}
		if !hasNote(p, plan.NoteAddedGate, "send", "cannot show its args") {
			t.Fatalf("%+v", p.Notes)
		}
	})
	t.Run("if no: the No option carries its own steps", func(t *testing.T) {
		p := mustCompile(t, "ask me:\n  deploy?\n  if no:\n    why: explain why we stopped\nd: payments.pay {\"vendor\": \"V-1\", \"invoice\": \"I-1\", \"amount\": 1, \"currency\": \"INR\", \"bank_account\": \"X\"}\n", cat)
		no := p.StoppingPoints[0].Options[1]
		if no.Label != "No" || len(no.Steps) != 1 || no.Steps[0].ID != "why" {
			t.Fatalf("No option: %+v", no)
		}
	})
	t.Run("quorum, escalation and reminders", func(t *testing.T) {
		p := mustCompile(t, "ask finance:\n  pay?\n  approvers: 2 of alice, bob, carol\n  remind after: 1h\n  escalate after: 4h to cfo\nx: payments.pay {\"vendor\": \"V-1\", \"invoice\": \"I-1\", \"amount\": 1, \"currency\": \"INR\", \"bank_account\": \"X\"}\n", cat)
		sp := p.StoppingPoints[0]
		if sp.Quorum != 2 || len(sp.Approvers) != 3 || sp.RemindAfter != "1h" || sp.EscalateAfter != "4h" || sp.EscalateTo != "cfo" {
			t.Fatalf("%+v", sp)
		}
	})
	t.Run("a side effect that depends on another is gated after it", func(t *testing.T) {
		p := mustCompile(t, "a: notes.store {\"text\":\"1\"}\nb: notes.store {\"text\":\"{a}\"}\n", cat)
		ix := index(p)
		ga, _ := ix["a"].gatedBy()
		gb, _ := ix["b"].gatedBy()
		if ga == nil || gb == nil || ga == gb || ix[gb.ID].path[0].stop.ID != ga.ID {
			t.Fatalf("b's gate must sit inside a's gate: a=%+v b=%+v", ix["a"].path, ix["b"].path)
		}
	})
	t.Run("columns count characters, not bytes", func(t *testing.T) {
		r := Compile("b: dire é {zz}\n", Options{Catalog: cat})
		if len(r.Diagnostics) != 1 || r.Diagnostics[0].Pos != (Pos{1, 11}) {
			t.Fatalf("want one diagnostic at 1:11, got %v", r.Diagnostics)
		}
	})
}

// Hostile input is refused by limits, not by running for minutes: the
// API compiles whatever a caller sends.
func TestLimits(t *testing.T) {
	cat := exampleCatalog(t)
	deep := strings.Repeat("ask me:\n  go on?\n", MaxAskDepth+5) + "x: notes.search {}\n"
	r := Compile(deep, Options{Catalog: cat})
	if r.Plan != nil || !strings.Contains(FormatDiagnostics("", r.Diagnostics), "nest more than") {
		t.Fatalf("deep nesting: %v", r.Diagnostics)
	}
	ok := strings.Repeat("ask me:\n  go on?\n", MaxAskDepth) + "x: notes.search {}\n"
	if r := Compile(ok, Options{Catalog: cat}); r.Plan == nil {
		t.Fatalf("%d nested asks must compile: %v", MaxAskDepth, r.Diagnostics)
	}
	var many strings.Builder
	for i := 0; i <= MaxSteps; i++ {
		fmt.Fprintf(&many, "s%d: notes.search {}\n", i)
	}
	r = Compile(many.String(), Options{Catalog: cat})
	if r.Plan != nil || !strings.Contains(FormatDiagnostics("", r.Diagnostics), "more than 10000 steps") {
		t.Fatalf("too many steps: %d diagnostics", len(r.Diagnostics))
	}
	var unknown strings.Builder
	for i := 0; i < 3000; i++ {
		fmt.Fprintf(&unknown, "s%d: say {ghost%d}\n", i, i)
	}
	r = Compile(unknown.String(), Options{Catalog: cat})
	if len(r.Diagnostics) != MaxErrors+1 || r.Diagnostics[MaxErrors].Code != CodeTooManyErrors ||
		!strings.Contains(r.Diagnostics[MaxErrors].Message, "2900 more errors") {
		t.Fatalf("want %d errors and a count of the rest, got %d: %v", MaxErrors, len(r.Diagnostics), r.Diagnostics[len(r.Diagnostics)-1])
	}
}

func TestChainedSideEffectsLimit(t *testing.T) {
	cat := exampleCatalog(t)
	chain := func(n int) string {
		var b strings.Builder
		b.WriteString("s0: notes.store {}\n")
		for i := 1; i < n; i++ {
			fmt.Fprintf(&b, "s%d: notes.store {\"t\": \"{s%d}\"}\n", i, i-1)
		}
		return b.String()
	}
	p := mustCompile(t, chain(5), cat)
	ix := index(p)
	if len(ix["s4"].path) != 5 {
		t.Fatalf("s4 should sit under 5 nested gates, got %d", len(ix["s4"].path))
	}
	r := Compile(chain(2*MaxAskDepth+10), Options{Catalog: cat})
	if r.Plan != nil || r.Diagnostics[0].Code != CodeGatedDependent {
		t.Fatalf("a chain deeper than %d gates must be refused: %v", 2*MaxAskDepth, r.Diagnostics)
	}
}
