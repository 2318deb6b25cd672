package chaoscheck

import (
	"fmt"
	"math"
	"slices"
	"sort"

	"github.com/anishathalye/porcupine"
)

// An ask's life, as its histories can see it: open until one decision
// (a gate's approval or rejection, an in-doubt answer) decides it; closed
// by the run (cancelled, expired, stale, revoked) from open or decided,
// and never after that.
const (
	askOpen    = "open"
	askDecided = "decided"
	askClosed  = "closed"
)

// class is the life stage an ask state shows.
func class(state string) string {
	switch state {
	case "pending", "evidence_requested", "in_doubt":
		return askOpen
	case "approved", "consumed", "rejected", "answered":
		return askDecided
	default:
		return askClosed
	}
}

// askInput is one operation on one ask: a decision, or a read that saw
// the ask in a stage.
type askInput struct {
	decide  bool
	outcome Outcome // a decision's
	saw     string  // a read's stage
	desc    string
}

// askModel is the sequential specification of one ask. A decision told
// OK must find the ask open and decides it; one told it was refused
// changes nothing; one with no answer may have decided an open ask or not.
// A read must see the stage the ask is in, except that the run may close
// it at any time (expiry, cancel): a read that sees it closed closes it.
func askModel() porcupine.Model {
	m := porcupine.NondeterministicModel{
		Init: func() []any { return []any{askOpen} },
		Step: func(state, input, _ any) []any {
			s, in := state.(string), input.(askInput)
			if in.decide {
				switch in.outcome {
				case OK:
					if s == askOpen {
						return []any{askDecided}
					}
					return nil
				case Refused:
					return []any{s}
				default:
					if s == askOpen {
						return []any{askOpen, askDecided}
					}
					return []any{s}
				}
			}
			switch {
			case in.saw == s:
				return []any{s}
			case in.saw == askClosed:
				return []any{askClosed}
			}
			return nil
		},
		DescribeOperation: func(input, _ any) string { return input.(askInput).desc },
		DescribeState:     func(state any) string { return state.(string) },
	}
	return m.ToModel()
}

// SingleUse checks every ask's history (the decisions and answers clients
// made on it, and every read that showed it) for linearizability against
// the ask's life: an approval decided once, never after it closed, never
// seen decided before anyone decided it. Each ask is checked on its own.
func SingleUse(h []Op) []Violation {
	ops := map[string][]porcupine.Operation{}
	for _, o := range h {
		ret := int64(o.Return)
		if o.Outcome == Unknown {
			// It may take effect at any time after its call.
			ret = math.MaxInt64
		}
		switch o.Kind {
		case Decide, Answer:
			ops[o.Ask] = append(ops[o.Ask], porcupine.Operation{ClientId: o.Client, Call: int64(o.Call), Return: ret,
				Input: askInput{decide: true, outcome: o.Outcome, desc: o.String()}})
		case Read:
			if o.Outcome != OK {
				continue
			}
			for ask, state := range o.Asks {
				ops[ask] = append(ops[ask], porcupine.Operation{ClientId: o.Client, Call: int64(o.Call), Return: ret,
					Input: askInput{saw: class(state), desc: fmt.Sprintf("client %d read %s: %s", o.Client, ask, state)}})
			}
		}
	}
	asks := make([]string, 0, len(ops))
	for a := range ops {
		asks = append(asks, a)
	}
	sort.Strings(asks)
	model := askModel()
	var out []Violation
	for _, a := range asks {
		if porcupine.CheckOperations(model, ops[a]) {
			continue
		}
		out = append(out, Violation{Check: "single-use", Run: runOf(a), Detail: fmt.Sprintf("the history of ask %s is not linearizable (decided twice, after it closed, or seen decided before anyone decided it):\n%s", a, describe(ops[a]))})
	}
	return out
}

func describe(ops []porcupine.Operation) string {
	ops = slices.Clone(ops)
	sort.Slice(ops, func(i, j int) bool { return ops[i].Call < ops[j].Call })
	s := ""
	for _, op := range ops {
		ret := "∞"
		if op.Return != math.MaxInt64 {
			ret = fmt.Sprint(op.Return)
		}
		s += fmt.Sprintf("  [%d, %s] %s\n", op.Call, ret, op.Input.(askInput).desc)
	}
	return s
}
