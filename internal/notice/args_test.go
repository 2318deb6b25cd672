package notice

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestArgs(t *testing.T) {
	for _, tc := range []struct {
		name, args string
		max        int
		want       []Arg
		more       int
	}{
		{"not JSON", `{"amount":`, 0, nil, 0},
		{"not an object", `[1,2]`, 0, nil, 0},
		{"a string", `"amount"`, 0, nil, 0},
		{"empty object", `{}`, 0, nil, 0},
		{"null", `null`, 0, nil, 0},
		{"key order; strings unquoted; the rest compact JSON", `{"vendor":"V-1187", "amount": 485000, "meta": { "a" : [1, 2] }, "ok": true, "none": null}`, 0,
			[]Arg{{"amount", "485000"}, {"meta", `{"a":[1,2]}`}, {"none", "null"}, {"ok", "true"}, {"vendor", "V-1187"}}, 0},
		{"escapes in a string are read", `{"memo":"line\nbreak \u003c\u0021channel\u003e"}`, 0, []Arg{{"memo", "line\nbreak <!channel>"}}, 0},
		{"at most max, and how many more", `{"d":1,"c":2,"b":3,"a":4}`, 2, []Arg{{"a", "4"}, {"b", "3"}}, 2},
		{"max exactly", `{"b":1,"a":2}`, 2, []Arg{{"a", "2"}, {"b", "1"}}, 0},
		{"a duplicate key: the last", `{"a":1,"a":2}`, 0, []Arg{{"a", "2"}}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, more := Args(tc.args, tc.max)
			if !slices.Equal(got, tc.want) && !(len(got) == 0 && len(tc.want) == 0) || more != tc.more {
				t.Errorf("Args(%s, %d) = %q, %d; want %q, %d", tc.args, tc.max, got, more, tc.want, tc.more)
			}
		})
	}
}

func TestAmount(t *testing.T) {
	for _, tc := range []struct{ args, amount, currency string }{
		{`{"amount":485000,"currency":"INR"}`, "485000", "INR"},
		{`{"amount":"12.50"}`, "12.50", ""},
		{`{"total_amount":1e3,"currency":"EUR","vendor":"x"}`, "1e3", "EUR"},
		{`{"a_amount":1,"b_amount":2}`, "1", ""}, // the first in key order
		{`{"amount":5,"currency":840}`, "5", ""}, // a currency that is not a string
		{`{"amount":5,"currency":""}`, "5", ""},  // nor an empty one
		{`{"amount":{"value":5},"currency":null}`, `{"value":5}`, ""},
		{`{"amounts":5,"currency":"USD"}`, "", ""}, // not an amount's key
		{`{"currency":"USD"}`, "", ""},
		{`not json`, "", ""},
		{``, "", ""},
	} {
		amt, cur := Amount(tc.args)
		if amt != tc.amount || cur != tc.currency {
			t.Errorf("Amount(%s) = %q, %q; want %q, %q", tc.args, amt, cur, tc.amount, tc.currency)
		}
	}
}

func TestClip(t *testing.T) {
	for _, tc := range []struct {
		s    string
		n    int
		want string
	}{
		{"short", 10, "short"},
		{"exact", 5, "exact"},
		{"longer text", 5, "long…"},
		{"ünïcödé runes", 4, "ünï…"}, // runes, not bytes
		{"x", 0, ""},
		{"", 0, ""},
		{"ab", 1, "…"},
	} {
		if got := Clip(tc.s, tc.n); got != tc.want {
			t.Errorf("Clip(%q, %d) = %q, want %q", tc.s, tc.n, got, tc.want)
		}
		if got := Clip(tc.s, tc.n); utf8.RuneCountInString(got) > max(tc.n, 0) {
			t.Errorf("Clip(%q, %d) = %q: longer than %d runes", tc.s, tc.n, got, tc.n)
		}
	}
}

// FuzzArgs feeds the args helpers what a run may put in an action's args:
// any text. They never panic; a JSON object's fields come back each once,
// in key order, at most max of them with the rest counted; the amount is
// one of the args' values.
func FuzzArgs(f *testing.F) {
	for _, s := range []string{`{"amount":485000,"currency":"INR","memo":"<!channel>","vendor":"V-1187"}`, `{}`, `[]`, `null`, `"x"`, `{"a":{"b":[1,2,{"c":null}]}}`,
		`{"x_amount":"1","currency":{"no":1}}`, `{"\u202e":"\u0000"}`, "{\"a\":\"\xff\"}", `{"a":1,"a":2}`, `{"amount":1e400}`} {
		f.Add(s, 3)
	}
	f.Fuzz(func(t *testing.T, s string, max int) {
		max %= 16
		args, more := Args(s, max)
		all, none := Args(s, 0)
		if none != 0 {
			t.Fatalf("Args(%q, 0) counts %d more", s, none)
		}
		if len(args)+more != len(all) || max > 0 && len(args) > max || !slices.Equal(args, all[:len(args)]) {
			t.Fatalf("Args(%q, %d) = %q and %d more; all are %q", s, max, args, more, all)
		}
		var m map[string]json.RawMessage
		if json.Unmarshal([]byte(s), &m) == nil && len(all) != len(m) {
			t.Fatalf("Args(%q) has %d fields, the object %d", s, len(all), len(m))
		}
		if !slices.IsSortedFunc(all, func(a, b Arg) int { return strings.Compare(a.Key, b.Key) }) {
			t.Fatalf("Args(%q) = %q: not in key order", s, all)
		}
		for i := 1; i < len(all); i++ {
			if all[i].Key == all[i-1].Key {
				t.Fatalf("Args(%q): key %q twice", s, all[i].Key)
			}
		}
		amt, cur := Amount(s)
		if amt == "" && cur != "" {
			t.Fatalf("Amount(%q) = %q, %q: a currency without an amount", s, amt, cur)
		}
		if amt != "" && !slices.ContainsFunc(all, func(a Arg) bool {
			return a.Value == amt && (a.Key == "amount" || strings.HasSuffix(a.Key, "_amount"))
		}) {
			t.Fatalf("Amount(%q) = %q: not an amount among %q", s, amt, all)
		}
	})
}
