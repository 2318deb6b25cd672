package notice

import (
	"fmt"
	"slices"
	"strings"
	"time"

	tollgatev1 "github.com/tollgate-dev/tollgate/gen/tollgate/v1"
)

// Words is how a notifier writes what others wrote and when.
type Words struct {
	// Esc makes s, written by others (a name, a reason), safe to show in
	// the notifier's medium, within n runes.
	Esc func(s string, n int) string
	// When writes a time.
	When func(time.Time) string
}

// Ending is what became of an ask, in words a notifier marks and ends
// its own way (Slack puts an emoji before it, email a full stop after).
type Ending struct {
	// Text says who decided and when, or what else became of the ask:
	// "Rejected by bob at …: wrong vendor"; "" for an open ask nobody has
	// approved yet (nor for one in doubt: a notifier says that its own
	// way).
	Text string
	// State is the ask's state Text tells of.
	State tollgatev1.AskState
	// SoFar is set when Text counts the approvals so far of an ask not
	// yet approved.
	SoFar bool
	// Quoted is set when Text ends with words of others (a reason): the
	// notifier adds no punctuation of its own after them.
	Quoted bool
}

// Ending says what became of ask.
func (w Words) Ending(ask *tollgatev1.Ask) Ending {
	var approvers []string
	var last *tollgatev1.Decision
	lastOf := map[tollgatev1.DecisionKind]*tollgatev1.Decision{}
	for _, d := range ask.GetDecisions() {
		lastOf[d.GetKind()] = d
		if d.GetKind() == tollgatev1.DecisionKind_DECISION_KIND_APPROVE && d.GetCounts() {
			if !slices.Contains(approvers, d.GetActor()) {
				approvers = append(approvers, d.GetActor())
			}
			last = d
		}
	}
	e := Ending{State: ask.GetState()}
	// say is the sentence: its words, then a quoted text of others when
	// there is one.
	say := func(words, quote string) Ending {
		e.Text = words
		if quote != "" {
			e.Text, e.Quoted = words+": "+w.Esc(quote, 300), true
		}
		return e
	}
	by := func(d *tollgatev1.Decision) string {
		return w.Esc(d.GetActor(), 200) + " at " + w.When(d.GetTime().AsTime())
	}
	approvedBy := func() string {
		names := make([]string, len(approvers))
		for i, a := range approvers {
			names[i] = w.Esc(a, 200)
		}
		return strings.Join(names, ", ") + " at " + w.When(last.GetTime().AsTime())
	}
	closed := ""
	if c := ask.GetClosedAt(); c != nil {
		closed = " at " + w.When(c.AsTime())
	}
	reason := ask.GetStateReason()
	switch ask.GetState() {
	case tollgatev1.AskState_ASK_STATE_APPROVED, tollgatev1.AskState_ASK_STATE_CONSUMED:
		if last != nil {
			return say("Approved by "+approvedBy(), "")
		}
		return say("Approved"+closed, "")
	case tollgatev1.AskState_ASK_STATE_REJECTED:
		if d := lastOf[tollgatev1.DecisionKind_DECISION_KIND_REJECT]; d != nil {
			return say("Rejected by "+by(d), d.GetReason())
		}
		return say("Rejected"+closed, reason)
	case tollgatev1.AskState_ASK_STATE_ANSWERED:
		if d := lastOf[tollgatev1.DecisionKind_DECISION_KIND_ANSWER]; d != nil {
			return say("Answered by "+by(d), "")
		}
		if d := lastOf[tollgatev1.DecisionKind_DECISION_KIND_APPROVE]; d != nil {
			return say("Answered by "+by(d), "")
		}
		return say("Answered"+closed, "")
	case tollgatev1.AskState_ASK_STATE_EXPIRED:
		e = say("Expired undecided"+closed, reason)
		e.Text, e.Quoted = e.Text+"; nothing it governs ran", false
		return e
	case tollgatev1.AskState_ASK_STATE_CANCELLED:
		return say("Cancelled"+closed, reason)
	case tollgatev1.AskState_ASK_STATE_STALE:
		e = say("Stale"+closed, reason)
		e.Text, e.Quoted = e.Text+"; it will be asked again", false
		return e
	case tollgatev1.AskState_ASK_STATE_REVOKED:
		if d := lastOf[tollgatev1.DecisionKind_DECISION_KIND_REVOKE]; d != nil {
			return say("Approval revoked by "+by(d), d.GetReason())
		}
		return say("Approval revoked"+closed, reason)
	case tollgatev1.AskState_ASK_STATE_EVIDENCE_REQUESTED:
		if d := lastOf[tollgatev1.DecisionKind_DECISION_KIND_REQUEST_EVIDENCE]; d != nil {
			return say("Evidence requested by "+by(d), d.GetEvidenceRequest())
		}
	}
	if last != nil {
		e.SoFar = true
		return say(fmt.Sprintf("Approved by %s: %d of %d approvals so far", approvedBy(), len(approvers), max(ask.GetQuorum(), 1)), "")
	}
	return e
}
