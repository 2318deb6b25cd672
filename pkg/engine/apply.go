package engine

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tollgate-dev/tollgate/pkg/answer"
	"github.com/tollgate-dev/tollgate/pkg/freshness"
	"github.com/tollgate-dev/tollgate/pkg/plan"
)

// tx is one transition in progress on a private copy of the run.
type tx struct {
	m       *Machine
	run     *Run
	at      time.Time
	effects []Effect
	records []Record
	reply   *Reply
	refusal error
	// own holds the steps this transition copied or created, which it
	// may write; nil when it owns the whole run (Start).
	own map[*StepRun]bool
	// undo, during ApplyAll, holds each step an event touched as it was
	// before (nil: it did not exist).
	undo map[string]*StepRun
	// base is the tally of the run the transition started from (nil:
	// unknown), touched the steps it wrote since, as they were (tally.go).
	base    *tally
	touched map[string]*StepRun
	// via is the surface the applied decision came through (nil: none
	// named), stamped on its decisions and journal records.
	via *via
}

// Reply is the typed response to an Answer; see package answer.
type Reply = answer.Reply

func (t *tx) record(kind JournalKind, actor string, payload map[string]any) {
	if v := t.via; v != nil && actor == v.actor {
		if payload == nil {
			payload = map[string]any{}
		}
		if v.surface != "" {
			payload["via"] = v.surface
		}
		if v.link != "" {
			payload["link"] = v.link
		}
	}
	t.records = append(t.records, Record{Kind: kind, Actor: actor, At: t.at, Payload: payload})
}

func (t *tx) result() Transition {
	// A step queued and then cancelled within this transition must not go
	// out: keep only dispatches whose step is still queued at that attempt.
	kept := t.effects[:0]
	for _, e := range t.effects {
		if d, ok := e.(Dispatch); ok {
			if s := t.run.Steps[d.Step]; s == nil || s.Status != StatusQueued || s.Attempt != d.Attempt {
				continue
			}
		}
		kept = append(kept, e)
	}
	t.effects = kept
	c := t.counts()
	t.run.tally = &c
	t.run.Version++
	t.run.UpdatedAt = t.at
	return Transition{Run: t.run, Effects: t.effects, Records: t.records, Refusal: t.refusal, Reply: t.reply}
}

// Apply applies ev to run and returns the next state. run is not modified.
// An error means the event was refused and nothing changed; a Transition
// with Refusal set must still be committed (an expiry was applied).
//
// Deadlines are enforced here, before the event, against ev's time: an
// answer after the deadline is refused by the same code that reads the ask
// (I4).
func (m *Machine) Apply(run *Run, ev Event) (Transition, error) {
	if run.PlanDigest != m.digest {
		return Transition{}, fmt.Errorf("run %s was started from plan %s, not %s", run.ID, run.PlanDigest, m.digest)
	}
	t := &tx{m: m, run: run.clone(), own: map[*StepRun]bool{}}
	t.startTally()
	return t.apply(ev)
}

// apply applies one event to the transition's run; see Apply.
func (t *tx) apply(ev Event) (Transition, error) {
	t.at = ev.at()
	if t.at.Before(t.run.UpdatedAt) {
		t.at = t.run.UpdatedAt // the store's clock never runs backwards for a run
	}
	expired := t.expire()
	t.via = t.viaOf(ev) // each event's own (ApplyAll applies several)
	if err := t.linkUsedBefore(); err != nil {
		// Refused as any decision is (below): the expiries still commit.
		if !expired {
			return Transition{}, err
		}
		t.refusal = err
		t.advance()
		return t.result(), nil
	}
	var err error
	switch e := ev.(type) {
	case Tick:
	case Decide:
		err = t.decide(e, expired)
	case Answer:
		err = t.answer(e, expired)
	case Amend:
		err = t.amend(e, expired)
	case Revoke:
		err = t.revoke(e, expired)
	case Escalate:
		err = t.escalateEvent(e, expired)
	case RequestEvidence:
		err = t.requestEvidence(e, expired)
	case AttachEvidence:
		err = t.attachEvidence(e)
	case Delegate:
		err = t.delegate(e, expired)
	case Note:
		if !strings.HasPrefix(string(e.Kind), string(JournalNotePrefix)) {
			err = fmt.Errorf("%w: a note's kind starts with %s, not %q", ErrWrongTransition, JournalNotePrefix, e.Kind)
		} else {
			t.record(e.Kind, "system", e.Payload)
		}
	case Cancel:
		err = t.cancel(e.Actor, e.Reason)
	case StepLeased:
		err = t.leased(e)
	case StepStarted:
		err = t.started(e)
	case StepSucceeded:
		if err = t.finished(e.Step, e.Attempt, e.Output, ""); err == nil {
			t.afterProbe(e.Step, e.Attempt)
		}
	case StepFailed:
		if err = t.finished(e.Step, e.Attempt, nil, e.Error); err == nil {
			t.afterProbe(e.Step, e.Attempt)
		}
	case LeaseLost:
		err = t.leaseLost(e)
	case LeaseMoved:
		err = t.leaseMoved(e)
	case StepBlocked:
		err = t.blocked(e)
	case StepsBlocked:
		err = t.blockedAll(e)
	case StepRefused:
		err = t.refused(e)
	case OpenGate:
		err = t.openGateEvent(e)
	case ScriptStep:
		err = t.scriptStep(e)
	case Finish:
		err = t.finish(e)
	default:
		err = fmt.Errorf("unknown event %T", ev)
	}
	if err != nil && !expired {
		return Transition{}, err
	}
	if err != nil {
		t.refusal = err
	} else {
		t.stampVia()
	}
	t.advance()
	return t.result(), nil
}

// expire applies every deadline that has passed. It reports whether any did.
func (t *tx) expire() bool {
	fired := false
	for _, id := range sortedAskIDs(t.run) {
		a := t.run.Asks[id]
		if !a.State.Open() {
			continue
		}
		// The ladder's earlier rungs, each once.
		if !a.Reminded && !a.RemindAt.IsZero() && !t.at.Before(a.RemindAt) {
			a.Reminded = true
			t.record(JournalAskReminded, "system", map[string]any{"ask": a.ID, "audience": a.Audience, "waited_ms": t.at.Sub(a.OpenedAt).Milliseconds()})
			t.effects = append(t.effects, AskNotice{Ask: a.ID, Kind: NoticeReminder})
		}
		if a.EscalatedTo == "" && !a.EscalateAt.IsZero() && !t.at.Before(a.EscalateAt) {
			t.escalate(a, a.EscalateTo, fmt.Sprintf("undecided after %s", a.EscalateAt.Sub(a.OpenedAt)))
		}
		if t.at.Before(a.ExpiresAt) {
			continue
		}
		if a.OnExpiry == "escalate" && a.EscalatedTo == "" && a.EscalateTo != "" {
			// The deadline escalates once, and runs again from now.
			span := a.ExpiresAt.Sub(a.OpenedAt)
			t.escalate(a, a.EscalateTo, "its deadline passed (on expiry: escalate)")
			a.ExpiresAt = t.at.Add(span)
			continue
		}
		fired = true
		t.closeAsk(a, AskExpired, Decision{Kind: DecisionExpire, Actor: "system", At: t.at})
		t.record(JournalAskExpired, "system", map[string]any{"ask": a.ID, "idle_ms": t.at.Sub(a.OpenedAt).Milliseconds()})
		if t.run.State.Terminal() {
			continue
		}
		switch a.OnExpiry {
		case "reject":
			t.end(Rejected, fmt.Sprintf("%q expired unanswered (on expiry: reject)", a.Title))
		case "cancel":
			t.end(Cancelled, fmt.Sprintf("%q expired unanswered (on expiry: cancel)", a.Title))
		default:
			t.end(Expired, fmt.Sprintf("%q expired unanswered", a.Title))
		}
	}
	return fired
}

// escalate hands a pending ask to another audience. The recipe's named
// approvers no longer bind it: the escalation's audience decides.
func (t *tx) escalate(a *AskRun, to, why string) {
	a.EscalatedFrom, a.EscalatedTo = a.Audience, to
	a.Audience, a.Approvers = to, nil
	a.Decisions = append(a.Decisions, Decision{Kind: DecisionEscalate, Actor: "system", At: t.at, Reason: why + " → " + to})
	t.record(JournalAskEscalated, "system", map[string]any{"ask": a.ID, "from": a.EscalatedFrom, "to": to, "why": why})
	t.effects = append(t.effects, AskNotice{Ask: a.ID, Kind: NoticeEscalated})
}

func (t *tx) escalateEvent(e Escalate, expired bool) error {
	a, ok := t.run.Asks[e.Ask]
	if !ok {
		return fmt.Errorf("%w: %s", ErrUnknownAsk, e.Ask)
	}
	if a.State != AskPending {
		return fmt.Errorf("%w: %q is %s", ErrAlreadyDecided, a.Title, a.State)
	}
	if e.To == "" || e.To == a.Audience {
		return fmt.Errorf("%w: escalate %q to whom?", ErrWrongTransition, a.Title)
	}
	t.escalate(a, e.To, e.Reason)
	return nil
}

// pendingAsk finds an ask an actor may decide now.
func (t *tx) pendingAsk(id, actor string, expired bool) (*AskRun, error) {
	a, ok := t.run.Asks[id]
	if !ok {
		return nil, fmt.Errorf("%w: %s", ErrUnknownAsk, id)
	}
	if a.State == AskExpired {
		return nil, fmt.Errorf("%w: %q passed its deadline at %s", ErrExpired, a.Title, a.ExpiresAt.UTC().Format(time.RFC3339))
	}
	if a.State != AskPending {
		return nil, fmt.Errorf("%w: %q is %s", ErrAlreadyDecided, a.Title, a.State)
	}
	if a.Type == InDoubt && actor == t.run.Requester {
		// The requester may always say what happened ("it ran", "stop");
		// a retry is an approval, checked by the control plane against
		// the authority copied from the governing ask (openDoubt).
		return a, nil
	}
	if a.Audience == plan.AudienceRequester && actor != t.run.Requester {
		return nil, fmt.Errorf("%w: %q asks the requester (%s)", ErrForbidden, a.Title, t.run.Requester)
	}
	if len(a.Approvers) > 0 && !slices.Contains(a.Approvers, actor) {
		return nil, fmt.Errorf("%w: %q asks %s", ErrForbidden, a.Title, strings.Join(a.Approvers, ", "))
	}
	return a, nil
}

func (t *tx) decide(e Decide, expired bool) error {
	a, err := t.pendingAsk(e.Ask, e.Actor, expired)
	if err != nil {
		return err
	}
	if err := a.StillAsJudged(e.Judged); err != nil {
		return err
	}
	t.raiseQuorum(a, e.Quorum, e.Actor)
	if a.Type == InDoubt {
		opt := e.Option
		if e.Reject {
			opt = DoubtStop
		}
		return t.resolveDoubt(a, e.Actor, opt, e.Reason)
	}
	if e.Reject {
		if strings.TrimSpace(e.Reason) == "" {
			return ErrReasonRequired
		}
		t.reject(a, e.Actor, e.Reason)
		return nil
	}
	opt, ok := findOption(a, e.Option)
	if !ok {
		return fmt.Errorf("%w: %q has options %s", ErrBadOption, a.Title, optionList(a))
	}
	if (a.Type == plan.StopMenu || a.Type == Gate) && isNo(a, opt) {
		reason := e.Reason
		if reason == "" {
			reason = "chose " + opt.Label
		}
		t.reject(a, e.Actor, reason)
		return nil
	}
	return t.vote(a, Decision{Kind: DecisionApprove, Actor: e.Actor, Option: opt.ID, Why: e.Why, Policy: e.Policy, Groups: e.Groups}, opt)
}

// vote counts an approval of opt toward the ask's quorum of distinct
// people and chooses opt once the quorum is reached. A second approval
// by the same person is refused and counts nothing.
func (t *tx) vote(a *AskRun, d Decision, opt plan.Option) error {
	if (a.Type != plan.StopMenu && a.Type != Gate) || a.Quorum <= 1 {
		t.choose(a, d, opt)
		return nil
	}
	n := 1
	for _, v := range a.Votes {
		if v.Actor == d.Actor {
			return fmt.Errorf("%w: %s approved %q at %s; it needs %d distinct people", ErrAlreadyVoted, d.Actor, a.Title, v.At.UTC().Format(time.RFC3339), a.Quorum)
		}
		if v.Option == opt.ID {
			n++
		}
	}
	a.Votes = append(a.Votes, Vote{Actor: d.Actor, Option: opt.ID, At: t.at, Why: d.Why, Digest: a.PayloadDigest(), Evidence: a.EvidenceDigest(), Groups: d.Groups})
	if n < a.Quorum {
		// The vote that completes the quorum is recorded by choose.
		vd := d
		vd.At, vd.Option = t.at, opt.ID
		a.Decisions = append(a.Decisions, vd)
	}
	t.record(JournalAskVoted, d.Actor, map[string]any{"ask": a.ID, "option": opt.ID, "votes": n, "quorum": a.Quorum, "why": d.Why, "policy": d.Policy, "digest": a.PayloadDigest()})
	if n < a.Quorum {
		return nil
	}
	t.choose(a, d, opt)
	return nil
}

// retitle is an ask's title after an amendment changed a field from the
// values in from to to: where the title quotes an old value — as a whole
// number, not part of a longer one ("485000" in "pay 485000 INR", not in
// "I-4850001") — it quotes the new one, so the question never states a
// payload other than the one approved. Where the title quotes an old
// value more than once, or not at all, which mention is the field is not
// known: the title then ends "(FIELD now TO)", so it still never reads as
// the old payload, and a later amendment rewrites that suffix. Another
// field's suffix is never taken for a mention of this one.
func retitle(title, field string, from []string, to string) string {
	replaced := false
	// What an earlier amendment of another field appended, "(fee now
	// 70)", quotes that field, never this one.
	var others [][]int
	for _, sp := range nowSuffix.FindAllStringSubmatchIndex(title, -1) {
		if title[sp[2]:sp[3]] != field {
			others = append(others, sp[:2])
		}
	}
	for _, old := range slices.Compact(slices.Sorted(slices.Values(from))) {
		at := slices.DeleteFunc(wholeNumberAt(title, old), func(i int) bool {
			return slices.ContainsFunc(others, func(sp []int) bool { return sp[0] <= i && i < sp[1] })
		})
		if len(at) != 1 {
			continue
		}
		title = title[:at[0]] + to + title[at[0]+len(old):]
		replaced = true
	}
	if !replaced && !slices.Contains(from, to) {
		title += " (" + field + " now " + to + ")"
	}
	return title
}

// nowSuffix is what retitle appends for a field it found no mention of.
var nowSuffix = regexp.MustCompile(`\(([^()\s]+) now [^()]*\)`)

// wholeNumberAt is where s quotes n as a whole number: not preceded or
// followed by a digit, a letter, '-', '_' or '.' followed by a digit.
func wholeNumberAt(s, n string) []int {
	if n == "" {
		return nil
	}
	part := func(c byte) bool {
		return c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '-' || c == '_'
	}
	var at []int
	for i := 0; ; {
		j := strings.Index(s[i:], n)
		if j < 0 {
			return at
		}
		j += i
		end := j + len(n)
		before := j > 0 && (part(s[j-1]) || s[j-1] == '.' && j > 1 && s[j-2] >= '0' && s[j-2] <= '9')
		after := end < len(s) && (part(s[end]) || s[end] == '.' && end+1 < len(s) && s[end+1] >= '0' && s[end+1] <= '9')
		if !before && !after {
			at = append(at, j)
		}
		i = j + 1
	}
}

// amend changes an amendable integer field of the governed payloads.
func (t *tx) amend(e Amend, expired bool) error {
	a, err := t.pendingAsk(e.Ask, e.Actor, expired)
	if err != nil {
		return err
	}
	if err := a.StillAsJudged(e.Judged); err != nil {
		return err
	}
	var bound *plan.AmendBound
	var allowed []string
	for i, b := range a.Amend {
		allowed = append(allowed, fmt.Sprintf("%s %d..%d", b.Field, b.Min, b.Max))
		if b.Field == e.Field {
			bound = &a.Amend[i]
		}
	}
	if bound == nil {
		if len(allowed) == 0 {
			return fmt.Errorf("%w: %q allows no amendment", ErrBadAmend, a.Title)
		}
		return fmt.Errorf("%w: %s may not be amended (amendable: %s)", ErrBadAmend, e.Field, strings.Join(allowed, ", "))
	}
	if e.Value < bound.Min || e.Value > bound.Max {
		return fmt.Errorf("%w: %s %d is out of bounds %d..%d", ErrBadAmend, e.Field, e.Value, bound.Min, bound.Max)
	}
	before := a.PayloadDigest()
	var from []string
	changed := 0
	for i := range a.Payload {
		p := &a.Payload[i]
		m, err := plan.DecodeObject(p.Args)
		if err != nil {
			return fmt.Errorf("%w: args of %s: %v", ErrBadAmend, p.Step, err)
		}
		old, ok := m[e.Field]
		if !ok {
			continue
		}
		from = append(from, fmt.Sprint(old))
		m[e.Field] = e.Value
		amended, err := newPayload(p.Step, p.Server, p.Tool, plan.AppendCanonical(nil, m))
		if err != nil {
			return fmt.Errorf("%w: %v", ErrBadAmend, err)
		}
		// Within the recipe's bounds, but not a call the tool would take:
		// approving it could not run (Config.CheckArgs).
		if err := t.toolRefuses(p.Server, p.Tool, amended.Args); err != nil {
			return fmt.Errorf("%w: %s %d is not a value %s·%s takes (%v)", ErrBadAmend, e.Field, e.Value, p.Server, p.Tool, err)
		}
		*p = amended
		changed++
	}
	if changed == 0 {
		return fmt.Errorf("%w: no governed step of %q has a field %s", ErrBadAmend, a.Title, e.Field)
	}
	withdrawn := len(a.Votes)
	a.Votes = nil
	change := fmt.Sprintf("%s %s → %d", e.Field, strings.Join(from, ", "), e.Value)
	a.Title = retitle(a.Title, e.Field, from, strconv.FormatInt(e.Value, 10))
	a.Decisions = append(a.Decisions, Decision{Kind: DecisionAmend, Actor: e.Actor, At: t.at, Reason: change,
		Field: e.Field, Value: strconv.FormatInt(e.Value, 10), Before: before})
	t.record(JournalAskAmended, e.Actor, map[string]any{"ask": a.ID, "field": e.Field, "to": e.Value, "change": change,
		"digest_before": before, "digest_after": a.PayloadDigest(), "approvals_withdrawn": withdrawn})
	return nil
}

func (t *tx) requestEvidence(e RequestEvidence, expired bool) error {
	a, err := t.pendingAsk(e.Ask, e.Actor, expired)
	if err != nil {
		return err
	}
	if err := a.StillAsJudged(e.Judged); err != nil {
		return err
	}
	if a.Type != plan.StopMenu {
		return fmt.Errorf("%w: %q is a question; answer it instead", ErrEvidence, a.Title)
	}
	if strings.TrimSpace(e.What) == "" {
		return fmt.Errorf("%w: say what evidence is needed", ErrReasonRequired)
	}
	if a.EvidenceRounds >= MaxEvidenceRounds {
		return fmt.Errorf("%w: evidence was requested %d times already; decide on what there is", ErrEvidence, a.EvidenceRounds)
	}
	a.EvidenceRounds++
	a.State, a.EvidenceWanted = AskEvidenceRequested, e.What
	a.Decisions = append(a.Decisions, Decision{Kind: DecisionRequestEvidence, Actor: e.Actor, At: t.at, Reason: e.What})
	t.record(JournalAskEvidenceRequested, e.Actor, map[string]any{"ask": a.ID, "what": e.What, "round": a.EvidenceRounds})
	t.effects = append(t.effects, AskNotice{Ask: a.ID, Kind: NoticeEvidenceRequested})
	return nil
}

func (t *tx) attachEvidence(e AttachEvidence) error {
	a, ok := t.run.Asks[e.Ask]
	if !ok {
		return fmt.Errorf("%w: %s", ErrUnknownAsk, e.Ask)
	}
	if a.State != AskEvidenceRequested {
		return fmt.Errorf("%w: %q is %s; nobody asked for evidence", ErrEvidence, a.Title, a.State)
	}
	if e.Actor != t.run.Requester {
		return fmt.Errorf("%w: only the requester (%s) attaches evidence", ErrForbidden, t.run.Requester)
	}
	if len(e.Artifacts) == 0 {
		return fmt.Errorf("%w: attach at least one artifact", ErrEvidence)
	}
	if err := evidenceTooLarge(a.Evidence, e.Artifacts); err != nil {
		return err
	}
	before := a.EvidenceDigest()
	for _, ev := range e.Artifacts {
		ev.Digest, ev.AttachedBy, ev.Round = freshness.ContentDigest(ev.Content), e.Actor, a.EvidenceRounds
		a.Evidence = append(a.Evidence, ev)
	}
	withdrawn := len(a.Votes)
	a.Votes = nil // they approved on other evidence (I6)
	a.State, a.EvidenceWanted = AskPending, ""
	a.Decisions = append(a.Decisions, Decision{Kind: DecisionEvidence, Actor: e.Actor, At: t.at, Reason: e.Note})
	t.record(JournalAskEvidenceAttached, e.Actor, map[string]any{"ask": a.ID, "artifacts": len(e.Artifacts), "evidence_before": before,
		"evidence_after": a.EvidenceDigest(), "approvals_withdrawn": withdrawn})
	t.effects = append(t.effects, AskNotice{Ask: a.ID, Kind: NoticeEvidenceAttached})
	return nil
}

func (t *tx) delegate(e Delegate, expired bool) error {
	a, err := t.pendingAsk(e.Ask, e.Actor, expired)
	if err != nil {
		return err
	}
	if err := a.StillAsJudged(e.Judged); err != nil {
		return err
	}
	if e.To == "" || e.To == e.Actor {
		return fmt.Errorf("%w: delegate to whom?", ErrWrongTransition)
	}
	if len(a.Approvers) > 0 {
		if slices.Contains(a.Approvers, e.To) {
			return fmt.Errorf("%w: %s is already asked", ErrWrongTransition, e.To)
		}
		a.Approvers[slices.Index(a.Approvers, e.Actor)] = e.To
	}
	a.Delegations = append(a.Delegations, Delegation{From: e.Actor, To: e.To, At: t.at, Reason: e.Reason})
	a.Decisions = append(a.Decisions, Decision{Kind: DecisionDelegate, Actor: e.Actor, At: t.at, Reason: e.Reason, Text: e.To})
	t.record(JournalAskDelegated, e.Actor, map[string]any{"ask": a.ID, "to": e.To, "reason": e.Reason, "chain": len(a.Delegations)})
	t.effects = append(t.effects, AskNotice{Ask: a.ID, Kind: NoticeDelegated})
	return nil
}

// revoke withdraws the actor's approval of a gate that still waits for
// its quorum.
func (t *tx) revoke(e Revoke, expired bool) error {
	a, ok := t.run.Asks[e.Ask]
	if !ok {
		return fmt.Errorf("%w: %s", ErrUnknownAsk, e.Ask)
	}
	if a.State == AskConsumed || a.State == AskApproved {
		return fmt.Errorf("%w: %q is %s; its step was already scheduled under it", ErrAlreadyDecided, a.Title, a.State)
	}
	if e.By == "" {
		if _, err := t.pendingAsk(e.Ask, e.Actor, expired); err != nil {
			return err
		}
	} else if a.State != AskPending {
		return fmt.Errorf("%w: %q is %s", ErrAlreadyDecided, a.Title, a.State)
	}
	if err := a.StillAsJudged(e.Judged); err != nil {
		return err
	}
	by := e.By
	if by == "" {
		by = e.Actor
	}
	for i, v := range a.Votes {
		if v.Actor == e.Actor {
			a.Votes = slices.Delete(a.Votes, i, i+1)
			a.Decisions = append(a.Decisions, Decision{Kind: DecisionRevoke, Actor: by, At: t.at, Option: v.Option, Reason: e.Reason})
			t.record(JournalApprovalRevoked, by, map[string]any{"ask": a.ID, "voter": e.Actor, "option": v.Option, "reason": e.Reason, "votes": len(a.Votes)})
			return nil
		}
	}
	return fmt.Errorf("%w: %s has not approved %q", ErrNoVote, e.Actor, a.Title)
}

func (t *tx) answer(e Answer, expired bool) error {
	a, err := t.pendingAsk(e.Ask, e.Actor, expired)
	if err != nil {
		return err
	}
	r := a.Reply(e.Text, e.Literal)
	// A reply that selects is a decision, judged on the ask as read; one
	// that re-shows the menu or drops the run is the same on any ask.
	if r.Kind == answer.Selected {
		if err := a.StillAsJudged(e.Judged); err != nil {
			return err
		}
		t.raiseQuorum(a, e.Quorum, e.Actor)
	}
	if r.Kind == answer.Dropped && e.Actor != t.run.Requester {
		return fmt.Errorf("%w: only the requester (%s) can drop the run; reject the ask instead", ErrForbidden, t.run.Requester)
	}
	t.reply = &r
	a.Misses = r.Misses
	t.record(JournalAskReply, e.Actor, map[string]any{"ask": a.ID, "kind": string(r.Kind), "misses": r.Misses})
	switch r.Kind {
	case answer.Selected:
		if a.Type == InDoubt {
			return t.resolveDoubt(a, e.Actor, r.Option.ID, "")
		}
		if a.Type == plan.StopText {
			t.choose(a, Decision{Kind: DecisionAnswer, Actor: e.Actor, Text: r.Text, Why: e.Why, Policy: e.Policy}, plan.Option{})
			return nil
		}
		opt, _ := findOption(a, r.Option.ID)
		if (a.Type == plan.StopMenu || a.Type == Gate) && isNo(a, opt) {
			t.reject(a, e.Actor, "answered "+opt.Label)
			return nil
		}
		return t.vote(a, Decision{Kind: DecisionAnswer, Actor: e.Actor, Option: opt.ID, Why: e.Why, Policy: e.Policy, Groups: e.Groups}, opt)
	case answer.Dropped:
		return t.cancel(e.Actor, fmt.Sprintf("dropped while %q was asked", a.Title))
	}
	return nil
}

// Reply is what text does to the ask now, by the one matcher (package
// answer): the engine applies it, and the control plane reads it first to
// know which decision the text makes (and so which authority it needs).
// literal: a typed answer to a free-text question, taken as given.
func (a *AskRun) Reply(text string, literal bool) answer.Reply {
	if literal && a.Type == plan.StopText {
		return answer.Reply{Kind: answer.Selected, Text: strings.TrimSpace(text), Message: "Answered."}
	}
	q := answer.Ask{Title: a.Title, FreeText: a.Type == plan.StopText}
	for _, o := range a.Options {
		q.Options = append(q.Options, answer.Option{ID: o.ID, Label: o.Label})
	}
	return answer.Match(q, text, a.Misses)
}

// Rejects reports whether choosing option id of an approval gate (a
// recipe's menu or an external gate) is its No: a rejection, not an
// approval.
func (a *AskRun) Rejects(id string) bool {
	opt, ok := findOption(a, id)
	return ok && (a.Type == plan.StopMenu || a.Type == Gate) && isNo(a, opt)
}

func findOption(a *AskRun, id string) (plan.Option, bool) {
	for _, o := range a.Options {
		if o.ID == id {
			return o, true
		}
	}
	return plan.Option{}, false
}

// isNo reports whether opt is a gate's negative answer: the option
// labelled No. Any other option is chosen, not rejected.
func isNo(_ *AskRun, opt plan.Option) bool {
	return strings.EqualFold(opt.Label, "no")
}

func optionList(a *AskRun) string {
	var parts []string
	for _, o := range a.Options {
		parts = append(parts, o.ID+" "+o.Label)
	}
	return strings.Join(parts, ", ")
}

// afterProbe hands a finished freshness probe to its ask.
func (t *tx) afterProbe(step string, attempt int) {
	if ask, ok := strings.CutPrefix(step, "check~"); ok && t.m.stops[ask] != nil && t.m.stops[ask].check != nil {
		t.checked(ask, attempt)
	}
}

// choose records an answer (d: kind, actor, text, authority) and
// activates what follows it. An approval of a gate with a check: probe
// is not usable yet: the probe runs again, and only unchanged facts
// activate the option (checked).
func (t *tx) choose(a *AskRun, d Decision, opt plan.Option) {
	st := t.m.stops[a.ID]
	actor, kind := d.Actor, d.Kind
	d.At, d.Option = t.at, opt.ID
	a.Option, a.Label, a.Text = opt.ID, opt.Label, d.Text
	state := AskAnswered
	switch a.Type {
	case plan.StopMenu:
		state = AskApproved
	case Gate:
		// The approval is used as it is given: the grant it yields is
		// the caller's to present to whatever performs the effect.
		state = AskConsumed
	}
	t.closeAsk(a, state, d)
	t.record(JournalAskDecided, actor, map[string]any{"ask": a.ID, "decision": string(kind), "option": opt.ID, "label": opt.Label, "why": d.Why, "policy": d.Policy, "digest": a.PayloadDigest()})
	if a.Type == Gate {
		return
	}
	if a.Type == plan.StopMenu && st.check != nil {
		a.Verifying = true
		a.VerifyAttempt = 0 // a probe still running read the facts before this approval
		if !t.probing(a) {
			t.probe(a, "verify the approval")
			a.VerifyAttempt = t.run.Steps[CheckStepID(a.ID)].Attempt
		}
		return
	}
	if a.Type == plan.StopMenu {
		t.activate(st.options[opt.ID])
	} else if st.then != nil {
		t.activate(st.then)
	}
}

// reject records a No. A gate whose No option carries steps continues
// with them; otherwise the run ends rejected.
func (t *tx) reject(a *AskRun, actor, reason string) {
	st := t.m.stops[a.ID]
	var no *phaseInfo
	if a.Type == plan.StopMenu {
		for _, o := range a.Options {
			if isNo(a, o) {
				a.Option, a.Label = o.ID, o.Label
				no = st.options[o.ID]
				break
			}
		}
	}
	t.closeAsk(a, AskRejected, Decision{Kind: DecisionReject, Actor: actor, At: t.at, Option: a.Option, Reason: reason})
	t.record(JournalAskDecided, actor, map[string]any{"ask": a.ID, "decision": string(DecisionReject), "reason": reason})
	if no != nil && (len(no.steps) > 0 || len(no.stops) > 0) {
		t.activate(no)
		return
	}
	t.end(Rejected, fmt.Sprintf("%s said no to %q: %s", actor, a.Title, reason))
}

func (t *tx) closeAsk(a *AskRun, state AskState, d Decision) {
	a.State = state
	a.Closed = t.at
	a.Decisions = append(a.Decisions, d)
	if d.Kind == DecisionCancel {
		t.record(JournalAskClosed, d.Actor, map[string]any{"ask": a.ID, "state": string(state), "reason": d.Reason})
	}
	t.effects = append(t.effects, AskClosed{Ask: a.ID, State: state})
}

func (t *tx) cancel(actor, reason string) error {
	if t.run.State.Terminal() {
		return fmt.Errorf("%w: it is %s", ErrRunEnded, t.run.State)
	}
	if reason == "" {
		reason = "cancelled by " + actor
	}
	t.record(JournalRunCancel, actor, map[string]any{"reason": reason})
	t.end(Cancelled, reason)
	return nil
}

// end makes the run terminal: in the same transition every pending ask is
// closed (I3) and every queued or in-flight attempt is cancelled.
func (t *tx) end(state State, reason string) {
	if t.run.State.Terminal() {
		return
	}
	for _, id := range sortedAskIDs(t.run) {
		if a := t.run.Asks[id]; a.State.Open() {
			t.closeAsk(a, AskCancelled, Decision{Kind: DecisionCancel, Actor: "system", At: t.at, Reason: "the run ended " + string(state)})
		}
	}
	for _, id := range sortedStepIDs(t.run) {
		s := t.run.Steps[id]
		if s.Status == StatusQueued || s.Status.InFlight() || s.Status == StatusWaiting {
			s = t.stepW(id)
		}
		switch {
		case s.Status == StatusQueued || s.Status.InFlight():
			t.effects = append(t.effects, CancelStep{Step: id, Attempt: s.Attempt})
			t.record(JournalStepCancelled, "system", map[string]any{"step": id, "attempt": s.Attempt, "was": string(s.Status)})
			s.Status = StatusCancelled
		case s.Status == StatusWaiting:
			s.Status = StatusCancelled
		}
	}
	t.run.State = state
	t.run.Reason = reason
	t.record(JournalRunEnded, "system", map[string]any{"state": string(state), "reason": reason})
	t.effects = append(t.effects, RunEnded{State: state, Reason: reason})
}

// attempt finds the step's current attempt named by an executor event.
func (t *tx) attempt(step string, n int) (*StepRun, error) {
	s := t.stepW(step)
	if s == nil {
		return nil, fmt.Errorf("%w: %s", ErrUnknownStep, step)
	}
	if n != s.Attempt || len(s.Attempts) == 0 {
		return nil, fmt.Errorf("%w: %s attempt %d, current is %d", ErrStaleAttempt, step, n, s.Attempt)
	}
	return s, nil
}

func (t *tx) leased(e StepLeased) error {
	s, err := t.attempt(e.Step, e.Attempt)
	if err != nil {
		return err
	}
	if s.Status != StatusQueued {
		return fmt.Errorf("%w: lease of %s while %s", ErrWrongTransition, e.Step, s.Status)
	}
	s.Status = StatusLeased
	s.Blocked = false
	a := &s.Attempts[len(s.Attempts)-1]
	a.Executor, a.LeaseID, a.Replica, a.LeasedAt = e.Executor, e.LeaseID, e.Replica, t.at
	rec := map[string]any{"step": e.Step, "attempt": e.Attempt, "lease": e.LeaseID}
	if e.Replica != "" {
		rec["replica"] = e.Replica
	}
	t.record(JournalStepLeased, e.Executor, rec)
	return nil
}

func (t *tx) started(e StepStarted) error {
	s, err := t.attempt(e.Step, e.Attempt)
	if err != nil {
		return err
	}
	if s.Status != StatusLeased {
		return fmt.Errorf("%w: start of %s while %s", ErrWrongTransition, e.Step, s.Status)
	}
	s.Status = StatusStarted
	a := &s.Attempts[len(s.Attempts)-1]
	a.StartedAt = t.at
	t.record(JournalStepStarted, a.Executor, map[string]any{"step": e.Step, "attempt": e.Attempt, "grant": s.Grant})
	return nil
}

func (t *tx) finished(step string, n int, output json.RawMessage, errText string) error {
	s, err := t.attempt(step, n)
	if err != nil {
		return err
	}
	if !s.Status.InFlight() && s.Status != StatusCancelled {
		return fmt.Errorf("%w: result of %s while %s", ErrWrongTransition, step, s.Status)
	}
	if s.Status == StatusLeased && t.m.steps[step].step.SideEffect {
		// I7: a side effect reports only after its Start was recorded.
		return fmt.Errorf("%w: result of side-effecting %s without a recorded start", ErrWrongTransition, step)
	}
	output, errText = boundResult(output, errText)
	a := &s.Attempts[len(s.Attempts)-1]
	a.FinishedAt = t.at
	info := t.m.steps[step].step
	if s.Status == StatusCancelled {
		// The run ended while it ran; keep the result for the record.
		a.Error = errText
		if errText == "" {
			s.Output = output
		}
		t.record(JournalStepResultAfterEnd, a.Executor, map[string]any{"step": step, "attempt": n, "ok": errText == ""})
		return nil
	}
	if errText == "" {
		if !json.Valid(output) {
			output, _ = json.Marshal(string(output))
		}
		s.Status, s.Output = StatusSucceeded, output
		t.record(JournalStepSucceeded, a.Executor, map[string]any{"step": step, "attempt": n})
		return nil
	}
	a.Error = errText
	t.record(JournalStepFailed, a.Executor, map[string]any{"step": step, "attempt": n, "error": errText})
	if n <= info.Retry {
		t.queue(step, s, "retry")
		return nil
	}
	s.Status, s.Error = StatusFailed, errText
	if info.OnFail != plan.OnFailSkip && t.run.Failing == "" {
		t.run.Failing = step
	}
	return nil
}

func (t *tx) leaseLost(e LeaseLost) error {
	s, err := t.attempt(e.Step, e.Attempt)
	if err != nil {
		return err
	}
	if !s.Status.InFlight() {
		return fmt.Errorf("%w: lease lost for %s while %s", ErrWrongTransition, e.Step, s.Status)
	}
	info := t.m.steps[e.Step].step
	a := &s.Attempts[len(s.Attempts)-1]
	if e.Replica != "" && a.Replica != e.Replica {
		return fmt.Errorf("%w: the lease of %s moved to replica %q", ErrStaleAttempt, e.Step, a.Replica)
	}
	a.Error, a.FinishedAt = LeaseLostError, t.at
	t.record(JournalStepLeaseLost, a.Executor, map[string]any{"step": e.Step, "attempt": e.Attempt, "status": string(s.Status)})
	if s.Status == StatusStarted && info.SideEffect && !info.Idempotent {
		// I7: the effect may have happened. Never retry blindly: a
		// person says what happened (DESIGN.md §6).
		s.Status = StatusInDoubt
		return t.openDoubt(e.Step, s.Attempt)
	}
	t.queue(e.Step, s, "re-lease")
	return nil
}

func (t *tx) leaseMoved(e LeaseMoved) error {
	s, err := t.attempt(e.Step, e.Attempt)
	if err != nil {
		return err
	}
	if !s.Status.InFlight() || len(s.Attempts) == 0 {
		return fmt.Errorf("%w: lease moved for %s while %s", ErrWrongTransition, e.Step, s.Status)
	}
	a := &s.Attempts[len(s.Attempts)-1]
	switch {
	case a.Executor != e.Executor:
		return fmt.Errorf("%w: %s's lease is held by executor %q, not %q", ErrStaleAttempt, e.Step, a.Executor, e.Executor)
	case a.Replica != e.From:
		return fmt.Errorf("%w: %s's lease is held by replica %q, not %q", ErrStaleAttempt, e.Step, a.Replica, e.From)
	case e.Replica == "":
		return fmt.Errorf("%w: a lease moves to a named replica", ErrWrongTransition)
	}
	a.Replica = e.Replica
	t.record(JournalStepLeaseMoved, a.Executor, map[string]any{"step": e.Step, "attempt": e.Attempt, "from": e.From, "replica": e.Replica})
	return nil
}

func (t *tx) blocked(e StepBlocked) error {
	s, err := t.attempt(e.Step, e.Attempt)
	if err != nil {
		return err
	}
	if s.Status != StatusQueued {
		return fmt.Errorf("%w: blocked %s while %s", ErrWrongTransition, e.Step, s.Status)
	}
	if !s.Blocked {
		s.Blocked = true
		t.record(JournalStepBlocked, "system", map[string]any{"step": e.Step})
	}
	return nil
}

func (t *tx) blockedAll(e StepsBlocked) error {
	var first error
	applied := 0
	for _, sa := range e.Steps {
		if err := t.blocked(StepBlocked{Step: sa.Step, Attempt: sa.Attempt, At: e.At}); err != nil {
			if first == nil {
				first = err
			}
			continue
		}
		applied++
	}
	if applied == 0 {
		if first == nil {
			first = fmt.Errorf("%w: no step to block", ErrWrongTransition)
		}
		return first
	}
	return nil
}

// openDoubt asks what happened to a side effect whose executor was lost
// after Start. Answering "retry" performs the effect again, so the ask
// carries the authority that approved the attempt: the governing ask's
// payload for this step, audience, approvers and quorum (a `without
// asking` step: the step's args, asking the requester, as the start
// approved it). It is routed to that audience; the requester may always
// answer "it ran" or "stop".
func (t *tx) openDoubt(step string, attempt int) error {
	st := t.m.steps[step].step
	a := &AskRun{ID: fmt.Sprintf("doubt_%s_%d", step, attempt), Type: InDoubt, Step: step, Audience: plan.AudienceRequester,
		Title: fmt.Sprintf("did %s (%s·%s) happen? Its executor was lost after it started, so nobody knows", step, st.Server, st.Tool),
		State: AskPending, OpenedAt: t.at, ExpiresAt: t.at.Add(t.m.cfg.DefaultExpiry),
		Options: []plan.Option{{ID: DoubtRetry, Label: "retry"}, {ID: DoubtRan, Label: "it ran"}, {ID: DoubtStop, Label: "stop"}}}
	if gov := t.run.Asks[t.run.Steps[step].Grant]; gov != nil {
		a.Audience, a.Approvers, a.Quorum = gov.Audience, slices.Clone(gov.Approvers), gov.Quorum
		for _, p := range gov.Payload {
			if p.Step == step {
				a.Payload = append(a.Payload, p)
			}
		}
	}
	if len(a.Payload) == 0 {
		// Unreachable in practice: the dispatcher digested these args
		// when it signed the lost lease's grant.
		p, err := newPayload(step, st.Server, st.Tool, t.dispatchFor(step, t.run.Steps[step]).Args)
		if err != nil {
			return fmt.Errorf("%w: %s is in doubt, and its args cannot be shown: %v", ErrWrongTransition, step, err)
		}
		a.Payload = []Payload{p}
	}
	t.floorQuorum(a)
	t.run.Asks[a.ID] = a
	t.effects = append(t.effects, AskOpened{Ask: a.ID})
	t.record(JournalAskOpened, "system", map[string]any{"ask": a.ID, "title": a.Title, "in_doubt": step, "expires_at": a.ExpiresAt})
	return nil
}

// resolveDoubt applies a person's word on an in-doubt side effect.
func (t *tx) resolveDoubt(a *AskRun, actor, option, reason string) error {
	opt, ok := findOption(a, option)
	if !ok {
		return fmt.Errorf("%w: %q has options %s", ErrBadOption, a.Title, optionList(a))
	}
	s := t.stepW(a.Step)
	if opt.ID == DoubtRetry && len(a.Approvers) > 0 && !slices.Contains(a.Approvers, actor) {
		// The requester passed pendingAsk to say what happened; a retry
		// is an approval, and the recipe asks only its approvers.
		return fmt.Errorf("%w: retrying %q is for %s", ErrForbidden, a.Title, strings.Join(a.Approvers, ", "))
	}
	if opt.ID == DoubtRetry && a.Quorum > 1 {
		// A retry is an approval: it needs the governing ask's quorum of
		// distinct people, like the approval it repeats.
		for _, v := range a.Votes {
			if v.Actor == actor {
				return fmt.Errorf("%w: %s chose retry for %q at %s; it needs %d distinct people", ErrAlreadyVoted, actor, a.Title, v.At.UTC().Format(time.RFC3339), a.Quorum)
			}
		}
		a.Votes = append(a.Votes, Vote{Actor: actor, Option: opt.ID, At: t.at, Digest: a.PayloadDigest()})
		t.record(JournalAskVoted, actor, map[string]any{"ask": a.ID, "option": opt.ID, "votes": len(a.Votes), "quorum": a.Quorum, "digest": a.PayloadDigest()})
		if len(a.Votes) < a.Quorum {
			a.Decisions = append(a.Decisions, Decision{Kind: DecisionAnswer, Actor: actor, At: t.at, Option: opt.ID, Reason: reason})
			return nil
		}
	}
	a.Option, a.Label = opt.ID, opt.Label
	t.closeAsk(a, AskAnswered, Decision{Kind: DecisionAnswer, Actor: actor, At: t.at, Option: opt.ID, Reason: reason})
	t.record(JournalAskDecided, actor, map[string]any{"ask": a.ID, "decision": DecidedInDoubt, "option": opt.ID, "label": opt.Label})
	switch opt.ID {
	case DoubtRetry:
		// The decided retry is the approval of the next attempt, consumed
		// by its dispatch (I1): journaled as any consumed approval, so the
		// audit reads it as one (AttemptAuthorized).
		s.Grant = a.ID
		t.record(JournalApprovalConsumed, "system", map[string]any{"ask": a.ID, "step": a.Step, "option": opt.ID})
		t.queue(a.Step, s, "retry after doubt")
	case DoubtRan:
		s.Status, s.Output = StatusSucceeded, []byte("null")
		t.record(JournalStepSucceeded, actor, map[string]any{"step": a.Step, "attempt": s.Attempt, "by": "in-doubt answer"})
	default:
		s.Status, s.Error = StatusFailed, "stopped: the outcome of a side effect was unknown"
		t.end(Failed, fmt.Sprintf("%s stopped the run: %s may or may not have happened", actor, a.Step))
	}
	return nil
}
