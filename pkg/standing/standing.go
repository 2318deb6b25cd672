package standing

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/tollgate-dev/tollgate/pkg/plan"
)

// Scope is a parsed scope.
type Scope struct {
	Action string
	Equals map[string]string // field → required value
	AtMost map[string]int64  // field → inclusive ceiling
	// Requester, when set, is the one whose runs' asks it covers (an
	// agent's, say); "" covers anyone's.
	Requester string
}

// ErrScope is the kind of every parse error.
var ErrScope = errors.New("bad scope")

// Parse reads a scope. Every field may be bounded once; an action alone
// (no bounds) is allowed but wide — callers decide whether to accept it.
func Parse(s string) (Scope, error) {
	toks := strings.Fields(s)
	if len(toks) == 0 {
		return Scope{}, fmt.Errorf("%w: empty; write ACTION [FIELD=VALUE] [FIELD<=N] [@REQUESTER], e.g. payments.pay vendor=V-1187 amount<=500000", ErrScope)
	}
	sc := Scope{Action: toks[0], Equals: map[string]string{}, AtMost: map[string]int64{}}
	server, tool, ok := strings.Cut(sc.Action, ".")
	if !ok || !name(server) || !name(tool) {
		return Scope{}, fmt.Errorf("%w: %q is not an action (server.tool)", ErrScope, sc.Action)
	}
	for _, t := range toks[1:] {
		if who, ok := strings.CutPrefix(t, "@"); ok {
			if who == "" || sc.Requester != "" {
				return Scope{}, fmt.Errorf("%w: %q: want one @REQUESTER (the one whose asks it covers)", ErrScope, t)
			}
			sc.Requester = who
			continue
		}
		if f, v, ok := strings.Cut(t, "<="); ok {
			n, err := integer(v)
			if !name(f) || err != nil {
				return Scope{}, fmt.Errorf("%w: %q: want FIELD<=INTEGER", ErrScope, t)
			}
			if err := sc.claim(f); err != nil {
				return Scope{}, err
			}
			sc.AtMost[f] = n
			continue
		}
		f, v, ok := strings.Cut(t, "=")
		if !ok || !name(f) || v == "" {
			return Scope{}, fmt.Errorf("%w: %q: want FIELD=VALUE or FIELD<=INTEGER", ErrScope, t)
		}
		if err := sc.claim(f); err != nil {
			return Scope{}, err
		}
		sc.Equals[f] = v
	}
	return sc, nil
}

func (sc Scope) claim(f string) error {
	_, a := sc.Equals[f]
	_, b := sc.AtMost[f]
	if a || b {
		return fmt.Errorf("%w: %s is bounded twice", ErrScope, f)
	}
	return nil
}

// String is the canonical text of the scope: Parse(sc.String()) == sc.
func (sc Scope) String() string {
	parts := []string{sc.Action}
	for _, f := range slices.Sorted(maps.Keys(sc.Equals)) {
		parts = append(parts, f+"="+sc.Equals[f])
	}
	for _, f := range slices.Sorted(maps.Keys(sc.AtMost)) {
		parts = append(parts, f+"<="+strconv.FormatInt(sc.AtMost[f], 10))
	}
	if sc.Requester != "" {
		parts = append(parts, "@"+sc.Requester)
	}
	return strings.Join(parts, " ")
}

// Covers reports whether the scope covers asks of runs requester started,
// and if not, why: any requester's, unless it names one (@REQUESTER: "this
// agent may post to #daily").
func (sc Scope) Covers(requester string) (bool, string) {
	if sc.Requester != "" && sc.Requester != requester {
		return false, fmt.Sprintf("the scope covers only %s's asks, this is %s's", sc.Requester, requester)
	}
	return true, ""
}

// Match reports whether an action with these (canonical JSON) args lies
// within the scope, and if not, why. A bounded field the args lack, or
// hold in another type, does not match.
func (sc Scope) Match(action string, args []byte) (bool, string) {
	if action != sc.Action {
		return false, fmt.Sprintf("the action is %s, the scope is %s", action, sc.Action)
	}
	m, err := plan.DecodeObject(args)
	if err != nil {
		return false, "the args are not a JSON object"
	}
	for _, f := range slices.Sorted(maps.Keys(sc.Equals)) {
		if got, ok := text(m[f]); !ok || got != sc.Equals[f] {
			return false, fmt.Sprintf("%s is not %s", f, sc.Equals[f])
		}
	}
	for _, f := range slices.Sorted(maps.Keys(sc.AtMost)) {
		n, ok := m[f].(json.Number)
		if !ok {
			return false, fmt.Sprintf("%s is not a number", f)
		}
		v, err := integer(string(n))
		if err != nil {
			return false, fmt.Sprintf("%s is not an integer", f)
		}
		if v > sc.AtMost[f] {
			return false, fmt.Sprintf("%s %d is over %d", f, v, sc.AtMost[f])
		}
	}
	return true, ""
}

// text is a string arg's text or a number's digits.
func text(v any) (string, bool) {
	switch x := v.(type) {
	case string:
		return x, true
	case json.Number:
		return string(x), true
	}
	return "", false
}

// integer parses an exact int64 in plain decimal: no sign but "-", no
// leading zeros, no fraction or exponent.
func integer(s string) (int64, error) {
	d := strings.TrimPrefix(s, "-")
	if d == "" || (len(d) > 1 && d[0] == '0') || strings.IndexFunc(d, func(r rune) bool { return r < '0' || r > '9' }) >= 0 {
		return 0, fmt.Errorf("%q is not an integer", s)
	}
	return strconv.ParseInt(s, 10, 64)
}

func name(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if !(r == '_' || r == '-' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
			return false
		}
	}
	return true
}
