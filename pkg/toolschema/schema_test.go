package toolschema

import (
	"strings"
	"testing"
)

// pay is the shape of examples/mcp/demo's payments.pay.
const pay = `{"type":"object","required":["vendor","invoice","amount","currency","bank_account"],
 "properties":{"vendor":{"type":"string"},"invoice":{"type":"string"},"amount":{"type":"number","exclusiveMinimum":0},
 "currency":{"type":"string","pattern":"^[A-Z]{3}$"},"bank_account":{"type":"string"}},"additionalProperties":false}`

func TestCheck(t *testing.T) {
	s, err := Parse([]byte(pay))
	if err != nil {
		t.Fatal(err)
	}
	ok := `{"vendor":"V-1","invoice":"I-1","amount":10,"currency":"INR","bank_account":"X"}`
	cases := []struct {
		name  string
		args  string
		open  []string
		field string
		words string
	}{
		{"fits", ok, nil, "", ""},
		{"missing invoice", `{"vendor":"V-1","amount":10,"currency":"INR","bank_account":"X"}`, nil, "invoice", "required"},
		{"wrong type", `{"vendor":"V-1","invoice":"I-1","amount":"ten","currency":"INR","bank_account":"X"}`, nil, "amount", `want "number"`},
		{"pattern", `{"vendor":"V-1","invoice":"I-1","amount":10,"currency":"rupees","bank_account":"X"}`, nil, "currency", "pattern"},
		{"unknown property", `{"vendor":"V-1","invoice":"I-1","amount":10,"currency":"INR","bank_account":"X","memo":"m"}`, nil, "memo", "it takes amount, bank_account"},
		{"open field counts as present", `{"vendor":"V-1","invoice":"{inv.id}","amount":10,"currency":"INR","bank_account":"X"}`, []string{"invoice"}, "", ""},
		{"open field does not excuse a missing one", `{"vendor":"V-1","amount":"{x}","currency":"INR","bank_account":"X"}`, []string{"amount"}, "invoice", "required"},
		{"not an object", `[1]`, nil, "", "not a JSON object"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var open func(string) bool
			if c.open != nil {
				open = func(f string) bool { return strings.Contains(strings.Join(c.open, ","), f) }
			}
			ps := s.Check([]byte(c.args), open)
			if c.words == "" {
				if ps != nil {
					t.Fatalf("want no problem, got %v", ps)
				}
				return
			}
			if len(ps) == 0 || ps[0].Field != c.field || !strings.Contains(ps[0].Reason, c.words) {
				t.Fatalf("want %s: …%s…, got %v", c.field, c.words, ps)
			}
		})
	}
}

func TestParse(t *testing.T) {
	if s, err := Parse(nil); s != nil || err != nil {
		t.Fatalf("empty is no schema: %v %v", s, err)
	}
	if s := (*Schema)(nil); s.Check([]byte(`{"x":1}`), nil) != nil {
		t.Fatal("no schema accepts everything")
	}
	if _, err := Parse([]byte(`{"$ref":"https://example.com/s.json"}`)); err == nil {
		t.Fatal("a remote $ref must be refused, not fetched")
	}
	if _, err := Parse([]byte(`[1]`)); err == nil {
		t.Fatal("a schema must be an object")
	}
	// A local $ref still works field by field.
	s, err := Parse([]byte(`{"type":"object","properties":{"n":{"$ref":"#/$defs/pos"}},"$defs":{"pos":{"type":"integer","minimum":1}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if ps := s.Check([]byte(`{"n":0}`), nil); len(ps) != 1 || ps[0].Field != "n" || !strings.Contains(ps[0].Reason, "minimum") {
		t.Fatalf("local $ref: %v", ps)
	}
}
