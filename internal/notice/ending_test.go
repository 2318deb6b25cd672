package notice

import (
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	tollgatev1 "github.com/tollgate-dev/tollgate/gen/tollgate/v1"
)

// testWords marks what it escapes, so a test sees what went through Esc.
var testWords = Words{
	Esc:  func(s string, n int) string { return "[" + Clip(s, n) + "]" },
	When: func(t time.Time) string { return t.UTC().Format("15:04") },
}

func TestEnding(t *testing.T) {
	at := func(h int) *timestamppb.Timestamp {
		return timestamppb.New(time.Date(2030, 5, 1, h, 0, 0, 0, time.UTC))
	}
	decision := func(k tollgatev1.DecisionKind, actor string, h int, counts bool, reason string) *tollgatev1.Decision {
		return &tollgatev1.Decision{Kind: k, Actor: actor, Time: at(h), Counts: counts, Reason: reason}
	}
	approve := func(actor string, h int) *tollgatev1.Decision {
		return decision(tollgatev1.DecisionKind_DECISION_KIND_APPROVE, actor, h, true, "")
	}
	const (
		pending   = tollgatev1.AskState_ASK_STATE_PENDING
		approved  = tollgatev1.AskState_ASK_STATE_APPROVED
		rejected  = tollgatev1.AskState_ASK_STATE_REJECTED
		answered  = tollgatev1.AskState_ASK_STATE_ANSWERED
		expired   = tollgatev1.AskState_ASK_STATE_EXPIRED
		cancelled = tollgatev1.AskState_ASK_STATE_CANCELLED
		stale     = tollgatev1.AskState_ASK_STATE_STALE
		revoked   = tollgatev1.AskState_ASK_STATE_REVOKED
		evidence  = tollgatev1.AskState_ASK_STATE_EVIDENCE_REQUESTED
		inDoubt   = tollgatev1.AskState_ASK_STATE_IN_DOUBT
	)
	for _, tc := range []struct {
		name string
		ask  *tollgatev1.Ask
		want Ending
	}{
		{"open, nobody yet", &tollgatev1.Ask{State: pending}, Ending{State: pending}},
		{"in doubt: the notifier's to say", &tollgatev1.Ask{State: inDoubt}, Ending{State: inDoubt}},
		{"approved by each counting approver once", &tollgatev1.Ask{State: approved, ClosedAt: at(15), Decisions: []*tollgatev1.Decision{
			approve("bob", 12), decision(tollgatev1.DecisionKind_DECISION_KIND_APPROVE, "mallory", 13, false, ""), approve("dave", 14), approve("bob", 14)}},
			Ending{Text: "Approved by [bob], [dave] at 14:00", State: approved}},
		{"approved, no decision kept", &tollgatev1.Ask{State: tollgatev1.AskState_ASK_STATE_CONSUMED, ClosedAt: at(15)},
			Ending{Text: "Approved at 15:00", State: tollgatev1.AskState_ASK_STATE_CONSUMED}},
		{"rejected with a reason", &tollgatev1.Ask{State: rejected, Decisions: []*tollgatev1.Decision{decision(tollgatev1.DecisionKind_DECISION_KIND_REJECT, "bob", 14, false, "wrong vendor")}},
			Ending{Text: "Rejected by [bob] at 14:00: [wrong vendor]", State: rejected, Quoted: true}},
		{"rejected without one", &tollgatev1.Ask{State: rejected, Decisions: []*tollgatev1.Decision{decision(tollgatev1.DecisionKind_DECISION_KIND_REJECT, "bob", 14, false, "")}},
			Ending{Text: "Rejected by [bob] at 14:00", State: rejected}},
		{"rejected by the system", &tollgatev1.Ask{State: rejected, ClosedAt: at(15), StateReason: "policy changed"},
			Ending{Text: "Rejected at 15:00: [policy changed]", State: rejected, Quoted: true}},
		{"answered", &tollgatev1.Ask{State: answered, Decisions: []*tollgatev1.Decision{decision(tollgatev1.DecisionKind_DECISION_KIND_ANSWER, "carol", 9, true, "")}},
			Ending{Text: "Answered by [carol] at 09:00", State: answered}},
		{"answered by an approval", &tollgatev1.Ask{State: answered, Decisions: []*tollgatev1.Decision{approve("carol", 9)}},
			Ending{Text: "Answered by [carol] at 09:00", State: answered}},
		{"answered, no decision kept", &tollgatev1.Ask{State: answered}, Ending{Text: "Answered", State: answered}},
		{"expired", &tollgatev1.Ask{State: expired, ClosedAt: at(18), StateReason: "deadline"},
			Ending{Text: "Expired undecided at 18:00: [deadline]; nothing it governs ran", State: expired}},
		{"cancelled", &tollgatev1.Ask{State: cancelled, ClosedAt: at(18)}, Ending{Text: "Cancelled at 18:00", State: cancelled}},
		{"stale", &tollgatev1.Ask{State: stale, StateReason: "the invoice changed"},
			Ending{Text: "Stale: [the invoice changed]; it will be asked again", State: stale}},
		{"revoked", &tollgatev1.Ask{State: revoked, Decisions: []*tollgatev1.Decision{approve("dave", 10), decision(tollgatev1.DecisionKind_DECISION_KIND_REVOKE, "dave", 11, false, "oops")}},
			Ending{Text: "Approval revoked by [dave] at 11:00: [oops]", State: revoked, Quoted: true}},
		{"revoked, no decision kept", &tollgatev1.Ask{State: revoked, ClosedAt: at(11)}, Ending{Text: "Approval revoked at 11:00", State: revoked}},
		{"evidence requested", &tollgatev1.Ask{State: evidence, Decisions: []*tollgatev1.Decision{{Kind: tollgatev1.DecisionKind_DECISION_KIND_REQUEST_EVIDENCE, Actor: "erin", Time: at(8), EvidenceRequest: "the PO"}}},
			Ending{Text: "Evidence requested by [erin] at 08:00: [the PO]", State: evidence, Quoted: true}},
		{"approvals so far", &tollgatev1.Ask{State: pending, Quorum: 2, Decisions: []*tollgatev1.Decision{approve("dave", 10)}},
			Ending{Text: "Approved by [dave] at 10:00: 1 of 2 approvals so far", State: pending, SoFar: true}},
		{"approvals so far, no quorum set", &tollgatev1.Ask{State: evidence, Decisions: []*tollgatev1.Decision{approve("dave", 10)}},
			Ending{Text: "Approved by [dave] at 10:00: 1 of 1 approvals so far", State: evidence, SoFar: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := testWords.Ending(tc.ask); got != tc.want {
				t.Errorf("Ending = %+v\nwant     %+v", got, tc.want)
			}
		})
	}
}

// Every text of others goes through Esc, clipped as Esc is told.
func TestEndingEscapesOthersWords(t *testing.T) {
	long := strings.Repeat("r", 400)
	ask := &tollgatev1.Ask{State: tollgatev1.AskState_ASK_STATE_REJECTED, Decisions: []*tollgatev1.Decision{{
		Kind: tollgatev1.DecisionKind_DECISION_KIND_REJECT, Actor: strings.Repeat("a", 250), Time: timestamppb.New(time.Unix(0, 0)), Reason: long}}}
	got := testWords.Ending(ask).Text
	want := "Rejected by [" + strings.Repeat("a", 199) + "…] at 00:00: [" + strings.Repeat("r", 299) + "…]"
	if got != want {
		t.Errorf("Text = %q\nwant   %q", got, want)
	}
}
