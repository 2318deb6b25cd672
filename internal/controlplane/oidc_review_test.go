package controlplane

import (
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	tollgatev1 "github.com/tollgate-dev/tollgate/gen/tollgate/v1"
)

// A standing approval is applied later, under its granter's authority as
// policy judges it then — with no token of the granter's, so without the
// granter's groups. One granted on authority that came only through an
// IdP group must therefore not be accepted as if it will work: either it
// approves the next matching ask, or granting it is refused. (It was
// accepted and then never applied: every later ask parked.)
func TestStandingApprovalGrantedThroughAGroupIsNotInert(t *testing.T) {
	e, p := oidcEnv(t)
	p.SetGroups("dave", "finance-emea") // finance-1m through the group; finance-100k by name
	start := func() string {
		t.Helper()
		resp, err := tollgatev1.NewRunServiceClient(signedIn(t, e, p, "alice")).StartRun(bg, &tollgatev1.StartRunRequest{Source: &tollgatev1.StartRunRequest_Skill{Skill: "vendor-payment"}})
		if err != nil {
			t.Fatal(err)
		}
		e.settle()
		return resp.GetRun().GetId()
	}
	r1 := start()
	_, err := surface{tollgatev1.NewApprovalServiceClient(signedIn(t, e, p, "dave"))}.Decide(bg, &tollgatev1.DecideRequest{AskId: r1 + "/ask_1",
		Decision: &tollgatev1.DecideRequest_ApproveException{ApproveException: &tollgatev1.ApproveException{
			Until: timestamppb.New(time.Now().Add(time.Hour)), Scope: "payments.pay vendor=V-1187 amount<=500000", Reason: "monthly rent"}}})
	if err != nil {
		if !strings.Contains(err.Error(), "group") {
			t.Fatalf("a standing approval refused without saying the group's authority does not carry over: %v", err)
		}
		return // refused, and says why: fine
	}
	e.settle()
	r2 := start()
	got, err := tollgatev1.NewRunServiceClient(signedIn(t, e, p, "alice")).GetRun(bg, &tollgatev1.GetRunRequest{RunId: r2})
	if err != nil {
		t.Fatal(err)
	}
	if st := got.GetRun().GetState(); st != tollgatev1.RunState_RUN_STATE_COMPLETE {
		t.Fatalf("dave's standing approval was accepted, yet the next matching ask is %v, not approved by it", st)
	}
}
