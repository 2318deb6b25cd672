package plan

import (
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"
)

func loadDesignExample(t *testing.T) *Plan {
	t.Helper()
	b, err := os.ReadFile("testdata/design-example.json")
	if err != nil {
		t.Fatal(err)
	}
	var p Plan
	if err := json.Unmarshal(b, &p); err != nil {
		t.Fatalf("the plan of DESIGN.md §3 does not decode: %v", err)
	}
	return &p
}

func TestDesignExampleVerifies(t *testing.T) {
	if err := Verify(loadDesignExample(t)); err != nil {
		t.Fatalf("the plan of DESIGN.md §3 must verify: %v", err)
	}
}

func TestCanonicalSortsKeysAndKeepsNumbers(t *testing.T) {
	got, err := CanonicalJSON(map[string]any{"b": Object(`{"z":1,"a":485000000000000001}`), "a": "<&>"})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"a":"<&>","b":{"a":485000000000000001,"z":1}}`
	if string(got) != want {
		t.Fatalf("got %s want %s", got, want)
	}
}

func TestRefs(t *testing.T) {
	cases := []struct {
		in   string
		want []string
	}{
		{"from {cpu, mem}", []string{"cpu", "mem"}},
		{`{"text": "{brief}"}`, []string{"brief"}},
		{"{vendor.bank_account} and {a.b.c}", []string{"vendor.bank_account", "a.b.c"}},
		{"{not a ref} {} {1x}", nil},
	}
	for _, c := range cases {
		var got []string
		for _, r := range Refs(c.in) {
			got = append(got, r.String())
		}
		if strings.Join(got, "|") != strings.Join(c.want, "|") {
			t.Errorf("Refs(%q) = %v, want %v", c.in, got, c.want)
		}
	}
}

func step(id string, mut func(*Step)) Step {
	s := Step{ID: id, Kind: KindTool, Server: "s", Tool: "t", Args: Object(`{}`)}
	if mut != nil {
		mut(&s)
	}
	return s
}

func menu(id string, after []string, yes []Step, yesStops ...StoppingPoint) StoppingPoint {
	return StoppingPoint{ID: id, Type: StopMenu, Title: id + "?", After: after, Options: []Option{
		{ID: "1", Label: "Yes", Steps: yes, StoppingPoints: yesStops},
		{ID: "2", Label: "No", Steps: []Step{}, StoppingPoints: []StoppingPoint{}},
	}}
}

func effect(s *Step) { s.SideEffect = true }

// Hand-built plans that break I1 or the structure must be refused,
// whoever built them.
func TestVerifyRejects(t *testing.T) {
	cases := []struct {
		name string
		rule string
		plan Plan
	}{
		{"side effect at the top", "I1", Plan{InitialSteps: []Step{step("pay", effect)}}},
		{"side effect inside a question", "I1", Plan{StoppingPoints: []StoppingPoint{{
			ID: "q", Type: StopChoice, Title: "which?", After: []string{},
			Options: []Option{{ID: "1", Label: "a"}, {ID: "2", Label: "b"}},
			Then:    &Phase{Steps: []Step{step("pay", effect)}},
		}}}},
		{"gate cannot show args computed after it", "I1", Plan{StoppingPoints: []StoppingPoint{
			menu("ask", nil, []Step{
				{ID: "draft", Kind: KindProse, Prompt: "write"},
				step("send", func(s *Step) {
					s.SideEffect = true
					s.DependsOn = []string{"draft"}
					s.Args = Object(`{"text":"{draft}"}`)
				}),
			}),
		}}},
		{"side effect beside its gate, not inside", "I1", Plan{
			InitialSteps:   []Step{step("pay", effect)},
			StoppingPoints: []StoppingPoint{menu("ask", nil, []Step{})},
		}},
		{"duplicate id", "unique_id", Plan{InitialSteps: []Step{step("a", nil), step("a", nil)}}},
		{"ask id equal to a step id", "unique_id", Plan{InitialSteps: []Step{step("a", nil)},
			StoppingPoints: []StoppingPoint{menu("a", nil, []Step{})}}},
		{"unknown depends_on", "reference", Plan{InitialSteps: []Step{step("a", func(s *Step) { s.DependsOn = []string{"ghost"} })}}},
		{"reference not waited for", "reference", Plan{InitialSteps: []Step{
			step("a", nil), {ID: "b", Kind: KindProse, Prompt: "use {a}"}}}},
		{"reference into a gate's option from outside", "reference", Plan{
			InitialSteps:   []Step{{ID: "b", Kind: KindProse, Prompt: "use {x}"}},
			StoppingPoints: []StoppingPoint{menu("g", nil, []Step{step("x", nil)})}}},
		{"cycle", "cycle", Plan{InitialSteps: []Step{
			step("a", func(s *Step) { s.DependsOn = []string{"b"} }),
			step("b", func(s *Step) { s.DependsOn = []string{"a"} })}}},
		{"impossible join", "join", Plan{InitialSteps: []Step{
			step("a", nil), step("b", nil), {ID: "j", Kind: KindJoin, In: []string{"a", "b"}, MinSuccess: 3}}}},
		{"join over a step of another phase", "join", Plan{
			InitialSteps:   []Step{{ID: "j", Kind: KindJoin, In: []string{"x"}, MinSuccess: 1}},
			StoppingPoints: []StoppingPoint{menu("g", nil, []Step{step("x", nil)})}}},
		{"prose with a side effect", "shape", Plan{InitialSteps: []Step{{ID: "p", Kind: KindProse, Prompt: "x", SideEffect: true}}}},
		{"side effect reads its own gate's answer", "I1", Plan{StoppingPoints: []StoppingPoint{menu("g", nil, []Step{
			step("send", func(s *Step) { s.SideEffect = true; s.Args = Object(`{"choice":"{g}"}`) }),
		})}}},
		{"gate after an unknown step", "reference", Plan{StoppingPoints: []StoppingPoint{menu("g", []string{"ghost"}, []Step{})}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := Verify(&c.plan)
			var ve *VerifyError
			if !errors.As(err, &ve) {
				t.Fatalf("Verify accepted a plan that breaks %s", c.rule)
			}
			for _, p := range ve.Problems {
				if p.Rule == c.rule {
					return
				}
			}
			t.Fatalf("want a %s problem, got %v", c.rule, err)
		})
	}
}

func TestVerifyAccepts(t *testing.T) {
	cases := []struct {
		name string
		plan Plan
	}{
		{"without asking", Plan{InitialSteps: []Step{step("pay", func(s *Step) { s.SideEffect = true; s.WithoutAsking = true })}}},
		{"governed by the gate that shows its input", Plan{
			InitialSteps: []Step{{ID: "draft", Kind: KindProse, Prompt: "write"}},
			StoppingPoints: []StoppingPoint{menu("g", []string{"draft"}, []Step{
				step("send", func(s *Step) { s.SideEffect = true; s.Args = Object(`{"t":"{draft.body}"}`) }),
			})},
		}},
		{"nested gates", Plan{StoppingPoints: []StoppingPoint{menu("g1", nil, []Step{step("a", effect)},
			menu("g2", []string{"a"}, []Step{step("b", func(s *Step) { s.SideEffect = true; s.Args = Object(`{"x":"{a}"}`) })}))}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if err := Verify(&c.plan); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// FuzzVerify: Verify never panics, whatever JSON it is handed.
func FuzzVerify(f *testing.F) {
	b, _ := os.ReadFile("testdata/design-example.json")
	f.Add(b)
	f.Add([]byte(`{"initial_steps":[{"id":"a","kind":"join","in":["a"],"min_success":1}]}`))
	f.Add([]byte(`{"stopping_points":[{"id":"q","type":"choice","options":[{"id":"1","label":"x","steps":[{"id":"s","kind":"tool","side_effect":true}]}]}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var p Plan
		if json.Unmarshal(data, &p) != nil {
			return
		}
		_ = Verify(&p)
	})
}

// Item 15 (issue 13): a plan reads run inputs it declares, and an input
// shares the namespace of step and ask ids.
func TestVerifyInputs(t *testing.T) {
	mk := func(inputs []string, id, args string) *Plan {
		return &Plan{Name: "p", Inputs: inputs, InitialSteps: []Step{{ID: id, Kind: KindTool, Server: "s", Tool: "t", Args: Object(args)}},
			StoppingPoints: []StoppingPoint{}, Notes: []Note{}}
	}
	if err := Verify(mk([]string{"who"}, "look", `{"q":"{who}"}`)); err != nil {
		t.Fatalf("a declared input: %v", err)
	}
	for name, p := range map[string]*Plan{
		"undeclared":      mk(nil, "look", `{"q":"{who}"}`),
		"collides":        mk([]string{"look"}, "look", `{}`),
		"unsorted":        mk([]string{"b", "a"}, "look", `{}`),
		"not a reference": mk([]string{"two words"}, "look", `{}`),
	} {
		if err := Verify(p); err == nil {
			t.Errorf("%s input: verified", name)
		}
	}
	// Its digest is that of its canonical JSON (freshness.PlanDigest).
	c1, _ := Canonical(mk(nil, "look", `{}`))
	p := mk(nil, "look", `{}`)
	p.Inputs = []string{}
	if c2, _ := Canonical(p); string(c1) != string(c2) {
		t.Error("a plan without inputs keeps its digest")
	}
}
