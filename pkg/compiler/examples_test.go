package compiler

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"

	"github.com/tollgate-dev/tollgate/pkg/plan"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/golden")

func compileSkill(t *testing.T, name string) Result {
	t.Helper()
	src, err := os.ReadFile(filepath.Join("../../examples/skills", name, "SKILL.md"))
	if err != nil {
		t.Fatal(err)
	}
	r := Compile(string(src), Options{Catalog: exampleCatalog(t), Name: name})
	if r.Plan == nil {
		t.Fatalf("%s does not compile:\n%s", name, FormatDiagnostics(name, r.Diagnostics))
	}
	if r.Diagnostics.HasErrors() {
		t.Fatalf("plan returned with errors: %v", r.Diagnostics)
	}
	return r
}

// Every example skill compiles to its golden plan JSON and plan card.
// Regenerate with: go test ./pkg/compiler -run TestGolden -update
func TestGolden(t *testing.T) {
	dirs, err := os.ReadDir("../../examples/skills")
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range dirs {
		name := d.Name()
		t.Run(name, func(t *testing.T) {
			r := compileSkill(t, name)
			js, err := plan.Indent(r.Plan)
			if err != nil {
				t.Fatal(err)
			}
			card := []byte(Card(r.Plan, r.Digest, r.Diagnostics))
			for ext, got := range map[string][]byte{".json": js, ".card": card} {
				path := filepath.Join("testdata/golden", name+ext)
				if *update {
					if err := os.WriteFile(path, got, 0o644); err != nil {
						t.Fatal(err)
					}
				}
				want, err := os.ReadFile(path)
				if err != nil {
					t.Fatalf("%v (run with -update to create)", err)
				}
				if !bytes.Equal(got, want) {
					t.Errorf("%s differs from %s; run with -update if the change is intended\n--- got\n%s", name+ext, path, got)
				}
			}
		})
	}
}

// subset reports whether every key and value of want appears in got
// (extra keys in got are allowed), naming the first difference.
func subset(want, got any, path string) string {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return path + ": not an object"
		}
		for k, wv := range w {
			gv, ok := g[k]
			if !ok {
				return path + "." + k + ": missing"
			}
			if d := subset(wv, gv, path+"."+k); d != "" {
				return d
			}
		}
		return ""
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return path + ": list length differs"
		}
		for i := range w {
			if d := subset(w[i], g[i], path+"["+string(rune('0'+i))+"]"); d != "" {
				return d
			}
		}
		return ""
	default:
		if !reflect.DeepEqual(want, got) {
			return path + ": value differs"
		}
		return ""
	}
}

// graph-ask-demo compiles to the plan printed in DESIGN.md §3: every key
// shown there is present with the same value (extra keys are allowed).
func TestGraphAskDemoMatchesDesign(t *testing.T) {
	r := compileSkill(t, "graph-ask-demo")
	got, _ := plan.Indent(r.Plan)
	want, err := os.ReadFile("../plan/testdata/design-example.json")
	if err != nil {
		t.Fatal(err)
	}
	var w, g any
	if err := json.Unmarshal(want, &w); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatal(err)
	}
	if d := subset(w, g, "plan"); d != "" {
		t.Fatalf("compiled plan differs from DESIGN.md §3 at %s\n%s", d, got)
	}
}

func TestMorningBriefing(t *testing.T) {
	p := compileSkill(t, "morning-briefing").Plan
	ix := index(p)
	for _, id := range []string{"calendar", "mail", "slack"} {
		if s := ix[id].step; s == nil || s.ParallelGroup != "sources" || len(ix[id].path) != 0 {
			t.Fatalf("%s should run at the top in parallel group sources: %+v", id, ix[id])
		}
	}
	j := ix["join_sources"].step
	if j == nil || j.MinSuccess != 2 || !slices.Equal(j.In, []string{"calendar", "mail", "slack"}) {
		t.Fatalf("join over exactly the three sources with min_success 2, got %+v", j)
	}
	if b := ix["briefing"].step; !slices.Equal(b.DependsOn, []string{"join_sources"}) {
		t.Fatalf("briefing depends on the join, got %v", b.DependsOn)
	}
	// ping: moved alongside with a note, behind a gate of its own.
	if !hasNote(p, plan.NoteMoved, "ping", "reads nothing from calendar, mail, slack") {
		t.Fatalf("no move note for ping: %+v", p.Notes)
	}
	if !hasNote(p, plan.NoteAddedGate, "ping", "") {
		t.Fatalf("no added-gate note for ping: %+v", p.Notes)
	}
	g, label := ix["ping"].gatedBy()
	if g == nil || !g.Added || label != "Yes" || len(ix["ping"].path) != 1 {
		t.Fatalf("ping must sit in the Yes option of its own added gate at the top, got %+v", ix["ping"].path)
	}
	if len(g.After) != 0 {
		t.Fatalf("ping reads nothing, so its gate opens at once; after = %v", g.After)
	}
	if len(ix["ping"].step.DependsOn) != 0 {
		t.Fatalf("ping should wait for nothing, got %v", ix["ping"].step.DependsOn)
	}
	// post: inside the Yes option of "post to #daily?".
	g, label = ix["post"].gatedBy()
	if g == nil || g.Title != "post to #daily?" || label != "Yes" || g.Added {
		t.Fatalf("post must be in the Yes option of 'post to #daily?', got %+v %q", g, label)
	}
	if !slices.Equal(g.After, []string{"briefing"}) {
		t.Fatalf("post to #daily? opens after briefing, got %v", g.After)
	}
}

func TestPRReview(t *testing.T) {
	p := compileSkill(t, "pr-review").Plan
	ix := index(p)
	titles := []string{"approve the extracted claims?", "approve the adjudication?", "approve the fix plan?", "approve the commit?"}
	shows := []string{"claims", "verdicts", "plan", "patch"}
	// Four gates nested in order, each inside the previous one's Yes.
	sps := p.StoppingPoints
	for i, title := range titles {
		if len(sps) != 1 || sps[0].Title != title || sps[0].Type != plan.StopMenu {
			t.Fatalf("gate %d should be %q, got %+v", i+1, title, sps)
		}
		if !slices.Equal(sps[0].Show, []string{shows[i]}) {
			t.Fatalf("gate %q shows %v, want %s", title, sps[0].Show, shows[i])
		}
		sps = sps[0].Options[0].StoppingPoints
	}
	if ix["pr"].step.DependsOn != nil || ix["diff"].step.DependsOn != nil || len(ix["pr"].path) != 0 || len(ix["diff"].path) != 0 {
		t.Fatal("pr and diff run at once at the top")
	}
	for id, gate := range map[string]string{"patch": "approve the fix plan?", "push": "approve the commit?"} {
		g, label := ix[id].gatedBy()
		if !ix[id].step.SideEffect || g == nil || g.Title != gate || label != "Yes" {
			t.Fatalf("%s must be a side effect governed by %q, got %+v", id, gate, g)
		}
	}
	third := ix["ask_3"].stop
	if third.Expires != "24h" || third.Summary != "fix clusters and waves for PR 4182" {
		t.Fatalf("third gate: expires %q summary %q", third.Expires, third.Summary)
	}
	if len(p.Notes) != 0 {
		t.Fatalf("nothing to note: %+v", p.Notes)
	}
}

func TestVendorPayment(t *testing.T) {
	p := compileSkill(t, "vendor-payment").Plan
	ix := index(p)
	for _, id := range []string{"vendor", "invoice", "po"} {
		if ix[id].step.ParallelGroup != "facts" {
			t.Fatalf("%s should be in fan facts", id)
		}
	}
	if m := ix["match"].step; !slices.Equal(m.DependsOn, []string{"join_facts"}) {
		t.Fatalf("match waits for invoice and po through the join, got %v", m.DependsOn)
	}
	g, label := ix["pay"].gatedBy()
	if g == nil || label != "Yes" || g.Audience != "finance" {
		t.Fatalf("pay must be in the Yes option of the gate asked of finance, got %+v", g)
	}
	if g.Check == nil || g.Check.Server != "erp" || g.Check.Tool != "get_vendor" || !slices.Equal(g.Check.Fields, []string{"bank_account", "status"}) {
		t.Fatalf("check probe: %+v", g.Check)
	}
	if len(g.Amend) != 1 || g.Amend[0] != (plan.AmendBound{Field: "amount", Min: 0, Max: 485000}) {
		t.Fatalf("amend: %+v", g.Amend)
	}
	if g.Expires != "8h" || g.OnExpiry != "reject" {
		t.Fatalf("expires %q on expiry %q", g.Expires, g.OnExpiry)
	}
	pay := ix["pay"].step
	if !pay.SideEffect || !bytes.Contains(pay.Args, []byte(`"{vendor.bank_account}"`)) {
		t.Fatalf("pay args: %s", pay.Args)
	}
}

func TestUMLDiagram(t *testing.T) {
	p := compileSkill(t, "uml-diagram").Plan
	ix := index(p)
	kind := ix["kind"].stop
	if kind == nil || kind.Type != plan.StopChoice || len(kind.Options) != 3 || kind.Then == nil {
		t.Fatalf("kind should be a question with three options and one continuation: %+v", kind)
	}
	for i, l := range []string{"sequence", "class", "state"} {
		if kind.Options[i].Label != l || kind.Options[i].Steps != nil {
			t.Fatalf("option %d: %+v", i, kind.Options[i])
		}
	}
	if d := ix["drawing"]; len(d.path) != 1 || d.path[0].stop.ID != "kind" {
		t.Fatalf("drawing reads {kind}, so it continues after the question")
	}
	dest := ix["destination"].stop
	if dest == nil || dest.Type != plan.StopText || len(dest.Options) != 0 {
		t.Fatalf("destination should be a free-text question: %+v", dest)
	}
	g, label := ix["saved"].gatedBy()
	if g == nil || !g.Added || label != "Yes" {
		t.Fatalf("saved needs a gate of its own, questions govern nothing: %+v", g)
	}
	// Asked once {destination} and {drawing} are known: inside the
	// destination question's continuation, after drawing.
	where := ix[g.ID].path
	if len(where) != 2 || where[1].stop.ID != "destination" || !slices.Equal(g.After, []string{"drawing"}) {
		t.Fatalf("saved's gate should sit after the destination answer and after drawing: after=%v path=%v", g.After, where)
	}
	if !hasNote(p, plan.NoteAddedGate, "saved", "") {
		t.Fatalf("no note for saved's gate: %+v", p.Notes)
	}
}
