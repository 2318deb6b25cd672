package freshness

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/tollgate-dev/tollgate/pkg/plan"
)

// ReadFacts reads the material facts fields name out of out, a check's
// output as plan.DecodeObject decodes it: each field is a dotted path
// ("vendor.bank_account"), its fact the canonical JSON of the value there
// ("null" where there is none). An approval is given on these facts and
// is consumed only if they are the same when read again (I6).
func ReadFacts(out any, fields []string) map[string]string {
	facts := make(map[string]string, len(fields))
	for _, f := range fields {
		v := out
		for _, part := range strings.Split(f, ".") {
			m, _ := v.(map[string]any)
			v = m[part]
		}
		facts[f] = string(plan.AppendCanonical(nil, v))
	}
	return facts
}

// FactsDigest is one digest over facts, in field order: the resource
// version an ask shows and its basis binds.
func FactsDigest(facts map[string]string) string {
	var b []byte
	for _, f := range slices.Sorted(maps.Keys(facts)) {
		b = append(append(append(append(b, f...), '='), facts[f]...), '\n')
	}
	return sum(b)
}

// Changes names, in field order, each fact of now that differs from
// before — "vendor.bank_account ending 2048 → ending 7777" — with both
// values masked (Mask): what retires an approval whose facts moved, shown
// to people who may not see the values themselves. None: the facts are as
// they were.
func Changes(before, now map[string]string) []string {
	var changed []string
	for _, f := range slices.Sorted(maps.Keys(now)) {
		if now[f] != before[f] {
			changed = append(changed, fmt.Sprintf("%s %s → %s", f, Mask(before[f]), Mask(now[f])))
		}
	}
	return changed
}

// Mask shows a fact's value without disclosing it: anything with a digit
// in it (an account, an IBAN, a phone) by its last four characters only,
// anything else as it is. canonical is the fact as ReadFacts reads it; a
// JSON string is shown unquoted.
func Mask(canonical string) string {
	v := canonical
	if u, err := strconv.Unquote(canonical); err == nil {
		v = u
	}
	if strings.ContainsAny(v, "0123456789") {
		r := []rune(v)
		if len(r) <= 4 {
			return "ending " + strings.Repeat("•", len(r))
		}
		return "ending " + string(r[len(r)-4:])
	}
	return v
}
