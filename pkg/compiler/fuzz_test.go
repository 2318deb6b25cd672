package compiler

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/pkg/freshness"
	"github.com/tollgate-dev/tollgate/pkg/plan"
)

// FuzzCompile: on any input the compiler returns (never panics or hangs),
// a returned plan passes plan.Verify, the digest matches the plan, and the
// same input always compiles to the same digest.
func FuzzCompile(f *testing.F) {
	seeds, _ := filepath.Glob("../../examples/skills/*/SKILL.md")
	more, _ := filepath.Glob("testdata/refused/*.recipe")
	for _, path := range append(seeds, more...) {
		b, err := os.ReadFile(path)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(string(b))
	}
	f.Add("a: notes.store {\"text\":\"1\"}\nb: notes.store {\"text\":\"{a}\"}\n")
	f.Add("ask me:\n  deploy?\n  if no:\n    why: explain\nd: payments.pay {\"amount\":1} without asking\n")
	f.Add("a: notes.search {}\nw: notes.store {\"text\": \"{a}\"} without asking\n")
	f.Add("ask me:\n  pay?\np: payments.pay {\"vendor\": 1, \"memo\": {\"x\": [\"{a}\"]}, \"amount\": -1}\n")
	f.Add("together f:\n  a: notes.search {}\nthen:\n  need: 1 of 1\n  b: say {a}\nask me as q:\n  which?\n  options: x | y\nc: notes.store {\"t\":\"{q}{b}\"}\n")
	cat := exampleCatalog(f)
	f.Fuzz(func(t *testing.T, src string) {
		r := Compile(src, Options{Catalog: cat, Name: "fuzz"})
		if r.Plan == nil {
			if !r.Diagnostics.HasErrors() {
				t.Fatalf("no plan and no error for %q", src)
			}
			for _, d := range r.Diagnostics {
				if d.Code == "internal" {
					t.Fatalf("internal error for %q: %s", src, d.Message)
				}
				if d.Pos.Line < 1 || d.Pos.Col < 1 {
					t.Fatalf("diagnostic without a position: %v", d)
				}
			}
			return
		}
		if err := plan.Verify(r.Plan); err != nil {
			t.Fatalf("returned plan fails Verify for %q: %v", src, err)
		}
		d, err := freshness.PlanDigest(r.Plan)
		if err != nil || d != r.Digest {
			t.Fatalf("digest mismatch: %s vs %s (%v)", d, r.Digest, err)
		}
		if again := Compile(src, Options{Catalog: cat, Name: "fuzz"}); again.Digest != r.Digest {
			t.Fatalf("same input compiled to %s then %s", r.Digest, again.Digest)
		}
	})
}

// recipe200 is a 200-step recipe: fans, joins, prose, gates and side
// effects, the shape of a large real skill.
func recipe200() string {
	var b strings.Builder
	n := 0
	for block := 0; n < 200; block++ {
		fmt.Fprintf(&b, "together f%d:\n", block)
		var ids []string
		for i := 0; i < 8 && n < 200; i++ {
			id := fmt.Sprintf("s%d", n)
			fmt.Fprintf(&b, "  %s: notes.search {\"q\": \"item %d\"}\n", id, n)
			ids = append(ids, id)
			n++
		}
		b.WriteString("then:\n")
		fmt.Fprintf(&b, "  need: %d of %d\n", (len(ids)+1)/2, len(ids))
		if n < 200 {
			fmt.Fprintf(&b, "  p%d: summarise {%s}\n", block, strings.Join(ids, ", "))
			n++
		}
		if n < 200 && block%3 == 2 {
			fmt.Fprintf(&b, "ask me:\n  keep block %d?\n  show: {p%d}\n", block, block)
			fmt.Fprintf(&b, "w%d: notes.store {\"text\": \"{p%d}\"}\n", block, block)
			n++
		}
	}
	return b.String()
}

func BenchmarkCompile200(b *testing.B) {
	cat := exampleCatalog(b)
	src := recipe200()
	if r := Compile(src, Options{Catalog: cat}); r.Plan == nil {
		b.Fatalf("benchmark recipe does not compile: %v", r.Diagnostics)
	}
	b.ReportAllocs()
	b.SetBytes(int64(len(src)))
	for b.Loop() {
		Compile(src, Options{Catalog: cat})
	}
}

func BenchmarkCompileExample(b *testing.B) {
	cat := exampleCatalog(b)
	src, err := os.ReadFile("../../examples/skills/vendor-payment/SKILL.md")
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		Compile(string(src), Options{Catalog: cat})
	}
}
