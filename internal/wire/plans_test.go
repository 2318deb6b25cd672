package wire

import (
	"io/fs"
	"testing"

	"github.com/tollgate-dev/tollgate/examples"
	tollgatev1 "github.com/tollgate-dev/tollgate/gen/tollgate/v1"
	"github.com/tollgate-dev/tollgate/pkg/compiler"
	"github.com/tollgate-dev/tollgate/pkg/freshness"
	"github.com/tollgate-dev/tollgate/pkg/plan"
)

// The plan edge is lossless: every example skill's plan, converted to its
// proto and back, verifies and digests as it did.
func TestPlanRoundTrip(t *testing.T) {
	cat, _ := compiler.ParseCatalog(examples.Catalog)
	paths, err := fs.Glob(examples.Skills, "skills/*/SKILL.md")
	if err != nil || len(paths) == 0 {
		t.Fatalf("no example skills: %v", err)
	}
	for _, path := range paths {
		src, err := examples.Skills.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		res := compiler.Compile(string(src), compiler.Options{Catalog: cat})
		if res.Plan == nil {
			t.Fatalf("%s does not compile", path)
		}
		back, err := PlanFromProto(Plan(res.Plan, res.Digest))
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if err := plan.Verify(back); err != nil {
			t.Fatalf("%s: the converted plan fails Verify: %v", path, err)
		}
		if d, _ := freshness.PlanDigest(back); d != res.Digest {
			a, _ := plan.Indent(res.Plan)
			b, _ := plan.Indent(back)
			t.Fatalf("%s: the round trip changed the plan:\n%s\n---\n%s", path, a, b)
		}
	}
}

// Issue 16: `on expiry: escalate` survives the trip to the API and back
// (it was sent as UNSPECIFIED, which reads as the default).
func TestPlanRoundTripKeepsEscalateOnExpiry(t *testing.T) {
	src := "ask finance:\n  pay?\n  escalate after: 4h to finance-lead\n  on expiry: escalate\npay: payments.pay {\"vendor\":\"V-1\",\"amount\":1,\"currency\":\"EUR\",\"invoice\":\"I-1\",\"bank_account\":\"x\"}\n"
	cat, _ := compiler.ParseCatalog(examples.Catalog)
	res := compiler.Compile(src, compiler.Options{Catalog: cat})
	if res.Plan == nil {
		t.Fatalf("does not compile: %v", res.Diagnostics)
	}
	pp := Plan(res.Plan, res.Digest)
	if got := pp.GetStoppingPoints()[0].GetOnExpiry(); got != tollgatev1.OnExpiry_ON_EXPIRY_ESCALATE {
		t.Fatalf("on expiry sent as %v", got)
	}
	back, err := PlanFromProto(pp)
	if err != nil {
		t.Fatal(err)
	}
	if got := back.StoppingPoints[0].OnExpiry; got != "escalate" {
		t.Fatalf("on expiry read back as %q", got)
	}
}

// An enum value with no domain meaning is refused, not read as a default.
func TestPlanFromProtoRefusesUnknownEnums(t *testing.T) {
	if _, err := PlanFromProto(nil); err == nil {
		t.Fatal("no plan is an error")
	}
	bad := &tollgatev1.Plan{Name: "p", InitialSteps: []*tollgatev1.Step{{Id: "a", Kind: tollgatev1.StepKind_STEP_KIND_UNSPECIFIED}}}
	if _, err := PlanFromProto(bad); err == nil {
		t.Fatal("a step of no kind is an error")
	}
	bad = &tollgatev1.Plan{Name: "p", StoppingPoints: []*tollgatev1.StoppingPoint{{Id: "ask_1"}}}
	if _, err := PlanFromProto(bad); err == nil {
		t.Fatal("a stopping point of no type is an error")
	}
}
