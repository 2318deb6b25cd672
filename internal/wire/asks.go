package wire

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	tollgatev1 "github.com/tollgate-dev/tollgate/gen/tollgate/v1"
	"github.com/tollgate-dev/tollgate/internal/store"
	"github.com/tollgate-dev/tollgate/pkg/engine"
	"github.com/tollgate-dev/tollgate/pkg/plan"
)

// quorum is how many distinct approvals the ask needs (at least one).
func quorum(a *engine.AskRun) int32 { return int32(max(a.Quorum, 1)) }

// AskSummary is one line of an inbox or a run's list of asks.
func AskSummary(run *engine.Run, a *engine.AskRun) *tollgatev1.AskSummary {
	skill := run.Origin.Skill
	s := &tollgatev1.AskSummary{Id: store.AskID(run.ID, a.ID), RunId: run.ID, StoppingPointId: a.ID, Kind: askKindToProto[a.Type],
		State: askStateToProto[a.State], Title: a.Title, Requester: run.Requester, Skill: skill, Consequence: consequence(a),
		Quorum: quorum(a), CreatedAt: Time(a.OpenedAt), ExpiresAt: Time(a.ExpiresAt), ClosedAt: Time(a.Closed), PayloadDigest: a.PayloadDigest(),
		AnswerCommand: AnswerCommand(run, a), OnExpiry: expiryToProto[a.OnExpiry]}
	if a.State == engine.AskPending {
		s.Approvals = int32(len(a.Votes))
	} else if a.State == engine.AskApproved || a.State == engine.AskConsumed || a.State == engine.AskAnswered {
		s.Approvals = quorum(a)
	}
	return s
}

// consequence says in plain words what approving does.
func consequence(a *engine.AskRun) string {
	switch a.Type {
	case plan.StopChoice:
		return "your choice is passed to the steps that follow"
	case plan.StopText:
		return "your answer is passed to the steps that follow"
	case engine.InDoubt:
		return "retry runs " + a.Step + " again (it may then have happened twice); it ran treats it as done; stop ends the run"
	}
	if len(a.Payload) == 0 {
		return "approving lets the run continue; No ends it rejected"
	}
	var acts []string
	for _, p := range a.Payload {
		acts = append(acts, fmt.Sprintf("%s·%s %s", p.Server, p.Tool, string(p.Args)))
	}
	return "approving runs " + strings.Join(acts, " and ") + " exactly as shown; No ends the run rejected"
}

// MaxShownContent bounds an artifact's content in a packet: above it the
// packet carries the first bytes and says how to read the rest
// (EvidenceArtifact.truncated and note). A reader asks for the whole of
// it with GetAskRequest.full_content.
const MaxShownContent = 64 << 10

// Ask renders the whole decision packet of ask a of run: what approving
// does, the exact actions and their digests, the evidence with its
// content (read through m, the run's machine: a `show:` reference shows
// the referenced value as it is in the run; nil m shows digests only),
// the facts checked, the bounds of an amendment with the values now,
// what changed, the deadline ladder and every decision so far with who
// made it and why. Each artifact's content above MaxShownContent is cut
// unless full. Who may decide (authority_required) is policy's: the
// control plane fills it in.
func Ask(run *engine.Run, m *engine.Machine, a *engine.AskRun, full bool) *tollgatev1.Ask {
	out := &tollgatev1.Ask{Id: store.AskID(run.ID, a.ID), RunId: run.ID, StoppingPointId: a.ID, Kind: askKindToProto[a.Type],
		State: askStateToProto[a.State], Title: a.Title, Summary: a.Summary, Consequence: consequence(a), Requester: run.Requester,
		PayloadDigest: a.PayloadDigest(), CreatedAt: Time(a.OpenedAt), ExpiresAt: Time(a.ExpiresAt), OnExpiry: expiryToProto[a.OnExpiry],
		Quorum: quorum(a), SelectedOptionId: a.Option, AnswerText: a.Text, MissCount: int32(a.Misses), ClosedAt: Time(a.Closed),
		AnswerCommand: AnswerCommand(run, a), ResourceVersion: a.ResourceVersion, MaterialFields: a.Material, StateReason: stateReason(a),
		EscalatedTo: a.EscalatedTo, EvidenceDigest: a.EvidenceDigest(), Ladder: ladder(a), Changes: changes(run, a)}
	for _, e := range a.Evidence {
		out.Evidence = append(out.Evidence, artifact(run, m, a, e, full))
	}
	if !a.RemindAt.IsZero() {
		out.RemindAt = Time(a.RemindAt)
	}
	if !a.EscalateAt.IsZero() && a.EscalatedTo == "" {
		out.EscalateAt = Time(a.EscalateAt)
	}
	for _, b := range a.Amend {
		out.Amendable = append(out.Amendable, &tollgatev1.AmendBound{Field: b.Field, Min: b.Min, Max: b.Max})
		if v := amendableValue(a, b.Field); v != "" {
			if out.AmendableValues == nil {
				out.AmendableValues = map[string]string{}
			}
			out.AmendableValues[b.Field] = v
		}
	}
	for i := len(a.Decisions) - 1; i >= 0 && out.PolicyVersion == ""; i-- {
		out.PolicyVersion = a.Decisions[i].Policy
	}
	if a.Audience != "" && a.Audience != plan.AudienceRequester {
		out.AuthorityRequired = &tollgatev1.AuthorityRequirement{}
	}
	for _, p := range a.Payload {
		out.GovernedStepIds = append(out.GovernedStepIds, p.Step)
		out.Actions = append(out.Actions, &tollgatev1.Action{StepId: p.Step, Server: p.Server, Tool: p.Tool, ArgsJson: string(p.Args), PayloadDigest: p.Digest})
	}
	for _, o := range a.Options {
		out.Options = append(out.Options, &tollgatev1.AskOption{Id: o.ID, Label: o.Label, Proceeds: !((a.Type == plan.StopMenu || a.Type == engine.Gate) && strings.EqualFold(o.Label, "no"))})
	}
	for _, d := range a.Decisions {
		pd := &tollgatev1.Decision{Kind: decisionKindToProto[d.Kind], Actor: d.Actor, Time: Time(d.At),
			Reason: d.Reason, OptionId: d.Option, AnswerText: d.Text, Counts: d.Kind != engine.DecisionExpire && d.Kind != engine.DecisionCancel,
			Authority: d.Why, PolicyVersion: d.Policy, EvidenceRequest: evidenceRequest(d), DelegateTo: delegateTo(d), Via: via(d)}
		if d.Kind == engine.DecisionAmend {
			pd.AmendField, pd.AmendValueJson, pd.PayloadDigest = d.Field, d.Value, d.Before
		}
		out.Decisions = append(out.Decisions, pd)
	}
	// Only an amendment changes an ask's payload: the digest a decision
	// was made against is the one before the next amendment after it (the
	// ask's now, when none followed); an amendment's digest after it is
	// the next one's before.
	after := a.PayloadDigest()
	for i := len(out.Decisions) - 1; i >= 0; i-- {
		d := out.Decisions[i]
		if d.GetKind() == tollgatev1.DecisionKind_DECISION_KIND_AMEND {
			d.AmendedPayloadDigest, after = after, d.GetPayloadDigest()
			continue
		}
		d.PayloadDigest = after
	}
	return out
}

// artifact is one artifact of the packet with its content, cut to
// MaxShownContent unless full. Its digest is always the ask's: of the
// whole content, as bound.
func artifact(run *engine.Run, m *engine.Machine, a *engine.AskRun, e engine.Evidence, full bool) *tollgatev1.EvidenceArtifact {
	// Ref and Name as the engine holds them: the evidence digest is
	// computed over both (freshness.EvidenceDigest), so a reader
	// recomputes it from these fields.
	out := &tollgatev1.EvidenceArtifact{Ref: e.Ref, Name: e.Name, MediaType: e.MediaType, Digest: e.Digest, AttachedBy: e.AttachedBy}
	if e.Ref != "" {
		id, _, _ := strings.Cut(e.Ref, ".")
		out.StepId = id
		out.MediaType = cmp.Or(out.MediaType, engine.ShownMediaType)
	}
	var content []byte
	ok := m != nil || e.Ref == ""
	if m != nil {
		content, ok = m.Shown(run, e)
	} else {
		content = e.Content
	}
	if !ok {
		out.Note = "content no longer held: " + e.Ref + " ran again after the ask went stale; the digest is of what was shown then"
		return out
	}
	out.Size = int64(len(content))
	if !full && len(content) > MaxShownContent {
		cut := MaxShownContent
		for cut > MaxShownContent-utf8.UTFMax+1 && !utf8.RuneStart(content[cut]) {
			cut-- // never split a character; bytes that are not UTF-8 are cut at the bound
		}
		content = content[:cut]
		out.Truncated = true
		out.Note = fmt.Sprintf("truncated at %d KiB of %s; full content: approvectl asks show %s --full", MaxShownContent>>10, sizeWords(out.Size), store.AskID(run.ID, a.ID))
	}
	out.Content = content
	return out
}

// sizeWords is a byte count for people: "980 B", "200 KiB", "3.2 MiB".
func sizeWords(n int64) string {
	switch {
	case n < 1<<10:
		return fmt.Sprintf("%d B", n)
	case n < 1<<20:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
}

// amendableValue is field's value in the governed payloads now, as JSON;
// several actions' values are joined by ", ".
func amendableValue(a *engine.AskRun, field string) string {
	var vs []string
	for _, p := range a.Payload {
		if m, err := plan.DecodeObject(p.Args); err == nil {
			if v, ok := m[field]; ok {
				vs = append(vs, string(plan.AppendCanonical(nil, v)))
			}
		}
	}
	return strings.Join(vs, ", ")
}

// ladder is the ask's deadline ladder in time order.
func ladder(a *engine.AskRun) []*tollgatev1.LadderRung {
	var out []*tollgatev1.LadderRung
	if !a.RemindAt.IsZero() {
		out = append(out, &tollgatev1.LadderRung{Kind: "remind", At: Time(a.RemindAt), To: a.Audience, Done: a.Reminded})
	}
	if a.EscalateTo != "" && !a.EscalateAt.IsZero() {
		out = append(out, &tollgatev1.LadderRung{Kind: "escalate", At: Time(a.EscalateAt), To: a.EscalateTo, Done: a.EscalatedTo != ""})
	}
	out = append(out, &tollgatev1.LadderRung{Kind: "expire", At: Time(a.ExpiresAt), To: cmp.Or(a.OnExpiry, "expire"), Done: a.State == engine.AskExpired})
	slices.SortStableFunc(out, func(x, y *tollgatev1.LadderRung) int { return x.GetAt().AsTime().Compare(y.GetAt().AsTime()) })
	return out
}

// changes is what changed while the packet was open: what went stale in
// the round before, then each amendment.
func changes(run *engine.Run, a *engine.AskRun) []string {
	var out []string
	if a.Round > 0 {
		if prev := run.Asks[fmt.Sprintf("%s~%d", a.ID, a.Round)]; prev != nil && prev.Stale != "" {
			out = append(out, "asked again: "+prev.Stale)
		}
	}
	for _, d := range a.Decisions {
		if d.Kind == engine.DecisionAmend {
			out = append(out, d.Reason+" by "+d.Actor)
		}
	}
	return out
}

// stateReason says in words why the ask is in its state.
func stateReason(a *engine.AskRun) string {
	switch {
	case a.State == engine.AskStale:
		return "changed after it was approved: " + a.Stale
	case a.Verifying:
		return "approved; checking the facts are unchanged before it is used"
	case a.State == engine.AskEvidenceRequested:
		return "evidence requested: " + a.EvidenceWanted + " (the requester attaches it with approvectl evidence)"
	case a.State == engine.AskRejected || a.State == engine.AskExpired || a.State == engine.AskCancelled:
		if n := len(a.Decisions); n > 0 {
			return a.Decisions[n-1].Reason
		}
	}
	return ""
}

// AnswerCommand is the exact command that answers a pending ask; "" once
// it is not pending.
func AnswerCommand(run *engine.Run, a *engine.AskRun) string {
	if a.State != engine.AskPending {
		return ""
	}
	id := store.AskID(run.ID, a.ID)
	switch a.Type {
	case plan.StopText:
		return fmt.Sprintf("approvectl answer %s 'your answer'", id)
	case plan.StopChoice, engine.InDoubt:
		return fmt.Sprintf("approvectl approve %s --option N   (options: %s)", id, optionWords(a))
	}
	return fmt.Sprintf("approvectl approve %s   or   approvectl reject %s --reason TEXT", id, id)
}

func optionWords(a *engine.AskRun) string {
	var parts []string
	for _, o := range a.Options {
		parts = append(parts, o.ID+" "+o.Label)
	}
	return strings.Join(parts, ", ")
}

func evidenceRequest(d engine.Decision) string {
	if d.Kind == engine.DecisionRequestEvidence {
		return d.Reason
	}
	return ""
}

func delegateTo(d engine.Decision) string {
	if d.Kind == engine.DecisionDelegate {
		return d.Text
	}
	return ""
}

// via is the surface a decision came through, with the single-use link it
// was made through: "web link lnk_…".
func via(d engine.Decision) string {
	if d.Link == "" {
		return d.Via
	}
	return d.Via + " link " + d.Link
}
