package engine

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/pkg/plan"
)

// payFromVendor is a payment whose bank_account is read from an earlier
// step, so only the resolved args can be checked against pay's schema.
const payFromVendor = `v: erp.get_vendor {"id":"V-1"}
ask me:
  pay V-1?
  show: {v}
p: payments.pay {"vendor":"V-1","invoice":"I-1","amount":10,"currency":"INR","bank_account":"{v.bank_account}"}
`

// schemaCheck is Config.CheckArgs over the example catalog's schemas.
func schemaCheck(t *testing.T) func(server, tool string, args plan.Object) error {
	cat := catalog(t)
	return func(server, tool string, args plan.Object) error { return cat.CheckArgs(server, tool, args) }
}

// An ask never opens for a call whose resolved args its tool's input
// schema refuses: the run fails, naming the step, the field and why;
// args that fit are asked as before.
func TestAskNeverOpensForArgsTheToolRefuses(t *testing.T) {
	s := simWith(t, compile(t, payFromVendor), Config{CheckArgs: schemaCheck(t)})
	s.succeed("v", map[string]any{"bank_account": 2048})
	s.want(Failed)
	if len(s.run.Asks) != 0 {
		t.Fatalf("an ask opened: %+v", s.run.Asks)
	}
	for _, e := range s.all {
		if _, ok := e.(AskOpened); ok {
			t.Fatal("AskOpened for a call the tool would refuse")
		}
	}
	for _, w := range []string{`"pay V-1?" is not asked`, "`p` (payments·pay)", "bank_account", `want "string"`, "nobody is asked"} {
		if !strings.Contains(s.run.Reason, w) {
			t.Fatalf("the reason %q should say %q", s.run.Reason, w)
		}
	}

	s = simWith(t, compile(t, payFromVendor), Config{CheckArgs: schemaCheck(t)})
	s.succeed("v", map[string]any{"bank_account": "XXXX2048"})
	s.want(Parked)
	if a := s.run.Asks["ask_1"]; a == nil || a.State != AskPending {
		t.Fatalf("args that fit are asked: %+v", s.run.Asks)
	}
	s.approve("ask_1", "alice")
	if s.dispatched()["p"] != 1 {
		t.Fatalf("approved, p runs: %v", s.dispatched())
	}
}

// An amendment within the recipe's bounds that the tool's input schema
// refuses (pay takes an amount above 0) is refused: approving it could
// not run. One it takes is applied.
func TestAmendTheToolRefusesIsRefused(t *testing.T) {
	src := strings.Replace(payFromVendor, "  show: {v}\n", "  show: {v}\n  amend: amount between 0 and 100\n", 1)
	s := simWith(t, compile(t, src), Config{CheckArgs: schemaCheck(t)})
	s.succeed("v", map[string]any{"bank_account": "XXXX2048"})
	s.want(Parked)
	_, err := s.m.Apply(s.run, Amend{Ask: "ask_1", Actor: "alice", Field: "amount", Value: 0, At: s.tick(time.Second)})
	if !errors.Is(err, ErrBadAmend) || !strings.Contains(err.Error(), "amount 0 is not a value payments·pay takes") || !strings.Contains(err.Error(), "exclusiveMinimum") {
		t.Fatalf("amending to 0: %v", err)
	}
	s.apply(Amend{Ask: "ask_1", Actor: "alice", Field: "amount", Value: 7, At: s.tick(time.Second)})
	if !strings.Contains(string(s.run.Asks["ask_1"].Payload[0].Args), `"amount":7`) {
		t.Fatalf("amount 7 fits: %s", s.run.Asks["ask_1"].Payload[0].Args)
	}
}
