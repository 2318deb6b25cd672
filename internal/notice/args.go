package notice

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"unicode/utf8"
)

// Arg is one top-level field of an action's args: its key, and its value
// as text (a JSON string without its quotes, anything else as compact
// JSON). Neither is escaped or clipped.
type Arg struct{ Key, Value string }

// Args is argsJSON's top-level fields in key order, at most max of them
// (all when max <= 0), and how many more there are. Anything that is not
// a JSON object with fields has none.
func Args(argsJSON string, max int) ([]Arg, int) {
	args, keys := parse(argsJSON)
	more := 0
	if max > 0 && len(keys) > max {
		keys, more = keys[:max], len(keys)-max
	}
	out := make([]Arg, 0, len(keys))
	for _, k := range keys {
		out = append(out, Arg{k, compact(args[k])})
	}
	return out, more
}

// Amount is the amount an action moves and its currency, when its args
// say: the first top-level "amount" or "*_amount" in key order, as text,
// and a top-level string "currency" ("" when there is none). amount is
// "" when the args name no amount.
func Amount(argsJSON string) (amount, currency string) {
	args, keys := parse(argsJSON)
	for _, k := range keys {
		if k == "amount" || strings.HasSuffix(k, "_amount") {
			if json.Unmarshal(args["currency"], &currency) != nil {
				currency = ""
			}
			return compact(args[k]), currency
		}
	}
	return "", ""
}

// parse is argsJSON's top-level fields and their keys in order.
func parse(argsJSON string) (map[string]json.RawMessage, []string) {
	var args map[string]json.RawMessage
	if json.Unmarshal([]byte(argsJSON), &args) != nil || len(args) == 0 {
		return nil, nil
	}
	keys := make([]string, 0, len(args))
	for k := range args {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return args, keys
}

// compact is a JSON value as text: a string without its quotes (null
// stays "null").
func compact(raw json.RawMessage) string {
	var s string
	if bytes.HasPrefix(raw, []byte(`"`)) && json.Unmarshal(raw, &s) == nil {
		return s
	}
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return string(raw)
	}
	return b.String()
}

// Clip shortens s to at most n runes, marking the cut with "…".
func Clip(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	if n <= 0 {
		return ""
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}
