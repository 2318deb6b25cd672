package engine

import (
	"cmp"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/tollgate-dev/tollgate/pkg/freshness"
)

// Judged is what a person's decision was judged against: the payload and
// evidence digests the decider says they reviewed, and the ask's Basis
// when the control plane checked their authority. A decision event
// carries it and the engine applies the event only to an ask that is
// still that ask: the authority and digest checks the control plane made
// on the copy it read are then checks of the state this transition
// commits, whatever committed in between (I6, I9). The zero Judged pins
// nothing (events the engine's own tests build; withdrawals by policy).
type Judged struct {
	Payload  string // the payload digest the decider was shown
	Evidence string // the evidence digest the decider was shown
	// Basis is AskRun.Basis of the ask authority was checked on.
	Basis string
	// Approves: the decision lets an action run (an approval, a standing
	// approval, an in-doubt retry), so it must quote the payload digest
	// of an ask that governs actions and the evidence digest of an ask
	// that shows evidence.
	Approves bool
	// Via is the surface the decision came through ("api", "web",
	// "slack", …); the engine records it on the decision and its journal
	// records. Link, when set, is the id of the single-use link it was
	// made through: the engine refuses a second decision through one link
	// (ErrLinkUsed), on any replica, since the ask carries its uses.
	Via  string
	Link string
}

// Refusals of a decision judged on another ask than the one it would
// change: ErrStaleAsk when the ask changed since (or the decider reviewed
// another packet), ErrUnreviewed when an approval does not say which
// packet it reviewed.
var (
	ErrStaleAsk   = errors.New("the ask changed since the decision was judged")
	ErrUnreviewed = errors.New("the approval does not say what it reviewed")
	// ErrDigestMismatch: the decision quotes a payload digest the ask
	// never bound.
	ErrDigestMismatch = errors.New("digest mismatch")
	// ErrLinkUsed: a decision was already made through this single-use
	// link.
	ErrLinkUsed = errors.New("this link was already used")
)

// Bound reports whether the ask binds, or bound before an amendment,
// payload digest d.
func (a *AskRun) Bound(d string) bool {
	if d == a.PayloadDigest() {
		return true
	}
	for _, dec := range a.Decisions {
		if dec.Kind == DecisionAmend && dec.Before == d {
			return true
		}
	}
	return false
}

// JudgedOn pins a decision to a, the ask as read when authority was
// checked, with the digests the decider quotes.
func JudgedOn(a *AskRun, payload, evidence string, approves bool) Judged {
	return Judged{Payload: payload, Evidence: evidence, Basis: a.Basis(), Approves: approves}
}

// Basis is one digest over everything of the ask that a decision on it
// is judged by: its type and state, whom it asks (audience, approvers,
// quorum), the actions it governs (the payload digest, and the actions a
// gate's requester added) and the evidence and freshness it shows. Votes
// and reply counters are not in it: another approver's vote does not
// change what this one may decide.
func (a *AskRun) Basis() string {
	return freshness.BasisDigest(string(a.Type), string(a.State), a.Audience, strings.Join(a.Approvers, ","), strconv.Itoa(a.Quorum),
		strings.Join(a.Also, ","), a.PayloadDigest(), a.EvidenceDigest(), strconv.Itoa(a.Round), a.ResourceVersion)
}

// StillAsJudged is the one check that a decision fits the ask as it is: it
// quotes the packet the ask binds (required when it approves), and the ask
// is the one its authority was judged on. The control plane asks it of the
// copy it judged, to refuse early; the engine of the ask it commits.
func (a *AskRun) StillAsJudged(j Judged) error {
	if j == (Judged{}) {
		return nil
	}
	payload, evidence := a.PayloadDigest(), a.EvidenceDigest()
	if j.Approves && payload != "" && j.Payload == "" {
		return fmt.Errorf("%w: %q binds payload %s; send the payload digest you were shown (expected_payload_digest, approvectl asks show)", ErrUnreviewed, a.Title, payload)
	}
	if j.Payload != "" && j.Payload != payload {
		if !a.Bound(j.Payload) {
			// Not a payload this ask ever bound: a typo or another ask's
			// digest, not a change since it was read.
			return fmt.Errorf("%w: the payload digest you gave, %s, does not match the ask's, %s (approvectl asks show prints it)", ErrDigestMismatch, j.Payload, orNone(payload))
		}
		return fmt.Errorf("%w: you reviewed %s, the ask now binds %s", ErrStaleAsk, j.Payload, orNone(payload))
	}
	if j.Approves && evidence != "" && j.Evidence != evidence {
		switch {
		case j.Evidence == "":
			return fmt.Errorf("%w: %q shows evidence %s; send the evidence digest you were shown (expected_evidence_digest, approvectl asks show)", ErrUnreviewed, a.Title, evidence)
		case !a.showed(j.Evidence):
			return fmt.Errorf("%w: the evidence digest you gave, %s, does not match the ask's, %s (approvectl asks show prints it)", ErrDigestMismatch, j.Evidence, evidence)
		}
		return fmt.Errorf("%w: you reviewed evidence %s, the ask now shows %s (evidence was attached since; read it and decide on what it is now)", ErrStaleAsk, j.Evidence, evidence)
	}
	if j.Basis != "" && j.Basis != a.Basis() {
		return fmt.Errorf("%w: %q is now %s for %s, binding %s; read it again and decide on what it is now", ErrStaleAsk, a.Title, a.State, whom(a), orNone(payload))
	}
	return nil
}

// LinkUse is the decision made through single-use link id, if any ("" is
// no link, never used).
func (a *AskRun) LinkUse(id string) (Decision, bool) {
	if id == "" {
		return Decision{}, false
	}
	for _, d := range a.Decisions {
		if d.Link == id {
			return d, true
		}
	}
	return Decision{}, false
}

// LinkUse is the decision made through single-use link id on ask askID
// in any of its rounds: an ask asked again after going stale keeps its id,
// and its earlier rounds keep their decisions under round-numbered ids
// (askID~N, advance.go's open). A link bound to the ask decides once over
// all of them — a link used on the first round must not decide the next
// (a leaked or forwarded link would approve the changed facts too).
func (r *Run) LinkUse(askID, id string) (Decision, bool) {
	if id == "" {
		return Decision{}, false
	}
	for k, a := range r.Asks {
		if k != askID && !strings.HasPrefix(k, askID+"~") {
			continue
		}
		if d, ok := a.LinkUse(id); ok {
			return d, true
		}
	}
	return Decision{}, false
}

// CheckLink is the one check of a single-use link: ErrLinkUsed, saying who
// used it and when, when any round of ask askID recorded a decision
// through link (Run.LinkUse); nil otherwise. The engine asks it of every
// decision through a link; the control plane of the run it judged, to
// refuse early.
func (r *Run) CheckLink(askID, link string) error {
	if d, ok := r.LinkUse(askID, link); ok {
		return fmt.Errorf("%w: %s decided through it at %s (%s); a link decides once, also after its ask is asked again", ErrLinkUsed, d.Actor, d.At.UTC().Format(time.RFC3339), d.Kind)
	}
	return nil
}

// linkUsedBefore is CheckLink for the decision the transition applies.
func (t *tx) linkUsedBefore() error {
	if v := t.via; v != nil && v.link != "" {
		return t.run.CheckLink(v.ask, v.link)
	}
	return nil
}

// showed reports whether the ask ever showed the evidence digest d: its
// evidence only grows (attached rounds are appended), so what it showed
// before is a prefix of what it shows now.
func (a *AskRun) showed(d string) bool {
	for i := range len(a.Evidence) + 1 {
		if (&AskRun{Evidence: a.Evidence[:i]}).EvidenceDigest() == d {
			return true
		}
	}
	return false
}

func orNone(digest string) string {
	if digest == "" {
		return "no digest"
	}
	return digest
}

func whom(a *AskRun) string {
	w := cmp.Or(a.Audience, "the requester")
	if len(a.Approvers) > 0 {
		w += " (" + strings.Join(a.Approvers, ", ") + ")"
	}
	if a.Quorum > 1 {
		w += fmt.Sprintf(", %d approvals", a.Quorum)
	}
	return w
}

// judgedEvent is a person's decision on one ask, pinned by a Judged.
type judgedEvent interface {
	pinned() (ask, actor string, j Judged)
}

func (e Decide) pinned() (string, string, Judged)          { return e.Ask, e.Actor, e.Judged }
func (e Amend) pinned() (string, string, Judged)           { return e.Ask, e.Actor, e.Judged }
func (e RequestEvidence) pinned() (string, string, Judged) { return e.Ask, e.Actor, e.Judged }
func (e Delegate) pinned() (string, string, Judged)        { return e.Ask, e.Actor, e.Judged }
func (e Revoke) pinned() (string, string, Judged)          { return e.Ask, e.Actor, e.Judged }
func (e Answer) pinned() (string, string, Judged)          { return e.Ask, e.Actor, e.Judged }

// via is the surface and link of the decision a transition applies, for
// its decisions and journal records (tx.record, tx.stampVia).
type via struct {
	actor, surface, link string
	ask                  string
	from                 int // how many decisions the ask held before
}

// viaOf is the surface ev came through, if it is a decision that names one.
func (t *tx) viaOf(ev Event) *via {
	je, ok := ev.(judgedEvent)
	if !ok {
		return nil
	}
	ask, actor, j := je.pinned()
	if j.Via == "" && j.Link == "" {
		return nil
	}
	v := &via{actor: actor, surface: j.Via, link: j.Link, ask: ask}
	if a, ok := t.run.Asks[ask]; ok {
		v.from = len(a.Decisions)
	}
	return v
}

// stampVia marks the decisions the transition's actor made on its ask with
// the surface and link they came through.
func (t *tx) stampVia() {
	v := t.via
	if v == nil {
		return
	}
	a, ok := t.run.Asks[v.ask]
	if !ok || v.from > len(a.Decisions) {
		return
	}
	for i := v.from; i < len(a.Decisions); i++ {
		if d := &a.Decisions[i]; d.Actor == v.actor {
			d.Via, d.Link = v.surface, v.link
		}
	}
}
