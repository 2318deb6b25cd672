package controlplane

import (
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	tollgatev1 "github.com/tollgate-dev/tollgate/gen/tollgate/v1"
	"github.com/tollgate-dev/tollgate/pkg/compiler"
)

// withoutInputSchemas has the control plane know no tool's input schema:
// for tests of what policy makes of args (a payment without a currency)
// that pay's schema would refuse before policy is asked.
func withoutInputSchemas(c *Config) {
	var tools []compiler.ToolInfo
	for _, s := range c.Catalog.Servers() {
		for _, n := range c.Catalog.Tools(s) {
			t, _ := c.Catalog.Lookup(s, n)
			t.InputSchema = nil
			tools = append(tools, t)
		}
	}
	c.Catalog = compiler.NewCatalog(tools)
}

// Issue 16: nobody is asked to approve a call its tool cannot run. A
// payment whose bank_account resolves to a boolean is never asked (the
// run fails naming the step, the field and why; no inbox shows it); one
// whose literal args lack the invoice is refused at start with line:col.
func TestAskNeverOpensForArgsTheToolSchemaRefuses(t *testing.T) {
	e := newEnv(t, nil, echoTools())
	recipe := "v: erp.get_vendor {\"id\": \"V-1\"}\nask finance:\n  pay V-1?\n  show: {v}\n" +
		"p: payments.pay {\"vendor\": \"V-1\", \"invoice\": \"I-1\", \"amount\": 10, \"currency\": \"INR\", \"bank_account\": \"{v.ok}\"}\n"
	resp, err := e.runs("alice").StartRun(bg, &tollgatev1.StartRunRequest{Source: &tollgatev1.StartRunRequest_Recipe{Recipe: recipe}})
	if err != nil {
		t.Fatal(err)
	}
	e.settle()
	r := e.get("alice", resp.GetRun().GetId())
	if r.GetState() != tollgatev1.RunState_RUN_STATE_FAILED || len(r.GetAsks()) != 0 {
		t.Fatalf("want failed with no ask, got %v with asks %v", r.GetState(), r.GetAsks())
	}
	for _, w := range []string{"`p` (payments·pay)", "bank_account", `want "string"`} {
		if !strings.Contains(r.GetStateReason(), w) {
			t.Fatalf("the reason %q should say %q", r.GetStateReason(), w)
		}
	}
	for _, who := range []string{"bob", "dave"} {
		inbox, err := e.approvals(who).ListAsks(bg, &tollgatev1.ListAsksRequest{})
		if err != nil || len(inbox.GetItems()) != 0 {
			t.Fatalf("%s's inbox: %v %v", who, inbox.GetItems(), err)
		}
	}
	if n := e.exec.calls(r.GetId() + "/p"); n != 0 {
		t.Fatalf("pay ran %d times", n)
	}

	bad := "ask finance:\n  pay V-1?\np: payments.pay {\"vendor\": \"V-1\", \"amount\": 10, \"currency\": \"INR\", \"bank_account\": \"X\"}\n"
	_, err = e.runs("alice").StartRun(bg, &tollgatev1.StartRunRequest{Source: &tollgatev1.StartRunRequest_Recipe{Recipe: bad}})
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "3:17") || !strings.Contains(err.Error(), "lacks `invoice`") {
		t.Fatalf("want the start refused at 3:17 for the missing invoice: %v", err)
	}

	// All known at the start once the inputs are in: refused then, not
	// when the ask would open.
	withInputs := "ask finance:\n  pay V-1?\np: payments.pay {\"vendor\": \"V-1\", \"invoice\": \"I-1\", \"amount\": 10, \"currency\": \"{cur}\", \"bank_account\": \"X\"}\n"
	_, err = e.runs("alice").StartRun(bg, &tollgatev1.StartRunRequest{Source: &tollgatev1.StartRunRequest_Recipe{Recipe: withInputs}, Inputs: map[string]string{"cur": "rupees"}})
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "`p` (payments·pay)") || !strings.Contains(err.Error(), "currency") || !strings.Contains(err.Error(), "pattern") {
		t.Fatalf("want the start refused for currency %q: %v", "rupees", err)
	}
	if _, err := e.runs("alice").StartRun(bg, &tollgatev1.StartRunRequest{Source: &tollgatev1.StartRunRequest_Recipe{Recipe: withInputs}, Inputs: map[string]string{"cur": "INR"}}); err != nil {
		t.Fatalf("INR fits: %v", err)
	}
}
