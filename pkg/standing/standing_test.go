package standing

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

const pay = `{"amount":485000,"bank_account":"DE00 2048","currency":"INR","invoice":"I-991","vendor":"V-1187"}`

func TestMatch(t *testing.T) {
	for _, tc := range []struct {
		scope, action, args string
		ok                  bool
		why                 string
	}{
		{"payments.pay vendor=V-1187 amount<=500000", "payments.pay", pay, true, ""},
		{"payments.pay vendor=V-1187 amount<=485000", "payments.pay", pay, true, ""},
		{"payments.pay vendor=V-1187 amount<=484999", "payments.pay", pay, false, "amount 485000 is over 484999"},
		{"payments.pay vendor=V-9", "payments.pay", pay, false, "vendor is not V-9"},
		{"payments.pay amount=485000", "payments.pay", pay, true, ""},
		{"payments.pay", "payments.pay", pay, true, ""},
		{"payments.refund", "payments.pay", pay, false, "the action is payments.pay"},
		{"payments.pay missing=x", "payments.pay", pay, false, "missing is not x"},
		{"payments.pay vendor<=5", "payments.pay", pay, false, "vendor is not a number"},
		{"payments.pay amount<=9007199254740992", "payments.pay", `{"amount":9007199254740993}`, false, "over"},
		{"payments.pay amount<=500000", "payments.pay", `{"amount":4.85e5}`, false, "not an integer"},
		{"payments.pay amount<=500000", "payments.pay", `{"amount":"485000"}`, false, "not a number"},
	} {
		sc, err := Parse(tc.scope)
		if err != nil {
			t.Fatalf("%q: %v", tc.scope, err)
		}
		ok, why := sc.Match(tc.action, []byte(tc.args))
		if ok != tc.ok || !strings.Contains(why, tc.why) {
			t.Errorf("%q on %s %s: %v %q, want %v %q", tc.scope, tc.action, tc.args, ok, why, tc.ok, tc.why)
		}
	}
}

func TestParseRejects(t *testing.T) {
	for _, s := range []string{"", "pay", ".pay", "payments.", "payments.pay amount<=", "payments.pay amount<=5.5", "payments.pay amount<=+5",
		"payments.pay amount<=05", "payments.pay vendor=", "payments.pay =x", "payments.pay vendor", "payments.pay a=1 a<=2", "payments.pay a=1 a=2",
		"payments.pay a.b=1", "pay ments.pay"} {
		if _, err := Parse(s); !errors.Is(err, ErrScope) {
			t.Errorf("Parse(%q) = %v, want ErrScope", s, err)
		}
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{"payments.pay vendor=V-1187 amount<=500000", "a.b x=1 y<=-2", "a.b", "a.b c<=9223372036854775807"} {
		f.Add(s, pay)
	}
	f.Fuzz(func(t *testing.T, s, args string) {
		sc, err := Parse(s)
		if err != nil {
			return
		}
		again, err := Parse(sc.String())
		if err != nil || !reflect.DeepEqual(sc, again) {
			t.Fatalf("Parse(%q).String() = %q does not parse back: %v", s, sc.String(), err)
		}
		// A match never panics and a bounded field must be present.
		if ok, _ := sc.Match(sc.Action, []byte(args)); ok && len(sc.AtMost)+len(sc.Equals) > 0 && !strings.Contains(args, "\"") {
			t.Fatalf("%q matched args %q that name no field", s, args)
		}
	})
}

// @REQUESTER narrows a scope to one principal's runs ("this agent may
// post to #daily"): it round-trips, and covers only that requester.
func TestScopeRequester(t *testing.T) {
	sc, err := Parse("slack.slack_post_message channel=#daily @alice-agent")
	if err != nil {
		t.Fatal(err)
	}
	if sc.Requester != "alice-agent" || sc.String() != "slack.slack_post_message channel=#daily @alice-agent" {
		t.Fatalf("parsed %+v, printed %q", sc, sc.String())
	}
	if again, err := Parse(sc.String()); err != nil || again.String() != sc.String() {
		t.Fatalf("round trip: %v %q", err, again.String())
	}
	if ok, _ := sc.Covers("alice-agent"); !ok {
		t.Error("the scope does not cover its own requester")
	}
	if ok, why := sc.Covers("alice"); ok || why == "" {
		t.Errorf("the scope covers alice's asks (%q)", why)
	}
	if ok, _ := (Scope{Action: "a.b"}).Covers("anyone"); !ok {
		t.Error("a scope without a requester covers anyone's")
	}
	for _, bad := range []string{"a.b @", "a.b @x @y"} {
		if _, err := Parse(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}
